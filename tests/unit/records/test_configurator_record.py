"""The unit's record of the configurator relations: a hook reads what may have changed (ADR 0019).

The real charm through ``ops.testing`` against the emulator: a change without its event is
seen within a rotation, a new pod's record fills in without a write to GARM, departed
configurators leave the record, a secret's owners are read again, an entry that does not match
its digest is read again; and ops is kept from building every relation of the endpoint.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ops
import pytest
from ops import testing

from records.configurator_record import ROTATION
from tests.charm_driver import CharmDriver, Configurator, base_state, configurator
from tests.garm_emulator import GarmEmulator
from workload import pebble_layer

RECORD_OWNER = "GarmCharm/ConfiguratorRecord[configurator-record]"


def record_entries(state: testing.State) -> dict[int, dict[str, Any]]:
    """The record's entries by relation id, as the unit keeps them."""
    for stored in state.stored_states:
        if stored.owner_path == RECORD_OWNER:
            entries: Mapping[str, str] = stored.content["entries"]
            return {int(key): json.loads(text) for key, text in entries.items()}
    return {}


def fleet(count: int) -> list[Configurator]:
    return [configurator(f"cfg-{n:02d}", relation_id=n + 1, org=f"org-{n}") for n in range(count)]


def deployed_fleet(garm: GarmEmulator, tmp_path: Path, count: int) -> CharmDriver:
    """``count`` configurators related from the start, deployed, converged."""
    cfgs = fleet(count)
    state = base_state(
        tmp_path,
        relations={c.relation for c in cfgs},
        secrets={s for c in cfgs for s in c.secrets},
    )
    driver = CharmDriver(garm, state)
    driver.run(driver.ctx.on.install())
    driver.run(driver.ctx.on.leader_elected())
    driver.run(driver.ctx.on.pebble_ready(driver.state.get_container(pebble_layer.CONTAINER_NAME)))
    driver.continue_passes()
    assert driver.state.unit_status == ops.ActiveStatus()
    return driver


def silently_change(driver: CharmDriver, relation_id: int, **unit_data: str) -> None:
    """Change a relation's unit data without its relation-changed (a hook lost with a pod)."""
    current = driver.state.get_relation(relation_id)
    assert isinstance(current, testing.Relation)
    units = {n: {**d, **unit_data} for n, d in current.remote_units_data.items()}
    changed = dataclasses.replace(current, remote_units_data=units)
    others = {r for r in driver.state.relations if r.id != relation_id}
    driver.state = dataclasses.replace(driver.state, relations={*others, changed})


def max_runners(garm: GarmEmulator, name: str) -> int:
    (row,) = [s for s in garm.scalesets() if s["name"].startswith(name)]
    return row["max_runners"]


def test_a_change_without_its_event_is_seen_within_a_rotation(garm: GarmEmulator, tmp_path: Path):
    count = 45
    driver = deployed_fleet(garm, tmp_path, count)
    # The relation read most recently is the last the rotation comes back to.
    entries = record_entries(driver.state)
    latest = max(entries, key=lambda rid: (entries[rid]["read"], rid))
    name = f"cfg-{latest - 1:02d}-runners"
    assert max_runners(garm, name) == 4
    silently_change(driver, latest, max_runner="7")
    hooks = 0
    while max_runners(garm, name) != 7:
        assert hooks < math.ceil(count / ROTATION), f"not seen after {hooks} update-status hooks"
        driver.run(driver.ctx.on.update_status())
        hooks += 1
    unit = f"cfg-{latest - 1:02d}/0"
    assert record_entries(driver.state)[latest]["units"][unit]["max_runner"] == "7"


def test_a_new_pods_record_fills_in_without_a_write_to_garm(garm: GarmEmulator, tmp_path: Path):
    count = 2 * ROTATION + 5
    driver = deployed_fleet(garm, tmp_path, count)
    garm.clear_requests()
    # A new pod: the charm container's files are gone (its stored state), Pebble's plan too.
    container = driver.state.get_container(pebble_layer.CONTAINER_NAME)
    fresh = dataclasses.replace(container, layers={}, service_statuses={}, check_infos=frozenset())
    others = {c for c in driver.state.containers if c.name != container.name}
    driver.state = dataclasses.replace(
        driver.state, stored_states=frozenset(), containers={*others, fresh}
    )
    driver.run(driver.ctx.on.upgrade_charm())
    partial = driver.state.unit_status
    driver.run(driver.ctx.on.pebble_ready(driver.state.get_container(container.name)))
    continued = driver.continue_passes()
    assert partial == ops.MaintenanceStatus(
        f"reading garm-configurator relations: {ROTATION} of {count}"
    )
    assert continued >= 1
    assert driver.state.unit_status == ops.ActiveStatus()
    assert garm.writes() == []
    assert sorted(record_entries(driver.state)) == list(range(1, count + 1))


def test_departed_configurators_leave_the_record_in_the_hook_that_removes_them(
    garm: GarmEmulator, tmp_path: Path
):
    driver = deployed_fleet(garm, tmp_path, 3)
    relation = driver.state.get_relation(2)
    assert isinstance(relation, testing.Relation)
    driver.remove_relation(relation)
    assert sorted(record_entries(driver.state)) == [1, 3]


def test_a_secret_change_reads_the_relations_that_name_it(garm: GarmEmulator, tmp_path: Path):
    driver = deployed_fleet(garm, tmp_path, ROTATION + 10)
    for _ in range(2):  # every relation read in a hook before this one
        driver.run(driver.ctx.on.update_status())
    before = record_entries(driver.state)
    # The relation read last: the rotation would not come back to it in this hook.
    owner = max(before, key=lambda rid: (before[rid]["read"], rid))
    relation = driver.state.get_relation(owner)
    assert isinstance(relation, testing.Relation)
    uri = relation.remote_units_data[0]["openstack_password_secret_uri"]
    (secret,) = [s for s in driver.state.secrets if s.id == uri]
    driver.run(driver.ctx.on.secret_changed(secret))
    after = record_entries(driver.state)
    hook = max(entry["read"] for entry in after.values())
    read_now = {rid for rid, entry in after.items() if entry["read"] == hook}
    rotation = sorted(before, key=lambda rid: (before[rid]["read"], rid))[:ROTATION]
    assert owner not in rotation
    assert read_now == {owner, *rotation}


def test_an_entry_that_does_not_match_its_digest_is_read_again(
    garm: GarmEmulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    driver = deployed_fleet(garm, tmp_path, ROTATION + 10)
    (stored,) = [s for s in driver.state.stored_states if s.owner_path == RECORD_OWNER]
    entries = dict(stored.content["entries"])
    tampered = json.loads(entries["3"])
    tampered["units"]["cfg-02/0"]["max_runner"] = "99"
    entries["3"] = json.dumps(tampered)
    content = {**stored.content, "entries": entries}
    others = {s for s in driver.state.stored_states if s is not stored}
    driver.state = dataclasses.replace(
        driver.state, stored_states={*others, dataclasses.replace(stored, content=content)}
    )
    driver.run(driver.ctx.on.update_status())
    assert "configurator record of relation 3 unreadable" in caplog.text
    assert record_entries(driver.state)[3]["units"]["cfg-02/0"]["max_runner"] == "4"
    assert max_runners(garm, "cfg-02-runners") == 4


def test_a_relation_hook_builds_only_the_relations_it_reads(garm: GarmEmulator, tmp_path: Path):
    count = 2 * ROTATION + 10
    driver = deployed_fleet(garm, tmp_path, count)
    relation = driver.state.get_relation(count)
    assert isinstance(relation, testing.Relation)
    driver.change_relation(relation, max_runner="6")
    # ops alone would list every relation of the endpoint to hand the hook its own.
    assert driver.tool_calls["relation_list"] <= ROTATION + 2  # the rotation, the event, peers
    assert max_runners(garm, f"cfg-{count - 1:02d}-runners") == 6


def test_a_unit_that_is_not_the_leader_drops_its_record_and_reads_anew_once_elected(
    garm: GarmEmulator, tmp_path: Path
):
    count = ROTATION + 5
    driver = deployed_fleet(garm, tmp_path, count)
    driver.state = dataclasses.replace(driver.state, leader=False)
    driver.run(driver.ctx.on.update_status())
    assert record_entries(driver.state) == {}
    garm.clear_requests()
    driver.state = dataclasses.replace(driver.state, leader=True)
    driver.run(driver.ctx.on.leader_elected())
    assert driver.state.unit_status == ops.MaintenanceStatus(
        f"reading garm-configurator relations: {ROTATION} of {count}"
    )
    driver.continue_passes()
    assert driver.state.unit_status == ops.ActiveStatus()
    assert sorted(record_entries(driver.state)) == list(range(1, count + 1))
    assert garm.writes() == []
