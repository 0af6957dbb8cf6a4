"""One containment policy: only ``reconcile/containment.py`` turns a GARM failure into a notice.

Read from the source (nothing is run). A handler that catches GARM's base error
(``GarmApiError``), or a broad one (bare, ``Exception``, ``BaseException``) around a call on a
GARM client, decides on its own which failures end the pass; outside the modules below it is a
defect. A handler whose last statement is a bare ``raise`` decides nothing and is allowed.
Handlers of a subclass (``GarmNotFoundError``, ``GarmUnauthorizedError``) are a reconciler's
reading of one answer and are allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src"
BASE_ERROR = "GarmApiError"
BROAD = frozenset({"Exception", "BaseException"})
ALLOWED = {
    # The policy itself.
    "reconcile/containment.py": "the one place a contained failure becomes a notice",
    # The pass boundary: whatever escapes the chain, and any failure while bootstrapping GARM
    # (ready, first-run, login, controller URLs), ends the pass and becomes the charm's status.
    "charm_pass/garm_sync.py": "the pass boundary maps a pass-ending failure to the status",
    # An action reads GARM once and answers; any failure fails the action, nothing is contained.
    "charm_pass/actions.py": "an action fails on any GARM failure",
}


def _names(node: ast.expr | None) -> set[str]:
    if node is None:
        return {"<bare>"}
    items = node.elts if isinstance(node, ast.Tuple) else [node]
    names: set[str] = set()
    for item in items:
        if isinstance(item, ast.Name):
            names.add(item.id)
        elif isinstance(item, ast.Attribute):
            names.add(item.attr)
    return names


def _calls_client(body: list[ast.stmt]) -> bool:
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                receiver = node.func.value
                name = (
                    receiver.id
                    if isinstance(receiver, ast.Name)
                    else receiver.attr
                    if isinstance(receiver, ast.Attribute)
                    else ""
                )
                if name.lstrip("_").endswith("client"):
                    return True
    return False


def _reraises(handler: ast.ExceptHandler) -> bool:
    last = handler.body[-1]
    return isinstance(last, ast.Raise) and last.exc is None


def _offences(source: str) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Try):
            continue
        for handler in node.handlers:
            caught = _names(handler.type)
            base = BASE_ERROR in caught
            broad = bool(caught & (BROAD | {"<bare>"})) and _calls_client(node.body)
            if (base or broad) and not _reraises(handler):
                found.append(f"line {handler.lineno}: except {', '.join(sorted(caught))}")
    return found


def test_only_the_policy_module_contains_garm_failures():
    offences = {
        str(path.relative_to(SRC)): found
        for path in sorted(SRC.rglob("*.py"))
        if str(path.relative_to(SRC)) not in ALLOWED
        and (found := _offences(path.read_text(encoding="utf-8")))
    }
    assert offences == {}, "contain GARM failures with reconcile.containment.contain"


def test_the_scan_finds_each_kind_of_handler():
    source = """
try:
    client.list_scalesets()
except GarmApiError:
    pass
try:
    self._client.delete_template(1)
except Exception:
    pass
try:
    garm.GarmClient().login("a", "b")
except (ValueError, garm.GarmApiError):
    pass
try:
    client.list_scalesets()
except:
    pass
try:
    client.list_scalesets()
except GarmApiError:
    log()
    raise
try:
    client.list_scalesets()
except GarmNotFoundError:
    pass
try:
    parse()
except Exception:
    pass
"""
    assert _offences(source) == [
        "line 4: except GarmApiError",
        "line 8: except Exception",
        "line 12: except GarmApiError, ValueError",
        "line 16: except <bare>",
    ]


def test_every_allowed_module_exists():
    assert all((SRC / path).is_file() for path in ALLOWED)
