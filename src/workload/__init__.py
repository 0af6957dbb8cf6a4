"""The workload: GARM's container as the charm drives it through Pebble.

The Pebble layer and its environment (``pebble_layer``), GARM's restart for a stalled scale set
(``garm_restart``), garm-agent as the image ships it (``agent_image``) and the CA bundles GARM's
process trusts (``endpoint_trust``). It knows Pebble, not relations, records or GARM's API: it
imports only the vocabulary and the container's scripts.
"""
