"""The repository holds no outside program: no binary, no Go source or module, no build script.

GARM and Pebble are local parts (``tests/local_parts.py``): a developer builds them outside the
repositories. This house rule keeps a built binary, a copied source tree or a build script for
them from being committed by accident.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
# The first bytes of executables and archives: ELF, Mach-O (both byte orders, 32 and 64 bit),
# PE, and the zip and gzip containers Go toolchains and release tarballs come in.
BINARY_MAGIC = (
    b"\x7fELF",
    b"\xfe\xed\xfa\xce",
    b"\xfe\xed\xfa\xcf",
    b"\xce\xfa\xed\xfe",
    b"\xcf\xfa\xed\xfe",
    b"MZ",
    b"PK\x03\x04",
    b"\x1f\x8b",
)
GO_FILES = ("go.mod", "go.sum", "go.work")


def _tracked() -> list[Path]:
    try:
        listed = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "ls-files", "-z"],
            check=True,
            capture_output=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout, the tracked files are unknown: {exc}")
    return [REPO_ROOT / name for name in listed.decode().split("\0") if name]


def test_no_binary_is_committed() -> None:
    binaries = [
        str(path.relative_to(REPO_ROOT))
        for path in _tracked()
        if path.is_file() and path.read_bytes()[:4].startswith(BINARY_MAGIC)
    ]
    assert binaries == []


def test_no_go_source_module_or_vendor_tree_is_committed() -> None:
    found = [
        str(path.relative_to(REPO_ROOT))
        for path in _tracked()
        if path.suffix == ".go" or path.name in GO_FILES or "vendor" in path.parts
    ]
    assert found == []


def test_no_build_script_for_garm_or_pebble() -> None:
    scripts = [
        str(path.relative_to(REPO_ROOT))
        for path in _tracked()
        if path.name.startswith("build") and path.suffix in {".sh", ".bash", ""}
    ]
    assert scripts == []
