"""One relation of a crowded endpoint read without ops building every relation beside it.

ops 3.9 builds every relation of an endpoint (one ``relation-list`` each, a process under
Juju) whenever one of them is asked for, by id or not, and it asks for the event's relation
before any charm code runs. On an endpoint with hundreds of relations that alone is hundreds
of hook tools a hook. ``sparse`` makes the model's relation mapping build, on the endpoints it
names, only the relation asked for by id, and list their ids with one ``relation-ids``; asking
for the whole list (``model.relations[name]``) still builds every relation, as ops does.

The one place the charm reaches past ops' public interface: ops constructs the mapping, so the
charm changes the class of the one it made (``_get_unique`` is the method behind
``Model.get_relation`` and the events' relation). ``tests/unit/records/test_relation_reads.py``
pins the behaviour on ops' own code, so an ops upgrade that changes it fails there. Knows ops
only.
"""

from __future__ import annotations

from typing import Self, cast

import ops


class SparseRelations(ops.model.RelationMapping):
    """ops' relation mapping that builds a sparse endpoint's relations one at a time."""

    _sparse: frozenset[str]
    _listed: dict[str, tuple[int, ...]]
    _built: dict[int, ops.Relation]

    @classmethod
    def adopt(cls, relations: ops.model.RelationMapping, endpoints: frozenset[str]) -> Self:
        """Turn ops' own mapping into this class, sparse on ``endpoints`` too."""
        if not isinstance(relations, cls):
            # ops made the mapping: the class adds behaviour and the three fields set here.
            relations.__class__ = cls
            adopted = cast(Self, relations)
            adopted._sparse, adopted._listed, adopted._built = frozenset(), {}, {}
        adopted = cast(Self, relations)
        adopted._sparse |= endpoints
        return adopted

    def relation_ids(self, endpoint: str) -> tuple[int, ...]:
        """The ids of ``endpoint``'s relations (a broken relation's aside), listed once a hook."""
        if endpoint not in self._listed:
            ids = self._backend.relation_ids(endpoint)
            self._listed[endpoint] = tuple(i for i in ids if i != self._broken_relation_id)
        return self._listed[endpoint]

    def _get_unique(
        self, relation_name: str, relation_id: int | None = None
    ) -> ops.Relation | None:
        built_whole = isinstance(self._data[relation_name], list)
        if relation_name not in self._sparse or relation_id is None or built_whole:
            return super()._get_unique(relation_name, relation_id)
        if relation_id not in self._built:
            self._built[relation_id] = ops.Relation(
                relation_name,
                relation_id,
                relation_name in self._peers,
                self._our_unit,
                self._backend,
                self._cache,
                active=relation_id in self.relation_ids(relation_name),
                _remote_unit=self._remote_unit,
            )
        return self._built[relation_id]


def sparse(model: ops.Model, *endpoints: str) -> SparseRelations:
    """Make ``model``'s relation mapping build ``endpoints``' relations only by id.

    Call it in the charm's ``__init__``: ops restores the event's relation after it.

    Returns:
        The model's relation mapping, now a ``SparseRelations``.
    """
    return SparseRelations.adopt(model.relations, frozenset(endpoints))
