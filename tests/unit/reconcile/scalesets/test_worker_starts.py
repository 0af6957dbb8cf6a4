"""The gate before a disable or delete: GARM's scale-set workers started (issue 56).

On the emulator, whose ``/metrics`` counts the workers' starts as GARM's does and whose starts a
test can hold (``hold_worker_starts``), as real GARM's retry loop holds them for minutes after
its own start with hundreds of scale sets in one organisation.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx
import pytest

from garm import GarmClient, UpdateScaleSetParams
from reconcile.scalesets import worker_starts
from reconcile.scalesets.reconciler import ScalesetReconciler
from reconcile.scalesets.retirement import Phase
from reconcile.scalesets.worker_starts import IdleStarts, WorkerGate
from reconcile.writes import Unfinished, Writes
from tests.garm_emulator import GarmEmulator
from tests.garm_emulator.workers import go_float
from tests.sleep_clock import SleepClock
from tests.unit.reconcile.scalesets.test_reconciler import (
    LIVE,
    NEW_LABELS,
    ORG,
    make_spec,
    names,
    seed_credential_and_entities,
)

# Every scale set the tests seed is on this organisation (``add_scaleset``).
ORPHANS = ("gone-0-0000aaaa", "gone-1-0000aaaa", "gone-2-0000aaaa")
# Shorter than IDLE: the held starts stand for a retry loop still busy with other workers.
BUDGET = 10.0


@pytest.fixture
def garm(ready_emulator: GarmEmulator, client: GarmClient) -> GarmEmulator:
    """The emulator with a credential, an organisation and a repository, request log empty."""
    seed_credential_and_entities(client)
    ready_emulator.clear_requests()
    return ready_emulator


@pytest.fixture
def clock(gate_clock: SleepClock) -> SleepClock:
    """The gate's sleep and clock, and the pass budget's, on one fake clock."""
    return gate_clock


def seeded(garm: GarmEmulator, count: int = 3, *, held: bool) -> None:
    if held:
        garm.hold_worker_starts()
    for name in ORPHANS[:count]:
        garm.add_scaleset(name, org=ORG)
    garm.clear_requests()


def gate_of(client: GarmClient, writes: Writes, clock: SleepClock) -> WorkerGate:
    gate = WorkerGate(client, writes, sleep=clock.sleep, clock=clock)
    gate.expect(client.list_scalesets(), {p.name or "" for p in client.list_providers()})
    return gate


def metrics_reads(garm: GarmEmulator) -> int:
    return sum(1 for r in garm.requests if r.path == "/metrics")


def scaleset_writes(garm: GarmEmulator) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in garm.writes() if re.fullmatch(r"/scalesets/\d+", r.path)]


def test_the_client_reads_garms_counter_of_github_calls_summed_over_scopes(
    garm: GarmEmulator, client: GarmClient
) -> None:
    assert client.counters().operations == {}
    garm.add_scaleset("on-org-0000aaaa", org=ORG)
    garm.add_scaleset("on-repo-0000aaaa", repo="canonical/garm", enabled=False)

    assert client.counters().operations == {
        worker_starts.LOOKUP: 2.0,
        worker_starts.SESSION: 1.0,
    }


def test_the_gate_is_open_at_once_when_garm_started_every_worker(
    garm: GarmEmulator, client: GarmClient, clock: SleepClock
) -> None:
    seeded(garm, held=False)
    gate = gate_of(client, Writes(budget=20.0, clock=clock), clock)

    assert gate.wait() is True
    assert gate.wait() is True  # decided once a pass
    assert clock.sleeps == []  # no settle: it was open at the first read
    assert metrics_reads(garm) == 1


def test_the_gate_waits_for_the_starts_then_settles(
    garm: GarmEmulator, client: GarmClient, clock: SleepClock
) -> None:
    seeded(garm, held=True)
    gate = gate_of(client, Writes(budget=20.0, clock=clock), clock)
    original = clock.sleep

    def sleep(seconds: float) -> None:
        original(seconds)
        garm.release_worker_starts(1)  # GARM's retry loop starts one more worker

    gate = WorkerGate(client, Writes(budget=20.0, clock=clock), sleep=sleep, clock=clock)
    gate.expect(client.list_scalesets(), {p.name or "" for p in client.list_providers()})

    assert gate.wait() is True
    assert clock.sleeps == [worker_starts.POLL] * 3 + [worker_starts.SETTLE]


def test_a_wait_the_budget_ends_is_left_to_the_next_pass_in_its_own_words(
    garm: GarmEmulator, client: GarmClient, clock: SleepClock
) -> None:
    seeded(garm, held=True)
    garm.release_worker_starts(1)
    writes = Writes(budget=7.0, clock=clock)
    gate = gate_of(client, writes, clock)

    assert gate.wait() is False
    assert gate.wait() is False
    assert writes.unfinished == [Unfinished(worker_starts.WAITING_STEP, 1, 3)]
    assert str(writes.unfinished[0]) == "waiting for GARM to start its scale sets: 1 of 3"


def test_a_retry_loop_that_starts_no_worker_for_a_while_opens_the_gate(
    garm: GarmEmulator, client: GarmClient, clock: SleepClock, caplog: pytest.LogCaptureFixture
) -> None:
    seeded(garm, held=True)
    garm.release_worker_starts(2)  # one worker GARM cannot start (its GitHub lookup fails)
    gate = gate_of(client, Writes(budget=60.0, clock=clock), clock)

    assert gate.wait() is True
    assert gate.opened_idle
    assert worker_starts.IDLE <= clock.now < worker_starts.IDLE + 2 * worker_starts.POLL + 1
    assert "started none for 15 s; going on" in caplog.text


def test_scale_sets_deleted_since_garm_started_count_with_their_starts(
    garm: GarmEmulator, client: GarmClient, clock: SleepClock
) -> None:
    # Without them, three starts would cover three listed scale sets, one still unstarted.
    seeded(garm, held=False)
    gone = garm.state.scaleset_by_name(ORPHANS[0])
    assert gone is not None
    client.update_scaleset(gone.id, UpdateScaleSetParams(enabled=False))
    client.delete_scaleset(gone.id)
    garm.hold_worker_starts()
    garm.add_scaleset("late-0000aaaa", org=ORG)
    writes = Writes(budget=BUDGET, clock=clock)
    gate = gate_of(client, writes, clock)

    assert client.counters().operations[worker_starts.LOOKUP] == 3
    assert gate.wait() is False
    assert [str(cut) for cut in writes.unfinished] == [
        "waiting for GARM to start its scale sets: 2 of 3"
    ]


def test_scale_sets_on_a_provider_garm_did_not_load_are_not_waited_for(
    garm: GarmEmulator, client: GarmClient, clock: SleepClock
) -> None:
    garm.add_scaleset("orphaned-0000aaaa", org=ORG, provider_name="gone-provider-0")
    gate = gate_of(client, Writes(budget=20.0, clock=clock), clock)

    assert gate.wait() is True
    assert clock.sleeps == []


def test_unreadable_counters_leave_the_gate_open(
    garm: GarmEmulator, client: GarmClient, clock: SleepClock, caplog: pytest.LogCaptureFixture
) -> None:
    seeded(garm, held=True)
    garm.fail_next("GET", "/metrics", 404)
    gate = gate_of(client, Writes(budget=20.0, clock=clock), clock)

    assert gate.wait() is True
    assert "Cannot read GARM's counters of its scale-set workers" in caplog.text


def test_a_garm_restart_starts_every_worker_again(garm: GarmEmulator, client: GarmClient) -> None:
    seeded(garm, held=False)
    garm.hold_worker_starts()
    garm.restart(providers=garm.providers)

    assert client.counters().operations == {}
    garm.release_worker_starts()
    assert client.counters().operations[worker_starts.LOOKUP] == 3


# --- the pass ---------------------------------------------------------------------------------


def passes(client: GarmClient, garm: GarmEmulator, clock: SleepClock) -> Callable[[], Writes]:
    def one() -> Writes:
        writes = Writes(budget=BUDGET, clock=clock)
        ScalesetReconciler(client, clock=lambda: garm.now, writes=writes).reconcile([])
        return writes

    return one


def test_orphans_are_neither_disabled_nor_deleted_before_garm_started_their_workers(
    garm: GarmEmulator, client: GarmClient, clock: SleepClock
) -> None:
    seeded(garm, held=True)
    garm.release_worker_starts(1)
    one = passes(client, garm, clock)

    writes = one()

    assert scaleset_writes(garm) == []
    assert [str(cut) for cut in writes.unfinished] == [
        "waiting for GARM to start its scale sets: 1 of 3"
    ]
    assert names(garm) == set(ORPHANS)

    garm.release_worker_starts()
    writes = one()

    assert writes.unfinished == []
    assert names(garm) == set()
    assert sorted(m for m, _ in scaleset_writes(garm)) == ["DELETE"] * 3 + ["PUT"] * 3


def test_a_predecessor_is_not_retired_before_garm_started_its_worker(
    garm: GarmEmulator, client: GarmClient, clock: SleepClock
) -> None:
    garm.add_scaleset(LIVE, org=ORG, labels=["linux", "x64"], min_idle_runners=1, max_runners=3)
    spec = make_spec(labels=NEW_LABELS)

    def one() -> tuple[Writes, list[Phase]]:
        writes = Writes(budget=BUDGET, clock=clock)
        result = ScalesetReconciler(client, clock=lambda: garm.now, writes=writes).reconcile(
            [spec]
        )
        return writes, [entry.phase for entry in result.progress]

    one()  # the replacement is created; its predecessor waits for it to be live
    garm.hold_worker_starts()
    garm.restart(providers=garm.providers)  # GARM starts again: no worker started yet
    garm.clear_requests()

    writes, phases = one()

    assert scaleset_writes(garm) == []
    assert phases == [Phase.RETIRING_PREDECESSOR]
    assert [str(cut) for cut in writes.unfinished] == [
        "waiting for GARM to start its scale sets: 0 of 2"
    ]

    garm.release_worker_starts()
    writes, phases = one()

    predecessor = garm.state.scaleset_by_name(LIVE)
    assert predecessor is not None
    assert scaleset_writes(garm) == [("PUT", f"/scalesets/{predecessor.id}")]
    assert predecessor.enabled is False
    assert writes.unfinished == []


def test_after_an_idle_wait_the_scale_sets_disabled_are_deleted_in_the_next_pass(
    garm: GarmEmulator, client: GarmClient, clock: SleepClock
) -> None:
    # GARM lost one scale set's worker at its start: its disable makes GARM create the worker,
    # which starts after the disable; deleted before that start, GitHub would get it back.
    seeded(garm, held=False)
    garm.hold_worker_starts()
    garm.restart(providers=garm.providers)
    garm.forget_worker(ORPHANS[0])
    garm.release_worker_starts()

    def one() -> Writes:
        writes = Writes(budget=3 * worker_starts.IDLE, clock=clock)
        ScalesetReconciler(client, clock=lambda: garm.now, writes=writes).reconcile([])
        return writes

    writes = one()

    assert sorted(m for m, _ in scaleset_writes(garm)) == ["PUT"] * 3
    assert [str(cut) for cut in writes.unfinished] == ["deleting scale sets: 0 of 3"]
    assert client.counters().operations[worker_starts.LOOKUP] == 3  # the lost one has one now

    garm.clear_requests()
    writes = one()

    assert writes.unfinished == []
    assert sorted(m for m, _ in scaleset_writes(garm)) == ["DELETE"] * 3
    assert names(garm) == set()


# --- what a pass hands on: GARM found idle, keyed by its process --------------------------------


def idle_gate(
    client: GarmClient, clock: SleepClock, idle: IdleStarts | None, writes: Writes | None = None
) -> WorkerGate:
    writes = writes or Writes(budget=BUDGET, clock=clock)
    gate = WorkerGate(client, writes, sleep=clock.sleep, clock=clock, idle=idle)
    gate.expect(client.list_scalesets(), {p.name or "" for p in client.list_providers()})
    return gate


def test_an_idle_retry_loop_is_handed_on_with_garms_process_start(
    garm: GarmEmulator, client: GarmClient, clock: SleepClock
) -> None:
    seeded(garm, held=True)
    garm.release_worker_starts(2)
    gate = gate_of(client, Writes(budget=60.0, clock=clock), clock)

    assert gate.wait() is True
    assert gate.idle == IdleStarts(garm.state.workers.process_start, 2.0)

    clock.sleeps.clear()
    again = idle_gate(client, clock, gate.idle)

    assert again.wait() is True
    assert again.opened_idle  # what it disables now is deleted in a later pass
    assert clock.sleeps == []
    assert again.idle == gate.idle


def test_lookups_that_moved_are_judged_afresh(
    garm: GarmEmulator, client: GarmClient, clock: SleepClock
) -> None:
    seeded(garm, held=True)
    garm.release_worker_starts(1)
    remembered = IdleStarts(garm.state.workers.process_start, 1.0)
    garm.release_worker_starts(1)  # GARM's retry loop started one more since

    writes = Writes(budget=BUDGET, clock=clock)
    gate = idle_gate(client, clock, remembered, writes)

    assert gate.wait() is False  # BUDGET is shorter than IDLE
    assert gate.idle is None
    assert [str(cut) for cut in writes.unfinished] == [
        "waiting for GARM to start its scale sets: 2 of 3"
    ]


def test_a_gate_that_reads_no_counter_keeps_what_it_was_given(
    garm: GarmEmulator, client: GarmClient, clock: SleepClock
) -> None:
    remembered = IdleStarts(garm.state.workers.process_start, 5.0)
    gate = idle_gate(client, clock, remembered)  # no scale set: nothing to wait for

    assert gate.wait() is True
    assert gate.idle == remembered
    assert metrics_reads(garm) == 0


def test_the_client_reads_garms_process_start_as_prometheus_writes_it(
    garm: GarmEmulator, client: GarmClient
) -> None:
    started = client.counters().started

    assert started == garm.state.workers.process_start
    assert (
        f"process_start_time_seconds {go_float(started)}\n"
        in httpx.get(f"{garm.base_url}/metrics").text
    )
    garm.restart(providers=garm.providers)
    assert (client.counters().started or 0.0) > started
