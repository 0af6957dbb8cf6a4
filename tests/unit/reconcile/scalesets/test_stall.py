"""Stalled scale sets: the rule, the recovery steps and their memory, on the emulator.

The emulator's clock gives GARM's ``updated_at``; each test passes the charm's ``now`` itself.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from garm import GarmClient
from reconcile.scalesets import stall
from reconcile.scalesets.stall import (
    RECHECK_AFTER,
    RESTART_BACKOFF,
    STALL_AFTER,
    Recovery,
    Shortfall,
    StallWatch,
    Step,
    confirmed,
    shortfalls,
    watch_stalls,
)
from tests.garm_emulator import GarmEmulator
from vocabulary.notices import Notice, Severity

LIVE = "cfg-a-runners-18515357"
OTHER = "cfg-b-runners-28515357"


def _stalled(garm: GarmEmulator, name: str = LIVE, ago: timedelta = timedelta(minutes=10)) -> None:
    garm.add_scaleset(name, max_runners=2, min_idle_runners=0)
    garm.stall_demand(name, 1, garm.now - ago)


def _found(
    client: GarmClient, now: datetime, faulted: frozenset[str] = frozenset()
) -> list[Shortfall]:
    return shortfalls(client.list_scalesets(), client.list_instances(), now, faulted=faulted)


def _watch(
    client: GarmClient,
    now: datetime,
    remembered: dict[str, Recovery] | None = None,
    changing: bool = False,
) -> StallWatch:
    return watch_stalls(
        client,
        _found(client, now),
        remembered or {},
        instances=client.list_instances(),
        changing=changing,
        now=now,
    )


def test_a_demand_garm_sat_on_for_the_bound_is_a_stall_and_names_its_scaleset(
    ready_emulator: GarmEmulator, client: GarmClient
):
    _stalled(ready_emulator)
    since = ready_emulator.now - timedelta(minutes=10)
    (found,) = _found(client, ready_emulator.now)
    assert found.stall is not None
    assert (found.stall.wants, found.stall.has, found.stall.since) == (1, 0, since)
    text = f"GARM is not scaling (wants 1, has 0, since {since:%Y-%m-%d %H:%M} UTC)"
    assert found.stall.words() == text


def test_only_slow_faulted_recent_or_disabled_scalesets_are_not_stalled(
    ready_emulator: GarmEmulator, client: GarmClient
):
    garm = ready_emulator
    _stalled(garm, "slow-1a2b3c4d")
    garm.add_instance("slow-1a2b3c4d", status="pending_create", runner_status="pending")
    _stalled(garm, "creating-1a2b3c4d")
    garm.add_instance("creating-1a2b3c4d", status="creating", runner_status="pending")
    _stalled(garm, "recent-1a2b3c4d", ago=STALL_AFTER - timedelta(seconds=1))
    _stalled(garm, "faulted-1a2b3c4d")
    garm.add_scaleset("off-1a2b3c4d", max_runners=2, enabled=False)
    garm.stall_demand("off-1a2b3c4d", 1, garm.now - timedelta(hours=1))
    _stalled(garm, "full-1a2b3c4d")
    garm.add_instance("full-1a2b3c4d", status="running", runner_status="active")

    found = _found(client, garm.now, frozenset({"faulted-1a2b3c4d"}))
    assert [(s.scaleset.name, s.stall) for s in found] == [("recent-1a2b3c4d", None)]


def test_the_first_sighting_updates_the_scaleset_twice_and_its_worker_scales(
    ready_emulator: GarmEmulator, client: GarmClient
):
    _stalled(ready_emulator)
    ready_emulator.clear_requests()
    watch = _watch(client, ready_emulator.now)

    bodies = [r.body for r in ready_emulator.writes()]
    assert bodies == [{"runner_bootstrap_timeout": 21}, {"runner_bootstrap_timeout": 20}]
    assert watch.recoveries[LIVE].step is Step.UPDATED
    assert not watch.restart
    assert [n.severity for n in watch.notices] == [Severity.WAITING]
    assert watch.notices[0].subject == "cfg-a-runners"
    ready_emulator.advance()
    assert len(ready_emulator.instances(LIVE)) == 1
    # Short no more: nothing is remembered, and the pass writes nothing.
    ready_emulator.clear_requests()
    after = _watch(client, ready_emulator.now, watch.recoveries)
    assert (after.recoveries, after.notices, ready_emulator.writes()) == ({}, [], [])


def test_still_stalled_after_the_update_asks_for_one_restart_then_waits_out_the_back_off(
    ready_emulator: GarmEmulator, client: GarmClient
):
    _stalled(ready_emulator)
    now = ready_emulator.now
    first = datetime.fromisoformat("2026-01-01T00:00:00+00:00")
    updated = {LIVE: Recovery(Step.UPDATED, now - STALL_AFTER, first)}
    ready_emulator.clear_requests()

    restart = _watch(client, now, updated)
    assert restart.restart
    assert restart.recoveries[LIVE] == Recovery(Step.RESTARTED, now, first)
    assert ready_emulator.writes() == []
    assert "since 2026-01-01 00:00 UTC" in restart.notices[0].text

    later = now + RESTART_BACKOFF - timedelta(minutes=1)
    waiting = _watch(client, later, restart.recoveries)
    assert not waiting.restart
    assert waiting.recoveries == restart.recoveries
    assert [n.severity for n in waiting.notices] == [Severity.BLOCKED]
    assert ready_emulator.writes() == []

    again = _watch(client, now + RESTART_BACKOFF, restart.recoveries)
    assert again.recoveries[LIVE].step is Step.UPDATED
    assert len(ready_emulator.writes()) == 2


def test_a_restart_waits_while_another_scaleset_is_mid_change(
    ready_emulator: GarmEmulator, client: GarmClient
):
    _stalled(ready_emulator)
    ready_emulator.add_scaleset(OTHER, max_runners=2, min_idle_runners=1)
    ready_emulator.add_instance(OTHER, status="pending_delete", runner_status="idle")
    now = ready_emulator.now
    updated = {LIVE: Recovery(Step.UPDATED, now - STALL_AFTER, now - STALL_AFTER)}

    held = _watch(client, now, updated)
    assert not held.restart
    assert held.recoveries == updated
    changing = _watch(client, now, updated, changing=True)
    assert not changing.restart


def test_a_scaleset_short_but_within_the_bound_keeps_what_was_done(
    ready_emulator: GarmEmulator, client: GarmClient
):
    _stalled(ready_emulator, ago=timedelta(seconds=30))
    now = ready_emulator.now
    done = {LIVE: Recovery(Step.UPDATED, now, now)}
    watch = _watch(client, now, done)
    assert (watch.recoveries, watch.notices, watch.restart) == (done, [], False)


def test_a_refused_update_is_the_scalesets_notice(
    ready_emulator: GarmEmulator, client: GarmClient
):
    _stalled(ready_emulator)
    ready_emulator.fail_next("PUT", r"/scalesets/\d+", 400)
    watch = _watch(client, ready_emulator.now)
    refused = "GARM refused the update that restarts its scaling (400)"
    assert Notice(Severity.BLOCKED, "cfg-a-runners", refused) in watch.notices
    # Nothing remembered: the next pass tries the update again, not a restart.
    assert watch.recoveries == {}
    assert not _watch(client, ready_emulator.now).restart


def test_a_gap_garm_fills_within_its_autoscale_tick_is_not_a_stall(
    ready_emulator: GarmEmulator, client: GarmClient, monkeypatch: pytest.MonkeyPatch
):
    _stalled(ready_emulator)
    _stalled(ready_emulator, OTHER)
    waited: list[float] = []

    def garm_replaces_a_deleted_runner(seconds: float) -> None:
        waited.append(seconds)
        ready_emulator.add_instance(LIVE, status="pending_create", runner_status="pending")

    monkeypatch.setattr(stall, "_pause", garm_replaces_a_deleted_runner)
    found, relisted = confirmed(client, _found(client, ready_emulator.now), ready_emulator.now)
    assert waited == [RECHECK_AFTER.total_seconds()]
    assert [s.scaleset.name for s in found] == [OTHER]
    assert relisted is not None and len(relisted) == 1


def test_no_second_look_without_a_suspected_stall(
    ready_emulator: GarmEmulator, client: GarmClient, monkeypatch: pytest.MonkeyPatch
):
    _stalled(ready_emulator, ago=timedelta(seconds=30))
    monkeypatch.setattr(stall, "_pause", lambda _: pytest.fail("looked twice"))
    found = _found(client, ready_emulator.now)
    ready_emulator.clear_requests()
    assert confirmed(client, found, ready_emulator.now) == (found, None)
    assert ready_emulator.requests == []
