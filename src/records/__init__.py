"""The Juju side's records: what the charm keeps in Juju between hooks, and the limits it fits.

The ``garm-peers`` record of the GARM side's memory and of the leadership stamps, the provider
record over its secrets, the owned secrets and their revisions, the configurator secrets'
ledger, and Juju's size limits. It may use the relations, the workload, the vocabulary and the
reconcilers' face (the memory's encoding), never the pass.
"""
