"""What the unit keeps of GARM's idle worker starts, through the real charm (issue 56).

GARM v0.2.1-afda4e76 may lose a scale set's worker at its own start; the pass's gate before a
disable then waits ``IDLE`` seconds of no worker start (``reconcile.scalesets.worker_starts``).
The charm keeps where it found GARM idle in the unit's state, so a later pass of the same GARM
process, its lookups unmoved, goes on at once; a new GARM process is judged afresh. Here on the
emulator, which loses a worker when told (``forget_worker``), on a fake clock of the gate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ops
import pytest
from ops import testing

from reconcile.scalesets import worker_starts
from tests.charm_driver import CharmDriver, base_state, configurator, deployed
from tests.garm_emulator import GarmEmulator
from tests.sleep_clock import SleepClock

OWNER = "GarmCharm/WorkerIdle[worker-idle]"
NEW_LABELS = "linux,x64,noble"


@pytest.fixture
def clock(gate_clock: SleepClock) -> SleepClock:
    """The worker gate's fake clock."""
    return gate_clock


def kept(state: testing.State) -> list[Any]:
    """What the unit keeps of GARM's idle worker starts (its ``StoredState``)."""
    for stored in state.stored_states:
        if stored.owner_path == OWNER:
            return list(stored.content.get("idle", []))
    return []


def process_start(garm: GarmEmulator) -> float:
    return garm.state.workers.process_start


def scaleset_writes(garm: GarmEmulator) -> list[str]:
    return [f"{r.method} {r.path}" for r in garm.writes() if r.path.startswith("/scalesets/")]


@pytest.fixture
def lost_one(garm: GarmEmulator, tmp_path: Path, clock: SleepClock) -> CharmDriver:
    """Three scale sets; GARM started again and lost cfg-c's worker; cfg-a's labels changed.

    The label change's first pass creates the new generation (its predecessor waits for it).
    """
    driver = deployed(garm, base_state(tmp_path))
    for number, app in enumerate(("cfg-a", "cfg-b", "cfg-c"), start=1):
        driver.add_configurator(configurator(app, relation_id=number, org=f"org-{app}"))
    assert driver.state.unit_status == ops.ActiveStatus()
    lost_start(garm)
    relation = driver.state.get_relation(1)
    driver.change_relation(relation, labels=NEW_LABELS)
    assert clock.sleeps == []  # nothing disabled yet: the gate was not asked
    return driver


def lost_start(garm: GarmEmulator) -> None:
    """GARM starts again and loses cfg-c's worker (limit 4 of ``reconcile-cost.md``)."""
    garm.hold_worker_starts()
    garm.restart(providers=garm.providers)
    (lost,) = [s["name"] for s in garm.scalesets() if s["name"].startswith("cfg-c")]
    garm.forget_worker(lost)
    garm.release_worker_starts()


def cfg_a_enabled(garm: GarmEmulator) -> list[bool]:
    """Whether each of cfg-a's generations is enabled (GARM omits ``enabled`` when false)."""
    return sorted(
        s.get("enabled", False) for s in garm.scalesets() if s["name"].startswith("cfg-a")
    )


def test_a_lost_worker_costs_one_idle_wait_per_garm_process_not_one_per_pass(
    lost_one: CharmDriver, garm: GarmEmulator, clock: SleepClock
):
    driver = lost_one
    driver.run(driver.ctx.on.update_status())  # the predecessor is retired: the gate is asked

    assert worker_starts.IDLE <= clock.now < worker_starts.IDLE + 2 * worker_starts.POLL + 1
    assert cfg_a_enabled(garm) == [False, True]  # the predecessor disabled
    assert kept(driver.state) == [process_start(garm), 3.0]  # 3 of 4 started, then none

    garm.clear_requests()
    waited = clock.now
    driver.run(driver.ctx.on.update_status())  # the disabled predecessor is deleted

    assert clock.now == waited  # no wait: the same GARM, its lookups unmoved
    assert [w.split(" ")[0] for w in scaleset_writes(garm)] == ["DELETE"]
    assert cfg_a_enabled(garm) == [True]
    assert kept(driver.state) == [process_start(garm), 3.0]
    assert driver.state.unit_status == ops.ActiveStatus()


def test_a_new_garm_process_is_judged_afresh(
    lost_one: CharmDriver, garm: GarmEmulator, clock: SleepClock
):
    driver = lost_one
    driver.run(driver.ctx.on.update_status())
    before = kept(driver.state)
    assert before[1] == 3.0

    lost_start(garm)  # the same count of lookups, in another process
    waited = clock.now
    driver.run(driver.ctx.on.update_status())

    assert clock.now - waited >= worker_starts.IDLE
    assert kept(driver.state) == [process_start(garm), 3.0]
    assert process_start(garm) > before[0]


def test_once_garm_started_every_worker_nothing_is_kept(
    lost_one: CharmDriver, garm: GarmEmulator, clock: SleepClock
):
    driver = lost_one
    driver.run(driver.ctx.on.update_status())
    assert kept(driver.state)

    garm.restart(providers=garm.providers)  # every worker started again at once
    waited = clock.now
    driver.run(driver.ctx.on.update_status())

    assert clock.now == waited
    assert kept(driver.state) == []
