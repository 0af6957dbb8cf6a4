"""ops' relation mapping made sparse on one endpoint, pinned on ops' own code.

A probe charm with many relations on one endpoint: ops alone builds every one of them (a
``relation-list`` each) to hand a relation hook its own; made sparse, only the relation asked
for by id is built, ids come from one ``relation-ids`` (a broken relation's left out), and the
whole list is still there for whoever asks for it. An ops upgrade that changes what
``SparseRelations`` relies on fails here.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import ops
import pytest
from ops import testing
from scenario import mocking

from records.relation_reads import SparseRelations, sparse

ENDPOINT = "crowd"
META: dict[str, Any] = {"name": "probe", "requires": {ENDPOINT: {"interface": "crowd"}}}
COUNT = 30
SEEN: dict[str, Any] = {}


class ProbeCharm(ops.CharmBase):
    sparse_endpoint = True

    def __init__(self, framework: ops.Framework) -> None:
        super().__init__(framework)
        if self.sparse_endpoint:
            self.relations = sparse(self.model, ENDPOINT)
        framework.observe(self.on[ENDPOINT].relation_changed, self._on_changed)
        framework.observe(self.on[ENDPOINT].relation_broken, self._on_broken)

    def _on_changed(self, event: ops.RelationChangedEvent) -> None:
        relation = self.model.get_relation(ENDPOINT, event.relation.id)
        assert relation is event.relation
        SEEN["data"] = dict(relation.data[next(iter(relation.units))])

    def _on_broken(self, event: ops.RelationBrokenEvent) -> None:
        assert isinstance(self.model.relations, SparseRelations)
        SEEN["ids"] = self.model.relations.relation_ids(ENDPOINT)
        SEEN["whole"] = sorted(r.id for r in self.model.relations[ENDPOINT])


class WholeCharm(ProbeCharm):
    sparse_endpoint = False


@contextmanager
def listed() -> Iterator[collections.Counter[str]]:
    """Count the model backend's relation-list and relation-ids calls while the hook runs."""
    calls: collections.Counter[str] = collections.Counter()
    backend = mocking._MockModelBackend  # pyright: ignore[reportPrivateUsage]
    originals = {name: getattr(backend, name) for name in ("relation_list", "relation_ids")}

    def counted(name: str) -> Any:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return originals[name](self, *args, **kwargs)

        return call

    for name in originals:
        setattr(backend, name, counted(name))
    try:
        yield calls
    finally:
        for name, original in originals.items():
            setattr(backend, name, original)


def crowd() -> list[testing.Relation]:
    return [
        testing.Relation(ENDPOINT, id=n, remote_units_data={0: {"n": str(n)}})
        for n in range(1, COUNT + 1)
    ]


@pytest.fixture(autouse=True)
def _clear() -> None:
    SEEN.clear()


@pytest.mark.parametrize(("charm", "built"), [(ProbeCharm, 1), (WholeCharm, COUNT)])
def test_a_relation_hook_builds_only_its_own_relation(charm: type[ProbeCharm], built: int):
    relations = crowd()
    ctx = testing.Context(charm, meta=META)
    with listed() as calls:
        ctx.run(
            ctx.on.relation_changed(relations[6], remote_unit=0),
            testing.State(relations=relations),
        )
    assert SEEN["data"] == {"n": "7"}
    assert calls["relation_list"] == built
    assert calls["relation_ids"] == 1


def test_ids_leave_the_broken_relation_out_and_the_whole_list_is_still_built():
    relations = crowd()
    ctx = testing.Context(ProbeCharm, meta=META)
    ctx.run(ctx.on.relation_broken(relations[0]), testing.State(relations=relations))
    assert SEEN["ids"] == tuple(range(2, COUNT + 1))
    assert SEEN["whole"] == list(range(2, COUNT + 1))
