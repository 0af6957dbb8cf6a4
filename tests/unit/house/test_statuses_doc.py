"""Every status text the charm can set is described in docs/reference/statuses.md.

The texts are read from the source, not listed by hand: every ``ops.<Kind>Status(...)`` whose
argument is a literal or a module constant, every ``Notice(...)`` text and every
``CharmedTemplateError(...)`` message. Placeholders (f-string fields, ``str.format`` fields)
split a text into fixed parts; each fixed part must appear in the page.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "src"
PAGE = ROOT / "docs" / "reference" / "statuses.md"
STATUS_KINDS = {"ActiveStatus", "WaitingStatus", "BlockedStatus", "MaintenanceStatus"}
MESSAGE_CALLS = {"Notice": 2, "CharmedTemplateError": 0}
# Fixed parts shorter than this are joiners (": ", " (") that say nothing on their own.
MIN_PART = 4


def _constants(tree: ast.Module) -> dict[str, str]:
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if (
                isinstance(target, ast.Name)
                and isinstance(value, ast.Constant)
                and isinstance(value.value, str)
            ):
                found[target.id] = value.value
    return found


def _parts(node: ast.expr, constants: dict[str, str]) -> list[str] | None:
    """The fixed parts of a message expression, or None when it is not a fixed text."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.split(r"\{[^}]*\}", node.value)
    if isinstance(node, ast.Name) and node.id in constants:
        return re.split(r"\{[^}]*\}", constants[node.id])
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant)]  # type: ignore[misc]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        return _parts(node.func.value, constants)
    return None


def _callee(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def status_texts() -> list[tuple[str, list[str]]]:
    """Every fixed status text in src/, as (where, fixed parts)."""
    texts: list[tuple[str, list[str]]] = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = _constants(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _callee(node)
            if name in STATUS_KINDS and node.args:
                argument = node.args[0]
            elif name in MESSAGE_CALLS and len(node.args) > MESSAGE_CALLS[name]:
                argument = node.args[MESSAGE_CALLS[name]]
            else:
                continue
            parts = _parts(argument, constants)
            if parts is not None:
                where = f"{path.name}:{node.lineno}"
                texts.append((where, [p.strip() for p in parts if len(p.strip()) >= MIN_PART]))
    return texts


def test_the_scan_finds_the_texts_it_should() -> None:
    found = {part for _, parts in status_texts() for part in parts}
    # One of each kind of source: a constant, a notice f-string, a template error.
    assert "Waiting for pebble ready" in found
    assert "waiting for provider" in found
    assert "' not found in GARM" in found


@pytest.mark.parametrize(("where", "parts"), status_texts(), ids=lambda v: str(v)[:60])
def test_every_status_text_is_documented(where: str, parts: list[str]) -> None:
    page = PAGE.read_text(encoding="utf-8")
    missing = [part for part in parts if part not in page]
    assert not missing, f"{where}: not in {PAGE.name}: {missing}"
