"""GARM as Pebble runs it in the pod: the charm's own layer on a real Pebble, for the harness.

Where real Pebble is found (:data:`tests.local_parts.PEBBLE`), :class:`~tests.real_garm.harness.
RealGarm` runs GARM as the ``garm`` service of the layer the charm builds
(:func:`workload.build_layer`: its restart on failure and on the ``garm-alive`` check, the
check's period and threshold). Two things are moved for the test: the command runs the
entrypoint with the harness's layout (GARM on a test port, the SQLite file in the work
directory), and the check asks that port. Pebble then restarts a GARM that exits (its back-off)
and one that hangs (its check goes down), as in the pod; the harness only watches.

:class:`ServiceProcess` is GARM's process as the harness sees it there: not the harness's
child, so watched through ``/proc``, with the exit code Pebble logged.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import ops

from tests.real_pebble import RealPebble
from workload import pebble_layer

LAYER_LABEL = "garm"
# Pebble's own log lines when the service ends without being stopped: on its own (with a code,
# 128 + the signal for one ended by a signal), or ended by Pebble when its check failed.
_EXITED = re.compile(
    rf'Service "{pebble_layer.SERVICE_NAME}" (?:stopped unexpectedly with code (-?\d+)'
    r"|(exited after check failure))"
)
CHECK_FAILED = "Pebble's signal (its check failed)"
# How long Pebble may take to log an exit it reaped.
EXIT_LOG_TIMEOUT = 2.0
POLL = 0.02


class PebbleService:
    """A real Pebble daemon (stopped by its pid) running GARM from the charm's layer."""

    def __init__(self, binary: Path) -> None:
        """Start a daemon in a directory of its own.

        Not under the test's directory: a Unix socket path has at most 107 bytes, and pytest
        removes old numbered base directories when another session starts.
        """
        self._root = Path(tempfile.mkdtemp(prefix="garm-pebble-"))
        # Juju's Pebble runs services with a short environment, not the test process's.
        self.pebble = RealPebble(
            binary, self._root / "pebble", environment={"PATH": os.environ.get("PATH", "")}
        ).start()
        self.client = self.pebble.client()

    def start(self, command: str, environment: Mapping[str, str], check_url: str) -> None:
        """Plan the charm's layer for ``environment`` with ``command`` and ``check_url``; start it.

        Returns at once: the caller waits for GARM to answer, as the charm does.
        """
        layer = pebble_layer.build_layer(environment)
        layer["services"][pebble_layer.SERVICE_NAME]["command"] = command
        layer["checks"][pebble_layer.CHECK_NAME]["http"] = {"url": check_url}
        self.client.add_layer(LAYER_LABEL, layer, combine=True)
        self.client.start_checks([pebble_layer.CHECK_NAME])
        self.client.start_services([pebble_layer.SERVICE_NAME], timeout=0)

    def stop(self) -> None:
        """Stop GARM as Pebble stops a service (SIGTERM to its group, SIGKILL after 5 s).

        Its check goes too, as when the charm stops GARM: the harness keeps GARM stopped for
        a while (a snapshot, a pod being replaced), and a check left running would count
        failures then, and restart the next GARM as soon as that one started.
        """
        self.client.stop_checks([pebble_layer.CHECK_NAME])
        if self.state() in ("inactive", "error"):
            return
        try:
            self.client.stop_services([pebble_layer.SERVICE_NAME])
        except ops.pebble.ChangeError as exc:
            processes = subprocess.run(
                ["ps", "-eo", "pid,ppid,pgid,sid,stat,etime,args"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout
            raise AssertionError(
                f"{exc.err}\nPebble's log:\n{self.log_tail(30)}\nProcesses:\n{processes}"
            ) from exc

    def state(self) -> str:
        """Pebble's state of the ``garm`` service (``inactive`` before any layer)."""
        services = self.client.get_services([pebble_layer.SERVICE_NAME])
        if not services:
            return "inactive"
        current = services[0].current
        # ops 3.9 has no member for "backoff": it comes as the plain string.
        return current.value if isinstance(current, ops.pebble.ServiceStatus) else str(current)

    def check(self) -> ops.pebble.CheckInfo:
        """Pebble's view of the ``garm-alive`` check."""
        return self.client.get_checks(names=[pebble_layer.CHECK_NAME])[0]

    def log_size(self) -> int:
        """Where Pebble's log ends now (to read only what it logs later)."""
        return self.pebble.log.stat().st_size

    def exit_code(self, log_start: int) -> str:
        """How Pebble logged GARM's exit after ``log_start``: code, :data:`CHECK_FAILED` or ?."""
        deadline = time.monotonic() + EXIT_LOG_TIMEOUT
        while True:
            try:
                with self.pebble.log.open("rb") as log:
                    log.seek(log_start)
                    exits = _EXITED.findall(log.read().decode("utf-8", "replace"))
            except FileNotFoundError:  # the daemon was closed meanwhile
                return "?"
            if exits:
                code, _check_failed = exits[-1]
                return code or CHECK_FAILED
            if time.monotonic() > deadline:
                return "?"
            time.sleep(POLL)

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of Pebble's own log (its services' starts, exits, checks)."""
        try:
            text = self.pebble.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def close(self) -> None:
        """Stop the daemon (its services first), then remove its directory."""
        self.pebble.stop()
        shutil.rmtree(self._root, ignore_errors=True)


class ServiceProcess:
    """GARM's process under Pebble, with the ``subprocess.Popen`` surface the harness uses."""

    def __init__(self, pid: int, service: PebbleService, log_start: int) -> None:
        """Watch ``pid``; Pebble's log after ``log_start`` holds its exit code."""
        self.pid = pid
        self.returncode: str | None = None
        self._service = service
        self._log_start = log_start

    def poll(self) -> str | None:
        """None while the process lives, else how it ended as Pebble logged it."""
        if self.returncode is None and not alive(self.pid):
            self.returncode = self._service.exit_code(self._log_start)
        return self.returncode

    def wait(self, timeout: float | None = None) -> str:
        """Wait for the process to end (Pebble reaps it) and return its code."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"GARM (pid {self.pid}) still runs")
            time.sleep(POLL)
        return code

    def send_signal(self, signum: signal.Signals) -> None:
        """Signal the process (gone already: nothing to do)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (dead, not reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return False
    # The state follows the command name, which is in parentheses and may hold spaces.
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
