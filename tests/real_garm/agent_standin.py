#!/usr/bin/env python3
"""Stand-in for garm-agent (cloudbase/garm-agent), for tests only: as strict as the pinned agent.

A runner of an entity in agent mode downloads garm-agent from GARM and runs it as
``garm-agent daemon --config <toml>``; the agent runs the GitHub runner (``runner_cmdline``),
holds a websocket to GARM's agent URL and tells GARM, in heartbeats and status messages, what
shell it offers and what state its runner is in. This script is that program as far as GARM
and the runner's VM can see it: tests upload it to GARM as the garm-agent binary
(:func:`executable`) where the real agent is not found (``tests/local_parts.py``,
``GARM_AGENT``), and the provider stand-in's simulated runner downloads it through GARM's
metadata route and runs it.

Every rule below is garm-agent's at the commit ``rockcraft.yaml`` pins (``v0.1.0-beta1``,
``2ca2078``), read in its source; file names are that tree's:

- Configuration (``config/config.go``, ``Validate``): an unparsable ``server_url``, no
  ``token``, a token that is not a JWT or not scoped to an agent (``is_agent``; its signature is
  not checked, GARM does that), no ``runner_cmdline``: printed as Go's ``log.Fatal`` prints,
  exit 1. Then the token's ``forge_type`` claim must be ``github`` or ``gitea``
  (``ForgeType``; ``service/service.go``, ``NewService``): cobra's ``Error: ...``, exit 1.
- The shell (``NewService``): offered whenever ``enable_shell`` is set and a PTY can be opened,
  whatever the server URL's scheme. (A later upstream commit, 53198b4, refuses it over a
  plain URL; the charm withholds ``enable_shell`` without an ``https`` URL for that reason.)
- The working directory (``Service.Start``): the agent changes into ``work_dir``.
- The runner (``service/runner/runner.go``, ``types.go``): ``<work_dir>/.runner`` is decoded as
  Go decodes it into ``GitHubRunnerConfig``, whose ``agentId``, ``agentName``, ``ephemeral``
  and ``serverUrl`` are strings: a number or a boolean there, or a byte-order mark, is refused
  in Go's words. ``runner_cmdline`` must start with an absolute path and no argument may hold
  one of ``;|&<>$``` (``validateCmdParams``). Either failure leaves the agent without a runner
  command; it logs "failed to create runner command" and tries again every
  :data:`RETRY_SECONDS`, and its first heartbeat after connecting dereferences the missing
  command: the real agent panics (nil pointer in ``sendHeartbeat``), so this one exits 2 with
  Go's panic line.
- A runner command is started in its own process group, its output read line by line: a line
  holding ``Listening for Jobs`` makes the runner idle, one matching ``.* Running job: .*``
  active. When it ends the agent reports it (offline, or terminated after a job) and starts it
  again after :data:`RETRY_SECONDS` unless a job ran. On SIGTERM the agent stops the group
  (SIGTERM, then SIGKILL after :data:`RUNNER_STOP_SECONDS`) and exits.
- GARM's side (``service.go``, ``keepAliveLoop``, ``loop``): dials ``wss://`` for an ``https``
  server URL and ``ws://`` otherwise, with ``Authorization: Bearer <token>``; TLS is verified
  against ``SSL_CERT_FILE`` when set (as Go reads it). On each connection: a heartbeat, then
  the runner's status; then a heartbeat every :data:`HEARTBEAT_SECONDS`. A failed attempt is
  retried after :data:`RETRY_SECONDS`; a dropped connection at once. Messages (GARM's
  ``workers/websocket/agent/messaging``): heartbeat ``0x01``, status ``0x03``, each followed by
  the agent ID (8 bytes, big-endian) and JSON (``{"has_shell": ...}``;
  ``{"status", "message", "agent_id"}``).

What it does not do: open shells (a ``CreateShell`` from GARM is read and ignored), keep its
state in bbolt (``state_db_path`` holds JSON), Gitea. It exits after :data:`DEADLINE_SECONDS`
in any case, so a test that failed to stop it leaves nothing for long. It never logs the token.

Standard library and ``websockets`` only: it runs as a program of its own.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import threading
import time
import tomllib
import urllib.parse
from pathlib import Path
from typing import IO, Any

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.sync.client import ClientConnection, connect

HEARTBEAT_MESSAGE = 0x01
STATUS_MESSAGE = 0x03
# The pinned agent's timings, used as they are: a test that needs to know GARM stored the first
# heartbeat waits for the status message sent right after it, not for a second heartbeat.
HEARTBEAT_SECONDS = 30.0
RETRY_SECONDS = 5.0
RUNNER_STOP_SECONDS = 2.0
# The stand-in's own: no real agent exits, but a stand-in a test failed to stop must not linger.
DEADLINE_SECONDS = 900.0
OPEN_TIMEOUT_SECONDS = 10.0
USAGE = "usage: garm-agent daemon --config FILE"
FORGE_TYPES = ("github", "gitea")
# GitHubRunnerConfig's fields (service/runner/types.go), all Go strings.
RUNNER_STRING_FIELDS = ("agentId", "agentName", "ephemeral", "serverUrl")
LISTENING = re.compile("Listening for Jobs")
JOB_STARTED = re.compile(".* Running job: .*")
UNSAFE_ARGUMENT = re.compile(r"[;|&<>$`]")
NIL_POINTER_PANIC = (
    "panic: runtime error: invalid memory address or nil pointer dereference\n"
    "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x0]\n"
)


class ConfigError(Exception):
    """The configuration is refused, in garm-agent's words."""


class RunnerConfigError(Exception):
    """The runner command cannot be made, in garm-agent's words."""


def executable() -> bytes:
    """This script with a shebang naming the running interpreter: the 'binary' tests upload."""
    source = Path(__file__).read_text(encoding="utf-8")
    body = source.split("\n", 1)[1] if source.startswith("#!") else source
    return f"#!{sys.executable}\n{body}".encode()


def frame(message_type: int, agent_id: int, payload: dict[str, Any]) -> bytes:
    """One agent message as garm-agent marshals it: type, agent ID, JSON payload."""
    body = json.dumps(payload, separators=(",", ":")).encode()
    return bytes([message_type]) + agent_id.to_bytes(8, "big") + body


def heartbeat(agent_id: int, has_shell: bool) -> bytes:
    """A heartbeat (``RunnerHeartbetMessage``) with the agent's capabilities."""
    return frame(HEARTBEAT_MESSAGE, agent_id, {"has_shell": has_shell})


def status_message(agent_id: int, status: str, message: str) -> bytes:
    """A runner status (``RunnerUpdateMessage`` of an ``InstanceUpdateMessage``)."""
    payload = {"status": status, "message": message, "agent_id": agent_id}
    return frame(STATUS_MESSAGE, agent_id, payload)


def token_claims(token: str) -> dict[str, Any]:
    """The JWT's claims, unverified, as ``TokenClaims`` reads them."""
    parts = token.split(".")
    if len(parts) != 3:
        raise ConfigError("failed to parse token: failed to parse JWT token: token is malformed")
    padded = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(padded))
    except (binascii.Error, ValueError):
        raise ConfigError(
            "failed to parse token: failed to parse JWT token: token is malformed"
        ) from None
    if not isinstance(claims, dict):
        raise ConfigError("failed to parse token: failed to parse JWT token: token is malformed")
    if claims.get("is_agent") is not True:
        raise ConfigError("failed to parse token: token is not agent scoped")
    return claims


def _go_type(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "array" if isinstance(value, list) else "object"


def read_runner_file(path: Path) -> int:
    """The agent ID from ``.runner``, refused where Go's ``json.Unmarshal`` refuses it."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RunnerConfigError(f"failed to read runner config: {exc}") from None
    if raw.startswith(b"\xef\xbb\xbf"):
        raise RunnerConfigError(
            "failed to unmarshal github runner config: "
            "invalid character 'ï' looking for beginning of value"
        )
    try:
        document = json.loads(raw.decode("utf-8"))
    except ValueError as exc:
        raise RunnerConfigError(f"failed to unmarshal github runner config: {exc}") from None
    if not isinstance(document, dict):
        raise RunnerConfigError(
            "failed to unmarshal github runner config: json: cannot unmarshal "
            f"{_go_type(document)} into Go value of type runner.GitHubRunnerConfig"
        )
    fields = {name.lower(): name for name in RUNNER_STRING_FIELDS}
    for key, value in document.items():
        field = fields.get(key.lower())
        if field is not None and value is not None and not isinstance(value, str):
            raise RunnerConfigError(
                "failed to unmarshal github runner config: json: cannot unmarshal "
                f"{_go_type(value)} into Go struct field GitHubRunnerConfig.{field} of type string"
            )
    agent_id = next((v for k, v in document.items() if k.lower() == "agentid"), None) or ""
    # GetAgentID: a string that is not a uint32 reads as 0.
    return int(agent_id) if agent_id.isdigit() and int(agent_id) < 2**32 else 0


def check_cmdline(cmdline: list[str]) -> None:
    """``validateCmdParams``: an absolute executable, no shell metacharacters."""
    if not os.path.isabs(cmdline[0]):
        raise RunnerConfigError(
            f"invalid command parameters: executable path must be absolute: {cmdline[0]}"
        )
    for index, argument in enumerate(cmdline):
        if UNSAFE_ARGUMENT.search(argument):
            raise RunnerConfigError(
                f"invalid command parameters: argument {index} contains potentially "
                f"dangerous characters: {argument}"
            )


class Config:
    """The agent's TOML, validated as ``config.Agent.Validate`` and ``ForgeType`` do."""

    def __init__(self, path: Path) -> None:
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"error decoding toml: {exc}") from None
        self.server_url = str(document.get("server_url", ""))
        self.token = str(document.get("token", ""))
        self.work_dir = Path(str(document.get("work_dir", "")))
        self.log_file = str(document.get("log_file", ""))
        self.state_db_path = str(document.get("state_db_path", ""))
        self.enable_shell = bool(document.get("enable_shell", False))
        self.runner_cmdline = [str(a) for a in document.get("runner_cmdline") or []]
        parsed = urllib.parse.urlsplit(self.server_url)
        if not parsed.scheme or not (parsed.netloc or parsed.path.startswith("/")):
            raise ConfigError("error validating config: invalid server_url")
        if not self.token:
            raise ConfigError("error validating config: missing token")
        try:
            self.claims = token_claims(self.token)
        except ConfigError as exc:
            raise ConfigError(f"error validating config: {exc}") from None
        if not self.runner_cmdline:
            raise ConfigError("error validating config: runner_cmdline is not set")

    def forge_type(self) -> str:
        """The token's ``forge_type`` claim, refused unless GitHub or Gitea."""
        forge = str(self.claims.get("forge_type") or "")
        if forge not in FORGE_TYPES:
            raise ConfigError(f"failed to get forge type for agent: invalid forge type: {forge}")
        return forge

    @property
    def dial_url(self) -> str:
        """Where the websocket goes: ``wss`` only for an ``https`` server URL."""
        parsed = urllib.parse.urlsplit(self.server_url)
        scheme = "wss" if parsed.scheme == "https" else "ws"
        return f"{scheme}://{parsed.netloc}{parsed.path}"


def has_pty() -> bool:
    """Whether a PTY can be opened, as the agent checks it."""
    try:
        fd = os.open("/dev/ptmx", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    os.close(fd)
    return True


class Agent:
    """One agent process: its runner, its state and its connections to GARM."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.deadline = time.monotonic() + DEADLINE_SECONDS
        self.has_shell = config.enable_shell and has_pty()
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.agent_id: int | None = None
        self.runner: subprocess.Popen[bytes] | None = None
        self.runner_alive = False
        self.job_started = False
        self.socket: ClientConnection | None = None

    def log(self, message: str) -> None:
        """Write one line to the agent's log, as slog's text handler does."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        print(f"time={stamp} msg={json.dumps(message)}", flush=True)

    def remaining(self) -> float:
        """Seconds left before the stand-in's deadline."""
        return self.deadline - time.monotonic()

    def wait(self, seconds: float) -> bool:
        """Sleep unless stopped; True when the agent is stopping."""
        return self.stopping.wait(min(seconds, max(self.remaining(), 0))) or self.remaining() <= 0

    # ----------------------------------------------------------------- state and status

    def state(self) -> str:
        """``determineRunnerState``: offline, idle, active or terminated."""
        if self.job_started:
            return "active" if self.runner_alive else "terminated"
        return "idle" if self.runner_alive else "offline"

    def send(self, message: bytes) -> None:
        """Write one binary message to GARM, if connected; a failure is logged."""
        with self.lock:
            socket = self.socket
        if socket is None:
            self.log("failed to send status: websocket client not connected")
            return
        try:
            socket.send(message)
        except (ConnectionClosed, OSError) as exc:
            self.log(f"failed to send message: {exc}")

    def send_status(self, status: str, message: str) -> None:
        """One runner status message for the runner's agent ID."""
        self.send(status_message(self.agent_id or 0, status, message))

    def runner_started(self, alive: bool) -> None:
        """``SetRunnerStarted``: the runner went idle or stopped."""
        self.runner_alive = alive
        state = self.state()
        self.send_status(state, f"Agent update status to: {state}")

    def persist(self) -> None:
        """Keep ``job_started`` where the agent keeps its state."""
        if self.config.state_db_path:
            Path(self.config.state_db_path).write_text(
                json.dumps({"job_started": self.job_started}), encoding="utf-8"
            )

    # ----------------------------------------------------------------- the runner

    def make_runner_command(self) -> int:
        """``NewRunnerCommand``: the agent ID, once ``.runner`` and ``runner_cmdline`` pass."""
        agent_id = read_runner_file(self.config.work_dir / ".runner")
        check_cmdline(self.config.runner_cmdline)
        return agent_id

    def keep_runner_alive(self) -> None:
        """Make the runner command (retrying), then run it again whenever it ends."""
        while self.agent_id is None:
            try:
                self.agent_id = self.make_runner_command()
            except RunnerConfigError as exc:
                self.log(f"failed to create runner command: {exc}")
                if self.wait(RETRY_SECONDS):
                    return
        while self.state() != "terminated" and not self.stopping.is_set():
            self.run_runner_once()
            if self.state() == "terminated" or self.wait(RETRY_SECONDS):
                return

    def run_runner_once(self) -> None:
        """Start the runner in its own process group, follow its output until it exits."""
        cmdline = self.config.runner_cmdline
        try:
            process = subprocess.Popen(
                cmdline,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                process_group=0,
            )
        except OSError as exc:
            self.log(f"failed to start runner: {exc}")
            self.send_status("failed", f"Runner failed to start: {exc}")
            return
        with self.lock:
            self.runner = process
        readers = [
            threading.Thread(target=self.follow, args=(stream,), daemon=True)
            for stream in (process.stdout, process.stderr)
        ]
        for reader in readers:
            reader.start()
        code = process.wait()
        for reader in readers:
            reader.join(timeout=RUNNER_STOP_SECONDS)
        with self.lock:
            self.runner = None
        self.log(f"command failed: exit status {code}" if code else "runner exited")
        self.runner_started(False)
        if self.job_started:
            self.log("runner has finished th job")
            self.send_status("terminated", "Job execution has finished")

    def follow(self, stream: IO[bytes] | None) -> None:
        """Read the runner's output: its idle and job-started lines change its state."""
        if stream is None:
            return
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.log(line)
            if JOB_STARTED.match(line):
                self.log("runner is active")
                self.job_started = True
                self.persist()
                self.send_status("active", "runner is now executing a job")
            elif LISTENING.search(line):
                self.log("runner is online and idle")
                self.runner_started(True)

    def stop_runner(self) -> None:
        """``cleanup``: SIGTERM the runner's process group, SIGKILL it if it lingers."""
        with self.lock:
            process = self.runner
        if process is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                process.wait(timeout=RUNNER_STOP_SECONDS)
                return
            except subprocess.TimeoutExpired:
                continue

    # ----------------------------------------------------------------- GARM's side

    def run(self) -> int:
        """Run the runner and the connection until stopped or the deadline; the exit code."""
        self.log(f"starting; has_shell={str(self.has_shell).lower()}")
        runner = threading.Thread(target=self.keep_runner_alive, daemon=True)
        runner.start()
        code = 0
        while not self.stopping.is_set() and self.remaining() > 0:
            code = self.connect_once()
            if code or self.wait(RETRY_SECONDS):
                break
        self.stopping.set()
        self.stop_runner()
        self.log("daemon is shutting down")
        return code

    def connect_once(self) -> int:
        """One connection; 2 when its first heartbeat finds no runner command (Go's panic)."""
        url = self.config.dial_url
        context = ssl.create_default_context() if url.startswith("wss:") else None
        headers = {"Authorization": f"Bearer {self.config.token}"}
        self.log(f"attempting to connect to GARM server {self.config.server_url}")
        try:
            with connect(
                url,
                additional_headers=headers,
                ssl=context,
                proxy=None,
                open_timeout=OPEN_TIMEOUT_SECONDS,
            ) as socket:
                self.log("successfully connected to GARM")
                return self.session(socket)
        except (InvalidHandshake, InvalidURI) as exc:
            self.log(f"failed to start websocket connection: {exc}")
        except ConnectionClosed as exc:
            self.log(f"remote host closed WS connection: {exc}")
        except (OSError, TimeoutError) as exc:
            self.log(f"failed to create websocket client: {exc}")
        finally:
            with self.lock:
                self.socket = None
        return 0

    def session(self, socket: ClientConnection) -> int:
        """Heartbeat and status at once, then a heartbeat every :data:`HEARTBEAT_SECONDS`."""
        with self.lock:
            self.socket = socket
        if self.agent_id is None:
            sys.stderr.write(NIL_POINTER_PANIC)
            sys.stderr.flush()
            return 2
        self.send(heartbeat(self.agent_id, self.has_shell))
        state = self.state()
        self.send_status(state, f"Agent update status to: {state}")
        due = time.monotonic() + HEARTBEAT_SECONDS
        while not self.stopping.is_set() and self.remaining() > 0:
            wait = min(due, self.deadline) - time.monotonic()
            if wait <= 0:
                self.send(heartbeat(self.agent_id, self.has_shell))
                due = time.monotonic() + HEARTBEAT_SECONDS
                continue
            try:
                socket.recv(timeout=min(wait, 1.0))
            except TimeoutError:
                continue
        return 0


def main(argv: list[str]) -> int:
    """``garm-agent daemon --config FILE``: run the agent; 1 on a usage or configuration error."""
    if len(argv) != 3 or argv[0] != "daemon" or argv[1] != "--config":
        print(USAGE, file=sys.stderr)
        return 1
    try:
        config = Config(Path(argv[2]))
    except ConfigError as exc:
        print(f"{time.strftime('%Y/%m/%d %H:%M:%S')} {exc}", file=sys.stderr)
        return 1
    try:
        config.forge_type()
    except ConfigError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    if config.work_dir.is_dir():
        os.chdir(config.work_dir)
    if config.log_file:
        log = open(config.log_file, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        sys.stdout = log
    agent = Agent(config)
    signal.signal(signal.SIGTERM, lambda *_: agent.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: agent.stopping.set())
    return agent.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
