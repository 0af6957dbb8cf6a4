"""GARM's scale-set workers: started late, seen only in its ``/metrics``; the charm waits for them.

GARM v0.2.1-afda4e76 starts a scale set's worker seconds after its create (and every one again
after each of its own starts, one after another). A disable that reaches GARM before the worker
registered its watcher is missed, and deleting the scale set then crashes GARM
(``test_garm_exit.py``). GARM's API shows nothing of a worker; its counter of GitHub calls does:
one lookup per worker start, one message session per enabled worker's listener. So the charm's
pass disables and deletes nothing until the counts reach the scale sets GARM lists
(``reconcile.scalesets.worker_starts``).

A worker's start is held here as each backend can hold it: real GARM's in its GitHub lookup
(the GitHub stand-in holds the call, already counted; the listener, not yet), the emulator's
before it (``hold_worker_starts``).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from garm import CreateScaleSetParams, GarmClient, UpdateScaleSetParams
from reconcile.scalesets import worker_starts
from reconcile.scalesets.reconciler import ScalesetReconciler
from reconcile.writes import Writes
from tests.conformance.backends import EMULATOR, ProxiedEmulator, wait_for
from tests.conformance.conftest import PROVIDER_NAME
from tests.conformance.test_drain import SCALESET, _seed_scaleset
from tests.github_standin import GitHubStandin
from tests.real_garm.harness import UNEXPECTED_EXITS, RealGarm

Garm = RealGarm | ProxiedEmulator
# Seconds of a pass's budget here: shorter than the gate's IDLE, longer than one poll.
BUDGET = 3.0


class HeldStart:
    """The start of the next scale set's worker, held until :meth:`release`."""

    def __init__(self, garm: Garm, request: pytest.FixtureRequest) -> None:
        self._emulator = garm.emulator if isinstance(garm, ProxiedEmulator) else None
        if self._emulator is not None:
            self._emulator.hold_worker_starts()
            self._github = None
            return
        github: GitHubStandin = request.getfixturevalue("github")
        self._github = github
        self._lookup = github.hold("list_scale_sets")

    def arrived(self) -> None:
        """Wait until GARM's retry loop is at the held start (real GARM: within 5 s)."""
        if self._github is not None:
            assert self._lookup.arrived.wait(worker_starts.IDLE * 4)

    def release(self) -> None:
        """Let the start go on."""
        if self._emulator is not None:
            self._emulator.release_worker_starts()
        else:
            self._lookup.release()


def counts(client: GarmClient) -> tuple[float, float]:
    operations = client.counters().operations
    return operations.get(worker_starts.LOOKUP, 0.0), operations.get(worker_starts.SESSION, 0.0)


def scaleset_writes(garm: Garm) -> list[str]:
    return [f"{c.method} {c.path}" for c in garm.writes() if "/scalesets/" in c.path]


def without_times(scaleset: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in scaleset.items() if k not in ("created_at", "updated_at")}


def test_a_worker_start_shows_in_garms_counters_and_nowhere_in_its_api(
    ready_garm: Garm, client: GarmClient, request: pytest.FixtureRequest
):
    held = HeldStart(ready_garm, request)
    _seed_scaleset(client, min_idle=0)
    held.arrived()
    listed = ready_garm.scaleset_by_name(SCALESET)
    assert listed is not None
    assert counts(client)[1] == 0  # no listener: the worker has not registered its watcher

    held.release()
    wait_for(ready_garm, "the worker's listener", lambda: counts(client) == (1.0, 1.0))

    after = ready_garm.scaleset_by_name(SCALESET)
    assert after is not None
    assert without_times(after) == without_times(listed)
    assert after["updated_at"] == listed["updated_at"]


def test_the_pass_removes_a_scale_set_only_once_garm_started_its_worker(
    backend: str, ready_garm: Garm, client: GarmClient, request: pytest.FixtureRequest
):
    held = HeldStart(ready_garm, request)
    _seed_scaleset(client, min_idle=0)
    held.arrived()
    ready_garm.clear_requests()

    writes = Writes(budget=BUDGET)
    ScalesetReconciler(client, writes=writes).reconcile([])

    assert scaleset_writes(ready_garm) == []
    assert [cut.step for cut in writes.unfinished] == [worker_starts.WAITING_STEP]
    assert ready_garm.scaleset_by_name(SCALESET) is not None

    held.release()
    wait_for(ready_garm, "the worker's listener", lambda: counts(client)[1] >= 1)
    writes = Writes(budget=60.0)
    ScalesetReconciler(client, writes=writes).reconcile([])

    assert writes.unfinished == []
    assert ready_garm.scaleset_by_name(SCALESET) is None
    assert [w.split(" ")[0] for w in scaleset_writes(ready_garm)] == ["PUT", "DELETE"]
    if backend != EMULATOR:
        assert isinstance(ready_garm, RealGarm)
        ready_garm.settle()
        # The disable reached the started worker: its listener stopped, GARM did not exit.
        assert ready_garm.exits == []
        assert not [line for line in UNEXPECTED_EXITS if str(ready_garm.workdir) in line]
        github: GitHubStandin = request.getfixturevalue("github")
        assert github.scalesets() == []


def test_garm_tells_its_process_start_and_a_restart_tells_another(
    ready_garm: Garm, client: GarmClient
):
    # The gate keys what it found idle by GARM's process (``worker_starts.IdleStarts``).
    before = client.counters().started
    assert before is not None
    assert abs(before - time.time()) < 600

    ready_garm.restart()

    after = client.counters().started
    assert after is not None
    assert after > before


def test_disables_and_deletes_of_started_workers_look_nothing_up(
    ready_garm: Garm, client: GarmClient
):
    # What the gate found idle stays true while the pass disables and deletes scale sets whose
    # workers run: only a worker's start moves the lookups.
    kept = _seed_scaleset(client, min_idle=0)
    gone = _another_scaleset(client, kept)
    wait_for(ready_garm, "both workers' listeners", lambda: counts(client) == (2.0, 2.0))

    disabled = UpdateScaleSetParams(enabled=False, min_idle_runners=0)
    for scaleset_id in (kept, gone):
        client.update_scaleset(scaleset_id, disabled)
    ready_garm.settle()
    client.delete_scaleset(gone)
    ready_garm.settle()

    assert counts(client)[0] == 2.0
    assert client.counters().operations.get(worker_starts.DELETED) == 1.0


def _another_scaleset(client: GarmClient, beside: int) -> int:
    """A second scale set of the organisation of ``beside``, enabled; its id."""
    first = next(s for s in client.list_scalesets() if s.id == beside)
    assert first.org_id is not None
    params = CreateScaleSetParams(
        name=f"{SCALESET}-2",
        provider_name=PROVIDER_NAME,
        image="ubuntu-24.04",
        flavor="m1.small",
        os_type="linux",
        os_arch="amd64",
        max_runners=2,
        min_idle_runners=0,
        enabled=True,
        labels=["linux"],
    )
    created = client.create_org_scaleset(first.org_id, params)
    assert created.id is not None
    return created.id
