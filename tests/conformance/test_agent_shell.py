"""A runner's garm-agent connects to real GARM, and GARM reports the shell it offers.

The chain uploads garm-agent as the amd64 tool, which puts the organisation in agent mode: the
real agent where the local part is found, else its stand-in (``tests/real_garm/garm_agent.py``
prints which in one line). A scale set keeps one idle runner; the
provider stand-in's simulated runner reads its runner metadata, downloads the tool through
GARM's metadata route and runs it; the agent connects to GARM's agent URL with the agent token
and heartbeats, runs the runner command (the stand-in cloud's ``run.sh``) and reports its
runner idle. GARM then shows, on the instance, the last heartbeat, ``capabilities`` (a shell
where the scale set asked for one, ``enable_shell``, over plain ``http`` too: the agent the
image pins, ``def3b2b``, offers it there, which is why the charm withholds ``enable_shell``
without an ``https`` URL) and the agent's status messages.

Real GARM only: the emulator serves none of the runner's side (runner metadata, the metadata
download route, the ``/agent`` websocket), so no agent can connect to it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from garm import GarmClient
from reconcile.chain import run_chain
from reconcile.scalesets.names import target_scaleset_name
from tests.conformance.backends import REAL, wait_for
from tests.conformance.conftest import SHIPPED_AGENT
from tests.conformance.test_agent_mode import Reader, desired, spec
from tests.real_garm.garm_agent import shipped_agent
from tests.real_garm.harness import SKIP_REASON, RealGarm, garm_binary
from tests.real_garm.tls_front import TlsFront
from vocabulary.desired_state import AgentTool, AgentTools, ScalesetSpec

# What GARM sends for a time it never set (Go's zero time.Time).
NEVER = "0001-01-01T00:00:00Z"
# The status garm-agent sends once its runner listens (service/service.go, sendRunnerStatus).
AGENT_IDLE = "Agent update status to: idle"


@pytest.fixture(params=[REAL])
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Real GARM only (the emulator has no runner metadata, tool download or /agent routes)."""
    if garm_binary() is None:
        pytest.skip(SKIP_REASON)
    yield request.param


@pytest.fixture
def front(ready_garm: RealGarm, tmp_path: Path) -> Iterator[TlsFront]:
    """A TLS front to GARM whose CA the stand-in cloud's VMs trust."""
    directory = tmp_path / "front"
    directory.mkdir()
    tls = TlsFront(directory, lambda: ready_garm.port).start()
    ready_garm.set_trusted_ca(tls.ca_file.read_bytes())
    try:
        yield tls
    finally:
        tls.stop()


def agent_tool(reader: Reader, request: pytest.FixtureRequest) -> AgentTool:
    """garm-agent (the real one, else its stand-in), shipped as the amd64 binary.

    Which one shipped is one line of the run's summary (``conftest.py``).
    """
    agent = shipped_agent()
    print(agent.note)
    request.node.user_properties.append((SHIPPED_AGENT, agent.note))
    content = agent.content
    shipped = AgentTool(
        os_type="linux",
        os_arch="amd64",
        version="v0.0.0-standin",
        sha256=hashlib.sha256(content).hexdigest(),
        path="/opt/garm-agent/garm-agent-linux-amd64",
    )
    reader.files[shipped.path] = content
    return shipped


def runner_spec(name: str, enable_shell: bool) -> ScalesetSpec:
    return replace(spec(name, "acme", "amd64", enable_shell=enable_shell), min_idle_runners=1)


def set_agent_url(client: GarmClient, agent_url: str) -> None:
    info = client.get_controller()
    assert info.metadata_url and info.callback_url and info.webhook_url
    client.update_controller(
        metadata_url=info.metadata_url,
        callback_url=info.callback_url,
        webhook_url=info.webhook_url,
        agent_url=agent_url,
    )


def reported_idle(garm: RealGarm, scaleset: ScalesetSpec) -> dict[str, Any]:
    """The scale set's runner once GARM recorded its agent reporting the runner idle.

    On connecting, the agent sends a heartbeat, then its runner's status; GARM handles one
    connection's messages in order, so once it recorded an idle status from the agent (its
    runner printed ``Listening for Jobs``), it recorded that heartbeat's capabilities too.
    """
    live = target_scaleset_name(scaleset.name, scaleset.labels)

    def probe() -> dict[str, Any] | None:
        instances = garm.instances(live)
        if len(instances) != 1 or instances[0].get("heartbeat", NEVER) == NEVER:
            return None
        runner = garm.get(f"/instances/{instances[0]['name']}") or {}
        said = [m.get("message") for m in runner.get("status_messages") or []]
        return runner if AGENT_IDLE in said else None

    runner = wait_for(garm, f"the agent of {live} reporting its runner idle", probe)
    # The runner's timeline as GARM recorded it (shown with -s; the how-to's figures).
    said = {m.get("message"): m.get("created_at") for m in runner.get("status_messages") or []}
    print(
        f"{runner['name']}: created {runner.get('created_at')}, agent idle {said[AGENT_IDLE]}, "
        f"heartbeat {runner.get('heartbeat')}, capabilities {runner.get('capabilities')}"
    )
    return runner


def test_garm_reports_the_shell_the_agent_offers_and_its_runner_idle(
    client: GarmClient, ready_garm: RealGarm, front: TlsFront, request: pytest.FixtureRequest
):
    reader = Reader()
    tools = AgentTools((agent_tool(reader, request),))
    plain = runner_spec("plain-shell", enable_shell=True)

    # The agent URL GARM was given at bootstrap is plain http: the agent dials ws:// and, as
    # the pinned garm-agent does, offers the shell the scale set asks for all the same.
    assert (client.get_controller().agent_url or "").startswith("http://")
    first = run_chain(client, desired(tools, plain), read_tool=reader)
    assert first.notices == []
    runner = reported_idle(ready_garm, plain)
    assert runner["capabilities"] == {"has_shell": True}
    assert runner["status"] == "running"
    # What ran is what was uploaded, downloaded through GARM's metadata route.
    vm = ready_garm.vm_dir(runner["name"])
    assert (vm / "garm-agent").read_bytes() == reader.files[tools.tools[0].path]

    # Over the TLS front (https): the agent asked for a shell offers one, the other does not.
    set_agent_url(client, f"{front.base_url}/agent")
    shell = runner_spec("tls-shell", enable_shell=True)
    no_shell = runner_spec("tls-no-shell", enable_shell=False)
    state = desired(tools, plain, shell, no_shell)
    result = run_chain(client, state, first.memory, read_tool=reader)
    assert result.notices == []
    assert reported_idle(ready_garm, shell)["capabilities"] == {"has_shell": True}
    assert reported_idle(ready_garm, no_shell)["capabilities"] == {"has_shell": False}
