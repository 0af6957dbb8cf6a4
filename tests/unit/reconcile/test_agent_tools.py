"""The garm-agent tool step against the emulator through the real client."""

from __future__ import annotations

import hashlib

import pytest

from garm import GarmClient, GarmConnectionError
from reconcile.agent_tools import AgentModes, sync_agent_tools
from tests.garm_emulator import GarmEmulator
from vocabulary.desired_state import (
    AgentTool,
    AgentTools,
    AgentToolUnreadable,
    ScalesetSpec,
    entity_key,
)
from vocabulary.notices import Notice, Severity

TOOLS = "/tools/garm-agent"


def shipped(arch: str, content: bytes, version: str = "v1") -> AgentTool:
    digest = hashlib.sha256(content).hexdigest()
    return AgentTool("linux", arch, version, digest, f"/opt/garm-agent-{arch}")


def scaleset(entity: str, arch: str) -> ScalesetSpec:
    return ScalesetSpec(entity, "p", "img", "small", arch, 0, 1, "organization", entity)


def test_only_a_differing_arch_is_read_and_uploaded(
    client: GarmClient, ready_emulator: GarmEmulator
):
    files = {"amd64": b"a1", "arm64": b"r1"}
    reads: list[str] = []

    def read(tool: AgentTool) -> bytes:
        reads.append(tool.os_arch)
        return files[tool.os_arch]

    manifest = AgentTools((shipped("amd64", b"a1"), shipped("arm64", b"r1")))
    first = sync_agent_tools(client, manifest, read)
    assert (first.stored, first.uploaded, first.held) == (
        {("linux", "amd64"), ("linux", "arm64")},
        (("linux", "amd64"), ("linux", "arm64")),
        False,
    )
    ready_emulator.clear_requests()
    reads.clear()
    again = sync_agent_tools(client, manifest, read)
    assert (again.uploaded, reads, ready_emulator.writes()) == ((), [], [])
    files["arm64"] = b"r2"
    changed = AgentTools((shipped("amd64", b"a1"), shipped("arm64", b"r2", "v2")))
    assert sync_agent_tools(client, changed, read).uploaded == (("linux", "arm64"),)
    assert reads == ["arm64"]


def test_failures_hold_agent_mode(client: GarmClient, ready_emulator: GarmEmulator):
    def unreadable(tool: AgentTool) -> bytes:
        raise AgentToolUnreadable(tool.path)

    manifest = AgentTools((shipped("amd64", b"a1"),))
    held = sync_agent_tools(client, manifest, unreadable)
    assert held.held and held.wanted([scaleset("acme", "amd64")]) is None
    assert held.notices == [
        Notice(Severity.BLOCKED, "garm-agent", "cannot read the amd64 binary, agent mode held")
    ]
    ready_emulator.fail_next("GET", TOOLS, 403)
    listing = sync_agent_tools(client, manifest, lambda _t: b"a1")
    assert listing.notices == [
        Notice(Severity.BLOCKED, "garm-agent", "GARM refused the garm-agent listing (403)")
    ]
    ready_emulator.fail_next("POST", TOOLS, 502)
    upload = sync_agent_tools(client, manifest, lambda _t: b"a1")
    assert upload.held and upload.stored == frozenset()
    # A binary GARM stores with another digest than the manifest's is not counted.
    wrong = sync_agent_tools(client, manifest, lambda _t: b"not a1")
    assert wrong.notices == [
        Notice(
            Severity.BLOCKED,
            "garm-agent",
            "GARM stored another amd64 binary than the image's, agent mode held",
        )
    ]
    ready_emulator.drop_next("GET", TOOLS)
    with pytest.raises(GarmConnectionError):
        sync_agent_tools(client, manifest, lambda _t: b"a1")


def test_agent_mode_needs_every_architecture_of_an_entity():
    modes = AgentModes(stored=frozenset({("linux", "amd64")}))
    specs = [scaleset("acme", "amd64"), scaleset("beta", "amd64"), scaleset("beta", "arm64")]
    assert modes.wanted(specs) == {
        entity_key("organization", "acme"): True,
        entity_key("organization", "beta"): False,
    }
    assert AgentModes().wanted([]) == {}
