"""The charm's workload code on the real Pebble (v1.26.0): plans, restarts, stand-by, failures.

Each test runs ``src/workload/pebble_layer.py`` itself on an ``ops.Container`` whose client talks
to a real Pebble daemon; GARM is the stand-in of ``tests/pebble/conftest.py``. What Pebble does is
measured in ``../shared/pebble/README.md``; these tests hold the charm to it.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import ops
import pytest

from tests.pebble.conftest import Pod, standin_command
from workload import pebble_layer

# ops logs a security event when checks are stopped; under Juju its log handler takes it.
pytestmark = pytest.mark.filterwarnings("ignore:JujuLogHandler is not set up")
# Pebble restarts an exited service after 0.5 s, then 1 s, 2 s, ... (its back-off).
SETTLE = 5.0


def _await(what: str, probe: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, f"timed out awaiting {what}"
        time.sleep(0.05)


def _stays(what: str, probe: Callable[[], bool], seconds: float = SETTLE) -> None:
    """``probe`` holds for ``seconds`` (Pebble's back-off timer had time to fire)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert probe(), f"no longer true: {what}"
        time.sleep(0.1)


def _entrypoint() -> str:
    return pebble_layer.entrypoint_source()


def test_the_plan_holds_the_layer_and_a_second_pass_restarts_nothing(pod: Pod):
    layer = pod.layer()
    assert pebble_layer.apply_workload(pod.container, layer, _entrypoint()) is True
    [pid] = pod.garm_pids()
    plan = pod.container.get_plan()
    # Pebble adds its default threshold; the layer's own keys come back as they were sent.
    check = plan.checks[pebble_layer.CHECK_NAME].to_dict()
    assert check["threshold"] == 3
    assert pebble_layer._plan_matches(plan, layer)  # pyright: ignore[reportPrivateUsage]

    assert pebble_layer.apply_workload(pod.container, layer, _entrypoint()) is False
    assert pod.garm_pids() == [pid]


def test_a_changed_provider_restarts_garm_once(pod: Pod):
    first = pod.layer()
    pebble_layer.apply_workload(pod.container, first, _entrypoint())
    [before] = pod.garm_pids()
    service = first["services"][pebble_layer.SERVICE_NAME]
    changed_env = {**service["environment"], "GARM_PROVIDERS_JSON": '[{"unit_name": "cfg-a-0"}]'}
    changed = pebble_layer.build_layer(changed_env)

    assert pebble_layer.apply_workload(pod.container, changed, _entrypoint()) is True
    [after] = pod.garm_pids()
    assert after != before
    assert pebble_layer.apply_workload(pod.container, changed, _entrypoint()) is False
    assert pod.garm_pids() == [after]


def test_stand_by_stops_a_running_garm_and_nothing_starts_it_again(pod: Pod):
    pebble_layer.apply_workload(pod.container, pod.layer(), _entrypoint())
    assert pod.garm_pids()

    assert pebble_layer.stand_by(pod.container) == "active"
    _await("GARM stopped", lambda: not pod.garm_pids())
    (check,) = pod.container.get_checks(pebble_layer.CHECK_NAME).values()
    assert check.status == ops.pebble.CheckStatus.INACTIVE
    # An operator's replan starts the stand-by, which exits with 0: still no GARM. Pebble calls
    # the start failed only when that exit comes within 1 s, and a Python's start under CI's
    # load can take longer (then the start succeeds and the service ends, on-success: ignore).
    try:
        pod.container.replan()
    except ops.pebble.ChangeError as exc:
        assert "exited quickly with code 0" in str(exc)
    _stays("no GARM after a replan", lambda: not pod.garm_pids())
    assert pebble_layer.service_state(pod.container) == "inactive"
    # Standing by again stops nothing and changes nothing.
    assert pebble_layer.stand_by(pod.container) is None


def test_stand_by_stops_a_garm_in_back_off(pod: Pod):
    layer = pod.layer()
    # GARM starts, then exits after 1.5 s, again and again: mostly in Pebble's back-off.
    layer["services"][pebble_layer.SERVICE_NAME]["command"] = standin_command(
        pod.port, pod.mark, "--exit-after", "1.5"
    )
    pebble_layer.apply_workload(pod.container, layer, _entrypoint())
    _await(
        "GARM in back-off",
        lambda: pebble_layer.service_state(pod.container) == "backoff",
        timeout=15.0,
    )

    assert pebble_layer.stand_by(pod.container) == "backoff"
    _stays("no GARM once stood by", lambda: not pod.garm_pids())
    assert pebble_layer.service_state(pod.container) == "inactive"


def test_a_leader_after_stand_by_starts_garm_and_its_check(pod: Pod):
    layer = pod.layer()
    pebble_layer.apply_workload(pod.container, layer, _entrypoint())
    pebble_layer.stand_by(pod.container)
    _await("GARM stopped", lambda: not pod.garm_pids())

    assert pebble_layer.apply_workload(pod.container, layer, _entrypoint()) is True
    assert len(pod.garm_pids()) == 1
    (check,) = pod.container.get_checks(pebble_layer.CHECK_NAME).values()
    assert check.status == ops.pebble.CheckStatus.UP
    assert check.startup == ops.pebble.CheckStartup.ENABLED


def test_a_garm_that_exits_at_start_raises_with_pebble_s_reason(pod: Pod):
    layer = pod.layer()
    # A shell, not the Python stand-in: Pebble calls a start failed only when the process exits
    # within 1 s, and a Python's start under CI's load took longer (the test then saw no error).
    layer["services"][pebble_layer.SERVICE_NAME]["command"] = "/bin/sh -c 'exit 2'"
    with pytest.raises(pebble_layer.GarmExitedError) as raised:
        pebble_layer.apply_workload(pod.container, layer, _entrypoint())
    assert str(raised.value) == "exited quickly with code 2, will restart"
    # The layer is applied: the next pass does not replan, and reads Pebble's state.
    assert pebble_layer.apply_workload(pod.container, layer, _entrypoint()) is False
    assert pebble_layer.service_state(pod.container) in {"backoff", "active", "starting"}


def _fast_check(layer: ops.pebble.LayerDict) -> ops.pebble.LayerDict:
    """The charm's layer with its check 1 s apart (timeout 0.5 s): the same mechanism, sooner."""
    layer["checks"][pebble_layer.CHECK_NAME].update({"period": "1s", "timeout": "500ms"})
    return layer


def _replaced(pod: Pod, pid: int) -> bool:
    """One GARM runs, and it is not ``pid`` (one look: the old one may just have gone)."""
    pids = pod.garm_pids()
    return len(pids) == 1 and pids != [pid]


def _check_up(pod: Pod) -> bool:
    check = pod.container.get_checks(pebble_layer.CHECK_NAME)[pebble_layer.CHECK_NAME]
    return check.status == ops.pebble.CheckStatus.UP and check.successes > 0


def test_a_garm_hung_twice_is_restarted_twice(pod: Pod):
    pebble_layer.apply_workload(pod.container, _fast_check(pod.layer()), _entrypoint())
    for hang in ("first", "second"):
        _await(f"a passing check before the {hang} hang", lambda: _check_up(pod))
        [hung] = pod.garm_pids()
        os.kill(hung, signal.SIGSTOP)
        # Three failures, then Pebble's SIGTERM and, 5 s later, SIGKILL; then a new GARM.
        _await(
            f"Pebble to restart GARM after the {hang} hang",
            lambda pid=hung: _replaced(pod, pid),
            timeout=30.0,
        )


def test_a_garm_hung_at_start_is_restarted_once_by_pebble(pod: Pod):
    layer = _fast_check(pod.layer())
    layer["services"][pebble_layer.SERVICE_NAME]["command"] = standin_command(
        pod.port, pod.mark, "--hang-at-start"
    )
    pebble_layer.apply_workload(pod.container, layer, _entrypoint())
    [first] = pod.garm_pids()
    _await(
        "Pebble to restart the hung GARM",
        lambda: _replaced(pod, first),
        timeout=30.0,
    )
    [second] = pod.garm_pids()
    # Pebble acts when a check goes from up to down; this one was never up, so the GARM that
    # hangs again is left to Juju's liveness probe, which sees the alive check down.
    _stays("the second hung GARM not restarted", lambda: pod.garm_pids() == [second], 6.0)
    check = pod.container.get_checks(pebble_layer.CHECK_NAME)[pebble_layer.CHECK_NAME]
    assert check.status == ops.pebble.CheckStatus.DOWN
