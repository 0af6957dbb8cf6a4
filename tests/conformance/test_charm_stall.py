"""A scale set GARM stopped scaling, named and recovered by the real charm on each backend.

The charm runs through ``ops.testing`` with its ``garm-peers`` relation and an ingress URL its
runners call back to. GARM is left as its race leaves it (:mod:`tests.conformance.stall`): a
job's demand recorded ten minutes ago in GARM's database, and on real GARM the job assigned in
the GitHub stand-in with its messages handled, but no runner. The test never restarts GARM: the
charm names the scale set in its status and updates it, GARM's worker creates the runner, and
the job runs on it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import ops
import pytest

from tests.charm_driver import CharmDriver, configurator
from tests.conformance.backends import EMULATOR, ProxiedEmulator, wait_for
from tests.conformance.conftest import Garm
from tests.conformance.stall import stall
from tests.github_standin import GitHubStandin
from tests.simulate_backends import is_busy, is_idle

LOGICAL = "cfg-a-runners"


def _idle_runner(garm: Garm, live: str) -> dict[str, Any] | None:
    return next((r for r in garm.instances(live) if is_idle(r)), None)


def test_a_stalled_scaleset_is_named_then_updated_and_its_job_runs(
    runner_driver: CharmDriver, charm_garm: Garm, request: pytest.FixtureRequest
):
    driver, garm = runner_driver, charm_garm
    driver.add_configurator(configurator("cfg-a", relation_id=1, extra={"min_idle_runner": "0"}))
    (live,) = [s["name"] for s in garm.scalesets()]
    github: GitHubStandin | None = None
    if garm.name != EMULATOR:
        github = request.getfixturevalue("github")
        wait_for(
            garm,
            "GARM to listen to the scale set",
            lambda: any(v.name == live and v.has_session for v in github.scalesets()),
        )
    assert driver.run(driver.ctx.on.update_status()).unit_status == ops.ActiveStatus()
    assert driver.juju_writes() == {}

    recorded = (datetime.now(UTC) - timedelta(minutes=10)).replace(second=0, microsecond=0)
    job = github.assign_job_heard(live) if github else 0
    stall(garm, live, 1, recorded)
    state = driver.run(driver.ctx.on.update_status())
    since = recorded.strftime("%Y-%m-%d %H:%M UTC")
    words = f"GARM is not scaling (wants 1, has 0, since {since})"
    assert state.unit_status == ops.ActiveStatus(f"{LOGICAL}: {words}")
    updates = [c for c in garm.writes() if c.method == "PUT" and "/scalesets/" in c.path]
    assert len(updates) == 2  # the bootstrap timeout, up one minute and back

    runner = wait_for(garm, "a runner for the job", lambda: _idle_runner(garm, live))
    state = driver.run(driver.ctx.on.update_status())
    assert state.unit_status == ops.ActiveStatus()
    assert "stalled-scalesets" not in driver.run_action("scaleset-status")
    # The stall is over: the next converged hook writes nothing, to GARM or to Juju.
    garm.clear_requests()
    driver.run(driver.ctx.on.update_status())
    assert (garm.writes(), driver.juju_writes()) == ([], {})

    if github is None:
        assert isinstance(garm, ProxiedEmulator)
        garm.emulator.mark_busy(runner["name"])
    else:
        github.start_job(job, runner["name"])
    wait_for(
        garm,
        "the job to run on the runner",
        lambda: any(r["name"] == runner["name"] and is_busy(r) for r in garm.instances(live)),
    )
