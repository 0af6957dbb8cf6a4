"""A leadership change on SQLite, with two units, each with its own storage and its own GARM.

Real GARM only: what matters is what GitHub sees, and only real GARM registers scale sets there
(on the GitHub stand-in, which keeps every registration: ``github.scalesets()``). Two charm
drivers play ``garm/0`` and ``garm/1`` of one application; each has its own ``garm-data``
directory and its own real GARM, started by the charm's replan and stopped by its stand-by.
These tests decided ADR 0007.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import ops
import pytest
from ops import testing
from scenario.context import _Event  # pyright: ignore[reportPrivateUsage]

from records.leadership import GARM_UNIT_KEY, LEADER_KEY
from tests.charm_driver import CharmDriver, base_state, replaced_database
from tests.conformance.test_charm import quiet_configurator
from tests.github_standin import GitHubStandin
from tests.real_garm.github_apps import register_configured_apps
from tests.real_garm.harness import SKIP_REASON, RealGarm, garm_binary

pytestmark = pytest.mark.skipif(garm_binary() is None, reason=SKIP_REASON)

PEER_ID = 90
SCALESETS_PATH = "/_apis/runtime/runnerscalesets"
DATABASE_ON_UNIT_0 = ops.BlockedStatus(
    "GARM not started: its SQLite database is on garm/0; run 'juju scale-application garm 1'"
)
TWO_UNITS_ON_SQLITE = ops.BlockedStatus(
    "2 units on SQLite, which supports one: run 'juju scale-application garm 1'"
)
LEADER_SETTINGS_CHANGED = _Event("leader_settings_changed")


@pytest.fixture
def github() -> Iterator[GitHubStandin]:
    """The GitHub stand-in; a session of a stopped GARM is abandoned after 2 s, not 30 s."""
    with GitHubStandin(session_idle_timeout=2.0) as standin:
        yield standin


def _real_garm(tmp_path: Path, name: str, github: GitHubStandin) -> Iterator[RealGarm]:
    binary = garm_binary()
    assert binary is not None
    real = RealGarm.prepare(
        tmp_path / name, binary=binary, github_endpoint=github.endpoint_params()
    )
    register_configured_apps(real.proxy, github)
    try:
        yield real
    finally:
        real.stop()


@pytest.fixture
def garm_a(tmp_path: Path, github: GitHubStandin) -> Iterator[RealGarm]:
    """GARM in garm/0's pod."""
    yield from _real_garm(tmp_path, "unit-0", github)


@pytest.fixture
def garm_b(tmp_path: Path, github: GitHubStandin) -> Iterator[RealGarm]:
    """GARM in garm/1's pod."""
    yield from _real_garm(tmp_path, "unit-1", github)


def _peers(app_data: dict[str, str], *others: int) -> testing.PeerRelation:
    return testing.PeerRelation(
        "garm-peers", id=PEER_ID, local_app_data=app_data, peers_data={n: {} for n in others}
    )


def _record(driver: CharmDriver) -> dict[str, str]:
    return dict(driver.state.get_relation(PEER_ID).local_app_data)


def _leadership(driver: CharmDriver) -> dict[str, str]:
    """The leadership part of the peer record (the charm keeps other memories there too)."""
    return {k: v for k, v in _record(driver).items() if k in (LEADER_KEY, GARM_UNIT_KEY)}


def _unit_1(tmp_path: Path, garm: RealGarm, unit_0: CharmDriver, peers: dict[str, str]):
    """garm/1 as the new leader: the same application secrets and relations, its own storage."""
    data = tmp_path / "data-1"
    data.mkdir()
    configurators = {r for r in unit_0.state.relations if r.endpoint == "garm-configurator"}
    state = base_state(
        data,
        planned_units=2,
        relations={*configurators, _peers(peers, 0)},
        secrets=unit_0.state.secrets,
    )
    return CharmDriver(garm, state, ready_timeout=10.0, unit_id=1)


@pytest.fixture
def unit_0(tmp_path: Path, garm_a: RealGarm, github: GitHubStandin) -> CharmDriver:
    """garm/0, leader of two units, running GARM with one configurator's scale set."""
    data = tmp_path / "data-0"
    data.mkdir()
    state = base_state(data, planned_units=2, relations={_peers({}, 1)})
    driver = CharmDriver(garm_a, state, ready_timeout=10.0)
    driver.run(driver.ctx.on.install())
    driver.run(driver.ctx.on.leader_elected())
    driver.run(driver.ctx.on.pebble_ready(driver.state.get_container("garm")))
    driver.add_configurator(quiet_configurator(1, relation_id=1))
    assert driver.state.unit_status == ops.ActiveStatus()
    assert driver.state.app_status == TWO_UNITS_ON_SQLITE
    assert github.wait_until(lambda: [s.has_session for s in github.scalesets()] == [True])
    return driver


def _creates(github: GitHubStandin) -> list[int]:
    """Status of every scale set registration GitHub was asked for."""
    return [
        r.status for r in github.requests if r.method == "POST" and r.path.endswith(SCALESETS_PATH)
    ]


def test_new_leader_refuses_and_the_old_database_resumes_after_scaling_to_one(
    tmp_path: Path, unit_0: CharmDriver, garm_a: RealGarm, garm_b: RealGarm, github: GitHubStandin
):
    (registered,) = github.scalesets()
    assert _creates(github) == [200]

    # Leadership moves to garm/1, whose storage has no database.
    unit_1 = _unit_1(tmp_path, garm_b, unit_0, _record(unit_0))
    unit_1.run(unit_1.ctx.on.leader_elected())
    assert unit_1.state.unit_status == DATABASE_ON_UNIT_0
    assert garm_b.starts == 0  # no GARM, so no first-run and nothing sent to GitHub
    assert _leadership(unit_1) == {"leader": "garm/1", "garm-unit": "garm/0"}

    # garm/0 is deposed: its next hook stops its GARM.
    unit_0.state = dataclasses.replace(unit_0.state, leader=False)
    unit_0.run(LEADER_SETTINGS_CHANGED)
    assert garm_a.pid is None
    assert unit_0.state.unit_status == TWO_UNITS_ON_SQLITE

    # `juju scale-application garm 1`: garm/1 goes, garm/0 leads again with its own database.
    garm_a.clear_requests()
    peers = _peers(_record(unit_1))
    others = {r for r in unit_0.state.relations if r.id != PEER_ID}
    unit_0.state = dataclasses.replace(
        unit_0.state, leader=True, planned_units=1, relations={*others, peers}
    )
    unit_0.run(unit_0.ctx.on.leader_elected())
    assert unit_0.state.unit_status == ops.ActiveStatus()
    assert unit_0.state.app_status == ops.ActiveStatus()
    assert not [c for c in garm_a.requests if c.path.endswith("/first-run")]
    assert [s["name"] for s in garm_a.scalesets()] == [registered.name]
    assert github.wait_until(
        lambda: [(s.id, s.has_session) for s in github.scalesets()] == [(registered.id, True)]
    )
    assert _creates(github) == [200]


def test_taking_over_with_an_empty_database_registers_the_scale_sets_again_recovery(
    tmp_path: Path, unit_0: CharmDriver, garm_a: RealGarm, garm_b: RealGarm, github: GitHubStandin
):
    """What a new leader on an empty SQLite database does while the old registration remains.

    This is the path ADR 0007 refuses while the database's unit is still in the application,
    and the one left when that unit is gone: GitHub keeps the old registration and refuses the
    same name again. The application's memory (``garm-peers``) holds the GitHub id the old GARM
    registered, so the new leader deletes that stale scale set in GitHub and creates it again
    (ADR 0016).
    """
    (registered,) = github.scalesets()
    old_controller = garm_a.controller()["controller_id"]
    unit_0.state = dataclasses.replace(unit_0.state, leader=False)
    unit_0.run(LEADER_SETTINGS_CHANGED)
    assert garm_a.pid is None

    # garm/0 has left the application (no longer a peer): garm/1 takes over.
    unit_1 = _unit_1(tmp_path, garm_b, unit_0, _record(unit_0))
    relation = dataclasses.replace(unit_1.state.get_relation(PEER_ID), peers_data={})
    others = {r for r in unit_1.state.relations if r.id != PEER_ID}
    unit_1.state = dataclasses.replace(
        unit_1.state, planned_units=1, relations={*others, relation}
    )
    unit_1.run(unit_1.ctx.on.leader_elected())

    assert [c.status for c in garm_b.requests if c.path.endswith("/first-run")] == [200]
    assert _leadership(unit_1) == {"leader": "garm/1", "garm-unit": "garm/1"}
    assert [s["name"] for s in garm_b.scalesets()] == [registered.name]
    (again,) = github.scalesets()
    assert again.name == registered.name and again.id != registered.id
    assert _creates(github) == [200, 400, 200]
    # Active, naming the machines garm/0's GARM made in the cloud by their controller's tag.
    assert unit_1.state.unit_status == replaced_database(old_controller)
