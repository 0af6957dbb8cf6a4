"""The lint's own lists agree with what they describe (pyproject.toml, requirements.txt)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TRANSITIVE = "# Transitive dependencies"


def transitive_in_the_lock() -> list[str]:
    """The names the lock pins under its transitive heading, as written there."""
    text = (ROOT / "requirements.txt").read_text(encoding="utf-8").split(TRANSITIVE, 1)[1]
    return [m[1] for m in re.finditer(r"^([A-Za-z0-9_.-]+)==", text, re.M)]


def test_deptry_ignores_as_unused_only_the_locks_transitive_dependencies():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert config["tool"]["deptry"]["per_rule_ignores"]["DEP002"] == transitive_in_the_lock()
