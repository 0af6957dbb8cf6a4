"""A stalled scale set (GARM's stale desired count), measured on both backends.

GARM's database records a job's demand that its scale-set worker never heard
(:mod:`tests.conformance.stall`). Measured here: the API shows the recorded count and no
runner, and it stays so with no new message; an update that changes nothing is not written
(``updated_at`` stays: GARM emits no database event, the worker is not told); an update that
changes a field the charm does not manage (``runner_bootstrap_timeout``, up one minute and
back) is written twice, each time with an event carrying the row as the database has it, and
the worker creates the runner. What a restart and a new job message do is measured once,
outside CI (``docs/reference/garm-stall.md``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from garm import GarmClient, ScaleSet, UpdateScaleSetParams
from tests.conformance.backends import REAL, wait_for
from tests.conformance.conftest import Garm
from tests.conformance.stall import stall
from tests.conformance.test_drain import _seed_scaleset

NAME = "stall-me-1a2b3c4d"
# Long enough for GARM's autoscale loop (every 5 s) to act twice: 11 s of real time, 11 min of
# the emulator's.
QUIET_ROUNDS = 22


def _listed(client: GarmClient) -> ScaleSet:
    (listed,) = [s for s in client.list_scalesets() if s.name == NAME]
    return listed


def _stays_without_runners(garm: Garm) -> None:
    for _ in range(QUIET_ROUNDS):
        garm.settle()
        assert garm.instances(NAME) == [], "GARM created a runner for the stale demand"


def test_a_stalled_scaleset_waits_for_an_update_that_changes_it(
    ready_garm: Garm, client: GarmClient, backend: str, request: pytest.FixtureRequest
):
    scaleset_id = _seed_scaleset(client, min_idle=0, name=NAME)
    if backend == REAL:
        github = request.getfixturevalue("github")
        wait_for(
            ready_garm,
            "GARM to listen to the scale set",
            lambda: any(v.name == NAME and v.has_session for v in github.scalesets()),
        )
    recorded = (datetime.now(UTC) - timedelta(minutes=10)).replace(microsecond=0)
    stall(ready_garm, NAME, 1, recorded)

    listed = _listed(client)
    assert (listed.desired_runner_count, listed.updated_at) == (1, recorded)
    _stays_without_runners(ready_garm)

    unchanged = client.update_scaleset(
        scaleset_id, UpdateScaleSetParams(enabled=True, max_runners=2, min_idle_runners=0)
    )
    assert unchanged.updated_at == recorded  # nothing written: no event for the worker
    _stays_without_runners(ready_garm)

    timeout = listed.runner_bootstrap_timeout
    assert timeout
    client.update_scaleset(scaleset_id, UpdateScaleSetParams(runner_bootstrap_timeout=timeout + 1))
    restored = client.update_scaleset(
        scaleset_id, UpdateScaleSetParams(runner_bootstrap_timeout=timeout)
    )
    assert (restored.runner_bootstrap_timeout, restored.desired_runner_count) == (timeout, 1)
    assert restored.updated_at and restored.updated_at > recorded
    runners = wait_for(
        ready_garm, "a runner for the recorded demand", lambda: ready_garm.instances(NAME) or None
    )
    assert len(runners) == 1
