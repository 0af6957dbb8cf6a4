"""Removing the application: the leader's stop hook empties GARM of what the charm created.

Runs the real charm (``ops.testing``) on both backends, with ``planned_units`` 0 as Juju
reports it while the whole application is being removed. Idle runners go with their scale
set; a busy runner is never removed: the hook fails, naming the scale set and the runner, and
nothing under that scale set is deleted.

That the retried hook finishes once the job has ended is tested on the emulator only
(``tests/unit/test_teardown.py``): real GARM stops a scale set's message listener when the
scale set is disabled, so it learns that the job ended only from its runner consolidation,
every 5 minutes (``PoolReapTimeoutInterval``), too long for this suite.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from ops import testing

from charm import GarmCharm
from reconcile import teardown
from tests.charm_driver import CharmDriver, configurator
from tests.conformance.backends import EMULATOR, wait_for
from tests.conformance.conftest import Garm
from tests.garm_emulator import GarmEmulator
from tests.github_standin import GitHubStandin
from tests.real_garm.proxy import RecordedCall
from vocabulary.desired_state import MANAGED_CREDENTIAL_DESCRIPTION

# Real seconds the stop hook may spend before it gives up on a busy runner.
BLOCKED_TIMEOUT = 3.0
FINISH_TIMEOUT = 45.0


@contextmanager
def _bounded(garm: Garm, timeout: float) -> Iterator[None]:
    """Run hooks with a short teardown bound; between sweeps GARM's workers get to run."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(GarmCharm, "teardown_timeout", timeout)
        patch.setattr(GarmCharm, "teardown_poll_interval", 0.0)
        patch.setattr(teardown, "_wait", lambda _seconds: garm.settle())
        yield


def _remove_application(driver: CharmDriver) -> None:
    driver.state = dataclasses.replace(driver.state, planned_units=0)
    driver.run(driver.ctx.on.stop())


def _runner(garm: Garm, **wanted: str) -> dict[str, Any] | None:
    return next(
        (r for r in garm.instances() if all(r.get(k) == v for k, v in wanted.items())), None
    )


def _refused_deletes(calls: list[RecordedCall]) -> list[RecordedCall]:
    """The DELETEs GARM refused, but a runner's that GARM was already deleting itself.

    GARM deletes a runner in the background (pending_delete, deleting, gone), after the charm's
    DELETE or on its own once the scale set is disabled, while the charm sends the DELETE on
    every sweep that lists the runner: one that arrives after GARM moved on is refused (400
    while deleting, 404 once gone). The charm logs it and the next listing settles it.
    """
    return [
        call
        for call in calls
        if call.method == "DELETE"
        and call.refused
        and not (call.path.startswith("/instances/") and call.status in (400, 404))
    ]


def _managed_credentials(garm: Garm) -> list[str]:
    return [
        c["name"]
        for c in garm.credentials()
        if c.get("description") == MANAGED_CREDENTIAL_DESCRIPTION
    ]


def _start_job(garm: Garm, request: pytest.FixtureRequest, scaleset: str, runner: str) -> int:
    """Put a job on ``runner``; return the job id (0 on the emulator)."""
    if garm.name == EMULATOR:
        emulator: GarmEmulator = garm.emulator  # pyright: ignore[reportAttributeAccessIssue]
        emulator.mark_busy(runner)
        return 0
    github: GitHubStandin = request.getfixturevalue("github")
    job = github.queue_job(scaleset)
    wait_for(garm, "GARM to acquire the job", lambda: _job_state(github, job) == "assigned")
    github.start_job(job, runner)
    return job


def _job_state(github: GitHubStandin, job: int) -> str:
    return next((j.state for j in github.jobs() if j.id == job), "")


def test_removal_deletes_scaleset_with_its_idle_runner_then_entity_and_credential(
    driver: CharmDriver,
    charm_garm: Garm,
):
    driver.add_configurator(configurator("cfg-1", relation_id=1, org="org-1"))
    wait_for(charm_garm, "a runner up", lambda: _runner(charm_garm, status="running"))
    charm_garm.clear_requests()

    with _bounded(charm_garm, FINISH_TIMEOUT):
        _remove_application(driver)

    assert charm_garm.scalesets() == []
    assert charm_garm.instances() == []
    assert charm_garm.organizations() == []
    assert _managed_credentials(charm_garm) == []
    deletes = [c.path.split("/")[1] for c in charm_garm.requests if c.method == "DELETE"]
    # Dependents first: runner, scale set, then the organisation, then the credential.
    assert deletes.index("scalesets") < deletes.index("organizations")
    assert deletes.index("organizations") < deletes.index("github")
    assert _refused_deletes(charm_garm.requests) == []


def test_busy_runner_blocks_removal_and_nothing_under_it_is_deleted(
    driver: CharmDriver,
    charm_garm: Garm,
    request: pytest.FixtureRequest,
):
    driver.add_configurator(configurator("cfg-1", relation_id=1, org="org-1"))
    idle = wait_for(charm_garm, "a runner up", lambda: _runner(charm_garm, status="running"))
    (scaleset,) = charm_garm.scalesets()
    _start_job(charm_garm, request, scaleset["name"], idle["name"])
    wait_for(
        charm_garm,
        "the runner busy",
        lambda: _runner(charm_garm, name=idle["name"], runner_status="active"),
    )

    with (
        _bounded(charm_garm, BLOCKED_TIMEOUT),
        pytest.raises(testing.errors.UncaughtCharmError) as failed,
    ):
        _remove_application(driver)

    error = failed.value.__cause__
    assert isinstance(error, teardown.TeardownBlockedError)
    message = str(error)
    assert f"scale set {scaleset['name']!r} (id={scaleset['id']})" in message
    assert f"runner {idle['name']!r}" in message
    assert f"garm-cli runner delete {idle['name']} --force-remove-runner" in message
    # Nothing under the busy runner was deleted.
    assert _runner(charm_garm, name=idle["name"]) is not None
    assert [s["name"] for s in charm_garm.scalesets()] == [scaleset["name"]]
    assert [o["name"] for o in charm_garm.organizations()] == ["org-1"]
    assert _managed_credentials(charm_garm) == ["app-101-202"]
