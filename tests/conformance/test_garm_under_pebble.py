"""Real GARM as Pebble runs it in the pod: killed, hung, and what the charm is told.

Real GARM and real Pebble only (both local parts). The charm deploys on real GARM; the harness
runs GARM from the environment the charm planned as the ``garm`` service of the charm's own
layer on a real Pebble (:mod:`tests.real_garm.pebble_service`), so what restarts GARM here is
Pebble itself: on an exit (its back-off) and on the ``garm-alive`` check going down (the
layer's ``on-check-failure``). The check-failed event Juju then emits is given to the charm
with the check as the real Pebble reports it. The times are measured by
``python -m tests.pebble.measure_hang`` (``docs/reference/workload.md``), not asserted here.
"""

from __future__ import annotations

import dataclasses
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import ops
import pytest
from ops import testing

from tests.charm_driver import CharmDriver, base_state
from tests.conformance.backends import wait_for
from tests.conformance.conftest import (
    ADMIN_PASSWORD,
    ADMIN_USERNAME,
    PROVIDER_NAME,
    deployed,
    prepared_real_garm,
    provider_entry,
)
from tests.conformance.test_garm_exit import garm_hanging_once
from tests.github_standin import GitHubStandin
from tests.local_parts import PEBBLE
from tests.real_garm.harness import (
    SKIP_REASON,
    UNEXPECTED_EXITS,
    RealGarm,
    garm_binary,
    standalone_environment,
)
from tests.real_garm.pebble_service import CHECK_FAILED, PebbleService
from tests.security_log import security_events as logged
from vocabulary import security_events
from workload import pebble_layer

pytestmark = [
    pytest.mark.skipif(garm_binary() is None, reason=SKIP_REASON),
    pytest.mark.skipif(PEBBLE.find() is None, reason=PEBBLE.skip_reason()),
]


@pytest.fixture
def pod(tmp_path: Path, github: GitHubStandin) -> Iterator[tuple[CharmDriver, RealGarm]]:
    """The charm deployed on real GARM, which runs under the real Pebble."""
    garm = prepared_real_garm(tmp_path, github)
    try:
        data = tmp_path / "data"
        data.mkdir()
        yield deployed(garm, base_state(data)), garm
    finally:
        garm.stop()


def _service(garm: RealGarm) -> PebbleService:
    service = garm.pebble_service
    assert service is not None, "GARM does not run under the real Pebble"
    return service


def _restarted(garm: RealGarm, old_pid: int | None) -> bool:
    """A new GARM runs in place of ``old_pid`` and answers."""
    return garm.pid not in (None, old_pid) and bool(garm.controller())


def _expected_exit(garm: RealGarm) -> str:
    (line,) = garm.exits
    UNEXPECTED_EXITS.remove(line)  # provoked here: not for the run's summary
    return line


def test_a_killed_garm_is_started_again_by_pebble_on_its_own_database(
    pod: tuple[CharmDriver, RealGarm],
):
    driver, garm = pod
    service = _service(garm)
    assert service.state() == "active"
    controller = garm.controller()["controller_id"]
    killed = garm.pid
    status = driver.state.unit_status
    garm.clear_requests()

    garm.kill()
    wait_for(garm, "Pebble to start GARM again", lambda: _restarted(garm, killed))

    # Pebble logs a service ended by a signal as a shell would: 128 + the signal.
    assert "exited with 137" in _expected_exit(garm)
    assert garm.controller()["controller_id"] == controller
    # The charm's next hook finds the same GARM answering: nothing to redo.
    assert driver.run(driver.ctx.on.update_status()).unit_status == status
    assert garm.writes() == []


def test_a_hung_garm_fails_its_check_is_restarted_by_pebble_and_reported_by_the_charm(
    pod: tuple[CharmDriver, RealGarm], caplog: pytest.LogCaptureFixture
):
    driver, garm = pod
    service = _service(garm)
    wait_for(garm, "a first passing check", lambda: service.check().successes > 0)
    hung = garm.pid
    assert hung is not None
    status = driver.state.unit_status

    os.kill(hung, signal.SIGSTOP)
    wait_for(
        garm, "the check to go down", lambda: service.check().status == ops.pebble.CheckStatus.DOWN
    )
    reported = service.check()
    pebble_state = service.state()
    wait_for(garm, "Pebble to start GARM again", lambda: _restarted(garm, hung))

    # Pebble ended the hung GARM (SIGTERM waits while it is stopped; SIGKILL after 5 s).
    assert f"exited with {CHECK_FAILED}" in _expected_exit(garm)
    assert reported.threshold == 3  # Pebble's default: the layer sets none
    assert reported.failures >= reported.threshold

    # The check-failed event Juju emits for it, with the check as the real Pebble reported it.
    info = testing.CheckInfo(
        reported.name,
        level=reported.level,
        status=reported.status,
        failures=reported.failures,
        threshold=reported.threshold,
    )
    container = driver.state.get_container(pebble_layer.CONTAINER_NAME)
    container = dataclasses.replace(
        container,
        check_infos={info},
        service_statuses={pebble_layer.SERVICE_NAME: ops.pebble.ServiceStatus(pebble_state)},
    )
    caplog.clear()
    driver.ctx.run(
        driver.ctx.on.pebble_check_failed(container, info),
        dataclasses.replace(driver.state, containers={container}),
    )

    (event,) = logged(caplog, security_events.SYS_CRASH)
    assert event["event"] == f"sys_crash:garm,{pebble_layer.CHECK_NAME}"
    assert (
        f"failed {reported.failures} time(s) in a row (threshold {reported.threshold})"
        in event["description"]
    )
    assert f"Pebble reports the garm service {pebble_state}" in event["description"]
    # The GARM Pebble started again answers the charm's next hook on the same database.
    assert driver.run(driver.ctx.on.update_status()).unit_status == status


def test_a_garm_that_hangs_at_start_is_ended_by_its_check_and_started_again_by_pebble(
    tmp_path: Path, github: GitHubStandin
):
    garm = RealGarm.prepare(
        tmp_path / "root",
        binary=garm_hanging_once(tmp_path),
        github_endpoint=github.endpoint_params(),
    )
    try:
        # Long before the harness's own patience ends (START_TIMEOUT), the check does: three
        # failures, 5 s apart, take the check down, and Pebble ends GARM and starts it again.
        garm.start(standalone_environment([provider_entry(PROVIDER_NAME)]))

        assert _expected_exit(garm).endswith(
            "hung at start (Pebble's check ended it); started again"
        )
        assert garm.starts == 2
        garm.bootstrap(ADMIN_USERNAME, ADMIN_PASSWORD, urls=True)
        assert garm.providers() == [PROVIDER_NAME]
    finally:
        garm.stop()
