"""The walls between src/'s packages are import-linter's contracts (pyproject.toml, ADR 0018).

``tox -e lint`` runs ``lint-imports``; here the same command runs on the tree as it is, and on
a copy of it with an import planted across a wall, which it must refuse. charm.py is a module,
which import-linter cannot take as a root package: its imports are read here instead.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "src"
# The unit env installs import-linter; its command sits beside the interpreter, never on PATH.
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
GARM_SIDE_CONTRACT = (
    "The GARM side (GARM's client, the reconcilers, the GitHub door) never reaches Juju"
)
FACES = ("reconcile", "garm")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def copy_of_the_tree(tmp_path: Path) -> Path:
    shutil.copytree(SRC, tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_tree_keeps_every_contract():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_import_across_a_wall_fails_the_lint(tmp_path: Path):
    root = copy_of_the_tree(tmp_path)
    reconciler = root / "src" / "reconcile" / "credentials.py"
    reconciler.write_text(reconciler.read_text() + "\nimport ops  # planted\n")

    result = lint_imports(root)

    assert result.returncode != 0
    broken = " ".join(result.stdout.split("Broken contracts", 1)[-1].split())
    assert f"{GARM_SIDE_CONTRACT} ---" in broken
    assert "reconcile is not allowed to import ops: - reconcile.credentials -> ops" in broken


def behind_the_faces(source: str) -> list[str]:
    """The modules behind ``reconcile``'s and ``garm``'s faces that ``source`` imports."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        found += [name for name in names if name.split(".")[0] in FACES and "." in name]
    return found


def test_charm_py_calls_the_garm_side_through_its_faces():
    assert behind_the_faces((SRC / "charm.py").read_text(encoding="utf-8")) == []


def test_the_face_check_sees_a_module_behind_a_face():
    planted = "from reconcile.chain import run_chain\nimport garm.client\nfrom garm import X\n"
    assert behind_the_faces(planted) == ["reconcile.chain", "garm.client"]
