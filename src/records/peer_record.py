"""Where the charm keeps the GARM side's memory between hooks: the ``garm-peers`` app databag.

The memory itself (what it holds, its encoding as fields) is ``reconcile.memory``'s; this module
reads those fields from the databag and writes back only the ones that changed. The databag
survives a pod replacement and a leader change; only the leader, which runs GARM, writes it.
Knows Juju; must not import the GARM client.
"""

from __future__ import annotations

import ops

from reconcile import Memory, decode_memory, encode_memory
from records.leadership import PEER_RELATION
from relations.databag import write_changed


def load(model: ops.Model) -> Memory:
    """Return what the last pass left; no credential memory without a peer relation."""
    relation = model.get_relation(PEER_RELATION)
    if relation is None:
        return Memory()
    return decode_memory(relation.data[model.app])


def save(model: ops.Model, memory: Memory) -> None:
    """Leader: write what changed (nothing in a converged hook, no empty record to start)."""
    relation = model.get_relation(PEER_RELATION)
    if relation is None:
        return
    data = relation.data[model.app]
    write_changed(data, encode_memory(memory, set(data.keys())))
