"""What charmcraft packs from the repository: an executable entrypoint and a complete lock.

`tox -e pack` builds the charm from these; the checks here are the cheap half, run with the
unit tests, so that a change that would break every hook or the build fails early.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
PIN = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)(?:\[[a-z,]+\])?==(?P<version>\S+)(?P<rest>.*)$")


def git_mode(path: str) -> str:
    listed = subprocess.run(
        ["git", "ls-files", "-s", path], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    return listed.split()[0] if listed else ""


def charm_part() -> dict[str, object]:
    return yaml.safe_load((REPO / "charmcraft.yaml").read_text())["parts"]["charm"]


def lock_lines() -> list[re.Match[str]]:
    lines = (REPO / "requirements.txt").read_text().splitlines()
    entries = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    matches = [PIN.match(line) for line in entries]
    assert all(matches), [line for line, m in zip(entries, matches, strict=True) if not m]
    return [m for m in matches if m]


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_entrypoints_charmcraft_dispatch_execs_are_executable():
    """The dispatch charmcraft writes execs `./src/charm.py`: at 0644 every hook fails (126)."""
    for entrypoint in ("src/charm.py", "tests/integration/charms/configurator-stub/src/charm.py"):
        assert git_mode(entrypoint) == "100755", f"{entrypoint} must be committed executable"
        assert (REPO / entrypoint).read_text().startswith("#!/usr/bin/env python3\n")


def test_the_charm_is_packed_in_strict_mode_from_the_lock():
    part = charm_part()
    assert part["charm-strict-dependencies"] is True
    assert part["charm-requirements"] == ["requirements.txt"]


def test_every_lock_entry_is_pinned_to_one_version():
    names = [normalise(m["name"]) for m in lock_lines()]
    assert len(names) == len(set(names)), "a package pinned twice"


def test_the_wheels_allowed_are_the_lock_entries_marked_for_it():
    """Compiled packages, and those PyPI has no sdist of, come as wheels; nothing else does."""
    marked = {
        normalise(m["name"])
        for m in lock_lines()
        if "compiled" in m["rest"] or "wheel only" in m["rest"]
    }
    binaries = {normalise(name) for name in charm_part()["charm-binary-python-packages"]}
    assert binaries == marked
