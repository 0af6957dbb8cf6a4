"""The Juju side's relations: each relation's databag read or written, one module each.

The ``garm-configurator`` contract, parse and merge; ``debug-ssh``; the PostgreSQL ``database``
requirer and its login probe; ``ingress``; ``k8s-backup-target``; the COS relations with their
alert rules and dashboard; ``databag.write_changed``. It may use the workload (GARM's port,
the database settings) and the vocabulary, never the records, the pass or GARM.
"""
