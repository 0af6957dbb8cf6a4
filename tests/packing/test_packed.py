"""The packed charm as `tox -e pack` left it: charmcraft's files, the lock, the zip, the linters.

Run by `tox -e pack` after `python -m tests.packing.pack`, on Python 3.12 with charmcraft
installed; the last two tests pack small projects of their own to show what fails the pack.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.packing.pack import REPO

PRIME = REPO / "build" / "pack" / "prime"
CHARM_FILE = REPO / "garm_amd64.charm"

pytestmark = pytest.mark.skipif(
    sys.version_info[:2] != (3, 12), reason="the charm is packed on Python 3.12 (tox -e pack)"
)


def charmcraft_yaml() -> dict[str, object]:
    return yaml.safe_load((REPO / "charmcraft.yaml").read_text())


def load(name: str) -> dict[str, object]:
    return yaml.safe_load((PRIME / name).read_text())


def lock() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry:
            name, version = re.sub(r"\[.*\]", "", entry).split("==")
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_charmcraft_wrote_metadata_config_and_actions_from_charmcraft_yaml():
    project = charmcraft_yaml()
    metadata = load("metadata.yaml")
    for key in ("name", "containers", "resources", "storage", "peers", "requires", "provides"):
        assert metadata[key] == project[key], key
    assert load("config.yaml") == project["config"]
    assert load("actions.yaml") == project["actions"]


def test_the_manifest_names_charmcraft_the_base_and_the_ops_framework():
    manifest = load("manifest.yaml")
    attributes = {a["name"]: a["result"] for a in manifest["analysis"]["attributes"]}
    assert attributes == {"language": "python", "framework": "operator"}
    assert manifest["charmcraft-version"] == "4.5.0"
    assert manifest["bases"] == [
        {"name": "ubuntu", "channel": "24.04", "architectures": ["amd64"]}
    ]


def test_dispatch_execs_the_executable_entrypoint():
    dispatch = (PRIME / "dispatch").read_text()
    assert dispatch.rstrip().endswith("exec ./src/charm.py")
    for path in ("dispatch", "src/charm.py"):
        assert os.access(PRIME / path, os.X_OK), path


def test_the_zip_keeps_modes_and_leaves_the_repository_tooling_out():
    with zipfile.ZipFile(CHARM_FILE) as charm:
        infos = {info.filename: info for info in charm.infolist()}
    assert stat.S_IMODE(infos["src/charm.py"].external_attr >> 16) & 0o111
    assert stat.S_IMODE(infos["dispatch"].external_attr >> 16) & 0o111
    top = {name.split("/", 1)[0] for name in infos}
    assert top == {
        "README.md", "actions.yaml", "config.yaml", "dispatch", "hooks", "lib",
        "manifest.yaml", "metadata.yaml", "src", "venv",
    }  # fmt: skip


def test_the_venv_holds_exactly_the_lock():
    """The lock's packages at its versions, and the venv's own pip.

    charmcraft's builder makes the venv with pip in it (at least 24.1).
    """
    installed = {}
    for dist_info in (PRIME / "venv").glob("*.dist-info"):
        name, version = dist_info.name.removesuffix(".dist-info").rsplit("-", 1)
        installed[re.sub(r"[-_.]+", "-", name).lower()] = version
    assert installed.pop("pip") >= "24.1"
    assert installed == lock()


def test_the_packed_charm_imports_on_the_bases_python():
    """The charm module and everything it imports load from the charm's own venv and lib."""
    code = "import sys; sys.path[:0] = ['lib', 'venv', 'src']; import charm; print(charm.__file__)"
    result = subprocess.run(
        [sys.executable, "-I", "-c", code], check=False, cwd=PRIME, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(PRIME / "src" / "charm.py")


MINIMAL_CHARM = """\
name: packing-probe
type: charm
summary: A project that shows what fails the pack.
description: A project that shows what fails the pack.
base: ubuntu@24.04
platforms:
  amd64:
parts:
  charm:
    plugin: charm
    charm-strict-dependencies: true
    charm-binary-python-packages: [cffi, pycparser]
"""
ENTRYPOINT = "#!/usr/bin/env python3\nimport ops\n\nops.main(ops.CharmBase)\n"


def pack_probe(tmp_path: Path, requirements: str, entrypoint_mode: int) -> tuple[int, str]:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "charmcraft.yaml").write_text(MINIMAL_CHARM)
    (project / "requirements.txt").write_text(requirements)
    (project / "src" / "charm.py").write_text(ENTRYPOINT)
    (project / "src" / "charm.py").chmod(entrypoint_mode)
    result = subprocess.run(
        [
            sys.executable, "-m", "tests.packing.pack", "--project-dir", str(project),
            "--work-dir", str(tmp_path / "work"), "--output", str(tmp_path),
        ],
        check=False, cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    return result.returncode, result.stdout + result.stderr


def test_a_dependency_that_builds_only_with_rust_fails_the_pack(tmp_path: Path):
    """Cryptography not allowed as a wheel: its sdist needs Rust, which the builder lacks."""
    code, output = pack_probe(
        tmp_path, "cryptography==48.0.0\ncffi==2.1.1\npycparser==3.12\n", 0o755
    )
    assert code != 0
    assert "Failed to run the build script for part 'charm'" in output
    assert re.search(r"cargo|[Rr]ust", output), output[-3000:]


def test_a_non_executable_entrypoint_is_a_linter_error(tmp_path: Path):
    code, output = pack_probe(tmp_path, "cffi==2.1.1\npycparser==3.12\n", 0o644)
    assert code == 1
    assert re.search(r"PACK PROBLEM: entrypoint: error: .*not executable", output), output[-3000:]
