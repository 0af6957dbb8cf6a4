"""Measure what a hung GARM costs under the real Pebble with the charm's own check.

``python -m tests.pebble.measure_hang`` (with the ``real-garm`` env's Python; about four minutes):
the charm's layer (``workload.build_layer``) on a real Pebble, GARM played by the stand-in
(``tests/pebble/standin_garm.py``), then

1. **hung while running**: the stand-in is stopped with SIGSTOP right after a passing check;
   printed are the seconds until Pebble's ``/v1/health?level=alive`` (what Juju's liveness
   probe asks) first answers unhealthy, until Pebble has restarted GARM (a new pid answering),
   and until the health endpoint is healthy again;
2. **hung a second time**, the same, once the first restart passed a check;
3. **hung at start**: the stand-in stops itself before it answers; printed is when Pebble
   restarts it, and whether Pebble restarts the one that hangs again (it does not: Pebble's
   action fires when a check goes from up to down, and that check never was up).

Then, where real GARM is found too, the same on **real GARM** as the real-GARM harness runs it
under this Pebble (the charm's layer; :mod:`tests.real_garm.pebble_service`):

4. **killed** (SIGKILL): seconds until Pebble's restarted GARM answers its API again;
5. **hung** (SIGSTOP right after a passing check): seconds until the check is down, and until
   Pebble's restarted GARM answers its API again.

The results are written down in ``docs/reference/workload.md``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import ops

from tests.local_parts import GARM, PEBBLE
from tests.pebble.conftest import Pod, standin_command
from tests.real_garm.harness import RealGarm, standalone_environment
from tests.real_garm.ports import reserved_port
from tests.real_pebble import RealPebble
from workload import pebble_layer

POLL = 0.1


def _healthy(pebble: RealPebble) -> bool:
    """What Pebble's health endpoint says at the level Juju's liveness probe asks."""
    request = urllib.request.Request("http://localhost/v1/health?level=alive")
    opener = urllib.request.build_opener(_UnixHandler(str(pebble.socket)))
    try:
        with opener.open(request, timeout=5) as answer:
            return bool(json.load(answer)["result"]["healthy"])
    except urllib.error.HTTPError as refused:
        return bool(json.load(refused)["result"]["healthy"])


class _UnixHandler(urllib.request.HTTPHandler):
    def __init__(self, socket_path: str) -> None:
        super().__init__()
        self.socket_path = socket_path

    def http_open(self, req: Any) -> Any:
        import http.client
        import socket

        path = self.socket_path

        class _Conn(http.client.HTTPConnection):
            def connect(self) -> None:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(path)

        return self.do_open(_Conn, req)


def _replaced(pod: Pod, pid: int) -> bool:
    pids = pod.garm_pids()
    return len(pids) == 1 and pids != [pid]


def _until(probe: Callable[[], bool], timeout: float = 300.0) -> float:
    started = time.monotonic()
    while not probe():
        if time.monotonic() - started > timeout:
            raise TimeoutError
        time.sleep(POLL)
    return time.monotonic() - started


def _hang(pod: Pod, pebble: RealPebble, label: str) -> None:
    [pid] = pod.garm_pids()
    # Right after a passing check: the worst case, a whole period before the next one.
    (check,) = pod.container.get_checks(pebble_layer.CHECK_NAME).values()
    successes = check.successes
    _until(
        lambda: pod.container.get_checks(pebble_layer.CHECK_NAME)[
            pebble_layer.CHECK_NAME
        ].successes
        > successes
    )
    os.kill(pid, signal.SIGSTOP)
    unhealthy = _until(lambda: not _healthy(pebble))
    restarted = _until(lambda: _replaced(pod, pid)) + unhealthy
    healthy = _until(lambda: _healthy(pebble)) + restarted
    print(
        f"{label}: health unhealthy after {unhealthy:.1f} s, GARM restarted after "
        f"{restarted:.1f} s, healthy again after {healthy:.1f} s "
        f"(unhealthy for {healthy - unhealthy:.1f} s)"
    )


def main() -> int:
    """Run the three stories; print the figures."""
    binary = PEBBLE.find()
    if binary is None:
        print(f"NOT MEASURED: {PEBBLE.skip_reason()}")
        return 0
    check = pebble_layer.build_layer({})["checks"][pebble_layer.CHECK_NAME]
    print(f"the charm's check: {check}")
    with tempfile.TemporaryDirectory() as scratch, reserved_port() as port:
        root = Path(scratch)
        mark = f"garm-standin-{os.getpid()}"
        pebble_layer.ENTRYPOINT_PATH = str(root / "garm_entrypoint.py")
        pebble_layer.SERVICE_COMMAND = standin_command(port, mark)
        pebble_layer.METRICS_URL = f"http://127.0.0.1:{port}/metrics"
        with RealPebble(binary, root / "pebble") as pebble:
            pod = Pod(pebble.container(), port, mark)
            layer = pebble_layer.build_layer(standalone_environment())
            pebble_layer.apply_workload(pod.container, layer, pebble_layer.entrypoint_source())
            _hang(pod, pebble, "hung while running")
            _hang(pod, pebble, "hung a second time")
            pod.container.stop(pebble_layer.SERVICE_NAME)
            at_start = pebble_layer.build_layer(standalone_environment())
            at_start["services"][pebble_layer.SERVICE_NAME]["command"] = standin_command(
                port, mark, "--hang-at-start"
            )
            layered = time.monotonic()
            pebble_layer.apply_workload(pod.container, at_start, pebble_layer.entrypoint_source())
            [first] = pod.garm_pids()
            _until(lambda: _replaced(pod, first))
            print(
                f"hung at start: Pebble restarted it {time.monotonic() - layered:.1f} s "
                "after the layer was added"
            )
            [second] = pod.garm_pids()
            try:
                _until(lambda: pod.garm_pids() != [second], timeout=150.0)
                print("hung at start, again: Pebble restarted it a second time")
            except TimeoutError:
                print(
                    "hung at start, again: not restarted by Pebble within 150 s "
                    f"(health unhealthy: {not _healthy(pebble)})"
                )
    _real_garm()
    return 0


def _real_garm() -> None:
    """Kill, then hang, real GARM under the real Pebble; print the times."""
    binary = GARM.find()
    if binary is None:
        print(f"real GARM NOT MEASURED: {GARM.skip_reason()}")
        return
    with tempfile.TemporaryDirectory() as scratch:
        garm = RealGarm.prepare(Path(scratch), binary=binary, github_endpoint={})
        try:
            garm.start()
            service = garm.pebble_service
            assert service is not None
            killed = garm.pid
            os.kill(killed or 0, signal.SIGKILL)
            answering = _until(lambda: _real_answers(garm, killed))
            print(f"real GARM killed: answering again after {answering:.1f} s")
            successes = service.check().successes
            _until(lambda: service.check().successes > successes)
            hung = garm.pid
            os.kill(hung or 0, signal.SIGSTOP)
            down = _until(lambda: service.check().status == ops.pebble.CheckStatus.DOWN)
            answering = _until(lambda: _real_answers(garm, hung)) + down
            print(
                f"real GARM hung: check down after {down:.1f} s, "
                f"answering again after {answering:.1f} s"
            )
        finally:
            garm.stop()


def _real_answers(garm: RealGarm, old_pid: int | None) -> bool:
    """A GARM other than ``old_pid`` runs and answers (Pebble restarted it)."""
    if garm.pid in (None, old_pid):
        return False
    try:
        # GARM itself, not the recording proxy (which answers 502 for a GARM that is down).
        httpx.get(f"http://127.0.0.1:{garm.port}/api/v1/controller-info", timeout=1)
    except httpx.TransportError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
