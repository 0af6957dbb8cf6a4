"""The garm-agent manifest and binaries as the charm reads them from the workload container.

The container is ``ops.testing``'s, holding the directory :func:`write_agent_tools` lays out as
the rock does; ``tests/unit/house/test_rock.py`` checks the rock's own script writes that layout.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import ops
import pytest
from ops import testing

from charm import GarmCharm
from tests.charm_driver import AGENT_VERSION, agent_binary, base_state, write_agent_tools
from vocabulary.desired_state import AgentToolUnreadable
from workload import agent_image


@contextmanager
def workload_container(data: Path, agent_dir: Path) -> Iterator[ops.Container]:
    """The charm's workload container in a hook, with ``agent_dir`` as the image's agent dir."""
    ctx = testing.Context(GarmCharm)
    state = base_state(data, agent_dir=agent_dir)
    # start runs no reconcile pass: the hook only lends the test its container.
    with ctx(ctx.on.start(), state) as manager:
        yield manager.charm.unit.get_container("garm")


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    return write_agent_tools(tmp_path / "agent")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path


def manifest_of(agent_dir: Path) -> dict[str, object]:
    return json.loads((agent_dir / "manifest.json").read_text(encoding="utf-8"))


def write_manifest(agent_dir: Path, text: str) -> None:
    (agent_dir / "manifest.json").write_text(text, encoding="utf-8")


def test_the_manifest_reads_into_one_tool_per_arch(data: Path, agent_dir: Path):
    with workload_container(data, agent_dir) as container:
        read = agent_image.read_manifest(container)
    assert read.problem == ""
    assert [(t.os_type, t.os_arch, t.version) for t in read.tools] == [
        ("linux", "amd64", AGENT_VERSION),
        ("linux", "arm64", AGENT_VERSION),
    ]
    for tool in read.tools:
        assert tool.path == f"/opt/garm-agent/linux/{tool.os_arch}/garm-agent"
        assert tool.sha256 == hashlib.sha256(agent_binary(tool.os_arch)).hexdigest()


def test_a_missing_manifest_is_a_problem_naming_its_path(
    data: Path, agent_dir: Path, caplog: pytest.LogCaptureFixture
):
    (agent_dir / "manifest.json").unlink()
    with workload_container(data, agent_dir) as container:
        read = agent_image.read_manifest(container)
    assert read.tools == ()
    assert read.problem == "no manifest at /opt/garm-agent/manifest.json in the workload image"
    assert read.problem in caplog.text


@pytest.mark.parametrize(
    ("change", "fault"),
    [
        (lambda m: "{not json", "not JSON"),
        (lambda m: "[]", "not a JSON object"),
        (lambda m: {**m, "version": ""}, "version"),
        (lambda m: {**m, "version": "v1\nforged"}, "version"),
        (lambda m: {**m, "tools": []}, "tools"),
        (lambda m: {**m, "tools": ["x"]}, "tools[0] is not an object"),
        (lambda m: _tool0(m, sha256="abc"), "tools[0].sha256"),
        (lambda m: _tool0(m, sha256=None), "tools[0].sha256"),
        (lambda m: _tool0(m, os_type="plan9"), "tools[0].os_type"),
        (lambda m: _tool0(m, os_arch="AMD 64"), "tools[0].os_arch"),
        (lambda m: _tool0(m, path="/etc/garm/config.toml"), "tools[0].path"),
        (lambda m: _tool0(m, path="/opt/garm-agent/../../etc/shadow"), "tools[0].path"),
        (lambda m: _tool0(m, os_arch="arm64"), "tools[1]: linux/arm64 twice"),
    ],
)
def test_a_malformed_manifest_is_a_problem_naming_path_and_field(
    data: Path, agent_dir: Path, change, fault: str
):
    changed = change(manifest_of(agent_dir))
    write_manifest(agent_dir, changed if isinstance(changed, str) else json.dumps(changed))
    with workload_container(data, agent_dir) as container:
        read = agent_image.read_manifest(container)
    assert read.tools == ()
    assert read.problem == f"/opt/garm-agent/manifest.json is malformed ({fault})"


def _tool0(manifest: dict[str, object], **fields: object) -> dict[str, object]:
    tools = list(manifest["tools"])  # type: ignore[call-overload]
    tools[0] = {**tools[0], **fields}
    return {**manifest, "tools": tools}


def test_the_reader_returns_a_binary_that_matches_its_digest(data: Path, agent_dir: Path):
    with workload_container(data, agent_dir) as container:
        (amd64, _) = agent_image.read_manifest(container).tools
        assert agent_image.tool_reader(container)(amd64) == agent_binary("amd64")


def test_the_reader_refuses_a_binary_that_does_not_match_its_digest(
    data: Path, agent_dir: Path, caplog: pytest.LogCaptureFixture
):
    (agent_dir / "linux" / "arm64" / "garm-agent").write_bytes(b"tampered")
    with workload_container(data, agent_dir) as container:
        (_, arm64) = agent_image.read_manifest(container).tools
        with pytest.raises(AgentToolUnreadable) as raised:
            agent_image.tool_reader(container)(arm64)
    assert str(raised.value) == (
        "/opt/garm-agent/linux/arm64/garm-agent does not match its sha256 in the manifest"
    )
    assert "does not match its sha256" in caplog.text


def test_the_reader_refuses_a_binary_that_is_not_there(data: Path, agent_dir: Path):
    (agent_dir / "linux" / "amd64" / "garm-agent").unlink()
    with workload_container(data, agent_dir) as container:
        (amd64, _) = agent_image.read_manifest(container).tools
        with pytest.raises(AgentToolUnreadable, match=r"cannot read /opt/garm-agent/linux/amd64"):
            agent_image.tool_reader(container)(amd64)
