"""The real Pebble for tests: started as Juju starts it, and an ``ops.Container`` that talks to it.

Pebble is a local part (:data:`tests.local_parts.PEBBLE`, v1.26.0, the one Juju 3.6 runs): a
test that needs it skips with one line where none is found. :class:`RealPebble` runs
``pebble run --create-dirs --hold`` (what Juju runs in the workload container) with a
temporary ``$PEBBLE`` directory, in its own session, and stops exactly its own process group.
:meth:`RealPebble.container` gives the ``ops.Container`` the charm's code would get in a pod,
with ops' own Pebble client on the daemon's socket.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Self

import ops

# Pebble answers on its socket about 10 ms after it starts.
START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0
# The Juju the charm's tests deploy on: Juju 3.6 bundles Pebble v1.26.0.
JUJU_VERSION = "3.6.12"


class RealPebble:
    """One Pebble daemon in ``directory``; a context manager that stops it by its pid."""

    def __init__(
        self, binary: Path, directory: Path, environment: Mapping[str, str] | None = None
    ) -> None:
        """Prepare a daemon of ``binary`` whose state directory is ``directory``.

        ``environment`` is the daemon's (its services inherit it); the test process's by default.
        """
        self.binary = binary
        self.environment = dict(os.environ if environment is None else environment)
        self.directory = directory
        self.socket = directory / ".pebble.socket"
        self.log = directory.with_name(f"{directory.name}.log")
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> Self:
        """Start the daemon; return once its socket exists."""
        env = {**self.environment, "PEBBLE": str(self.directory)}
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(
                [str(self.binary), "run", "--create-dirs", "--hold"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT
        # The socket file exists from bind(), a moment before Pebble listens on it: wait for an
        # answer, not for the file.
        while not self._answers():
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"pebble did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.01)
        return self

    def _answers(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            self.client().get_system_info()
        except ops.pebble.ConnectionError:
            return False
        return True

    @property
    def pid(self) -> int:
        """The daemon's pid (its process group's id too)."""
        assert self._process is not None
        return self._process.pid

    def client(self) -> ops.pebble.Client:
        """The Pebble client of ops, on the daemon's socket."""
        return ops.pebble.Client(socket_path=str(self.socket))

    def container(self, name: str = "garm") -> ops.Container:
        """The ``ops.Container`` the charm's code gets in a pod, on this daemon."""
        backend: Any = SimpleNamespace(
            _juju_context=SimpleNamespace(version=ops.JujuVersion(JUJU_VERSION))
        )
        return ops.Container(name, backend, pebble_client=self.client())

    def stop(self) -> None:
        """Stop the daemon (SIGTERM stops its services first), then its whole group."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def __enter__(self) -> Self:
        """Start the daemon."""
        return self.start()

    def __exit__(self, *_: object) -> None:
        """Stop the daemon."""
        self.stop()
