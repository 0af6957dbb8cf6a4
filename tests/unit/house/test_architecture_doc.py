"""docs/explanation/architecture.md keeps up with the code: every module, every chain step.

Read from the files (nothing is imported): the module table's first column must name every
``.py`` file of ``src/`` by its path there, and the numbered list under ``## The chain`` must
name every span ``reconcile/chain.py`` opens, in the chain's order.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "src"
DOC = ROOT / "docs" / "explanation" / "architecture.md"
_SPAN = re.compile(r'start_as_current_span\("([^"]+)"\)')
_STEP = re.compile(r"^\d+\. `([^`]+)`", re.M)


def _src_modules() -> set[str]:
    return {path.relative_to(SRC).as_posix() for path in SRC.rglob("*.py")}


def _table_modules(doc: str) -> set[str]:
    """The backticked names in the first column of the table whose header starts ``| Module``."""
    table = doc.split("| Module |", 1)[1].split("\n\n", 1)[0]
    names: set[str] = set()
    for row in table.splitlines()[2:]:
        names |= set(re.findall(r"`([^`]+)`", row.split("|")[1]))
    return names


def _chain_steps(doc: str) -> list[str]:
    return _STEP.findall(doc.split("## The chain", 1)[1].split("\n## ", 1)[0])


def _code_steps() -> list[str]:
    return _SPAN.findall((SRC / "reconcile" / "chain.py").read_text(encoding="utf-8"))


def _missing_modules(doc: str) -> set[str]:
    return _src_modules() - _table_modules(doc)


def test_every_module_of_src_has_a_row() -> None:
    assert _missing_modules(DOC.read_text(encoding="utf-8")) == set()


def test_every_chain_step_is_listed_in_order() -> None:
    assert _chain_steps(DOC.read_text(encoding="utf-8")) == _code_steps()


def test_the_checks_see_an_omission() -> None:
    doc = DOC.read_text(encoding="utf-8")
    assert _missing_modules(doc.replace("`reconcile/memory.py`", "`memory`")) == {
        "reconcile/memory.py"
    }
    steps = _chain_steps(doc.replace("`reconcile.agent_tools`", "the agent tools"))
    assert steps != _code_steps()
    assert len(_code_steps()) >= 8
