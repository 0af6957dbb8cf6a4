"""Ownership by incumbency: what the emulator-only charm tests pin beside the conformance one.

Two configurators, ``cfg-a`` (related first) and ``cfg-b``, each run a scale set with a runner.
A typo reaching for the other's scale-set name or organisation (the holder untouched in both
directions, recovery in one hook) runs on both GARM backends in
``tests/conformance/test_charm_ownership.py``. Here: a name nobody holds yet goes to the lower
relation id, and who holds a name is remembered in ``garm-peers`` across a new pod. The real
charm runs through ``ops.testing`` against the emulator, with the ``garm-peers`` relation Juju
always provides.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from pathlib import Path

import ops
import pytest
from ops import testing

from tests.charm_driver import (
    PRIVATE_KEY_VALUE,
    CharmDriver,
    base_state,
    configurator,
    deployed,
    peer_data,
    with_peer_data,
)
from tests.garm_emulator import GarmEmulator
from vocabulary.github_key import public_key_digest
from workload import pebble_layer

A_LIVE = "cfg-a-runners-18515357"
B_LIVE = "cfg-b-runners-18515357"


@pytest.fixture
def driver(garm: GarmEmulator, tmp_path: Path) -> CharmDriver:
    """Both configurators deployed, each scale set with an idle runner."""
    charm = deployed(garm, base_state(tmp_path))
    charm.add_configurator(configurator("cfg-a", relation_id=1, org="org-a", app_id="11"))
    charm.add_configurator(configurator("cfg-b", relation_id=2, org="org-b", app_id="22"))
    for _ in range(2):  # one tick creates the runners, the next boots them
        garm.advance(timedelta(seconds=30))
    charm.run(charm.ctx.on.update_status())
    assert sorted(s["name"] for s in garm.scalesets()) == [A_LIVE, B_LIVE]
    assert charm.state.unit_status == ops.ActiveStatus()
    return charm


def _rename(driver: CharmDriver, relation_id: int, name: str) -> testing.State:
    relation = driver.state.get_relation(relation_id)
    assert isinstance(relation, testing.Relation)
    return driver.change_relation(relation, name=name)


def test_a_name_nobody_holds_goes_to_the_lower_relation_id(
    driver: CharmDriver, garm: GarmEmulator
):
    # Both reach for a new name in the same hook: nobody holds it yet, so relation order decides.
    relation = driver.state.get_relation(2)
    assert isinstance(relation, testing.Relation)
    units = {n: {**d, "name": "shared-runners"} for n, d in relation.remote_units_data.items()}
    renamed = dataclasses.replace(relation, remote_units_data=units)
    driver.state = dataclasses.replace(
        driver.state, relations={*(r for r in driver.state.relations if r.id != 2), renamed}
    )
    out = _rename(driver, 1, "shared-runners")
    message = out.unit_status.message
    assert isinstance(out.unit_status, ops.BlockedStatus)
    assert "cfg-b: scale set shared-runners belongs to cfg-a" in message


def test_the_holder_is_remembered_across_a_leader_change(
    driver: CharmDriver, garm: GarmEmulator, tmp_path: Path
):
    # A new pod (empty container, no plan); the peer databag remains.
    fresh = base_state(tmp_path)
    driver.state = dataclasses.replace(driver.state, containers=fresh.containers)
    driver.run(driver.ctx.on.pebble_ready(driver.state.get_container(pebble_layer.CONTAINER_NAME)))
    out = _rename(driver, 1, "cfg-b-runners")
    assert isinstance(out.unit_status, ops.BlockedStatus)
    assert out.unit_status.message.startswith("cfg-a: scale set cfg-b-runners belongs to cfg-b")
    assert garm.scaleset_by_name(B_LIVE)["enabled"] is True  # pyright: ignore[reportOptionalSubscript]


def test_the_app_holder_is_remembered_and_a_record_without_it_changes_nothing(
    driver: CharmDriver, garm: GarmEmulator
):
    # Each App's holder is in the record, as a digest of its public key, never the key.
    record = json.loads(peer_data(driver.state)["incumbents"])
    digest = public_key_digest(PRIVATE_KEY_VALUE)
    assert record["credentials"] == [
        ["app-11-202", "cfg-a", digest],
        ["app-22-202", "cfg-b", digest],
    ]
    assert PRIVATE_KEY_VALUE.splitlines()[1] not in json.dumps(peer_data(driver.state))
    # A record from before (no App holders, names in their own case): the first pass after
    # the refresh writes nothing to GARM and records the holders again.
    old = {**record, "entities": [["organization", "Org-A", "cfg-a"]]}
    del old["credentials"]
    driver.state = with_peer_data(driver.state, incumbents=json.dumps(old))
    garm.clear_requests()
    out = driver.run(driver.ctx.on.update_status())
    assert out.unit_status == ops.ActiveStatus()
    assert garm.writes() == []
    assert json.loads(peer_data(out)["incumbents"])["credentials"] == record["credentials"]
