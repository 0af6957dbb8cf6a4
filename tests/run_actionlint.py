"""Lint GitHub workflows with actionlint, and their ``run:`` scripts with shellcheck.

``tox -e lint`` runs this on the repository's ``.github/workflows``;
``tests/unit/house/test_actionlint.py`` runs the same command on directories of broken workflows,
so the lint is proved to fail. actionlint is the ``actionlint`` command of the PyPI wheel pinned in
tox.ini (``[vars] actionlint``; AGENTS.md says why that wheel), taken from this interpreter's
scripts directory so that another ``actionlint`` earlier on PATH (npm's is years old) is never the
one that runs. Without it this fails: there is no skip. shellcheck is Debian's, found on PATH;
actionlint runs it on every ``run:`` block, and without it those blocks go unchecked and this says
so (``.ci/run`` installs it).

Usage: ``python tests/run_actionlint.py [WORKFLOW_DIR]``; exit status 0 when clean, else not 0.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

WORKFLOWS = Path(__file__).resolve().parents[1] / ".github" / "workflows"


def _actionlint() -> Path | None:
    binary = Path(sysconfig.get_path("scripts")) / "actionlint"
    return binary if binary.is_file() else None


def main(argv: list[str]) -> int:
    """Lint every workflow in the directory given (default: this repository's); the exit code."""
    directory = Path(argv[0]) if argv else WORKFLOWS
    binary = _actionlint()
    if binary is None:
        print(
            f"actionlint: not installed for {sys.executable}; run `tox -e lint`, which installs "
            "the wheel pinned in tox.ini",
            file=sys.stderr,
        )
        return 2
    files = sorted(str(p) for p in (*directory.glob("*.yaml"), *directory.glob("*.yml")))
    if not files:
        print(f"actionlint: no workflow in {directory}", file=sys.stderr)
        return 2
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        print("actionlint: shellcheck not on PATH, run: blocks unchecked (apt install shellcheck)")
    else:
        print(f"actionlint: {len(files)} workflow(s), run: blocks checked by {shellcheck}")
    sys.stdout.flush()
    command = [str(binary), f"-shellcheck={shellcheck or ''}", *files]
    return subprocess.run(command, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
