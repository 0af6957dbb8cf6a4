"""The size rules of src/: no module over 450 lines, no class over 250, the event table under 250.

Read from the source. The container entrypoint is the one exception: it runs inside the
workload image on the standard library alone and must stay one self-contained file.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src"
MAX_MODULE_LINES = 450
MAX_CLASS_LINES = 250
SELF_CONTAINED = frozenset({"garm_entrypoint.py"})
# charm.py is the event table and the pass boundary: the pass's parts live in their own modules.
MAX_CHARM_LINES = 250


def oversized(root: Path) -> list[str]:
    """Every module and class under ``root`` above its bound, as ``path: what (lines)``."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        where = path.relative_to(root)
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES and path.name not in SELF_CONTAINED:
            found.append(f"{where}: module ({lines} lines)")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                length = node.end_lineno - node.lineno + 1
                if length > MAX_CLASS_LINES:
                    found.append(f"{where}: class {node.name} ({length} lines)")
    return found


def test_no_module_or_class_of_src_is_over_its_bound():
    assert oversized(SRC) == []


def test_charm_py_stays_the_event_table():
    lines = len((SRC / "charm.py").read_text().splitlines())
    assert lines < MAX_CHARM_LINES, f"src/charm.py has {lines} lines"


def test_an_oversized_module_and_class_are_named(tmp_path: Path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_CLASS_LINES))
    (tmp_path / "big.py").write_text(f"class Big:\n{body}\n" + "\n" * MAX_MODULE_LINES)
    (tmp_path / "garm_entrypoint.py").write_text("\n" * (MAX_MODULE_LINES + 1))

    assert oversized(tmp_path) == [
        f"big.py: module ({MAX_CLASS_LINES + 1 + MAX_MODULE_LINES} lines)",
        f"big.py: class Big ({MAX_CLASS_LINES + 1} lines)",
    ]
