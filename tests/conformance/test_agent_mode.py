"""The garm-agent tool step and agent mode, through the whole reconcile chain, on both backends.

Each pass runs ``reconcile.chain.run_chain`` with a manifest of the image's binaries and a
reader that records what it was asked for; the assertions read what GARM received (the
proxy's record) and what it then lists. Scale sets keep no idle runner.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

from garm import GarmClient
from reconcile import ChainResult, Memory, run_chain
from tests.conformance.conftest import PROVIDER_NAME, Garm
from tests.rsa_keys import pkcs1_pem
from vocabulary.desired_state import (
    AgentTool,
    AgentTools,
    AgentToolUnreadable,
    AppKey,
    CredentialSpec,
    DesiredState,
    EntitySpec,
    ScalesetSpec,
)
from vocabulary.notices import Notice, Severity

MARKER = "Managed by garm"
CREDENTIAL = "app-5-6"
TOOLS = "/tools/garm-agent"


def binary(arch: str, version: str) -> bytes:
    # Not JSON, so the proxy records it as the text it is.
    return f"garm-agent {arch} {version} \x7fELF".encode()


def tool(arch: str, version: str = "v0.1.0", content: bytes | None = None) -> AgentTool:
    data = content if content is not None else binary(arch, version)
    return AgentTool(
        os_type="linux",
        os_arch=arch,
        version=version,
        sha256=hashlib.sha256(data).hexdigest(),
        path=f"/opt/garm-agent/garm-agent-linux-{arch}",
    )


@dataclass
class Reader:
    """The charm's side: the image's binaries by path; records each read."""

    files: dict[str, bytes] = field(default_factory=dict[str, bytes])
    unreadable: set[str] = field(default_factory=set[str])
    reads: list[str] = field(default_factory=list[str])

    def ship(self, arch: str, version: str = "v0.1.0") -> AgentTool:
        shipped = tool(arch, version)
        self.files[shipped.path] = binary(arch, version)
        return shipped

    def __call__(self, wanted: AgentTool) -> bytes:
        self.reads.append(wanted.os_arch)
        if wanted.os_arch in self.unreadable:
            raise AgentToolUnreadable(f"cannot read {wanted.path}")
        return self.files[wanted.path]


def spec(name: str, org: str, arch: str, enable_shell: bool = False) -> ScalesetSpec:
    return ScalesetSpec(
        name=name,
        provider_name=PROVIDER_NAME,
        image="ubuntu-24.04",
        flavor="small",
        os_arch=arch,
        min_idle_runners=0,
        max_runners=2,
        entity_type="organization",
        entity_name=org,
        labels=("linux",),
        enable_shell=enable_shell,
    )


def desired(tools: AgentTools, *scalesets: ScalesetSpec) -> DesiredState:
    credential = CredentialSpec(
        name=CREDENTIAL,
        endpoint="github.com",
        app_id=5,
        installation_id=6,
        key=AppKey.of(pkcs1_pem()),
        description=MARKER,
    )
    orgs = ("acme", "beta", "idle")
    return DesiredState(
        providers=(),
        credentials=(credential,),
        entities=tuple(EntitySpec("organization", o, CREDENTIAL) for o in orgs),
        scalesets=scalesets,
        debug_ssh=(),
        configurator_relation_count=1,
        unpublished_relation_ids=(),
        problems=(),
        agent_tools=tools,
    )


def agent_modes(garm: Garm) -> dict[str, bool]:
    return {o["name"]: o["agent_mode"] for o in garm.organizations()}


def uploads(garm: Garm) -> list[tuple[str, int]]:
    """The uploads GARM received since the last clear: (body, status)."""
    return [(str(c.body), c.status) for c in garm.writes() if c.path == TOOLS]


def entity_writes(garm: Garm) -> list[tuple[str, object]]:
    return [(c.method, c.body) for c in garm.writes() if c.path.startswith("/organizations")]


def stored(client: GarmClient) -> dict[str, tuple[str | None, str | None]]:
    return {t.os_arch or "": (t.version, t.sha256sum) for t in client.list_tools()}


class Passes:
    """Runs chain passes against one GARM, carrying the memory, clearing the record first."""

    def __init__(self, client: GarmClient, garm: Garm, reader: Reader) -> None:
        self.client, self.garm, self.reader = client, garm, reader
        self.memory: Memory | None = None

    def run(self, state: DesiredState) -> ChainResult:
        self.garm.clear_requests()
        self.reader.reads.clear()
        result = run_chain(self.client, state, self.memory, read_tool=self.reader)
        self.memory = result.memory
        return result


def test_tools_uploaded_once_and_agent_mode_follows_the_store(
    client: GarmClient, ready_garm: Garm
):
    reader = Reader()
    passes = Passes(client, ready_garm, reader)
    amd64 = reader.ship("amd64")
    acme = spec("acme-runners", "acme", "amd64", enable_shell=True)
    beta = spec("beta-runners", "beta", "arm64")

    # Only amd64 is shipped: acme (amd64) runs agents, beta (arm64) and idle (none) do not.
    first = passes.run(desired(AgentTools((amd64,)), acme, beta))
    assert first.notices == []
    assert reader.reads == ["amd64"]
    assert uploads(ready_garm) == [(binary("amd64", "v0.1.0").decode(), 200)]
    assert agent_modes(ready_garm) == {"acme": True, "beta": False, "idle": False}
    shells = {s["name"].split("-")[0]: s["enable_shell"] for s in ready_garm.scalesets()}
    assert shells == {"acme": True, "beta": False}
    assert stored(client) == {"amd64": ("v0.1.0", amd64.sha256)}

    # Converged: one listing of the tools, no binary read, no write.
    again = passes.run(desired(AgentTools((amd64,)), acme, beta))
    assert again.notices == []
    assert reader.reads == []
    assert ready_garm.writes() == []
    assert [c.path for c in ready_garm.requests].count(TOOLS) == 1

    # arm64 shipped too: only it is uploaded, and beta is switched on by an update.
    arm64 = reader.ship("arm64")
    both = AgentTools((amd64, arm64))
    passes.run(desired(both, acme, beta))
    assert reader.reads == ["arm64"]
    assert uploads(ready_garm) == [(binary("arm64", "v0.1.0").decode(), 200)]
    assert [body for _method, body in entity_writes(ready_garm)] == [{"agent_mode": True}]
    assert agent_modes(ready_garm) == {"acme": True, "beta": True, "idle": False}

    # A new amd64 build: only amd64 goes again; GARM keeps only the newest.
    amd64_v2 = reader.ship("amd64", "v0.2.0")
    passes.run(desired(AgentTools((amd64_v2, arm64)), acme, beta))
    assert reader.reads == ["amd64"]
    assert uploads(ready_garm) == [(binary("amd64", "v0.2.0").decode(), 200)]
    assert entity_writes(ready_garm) == []
    assert stored(client) == {
        "amd64": ("v0.2.0", amd64_v2.sha256),
        "arm64": ("v0.1.0", arm64.sha256),
    }
    assert passes.run(desired(AgentTools((amd64_v2, arm64)), acme, beta)).notices == []
    assert ready_garm.writes() == []

    # The shell is asked off: one scale-set update names it; then converged again.
    no_shell = replace(acme, enable_shell=False)
    passes.run(desired(AgentTools((amd64_v2, arm64)), no_shell, beta))
    [update] = [c for c in ready_garm.writes() if c.path.startswith("/scalesets/")]
    assert (update.method, update.body["enable_shell"]) == ("PUT", False)
    passes.run(desired(AgentTools((amd64_v2, arm64)), no_shell, beta))
    assert ready_garm.writes() == []


def test_each_failure_holds_agent_mode_alone_and_names_itself(
    client: GarmClient, ready_garm: Garm
):
    reader = Reader()
    passes = Passes(client, ready_garm, reader)
    amd64, arm64 = reader.ship("amd64"), reader.ship("arm64")
    acme = spec("acme-runners", "acme", "amd64")
    beta = spec("beta-runners", "beta", "arm64")
    passes.run(desired(AgentTools((amd64,)), acme, beta))
    assert agent_modes(ready_garm) == {"acme": True, "beta": False, "idle": False}
    idle = spec("idle-runners", "idle", "amd64")

    # The arm64 binary cannot be read: agent mode is held (beta stays off, and idle, which
    # gains an amd64 scale set, stays off too); the scale set is still created.
    reader.unreadable.add("arm64")
    held = passes.run(desired(AgentTools((amd64, arm64)), acme, beta, idle))
    assert held.notices == [
        Notice(Severity.BLOCKED, "garm-agent", "cannot read the arm64 binary, agent mode held")
    ]
    assert uploads(ready_garm) == []
    # The one write on an organisation is idle's new scale set: no agent mode update.
    [(method, path)] = [
        (c.method, c.path) for c in ready_garm.writes() if c.path.startswith("/organizations")
    ]
    assert (method, path.endswith("/scalesets")) == ("POST", True)
    assert agent_modes(ready_garm) == {"acme": True, "beta": False, "idle": False}

    # Readable again, but GARM fails on the upload: held, retried next pass.
    reader.unreadable.clear()
    ready_garm.clear_requests()
    ready_garm.proxy.refuse_next("POST", TOOLS, 500)
    failed = passes.run(desired(AgentTools((amd64, arm64)), acme, beta, idle))
    assert failed.notices == [
        Notice(Severity.WAITING, "garm-agent", "GARM failed on the arm64 binary (500); will retry")
    ]
    assert entity_writes(ready_garm) == []
    assert agent_modes(ready_garm) == {"acme": True, "beta": False, "idle": False}

    # The upload goes: every entity's architecture is stored, beta and idle switch on.
    done = passes.run(desired(AgentTools((amd64, arm64)), acme, beta, idle))
    assert done.notices == []
    assert uploads(ready_garm) == [(binary("arm64", "v0.1.0").decode(), 200)]
    assert agent_modes(ready_garm) == {"acme": True, "beta": True, "idle": True}

    # A manifest problem: GARM's tools are not even listed; entities keep their mode even
    # where they would change (acme loses its scale set).
    broken = AgentTools(problem="garm-agent manifest missing")
    problem = passes.run(desired(broken, beta, idle))
    assert problem.notices == [
        Notice(Severity.BLOCKED, "garm-agent", "garm-agent manifest missing; agent mode held")
    ]
    assert TOOLS not in [c.path for c in ready_garm.requests]
    assert entity_writes(ready_garm) == []
    assert agent_modes(ready_garm) == {"acme": True, "beta": True, "idle": True}

    # GARM refuses an architecture it does not know (400): held again, the others stay.
    riscv = reader.ship("riscv64")
    refused = passes.run(desired(AgentTools((amd64, arm64, riscv)), beta, idle))
    assert refused.notices == [
        Notice(Severity.BLOCKED, "garm-agent", "GARM refused the riscv64 binary (400)")
    ]
    assert uploads(ready_garm) == [(binary("riscv64", "v0.1.0").decode(), 400)]
    assert entity_writes(ready_garm) == []

    # Nothing held: acme, which has no scale set any more, goes off.
    passes.run(desired(AgentTools((amd64, arm64)), beta, idle))
    assert agent_modes(ready_garm) == {"acme": False, "beta": True, "idle": True}


def test_without_a_reader_nothing_is_uploaded_and_agent_mode_is_held(
    client: GarmClient, ready_garm: Garm
):
    state = desired(AgentTools((tool("amd64"),)), spec("acme-runners", "acme", "amd64"))
    result = run_chain(client, state)
    assert result.notices == [
        Notice(Severity.WAITING, "garm-agent", "cannot read the shipped binaries, agent mode held")
    ]
    assert uploads(ready_garm) == []
    assert agent_modes(ready_garm) == {"acme": False, "beta": False, "idle": False}
