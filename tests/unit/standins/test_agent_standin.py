"""The garm-agent stand-in refuses what the pinned garm-agent refuses, and runs its runner."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.sync.server import Server, ServerConnection, serve

from tests.github_standin import wire
from tests.real_garm import agent_standin
from tests.real_garm.agent_standin import RunnerConfigError, check_cmdline, read_runner_file


def jwt(claims: dict[str, object]) -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256'})}.{part(claims)}.c2ln"


AGENT_TOKEN = jwt({"is_agent": True, "forge_type": "github"})


def test_github_s_runner_file_is_read(tmp_path: Path) -> None:
    runner = tmp_path / ".runner"
    runner.write_bytes(wire.runner_file({"agentId": "123", "ephemeral": "True"}))
    assert read_runner_file(runner) == 123


def test_a_numeric_agent_id_is_refused_in_go_s_words(tmp_path: Path) -> None:
    runner = tmp_path / ".runner"
    runner.write_text(json.dumps({"agentId": 123, "agentName": "r1"}))
    with pytest.raises(RunnerConfigError) as refused:
        read_runner_file(runner)
    assert str(refused.value) == (
        "failed to unmarshal github runner config: json: cannot unmarshal number into Go "
        "struct field GitHubRunnerConfig.agentId of type string"
    )


@pytest.mark.parametrize(
    "content",
    [
        json.dumps({"agentId": "1", "ephemeral": True}).encode(),
        b"\xef\xbb\xbf" + json.dumps({"agentId": "1"}).encode(),
    ],
    ids=["boolean", "bom"],
)
def test_other_files_go_refuses_are_refused(tmp_path: Path, content: bytes) -> None:
    runner = tmp_path / ".runner"
    runner.write_bytes(content)
    with pytest.raises(RunnerConfigError, match="failed to unmarshal github runner config"):
        read_runner_file(runner)


@pytest.mark.parametrize(
    ("cmdline", "words"),
    [
        (["bash", "run.sh"], "executable path must be absolute: bash"),
        (["/bin/bash", "run.sh; rm -rf /"], "argument 1 contains potentially dangerous"),
    ],
)
def test_a_relative_or_unsafe_runner_cmdline_is_refused(cmdline: list[str], words: str) -> None:
    with pytest.raises(RunnerConfigError, match=words):
        check_cmdline(cmdline)


def write_config(vm: Path, url: str, token: str, runner: bytes) -> Path:
    work = vm / "actions-runner"
    work.mkdir(parents=True)
    (work / ".runner").write_bytes(runner)
    script = work / "run.sh"
    script.write_text('#!/bin/bash\necho "2026-12-06 00:00:00Z: Listening for Jobs"\nsleep 60\n')
    config = vm / "garm-agent.toml"
    settings = {
        "server_url": url,
        "token": token,
        "work_dir": str(work),
        "enable_shell": True,
        "runner_cmdline": ["/bin/bash", "-C", str(script)],
    }
    config.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items()))
    return config


def run_agent(config: Path) -> subprocess.Popen[str]:
    script = Path(agent_standin.__file__)
    command = [sys.executable, str(script), "daemon", "--config", str(config)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_token_without_forge_type_is_refused(tmp_path: Path) -> None:
    token = jwt({"is_agent": True})
    config = write_config(tmp_path, "http://127.0.0.1:1/agent", token, b"{}")
    agent = run_agent(config)
    _, err = agent.communicate(timeout=30)
    assert agent.returncode == 1
    assert err.strip() == "Error: failed to get forge type for agent: invalid forge type:"


class Garm:
    """GARM's agent websocket: records every message of every connection."""

    def __init__(self) -> None:
        self.messages: list[bytes] = []
        self.server: Server = serve(self.handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.socket.getsockname()[1]}/agent"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def handle(self, connection: ServerConnection) -> None:
        for message in connection:
            assert isinstance(message, bytes)
            self.messages.append(message)


@pytest.fixture
def garm() -> Iterator[Garm]:
    server = Garm()
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()


def test_a_numeric_agent_id_crashes_the_agent_once_connected(tmp_path: Path, garm: Garm) -> None:
    runner = json.dumps({"agentId": 7, "ephemeral": True}).encode()
    agent = run_agent(write_config(tmp_path, garm.url, AGENT_TOKEN, runner))
    out, err = agent.communicate(timeout=60)
    assert agent.returncode == 2
    assert "nil pointer dereference" in err
    assert "cannot unmarshal number into Go struct field GitHubRunnerConfig.agentId" in out
    assert garm.messages == []


def test_the_agent_runs_its_runner_and_reports_it_idle(tmp_path: Path, garm: Garm) -> None:
    runner = wire.runner_file({"agentId": "7", "agentName": "r1", "ephemeral": "True"})
    agent = run_agent(write_config(tmp_path, garm.url, AGENT_TOKEN, runner))
    idle = agent_standin.status_message(7, "idle", "Agent update status to: idle")
    try:
        deadline = time.monotonic() + 30
        while idle not in garm.messages:
            assert time.monotonic() < deadline, garm.messages
            time.sleep(0.05)
        # On connecting: the heartbeat with the shell (enable_shell, over plain http as the
        # pinned agent allows), then the runner's status; idle once run.sh says it listens.
        assert garm.messages[0] == agent_standin.heartbeat(7, True)
        assert garm.messages[1][:9] == bytes([agent_standin.STATUS_MESSAGE]) + (7).to_bytes(8)
    finally:
        agent.terminate()
        agent.communicate(timeout=30)
    assert agent.returncode == 0
    # The runner went with the agent: nothing is left running run.sh's sleep.
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    assert str(tmp_path) not in ps.stdout
