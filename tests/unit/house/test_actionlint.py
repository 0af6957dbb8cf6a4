"""The workflow lint of ``tox -e lint`` fails on a broken workflow.

Each test writes a workflow into a temporary directory and runs the command the lint env runs
(``tests/run_actionlint.py``) on it, with this interpreter: the unit env installs the same
pinned actionlint wheel as the lint env (tox.ini ``[vars] actionlint``). A clean workflow passes,
so each failure is the broken line's. The shellcheck case skips where Debian's shellcheck is
not installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

RUN_ACTIONLINT = Path(__file__).resolve().parents[2] / "run_actionlint.py"
HEADER = """\
on: push
permissions:
  contents: read
jobs:
  check:
    runs-on: ubuntu-24.04
    steps:
"""


def _run(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(RUN_ACTIONLINT), str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _lint(tmp_path: Path, steps: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "ci.yaml").write_text(HEADER + steps, encoding="utf-8")
    return _run(tmp_path)


def test_a_clean_workflow_passes(tmp_path: Path):
    result = _lint(tmp_path, '      - run: echo "$GITHUB_SHA"\n')
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_unknown_key_fails(tmp_path: Path):
    result = _lint(tmp_path, '      - run: echo "$GITHUB_SHA"\n        timeout-minute: 5\n')
    assert result.returncode != 0
    assert 'unexpected key "timeout-minute"' in result.stdout


def test_an_untrusted_expression_in_a_script_fails(tmp_path: Path):
    result = _lint(tmp_path, "      - run: echo ${{ github.event.head_commit.message }}\n")
    assert result.returncode != 0
    assert '"github.event.head_commit.message" is potentially untrusted' in result.stdout


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not on PATH")
def test_shellcheck_checks_run_blocks(tmp_path: Path):
    result = _lint(tmp_path, "      - run: echo $GITHUB_SHA\n")
    assert result.returncode != 0
    assert "SC2086" in result.stdout
    assert "run: blocks checked by" in result.stdout


def test_an_empty_directory_fails(tmp_path: Path):
    result = _run(tmp_path)
    assert result.returncode != 0
    assert "no workflow" in result.stderr
