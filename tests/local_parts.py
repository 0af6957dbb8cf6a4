"""Where the tests find the real programs they run beside the charm: GARM and Pebble.

Neither program is part of the project, and neither its source, a binary built from it nor the
commands that build one are ever committed. A developer who wants the real-GARM or real-Pebble
tests builds the program locally from its upstream source, outside both repositories, and
either names it in the part's variable (``GARM_BIN``, ``PEBBLE_BIN``) or puts it at the one
conventional path, ``$XDG_CACHE_HOME/garm-charm/bin/<name>`` (``~/.cache`` when
``XDG_CACHE_HOME`` is unset or not absolute, as the XDG base directory specification says).

A set variable is the only place looked at: a developer who names a build wants that build
tested, not another one found elsewhere, so a variable naming no executable file is reported
in the skip line rather than passed over. Where nothing is found, every caller (the conformance
tests, the fault campaign, the simulation on real GARM, the bench) skips with
:meth:`LocalPart.skip_reason`, one line that says where the part was looked for.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.real_garm.pin import read_pin

# The folder under the user's cache directory that holds the local parts.
CACHE_FOLDER = Path("garm-charm") / "bin"
HOW_TO = "docs/how-to/run-real-garm-tests.md"


@dataclass(frozen=True)
class LocalPart:
    """One outside program the tests may run: where it is looked for, and what to build."""

    title: str
    variable: str
    filename: str
    upstream: str

    def conventional_path(self, environ: Mapping[str, str] | None = None) -> Path:
        """The path looked at when the variable is unset: the user's cache directory."""
        env = os.environ if environ is None else environ
        cache = env.get("XDG_CACHE_HOME", "")
        base = Path(cache) if os.path.isabs(cache) else Path(env.get("HOME", "~")) / ".cache"
        return base.expanduser() / CACHE_FOLDER / self.filename

    def candidate(self, environ: Mapping[str, str] | None = None) -> Path:
        """The one path this environment names: the variable's, else the conventional one."""
        env = os.environ if environ is None else environ
        configured = env.get(self.variable, "")
        return Path(configured).expanduser() if configured else self.conventional_path(env)

    def find(self, environ: Mapping[str, str] | None = None) -> Path | None:
        """The program to run, or None when its one candidate is not an executable file."""
        path = self.candidate(environ)
        return path if path.is_file() and os.access(path, os.X_OK) else None

    def skip_reason(self, environ: Mapping[str, str] | None = None) -> str:
        """One line saying where the program was looked for and what to build."""
        env = os.environ if environ is None else environ
        path = self.candidate(env)
        where = (
            f"{self.variable}={path}"
            if env.get(self.variable)
            else f"{self.variable} unset and {path}"
        )
        return (
            f"real {self.title} not found: {where} is not an executable file "
            f"(build {self.upstream} outside the repositories; see {HOW_TO})"
        )


GARM = LocalPart(
    title="GARM",
    variable="GARM_BIN",
    filename="garm",
    # The commit the rock pins, so the tests run what the image ships.
    upstream=f"cloudbase/garm commit {read_pin().commit[:8]}",
)
PEBBLE = LocalPart(
    title="Pebble",
    variable="PEBBLE_BIN",
    filename="pebble",
    upstream="canonical/pebble v1.26.0",
)
GARM_AGENT = LocalPart(
    title="garm-agent",
    variable="GARM_AGENT_BIN",
    filename="garm-agent",
    # What the rock builds: its part pins the commit (and the agent's version) in one place.
    upstream="cloudbase/garm-agent at the commit rockcraft.yaml's garm-agent part pins",
)
