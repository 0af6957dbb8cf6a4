"""The garm-agent stand-in refuses what the pinned garm-agent refuses, and runs its runner.

The tests that run an agent run the stand-in, and the real garm-agent too where its local
part is found (``tests/local_parts.py``, ``GARM_AGENT_BIN``): both must pass the same
assertions, so a difference between them fails here (a stand-in defect, fixed in the
stand-in). Without the real agent, its cases skip with one line saying where it was looked for.
"""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from websockets.sync.server import Server, ServerConnection, serve

from tests.github_standin import wire
from tests.local_parts import GARM_AGENT
from tests.real_garm import agent_standin
from tests.real_garm.agent_standin import RunnerConfigError, check_cmdline, read_runner_file

# What the agent logs while it cannot make its runner command from a numeric agentId.
NUMERIC_AGENT_ID_REFUSED = (
    'msg="failed to create runner command" error="failed to read runner config: failed to '
    "unmarshal github runner config: json: cannot unmarshal number into Go struct field "
    'GitHubRunnerConfig.agentId of type string"'
)


def jwt(claims: dict[str, object]) -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256'})}.{part(claims)}.c2ln"


AGENT_TOKEN = jwt({"is_agent": True, "forge_type": "github"})
RUNNER = wire.runner_file({"agentId": "7", "agentName": "r1", "ephemeral": "True"})


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


@pytest.fixture(params=["stand-in", "real"])
def agent_command(request: pytest.FixtureRequest) -> list[str]:
    """How to run the agent: the stand-in, or the real garm-agent where it is found."""
    if request.param == "stand-in":
        return [sys.executable, str(Path(agent_standin.__file__))]
    path = GARM_AGENT.find()
    if path is None:
        pytest.skip(GARM_AGENT.skip_reason())
    return [str(path)]


# What a Go program exits with when it panics.
GO_PANIC_EXIT = 2
# The panic of the upstream race at the agent's stop (``stop``): gorilla/websocket's words, and
# the status write of the runner's goroutine through garm-provider-common's reader.
STOP_RACE = (
    "panic: concurrent write to websocket connection",
    "garm-provider-common@v0.1.9/util/websocket/reader.go",
    "garm-agent/service/runner/runner.go",
)


def write_config(vm: Path, url: str, token: str, runner: bytes | None, **extra: object) -> Path:
    work = vm / "actions-runner"
    work.mkdir(parents=True)
    if runner is not None:
        (work / ".runner").write_bytes(runner)
    script = work / "run.sh"
    script.write_text('#!/bin/bash\necho "2026-12-06 00:00:00Z: Listening for Jobs"\nsleep 60\n')
    config = vm / "garm-agent.toml"
    settings: dict[str, object] = {
        "server_url": url,
        "token": token,
        "work_dir": str(work),
        "enable_shell": True,
        "runner_cmdline": ["/bin/bash", "-C", str(script)],
        "state_db_path": str(vm / "agent-state.db"),
        **extra,
    }
    config.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items()))
    return config


def run_agent(command: list[str], config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*command, "daemon", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop(agent: subprocess.Popen[str]) -> str:
    """SIGTERM the agent as systemd stops it; its log (stdout). It must exit 0.

    Or, the real agent only, die of one known upstream race (:data:`STOP_RACE`): at the
    agent's stop, garm-provider-common v0.1.9's ``Reader.Stop`` writes the websocket's close
    frame without the write lock its ``WriteMessage`` takes, while the stopping runner's
    goroutine sends its last status; gorilla/websocket panics on the concurrent write (seen
    once in 16 stops under load). Any other exit fails.
    """
    agent.send_signal(signal.SIGTERM)
    out, err = agent.communicate(timeout=30)
    raced = agent.returncode == GO_PANIC_EXIT and all(line in err for line in STOP_RACE)
    assert agent.returncode == 0 or raced, (
        f"exited {agent.returncode}; the end of its log:\n{err[-3000:]}"
    )
    return out


def cobra_error(words: str) -> str:
    """What the agent prints on stderr when its daemon command returns an error."""
    return f"Error: {words}\n{agent_standin.USAGE}"


def test_a_token_without_forge_type_is_refused(tmp_path: Path, agent_command: list[str]) -> None:
    token = jwt({"is_agent": True})
    config = write_config(tmp_path, "http://127.0.0.1:1/agent", token, b"{}")
    agent = run_agent(agent_command, config)
    _, err = agent.communicate(timeout=30)
    assert agent.returncode == 1
    assert err == cobra_error("failed to get forge type for agent: invalid forge type: ")


def test_an_agent_without_a_state_file_is_refused(
    tmp_path: Path, agent_command: list[str]
) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:1/agent", AGENT_TOKEN, b"{}")
    settings = config.read_text().splitlines()
    config.write_text("".join(f"{s}\n" for s in settings if not s.startswith("state_db_path")))
    agent = run_agent(agent_command, config)
    _, err = agent.communicate(timeout=30)
    assert agent.returncode == 1
    assert err == cobra_error(
        "failed to create state manager: failed to open database: open : no such file or directory"
    )


class Garm:
    """GARM's agent websocket: records every message of every connection."""

    def __init__(self, drop_first_after: int | None = None) -> None:
        self.messages: list[bytes] = []
        self.connections: list[float] = []
        # Each connection's messages, in the order it sent them.
        self.received: list[list[bytes]] = []
        self.drop_first_after = drop_first_after
        self.server: Server = serve(self.handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.socket.getsockname()[1]}/agent"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def handle(self, connection: ServerConnection) -> None:
        self.connections.append(time.monotonic())
        received: list[bytes] = []
        self.received.append(received)
        first = len(self.connections) == 1
        for count, message in enumerate(connection, start=1):
            assert isinstance(message, bytes)
            self.messages.append(message)
            received.append(message)
            if first and count == self.drop_first_after:
                connection.close()

    def wait_for(self, what: str, ready: Callable[[], object]) -> None:
        deadline = time.monotonic() + 30
        while not ready():
            assert time.monotonic() < deadline, f"{what}: {self.messages}"
            time.sleep(0.05)


def serve_garm(server: Garm) -> Iterator[Garm]:
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()


@pytest.fixture
def garm() -> Iterator[Garm]:
    yield from serve_garm(Garm())


@pytest.fixture
def dropping_garm() -> Iterator[Garm]:
    """A GARM that closes the agent's first connection after its second message."""
    yield from serve_garm(Garm(drop_first_after=2))


def test_a_numeric_agent_id_leaves_the_agent_running_silent(
    tmp_path: Path, garm: Garm, agent_command: list[str]
) -> None:
    runner = json.dumps({"agentId": 7, "ephemeral": True}).encode()
    agent = run_agent(agent_command, write_config(tmp_path, garm.url, AGENT_TOKEN, runner))
    try:
        garm.wait_for("the agent connecting", lambda: garm.connections)
        # Past the first retry: the agent refused .runner twice, and runs on.
        time.sleep(agent_standin.RETRY_SECONDS + 1.5)
        assert agent.poll() is None
    finally:
        out = stop(agent)
    # No runner command: neither heartbeat nor status reached GARM, and no runner ran.
    assert garm.messages == []
    assert out.count(NUMERIC_AGENT_ID_REFUSED) >= 2
    assert "Listening for Jobs" not in out


def test_the_agent_runs_its_runner_and_reports_it_idle(
    tmp_path: Path, garm: Garm, agent_command: list[str]
) -> None:
    agent = run_agent(agent_command, write_config(tmp_path, garm.url, AGENT_TOKEN, RUNNER))
    idle = agent_standin.status_message(7, "idle", "Agent update status to: idle")
    try:
        garm.wait_for("the runner reported idle", lambda: idle in garm.messages)
        # On connecting: the heartbeat with the shell (enable_shell, over plain http as the
        # pinned agent allows) and the runner's status; idle once run.sh says it listens. No
        # order between them: the real agent's runner goroutine reports the runner started as
        # soon as the websocket client exists, and its connection loop sends the first heartbeat
        # once woken (garm-agent def3b2b, service.go: SetRunnerStarted and loop), so a status
        # can come first (seen once in CI's load).
        heartbeat = agent_standin.heartbeat(7, True)
        status_of_7 = bytes([agent_standin.STATUS_MESSAGE]) + (7).to_bytes(8)
        assert heartbeat in garm.messages
        assert all(m == heartbeat or m[:9] == status_of_7 for m in garm.messages)
    finally:
        stop(agent)
    # The runner went with the agent: nothing is left running run.sh's sleep.
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    assert str(tmp_path) not in ps.stdout


def test_without_a_runner_command_at_connecting_the_status_comes_alone(
    tmp_path: Path, garm: Garm, agent_command: list[str]
) -> None:
    config = write_config(tmp_path, garm.url, AGENT_TOKEN, None)
    agent = run_agent(agent_command, config)
    idle = agent_standin.status_message(7, "idle", "Agent update status to: idle")
    try:
        garm.wait_for("the agent connecting", lambda: garm.connections)
        # .runner appears (the runner was configured) after the agent connected: nothing was
        # sent on connecting; the next attempt makes the command and its runner goes idle.
        (tmp_path / "actions-runner" / ".runner").write_bytes(RUNNER)
        garm.wait_for("the runner reported idle", lambda: idle in garm.messages)
        assert garm.messages == [idle]
    finally:
        stop(agent)


def test_a_dropped_connection_is_made_again_at_once_with_heartbeat_and_status(
    tmp_path: Path, dropping_garm: Garm, agent_command: list[str]
) -> None:
    garm = dropping_garm
    agent = run_agent(agent_command, write_config(tmp_path, garm.url, AGENT_TOKEN, RUNNER))
    try:
        garm.wait_for(
            "a second connection's messages",
            lambda: len(garm.received) >= 2 and len(garm.received[1]) >= 2,
        )
    finally:
        stop(agent)
    first, second = garm.connections[:2]
    assert second - first < agent_standin.RETRY_SECONDS
    status = bytes([agent_standin.STATUS_MESSAGE]) + (7).to_bytes(8)
    for messages in garm.received[:2]:
        assert messages[0] == agent_standin.heartbeat(7, True)
        assert messages[1][:9] == status


def test_a_runner_that_cannot_start_is_reported_offline(
    tmp_path: Path, garm: Garm, agent_command: list[str]
) -> None:
    missing = str(tmp_path / "nowhere" / "run.sh")
    config = write_config(tmp_path, garm.url, AGENT_TOKEN, RUNNER, runner_cmdline=[missing])
    agent = run_agent(agent_command, config)
    offline = agent_standin.status_message(7, "offline", "Agent update status to: offline")
    try:
        garm.wait_for("the runner reported offline", lambda: offline in garm.messages)
    finally:
        out = stop(agent)
    # Go starts the command where it follows it: a start that fails ends as a runner that
    # exited (offline, tried again), not as GARM's "failed".
    assert (
        f'msg="failed to start command" error="failed to start process: fork/exec {missing}: '
        "no such file or directory"
    ) in out
    assert not any(
        m.startswith(bytes([agent_standin.STATUS_MESSAGE])) and b'"failed"' in m
        for m in garm.messages
    )
