"""Fixtures of the real-Pebble tests: a Pebble daemon and a pod where GARM is a stand-in.

The charm's own workload code (``src/workload/pebble_layer.py``) runs on an ``ops.Container``
whose client talks to the real Pebble (:mod:`tests.real_pebble`). Only what would touch the
machine outside the test's directory is moved: the entrypoint is pushed into the test's
directory instead of ``/opt/garm-charm``, and the layer's GARM command runs the stand-in GARM
(``tests/pebble/standin_garm.py``) on a free port of 127.0.0.1, which the liveness check asks.
The stand-by command runs the charm's real entrypoint with its stand-by argument.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import ops
import pytest

from tests.local_parts import PEBBLE
from tests.real_garm.harness import standalone_environment
from tests.real_garm.ports import reserved_port
from tests.real_pebble import RealPebble
from workload import pebble_layer

STANDIN = Path(__file__).with_name("standin_garm.py")


@pytest.fixture
def pebble() -> Iterator[RealPebble]:
    """A started real Pebble in a directory of its own; skips where none is found.

    Not under ``tmp_path``: pytest removes old numbered base directories when another session
    starts, and a daemon whose socket directory went away answers nothing.
    """
    binary = PEBBLE.find()
    if binary is None:
        pytest.skip(PEBBLE.skip_reason())
    with (
        tempfile.TemporaryDirectory(prefix="garm-pebble-") as root,
        RealPebble(binary, Path(root) / "pebble") as daemon,
    ):
        yield daemon


@dataclass
class Pod:
    """The workload container of a test: its Pebble, and where its stand-in GARM listens."""

    container: ops.Container
    port: int
    mark: str

    def layer(self, environment: dict[str, str] | None = None) -> ops.pebble.LayerDict:
        """The charm's layer for ``environment`` (a standalone one by default)."""
        return pebble_layer.build_layer(environment or standalone_environment())

    def garm_pids(self) -> list[int]:
        """The pids of this pod's stand-in GARM processes that are alive (zombies aside)."""
        pids: list[int] = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if self.mark.encode() in cmdline and state != "Z":
                pids.append(int(entry.name))
        return pids


def standin_command(port: int, mark: str, *extra: str) -> str:
    """The command line of the stand-in GARM."""
    return shlex.join([sys.executable, str(STANDIN), str(port), mark, *extra])


@pytest.fixture
def pod(pebble: RealPebble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Pod]:
    """The charm's workload code pointed at this test's Pebble, entrypoint path and stand-in."""
    mark = f"garm-standin-{uuid.uuid4().hex}"
    entrypoint = tmp_path / "pod" / "garm_entrypoint.py"
    # The port stays held until the test ends: the stand-in binds it with SO_REUSEADDR.
    with reserved_port() as port:
        yield from _pod(pebble, entrypoint, port, mark, monkeypatch)


def _pod(
    pebble: RealPebble, entrypoint: Path, port: int, mark: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Pod]:
    monkeypatch.setattr(pebble_layer, "ENTRYPOINT_PATH", str(entrypoint))
    monkeypatch.setattr(pebble_layer, "SERVICE_COMMAND", standin_command(port, mark))
    monkeypatch.setattr(
        pebble_layer,
        "STAND_BY_COMMAND",
        shlex.join([sys.executable, str(entrypoint), pebble_layer.STAND_BY_FLAG]),
    )
    monkeypatch.setattr(pebble_layer, "METRICS_URL", f"http://127.0.0.1:{port}/metrics")
    yield Pod(pebble.container(), port, mark)
