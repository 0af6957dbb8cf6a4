"""The one boundary of src/: the GARM side (``garm/``, ``reconcile/``) never reaches Juju.

Read from the source (no import is run): every module's imports, followed through src/ to the
end. A GARM-side module may reach the standard library, third-party packages other than ops,
the GARM side itself and the Juju-free vocabulary listed below; ``garm/`` reaches only itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src"
GARM_SIDE = ("garm", "reconcile")
# Flat modules that know neither Juju nor GARM: what the charm hands to the GARM side.
VOCABULARY = frozenset(
    {
        "desired_state",
        "github_endpoint",
        "github_key",
        "notices",
        "runner_options",
        "runner_template",
        "security_events",
        "telemetry",
    }
)
# The container script's shared constants (environment names, the unit-name pattern).
CONTAINER_SCRIPT = "garm_entrypoint"
# The charm's own door to GitHub (a stale scale set reclaimed): the GARM side may use it; it
# reaches neither Juju nor GARM.
GITHUB_DOOR = "github_actions"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """The absolute module names a file imports (``from a.b import c`` gives a.b and a.b.c)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _graph() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in SRC.rglob("*.py")}


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through src/ modules; packages included."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for name in graph.get(todo.pop(), set()):
            for prefix in _prefixes(name):
                if prefix not in seen:
                    seen.add(prefix)
                    todo.append(prefix)
    return seen


def _prefixes(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _is_garm_side(name: str) -> bool:
    return name.split(".")[0] in GARM_SIDE


def _crossings(graph: dict[str, set[str]], module: str) -> list[str]:
    local = {name.split(".")[0] for name in graph}
    allowed = {*GARM_SIDE, *VOCABULARY, CONTAINER_SCRIPT, GITHUB_DOOR}
    if module.split(".")[0] == "garm":
        allowed = {"garm"}
    bad: list[str] = []
    for name in sorted(_reach(graph, module)):
        top = name.split(".")[0]
        if top == "ops" or (top in local and top not in allowed):
            bad.append(name)
    return bad


GRAPH = _graph()


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if _is_garm_side(m)))
def test_garm_side_never_reaches_juju(module: str) -> None:
    assert _crossings(GRAPH, module) == []


@pytest.mark.parametrize("module", sorted(VOCABULARY))
def test_vocabulary_knows_neither_juju_nor_garm(module: str) -> None:
    reached = {name.split(".")[0] for name in _reach(GRAPH, module)}
    assert not reached & {"ops", "garm", "reconcile", "httpx"}, reached


def test_the_github_door_knows_neither_juju_nor_garm() -> None:
    reached = {name.split(".")[0] for name in _reach(GRAPH, GITHUB_DOOR)}
    local = {name.split(".")[0] for name in GRAPH}
    assert not reached & ({"ops", *GARM_SIDE} | (local - VOCABULARY)), reached


def test_the_check_sees_a_crossing() -> None:
    # A made-up GARM-side module that imports the Juju adapter must be caught, even through
    # a vocabulary module that (wrongly) imports ops.
    graph = {
        **GRAPH,
        "reconcile.bad": {"charm_state"},
        "reconcile.sly": {"notices"},
        "notices": {"ops"},
    }
    assert "charm_state" in _crossings(graph, "reconcile.bad")
    assert "ops" in _crossings(graph, "reconcile.sly")
    assert "desired_state" in _crossings({**GRAPH, "garm.bad": {"desired_state"}}, "garm.bad")


def test_every_garm_side_package_is_checked() -> None:
    # The parametrised list is read from disk: it must hold the packages' modules.
    checked = {m for m in GRAPH if _is_garm_side(m)}
    assert {"garm.client", "reconcile.chain", "reconcile.scalesets.reconciler"} <= checked


def test_the_login_probe_knows_no_juju_and_no_charm_module() -> None:
    local = {name.split(".")[0] for name in GRAPH} - {"postgres_login"}
    reached = {name.split(".")[0] for name in _reach(GRAPH, "postgres_login")}
    assert not reached & {"ops", *local}, reached


def _behind_the_face(graph: dict[str, set[str]], module: str) -> list[str]:
    """The modules behind ``reconcile``'s face that a Juju-side module imports directly."""
    behind = {name for name in graph if name.startswith("reconcile.")}
    return sorted(graph[module] & behind)


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if not _is_garm_side(m)))
def test_the_juju_side_calls_reconcile_through_its_face(module: str) -> None:
    # reconcile/__init__.py says what the charm may call; the modules behind it can change.
    assert _behind_the_face(GRAPH, module) == []


def test_the_face_check_sees_a_module_behind_it() -> None:
    graph = {**GRAPH, "charm": {*GRAPH["charm"], "reconcile.chain"}}
    assert _behind_the_face(graph, "charm") == ["reconcile.chain"]
