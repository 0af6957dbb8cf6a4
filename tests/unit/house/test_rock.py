"""The rock (``rockcraft.yaml``) agrees with the charm's entrypoint and with the tested GARM.

rockcraft is not needed: the file is parsed and checked against the constants the charm and
its entrypoint use, so a path, the Python or the GARM pin cannot drift without a failing test.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import posixpath
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from container_scripts import garm_entrypoint, provider_shim
from tests.real_garm.pin import GARM_PART, PROVIDER_PART, load_rockcraft, read_pin
from workload import agent_image, pebble_layer

REPO_ROOT = Path(__file__).resolve().parents[3]
SHARED_GARM_README = REPO_ROOT.parent / "shared" / "garm" / "README.md"
SHIM_PART = "provider-shim"
AGENT_PART = "garm-agent"
AGENT_VERSION_FLAG = "github.com/cloudbase/garm-agent/cmd.Version="
# Every architecture a scale set of the charm may name: agent mode needs a binary for each.
AGENT_ARCHES = ("amd64", "arm64")
GARM_VERSION_FLAG = "github.com/cloudbase/garm/util/appdefaults.Version="
PROVIDER_VERSION_FLAG = "github.com/cloudbase/garm-provider-openstack/provider.Version="
PROVIDER_RELEASE = "v0.1.5"
# The commit tag v0.1.5 of cloudbase/garm-provider-openstack points at.
PROVIDER_RELEASE_COMMIT = "767f22cb97a9431fdf697dc8750834a7a5b775f5"
# Packages that would give the workload a shell or shell tools it does not need.
SHELL_PACKAGES = ("bash", "dash", "busybox", "coreutils", "util-linux", "findutils", "sed")


@pytest.fixture(scope="module")
def rock() -> dict[str, Any]:
    return load_rockcraft()


def _part(rock: dict[str, Any], name: str) -> dict[str, Any]:
    return rock["parts"][name]


def _go_builds(part: dict[str, Any]) -> list[list[str]]:
    """Every ``go build`` command of a part's override-build, as argument lists."""
    script = part["override-build"].replace("\\\n", " ")
    return [shlex.split(line) for line in script.splitlines() if " go build " in f" {line} "]


def _output(build: list[str]) -> str:
    target = build[build.index("-o") + 1]
    return target.replace("${CRAFT_PART_INSTALL}", "")


def _staged(rock: dict[str, Any]) -> list[str]:
    return [pkg for part in rock["parts"].values() for pkg in part.get("stage-packages", [])]


def test_rock_identity(rock: dict[str, Any]):
    assert rock["name"] == "garm"
    assert rock["base"] == "bare"
    assert rock["build-base"] == "ubuntu@24.04"
    assert list(rock["platforms"]) == ["amd64"]


def test_pin_is_one_commit_and_its_version(rock: dict[str, Any]):
    pin = read_pin()
    assert re.fullmatch(r"[0-9a-f]{40}", pin.commit)
    # GARM's version string ends with the short commit it was built from.
    assert pin.version.endswith(f"-{pin.commit[:8]}")
    builds = _go_builds(_part(rock, GARM_PART))
    assert builds, "the garm part builds nothing"
    for build in builds:
        ldflags = build[build.index("-ldflags") + 1]
        assert f"{GARM_VERSION_FLAG}{pin.version}" in ldflags.split()


def test_pin_is_the_garm_the_tests_run():
    if not SHARED_GARM_README.is_file():
        pytest.skip(f"{SHARED_GARM_README} not found: the tested GARM's commit is unknown here")
    text = SHARED_GARM_README.read_text(encoding="utf-8")
    pin = read_pin()
    assert pin.commit in text
    assert f"`{pin.version}`" in text


def test_garm_builds_to_the_entrypoint_binary_path(rock: dict[str, Any]):
    outputs = [_output(b) for b in _go_builds(_part(rock, GARM_PART))]
    assert garm_entrypoint.GARM_BINARY in outputs
    assert garm_entrypoint.PRODUCTION_LAYOUT.garm_binary == garm_entrypoint.GARM_BINARY


def test_provider_is_the_pinned_static_release_at_the_entrypoint_path(rock: dict[str, Any]):
    part = _part(rock, PROVIDER_PART)
    assert part["source-commit"] == PROVIDER_RELEASE_COMMIT
    (build,) = _go_builds(part)
    assert _output(build) == garm_entrypoint.PRODUCTION_LAYOUT.provider_binary
    assert _output(build) == garm_entrypoint.PROVIDER_BINARY
    assert f"{PROVIDER_VERSION_FLAG}{PROVIDER_RELEASE}" in build[build.index("-ldflags") + 1]
    assert "CGO_ENABLED=0" in part["override-build"]


def test_python_and_certificates_are_staged(rock: dict[str, Any]):
    interpreter, script = pebble_layer.SERVICE_COMMAND.split()
    assert interpreter == "python3"
    assert script == pebble_layer.ENTRYPOINT_PATH
    staged = _staged(rock)
    # python3's standard slice brings /usr/bin/python3 and the whole standard library, which
    # is all the entrypoint imports.
    assert "python3_standard" in staged
    assert any(pkg.startswith("ca-certificates_") for pkg in staged)


def test_directories_the_entrypoint_expects_exist(rock: dict[str, Any]):
    script = _part(rock, "runtime")["override-build"]
    made = set(re.findall(r'"\$\{CRAFT_PART_INSTALL\}(/[^"]+)"', script))
    assert posixpath.dirname(pebble_layer.ENTRYPOINT_PATH) in made
    assert garm_entrypoint.CONFIG_DIR in made
    assert pebble_layer.DATA_DIR in made
    assert posixpath.dirname(pebble_layer.SQLITE_DB_FILE) == pebble_layer.DATA_DIR


def test_bare_rock_stages_only_slices_and_no_shell(rock: dict[str, Any]):
    staged = _staged(rock)
    # On a bare base every package comes as chisel slices (package_slice).
    assert all("_" in pkg for pkg in staged), staged
    assert not [p for p in staged if p.split("_")[0] in SHELL_PACKAGES]
    assert "run-user" not in rock  # GARM runs as root: see the comment in rockcraft.yaml


def test_provider_shim_is_installed_where_the_entrypoint_points_garm(rock: dict[str, Any]):
    part = _part(rock, SHIM_PART)
    assert (part["plugin"], part["source-type"]) == ("nil", "local")
    source_dir = REPO_ROOT / part["source"]
    script = part["override-build"].replace("\\\n", " ")
    (install,) = [shlex.split(line) for line in script.splitlines() if line.strip()]
    assert install[:4] == ["install", "-D", "-m", "0755"]
    source, target = install[4:]
    assert (source_dir / source).resolve() == Path(provider_shim.__file__).resolve()
    assert target.replace("${CRAFT_PART_INSTALL}", "") == garm_entrypoint.PROVIDER_SHIM
    assert garm_entrypoint.PRODUCTION_LAYOUT.provider_shim == garm_entrypoint.PROVIDER_SHIM


def test_provider_shim_execs_the_provider_the_rock_builds():
    beside = posixpath.join(
        posixpath.dirname(garm_entrypoint.PROVIDER_SHIM), provider_shim.PROVIDER_NAME
    )
    assert beside == garm_entrypoint.PROVIDER_BINARY
    assert provider_shim.provider_path("/usr/local/bin/x") == garm_entrypoint.PROVIDER_BINARY


def test_provider_shim_runs_on_the_staged_python_with_the_standard_library_only():
    source = Path(provider_shim.__file__).read_text(encoding="utf-8")
    # python3_standard (checked above) stages /usr/bin/python3 and the standard library.
    assert source.splitlines()[0] == "#!/usr/bin/python3"
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}


# --- garm-agent ---------------------------------------------------------------------------------

# Stands in for `go build` when the part's script runs here: writes, as the binary, what the
# build was asked for, so the test reads it back.
_FAKE_GO = textwrap.dedent(
    """\
    #!{python}
    import json, os, sys
    args = sys.argv[1:]
    assert args[0] == "build", args
    env = {{k: os.environ.get(k, "") for k in ("GOOS", "GOARCH", "CGO_ENABLED")}}
    with open(args[args.index("-o") + 1], "w") as out:
        json.dump({{"args": args, "env": env}}, out)
    """
)


@pytest.fixture(scope="module")
def agent_build(rock: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run the garm-agent part's override-build with a stand-in `go`; return its install dir."""
    if shutil.which("bash") is None or shutil.which("sha256sum") is None:
        pytest.fail("bash and sha256sum are needed to run the garm-agent part's script")
    root = tmp_path_factory.mktemp("agent-part")
    bin_dir, install = root / "bin", root / "install"
    bin_dir.mkdir()
    install.mkdir()
    go = bin_dir / "go"
    go.write_text(_FAKE_GO.format(python=sys.executable), encoding="utf-8")
    go.chmod(0o755)
    script = _part(rock, AGENT_PART)["override-build"]
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CRAFT_PART_INSTALL": str(install),
    }
    subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], env=env, cwd=root, check=True, timeout=60
    )
    return install


def _installed(install: Path, path: str) -> Path:
    return install / path.lstrip("/")


def test_agent_part_is_a_pinned_commit_built_static(rock: dict[str, Any]):
    part = _part(rock, AGENT_PART)
    assert part["source"] == "https://github.com/cloudbase/garm-agent.git"
    assert re.fullmatch(r"[0-9a-f]{40}", str(part["source-commit"]))
    assert "source-tag" not in part and "source-branch" not in part
    # As GARM's: the version names the short commit it was built from (no tag names it).
    (version,) = re.findall(r"^AGENT_VERSION=(\S+)$", part["override-build"], flags=re.MULTILINE)
    assert version.endswith(f"-{str(part['source-commit'])[:7]}")


def test_agent_manifest_names_every_arch_at_the_path_the_charm_reads(agent_build: Path):
    manifest = _installed(agent_build, agent_image.MANIFEST_PATH)
    tools = agent_image.parse_manifest(manifest.read_text(encoding="utf-8"))
    assert [(t.os_type, t.os_arch) for t in tools] == [("linux", a) for a in AGENT_ARCHES]
    for tool in tools:
        assert tool.path == agent_image.binary_path(tool.os_type, tool.os_arch)
        binary = _installed(agent_build, tool.path).read_bytes()
        assert hashlib.sha256(binary).hexdigest() == tool.sha256


def test_agent_binaries_are_static_cross_builds_of_the_pinned_version(
    rock: dict[str, Any], agent_build: Path
):
    manifest = _installed(agent_build, agent_image.MANIFEST_PATH)
    tools = agent_image.parse_manifest(manifest.read_text(encoding="utf-8"))
    script = _part(rock, AGENT_PART)["override-build"]
    # One definition of the version: the manifest and the -X flag both come from it.
    (pinned,) = re.findall(r"^AGENT_VERSION=(\S+)$", script, flags=re.MULTILINE)
    assert re.fullmatch(r"v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?", pinned)
    for tool in tools:
        assert tool.version == pinned
        build = json.loads(_installed(agent_build, tool.path).read_text(encoding="utf-8"))
        assert build["env"] == {"GOOS": "linux", "GOARCH": tool.os_arch, "CGO_ENABLED": "0"}
        args = build["args"]
        assert f"{AGENT_VERSION_FLAG}{pinned}" in args[args.index("-ldflags") + 1].split()
        assert args[-1] == "."
