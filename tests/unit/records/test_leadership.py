"""Exactly one GARM per application (ADR 0007): leadership changes, unit count, port, version.

The real charm through ``ops.testing`` with the emulator as GARM; a unit is ``garm/<unit_id>``
and the ``garm-peers`` relation carries the leader's record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

import ops
import pytest
from ops import testing
from scenario.context import _Event  # pyright: ignore[reportPrivateUsage]

from records import leadership
from tests.charm_driver import CharmDriver, base_state
from tests.garm_emulator import GarmEmulator
from workload import pebble_layer

PEERS = "garm-peers"
STANDBY = ops.ActiveStatus("standby; GARM runs on the leader unit")
TWO_UNITS_ON_SQLITE = ops.BlockedStatus(
    "2 units on SQLite, which supports one: run 'juju scale-application garm 1'"
)
DATABASE_ON_UNIT_0 = ops.BlockedStatus(
    "GARM not started: its SQLite database is on garm/0; run 'juju scale-application garm 1'"
)
WAITING_CONFIGURATOR = ops.WaitingStatus("Waiting for garm-configurator relation")
# ops.testing has no shortcut for this deprecated hook; Juju still runs it on a deposed leader.
LEADER_SETTINGS_CHANGED = _Event("leader_settings_changed")


def peers(*others: int, app_data: dict[str, str] | None = None) -> testing.PeerRelation:
    """The peer relation as one unit sees it: the other units' ids and the leader's record."""
    return testing.PeerRelation(
        PEERS, id=90, local_app_data=dict(app_data or {}), peers_data={n: {} for n in others}
    )


def postgresql() -> testing.Relation:
    return testing.Relation(
        "postgresql",
        id=30,
        remote_app_data={"endpoints": "pg:5432", "username": "u", "password": "p"},
    )


def unit(
    garm: GarmEmulator, data: Path, unit_id: int, *, leader: bool, units: int, **kwargs: object
) -> CharmDriver:
    data.mkdir(exist_ok=True)
    state = base_state(data, leader=leader, planned_units=units, **kwargs)
    return CharmDriver(garm, state, unit_id=unit_id)


def joining_unit(
    garm: GarmEmulator,
    tmp_path: Path,
    first: CharmDriver,
    *,
    leader: bool,
    units: int = 2,
    extra: Iterable[testing.Relation] = (),
) -> CharmDriver:
    """garm/1, seeing garm/0's peer record and the application's secrets."""
    others = (0,) if units > 1 else ()
    relations = {peers(*others, app_data=record(first.state)), *extra}
    return unit(
        garm,
        tmp_path / "d1",
        1,
        leader=leader,
        units=units,
        relations=relations,
        secrets=first.state.secrets,
    )


def deploy(driver: CharmDriver) -> testing.State:
    driver.run(driver.ctx.on.install())
    driver.run(driver.ctx.on.leader_elected())
    return driver.run(driver.ctx.on.pebble_ready(driver.state.get_container("garm")))


def running(state: testing.State) -> bool:
    status = state.get_container("garm").service_statuses.get(pebble_layer.SERVICE_NAME)
    return status == ops.pebble.ServiceStatus.ACTIVE


def record(state: testing.State) -> dict[str, str]:
    """The leadership record in the peer databag (the memory's fields aside)."""
    relation = state.get_relation(90)
    keys = (leadership.LEADER_KEY, leadership.GARM_UNIT_KEY)
    return {k: v for k, v in relation.local_app_data.items() if k in keys}


def first_runs(garm: GarmEmulator) -> int:
    return len([r for r in garm.requests if r.path.endswith("/first-run")])


def depose(driver: CharmDriver, *, app_data: dict[str, str]) -> None:
    """Leadership moved away: the new leader rewrote the peer record."""
    relation = dataclasses.replace(driver.state.get_relation(90), local_app_data=app_data)
    others = {r for r in driver.state.relations if r.id != 90}
    driver.state = dataclasses.replace(driver.state, leader=False, relations={*others, relation})


# --- the leader's record ---------------------------------------------------------------------


def test_leader_records_itself_as_leader_and_garm_unit(garm: GarmEmulator, tmp_path: Path):
    driver = unit(garm, tmp_path / "d0", 0, leader=True, units=1, relations={peers()})
    out = deploy(driver)
    assert record(out) == {"leader": "garm/0", "garm-unit": "garm/0"}
    assert out.unit_status == WAITING_CONFIGURATOR
    assert running(out)


# --- a deposed leader stops GARM in its next hook ---------------------------------------------


@pytest.mark.parametrize("hook", ["leader-settings-changed", "garm-peers-relation-changed"])
def test_deposed_leader_stops_garm_in_its_next_hook(garm: GarmEmulator, tmp_path: Path, hook: str):
    driver = unit(garm, tmp_path / "d0", 0, leader=True, units=2, relations={peers(1)})
    assert running(deploy(driver))
    assert driver.state.opened_ports == {testing.TCPPort(8080)}
    depose(driver, app_data={"leader": "garm/1", "garm-unit": "garm/1"})

    if hook == "leader-settings-changed":
        out = driver.run(LEADER_SETTINGS_CHANGED)
    else:
        out = driver.run(driver.ctx.on.relation_changed(out_relation(driver), remote_unit=1))

    assert not running(out)
    assert out.get_container("garm").plan.services["garm"].startup == "disabled"
    assert out.unit_status == TWO_UNITS_ON_SQLITE
    assert out.opened_ports == frozenset()
    assert out.workload_version == ""


def out_relation(driver: CharmDriver) -> testing.PeerRelation:
    relation = driver.state.get_relation(90)
    assert isinstance(relation, testing.PeerRelation)
    return relation


# --- more than one unit ------------------------------------------------------------------------


def test_non_leader_on_sqlite_with_two_units_is_blocked(garm: GarmEmulator, tmp_path: Path):
    leader = unit(garm, tmp_path / "d0", 0, leader=True, units=2, relations={peers(1)})
    deploy(leader)
    other = joining_unit(garm, tmp_path, leader, leader=False)
    out = other.run(other.ctx.on.update_status())
    assert out.unit_status == TWO_UNITS_ON_SQLITE
    assert not running(out)
    assert out.opened_ports == frozenset()


def test_non_leader_on_postgresql_stands_by(garm: GarmEmulator, tmp_path: Path):
    leader = unit(garm, tmp_path / "d0", 0, leader=True, units=2, relations={peers(1)})
    deploy(leader)
    other = joining_unit(garm, tmp_path, leader, leader=False, extra={postgresql()})
    out = other.run(other.ctx.on.update_status())
    assert out.unit_status == STANDBY
    assert not running(out)


def test_one_planned_unit_left_clears_the_block(garm: GarmEmulator, tmp_path: Path):
    # A unit on its way out is not planned: the one that stays reads 1 in its next hook.
    driver = unit(garm, tmp_path / "d1", 1, leader=False, units=1, relations={peers()})
    leader = unit(garm, tmp_path / "d0", 0, leader=True, units=1)
    deploy(leader)
    driver.state = dataclasses.replace(driver.state, secrets=leader.state.secrets)
    assert driver.run(driver.ctx.on.update_status()).unit_status == STANDBY


def test_leader_on_sqlite_with_two_units_keeps_garm_and_blocks_the_app(
    garm: GarmEmulator, tmp_path: Path
):
    driver = unit(garm, tmp_path / "d0", 0, leader=True, units=2, relations={peers(1)})
    out = deploy(driver)
    assert running(out)
    assert out.unit_status == WAITING_CONFIGURATOR
    assert out.app_status == TWO_UNITS_ON_SQLITE


def test_leader_on_sqlite_alone_shows_its_own_status_on_the_app(
    garm: GarmEmulator, tmp_path: Path
):
    out = deploy(unit(garm, tmp_path / "d0", 0, leader=True, units=1, relations={peers()}))
    assert out.app_status == out.unit_status == WAITING_CONFIGURATOR


# --- a new leader on SQLite --------------------------------------------------------------------


def test_new_leader_on_sqlite_refuses_while_the_database_unit_is_still_here(
    garm: GarmEmulator, tmp_path: Path
):
    old = unit(garm, tmp_path / "d0", 0, leader=True, units=2, relations={peers(1)})
    deploy(old)
    garm.clear_requests()
    new = joining_unit(garm, tmp_path, old, leader=True)
    out = new.run(new.ctx.on.leader_elected())
    assert out.unit_status == DATABASE_ON_UNIT_0
    assert out.app_status == DATABASE_ON_UNIT_0
    assert not running(out)
    assert garm.requests == []
    # It is the leader (the others stand by) but not GARM's unit.
    assert record(out) == {"leader": "garm/1", "garm-unit": "garm/0"}
    assert out.opened_ports == frozenset()


def test_new_leader_on_sqlite_takes_over_once_the_database_unit_has_left(
    garm: GarmEmulator, tmp_path: Path
):
    old = unit(garm, tmp_path / "d0", 0, leader=True, units=1, relations={peers()})
    deploy(old)
    fresh = GarmEmulator(providers=[]).start()
    try:
        new = joining_unit(fresh, tmp_path, old, leader=True, units=1)
        new.run(new.ctx.on.leader_elected())
        out = new.run(new.ctx.on.pebble_ready(new.state.get_container("garm")))
        assert out.unit_status == WAITING_CONFIGURATOR
        assert running(out)
        assert record(out) == {"leader": "garm/1", "garm-unit": "garm/1"}
        assert first_runs(fresh) == 1
    finally:
        fresh.stop()


def test_old_leader_back_resumes_its_own_database(garm: GarmEmulator, tmp_path: Path):
    driver = unit(garm, tmp_path / "d0", 0, leader=True, units=2, relations={peers(1)})
    deploy(driver)
    depose(driver, app_data={"leader": "garm/1", "garm-unit": "garm/0"})
    assert not running(driver.run(LEADER_SETTINGS_CHANGED))
    garm.clear_requests()
    driver.state = dataclasses.replace(driver.state, leader=True, planned_units=1)
    out = driver.run(driver.ctx.on.leader_elected())
    assert running(out)
    assert first_runs(garm) == 0
    assert record(out) == {"leader": "garm/0", "garm-unit": "garm/0"}
    assert out.app_status == out.unit_status == WAITING_CONFIGURATOR


def test_new_leader_on_postgresql_takes_over(garm: GarmEmulator, tmp_path: Path):
    old = unit(garm, tmp_path / "d0", 0, leader=True, units=2, relations={peers(1), postgresql()})
    deploy(old)
    new = joining_unit(garm, tmp_path, old, leader=True, extra={postgresql()})
    out = new.run(new.ctx.on.leader_elected())
    assert running(out)
    assert record(out) == {"leader": "garm/1", "garm-unit": "garm/1"}
    assert out.app_status == out.unit_status == WAITING_CONFIGURATOR


# --- juju status: port and workload version ----------------------------------------------------


def test_leader_opens_garms_port_and_shows_garms_version(garm: GarmEmulator, tmp_path: Path):
    out = deploy(unit(garm, tmp_path / "d0", 0, leader=True, units=1))
    assert out.opened_ports == {testing.TCPPort(8080)}
    assert out.workload_version == "v0.2.1-afda4e76"  # what the emulator answers, as GARM does


def test_version_unknown_while_garm_does_not_answer(garm: GarmEmulator, tmp_path: Path):
    driver = unit(garm, tmp_path / "d0", 0, leader=True, units=1)
    driver.ready_timeout = 0.0
    garm.stop()
    out = driver.run(driver.ctx.on.install())
    assert out.unit_status == ops.WaitingStatus("Waiting for GARM to become ready")
    assert out.workload_version == ""
    # The port is GARM's on the unit that runs it, whether or not GARM answers yet.
    assert out.opened_ports == {testing.TCPPort(8080)}


def juju_status_tools(driver: CharmDriver) -> dict[str, int]:
    """The port and workload-version hook tools the last hook ran."""
    names = ("opened_ports", "open_port", "close_port", "application_version_set")
    return {name: driver.tool_calls[name] for name in names if driver.tool_calls[name]}


def test_a_converged_hook_tells_juju_neither_port_nor_version(garm: GarmEmulator, tmp_path: Path):
    driver = unit(garm, tmp_path / "d0", 0, leader=True, units=1)
    deploy(driver)
    out = driver.run(driver.ctx.on.update_status())
    assert juju_status_tools(driver) == {}
    assert out.opened_ports == {testing.TCPPort(8080)}
    assert out.workload_version == "v0.2.1-afda4e76"


def test_a_new_pod_tells_juju_port_and_version_again(garm: GarmEmulator, tmp_path: Path):
    driver = unit(garm, tmp_path / "d0", 0, leader=True, units=1)
    deploy(driver)
    # The unit's own charm state goes with the pod; Juju keeps what the unit told it.
    driver.state = dataclasses.replace(driver.state, stored_states=frozenset())
    out = driver.run(driver.ctx.on.update_status())
    assert juju_status_tools(driver) == {"opened_ports": 1, "application_version_set": 1}
    assert out.opened_ports == {testing.TCPPort(8080)}
    assert out.workload_version == "v0.2.1-afda4e76"


def test_a_leader_again_after_standing_by_shows_port_and_version_again(
    garm: GarmEmulator, tmp_path: Path
):
    driver = unit(garm, tmp_path / "d0", 0, leader=True, units=2, relations={peers(1)})
    deploy(driver)
    depose(driver, app_data={"leader": "garm/1", "garm-unit": "garm/0"})
    out = driver.run(LEADER_SETTINGS_CHANGED)
    assert (out.opened_ports, out.workload_version) == (frozenset(), "")
    # garm/1 never started GARM (its peer stamp still names garm/0); leadership comes back.
    driver.state = dataclasses.replace(driver.state, leader=True, planned_units=1)
    out = driver.run(driver.ctx.on.leader_elected())
    assert running(out)
    assert out.opened_ports == {testing.TCPPort(8080)}
    assert out.workload_version == "v0.2.1-afda4e76"
