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

Every rule below is garm-agent's at the commit ``rockcraft.yaml`` pins (``def3b2b``, upstream's
"Unpin forked GARM", version ``v0.1.0-beta1-def3b2b``), read in its source and measured with
the real binary built from it (``tests/unit/standins/test_agent_standin.py`` runs both); file
names are that tree's:

- Configuration (``config/config.go``, ``Validate``): an unparsable ``server_url``, no
  ``token``, a token that is not a JWT or not scoped to an agent (``is_agent``; its signature is
  not checked, GARM does that), no ``runner_cmdline``: printed as Go's ``log.Fatal`` prints,
  exit 1. Then (``service/service.go``, ``NewService``) the token's ``forge_type`` claim must be
  ``github`` or ``gitea`` and ``state_db_path`` must name a file the agent can open; then
  (``Service.Start``) a ``work_dir`` that cannot be read is refused: cobra's ``Error: ...`` and
  the command's usage on stderr, exit 1.
- The shell (``NewService``): offered whenever ``enable_shell`` is set and a PTY can be opened,
  whatever the server URL's scheme. (A later upstream commit, 53198b4, refuses it over a
  plain URL; the charm withholds ``enable_shell`` without an ``https`` URL for that reason.)
- The working directory (``Service.Start``): the agent changes into ``work_dir``.
- The runner (``service/runner/runner.go``, ``types.go``): ``<work_dir>/.runner`` is decoded as
  Go decodes it into ``GitHubRunnerConfig``, whose ``agentId``, ``agentName``, ``ephemeral``
  and ``serverUrl`` are strings: a number or a boolean there, or a byte-order mark, is refused
  in Go's words. ``runner_cmdline`` must start with an absolute path and no argument may hold
  one of ``;|&<>$``` (``validateCmdParams``). Either failure leaves the agent without a runner
  command: it logs "failed to create runner command" and tries again every
  :data:`RETRY_SECONDS`, for as long as it runs. Without a runner command it sends GARM
  nothing, neither heartbeat nor status (``snapshot``), but stays connected and running.
- A runner command is started in its own process group, its output read line by line: a line
  holding ``Listening for Jobs`` makes the runner idle, one matching ``.* Running job: .*``
  active. A runner that cannot be started ends as one that exited. When it ends the agent
  signals what is left of its group, reports it (offline, or terminated after a job) and
  starts it again after :data:`RETRY_SECONDS` unless a job ran (kept in ``state_db_path``,
  read again at start). On SIGTERM the agent stops the group (SIGTERM, then SIGKILL after
  :data:`RUNNER_STOP_SECONDS`) and exits 0.
- GARM's side (``service.go``, ``keepAliveLoop``, ``loop``): dials ``wss://`` for an ``https``
  server URL and ``ws://`` otherwise, with ``Authorization: Bearer <token>``; TLS is verified
  against ``SSL_CERT_FILE`` when set (as Go reads it). On each connection, when there is a
  runner command: a heartbeat, then the runner's status. Heartbeats follow one ticker started
  with the agent, every :data:`HEARTBEAT_SECONDS` (not counted from the connection; a tick
  missed while disconnected is sent on reconnecting, as Go's ticker keeps one). A failed
  attempt is retried after :data:`RETRY_SECONDS`; a dropped connection at once. Messages
  (GARM's ``workers/websocket/agent/messaging``): heartbeat ``0x01``, status ``0x03``, each
  followed by the agent ID (8 bytes, big-endian) and JSON (``{"has_shell": ...}``;
  ``{"status", "message", "agent_id"}``).
- Its log: slog's text lines (``time=... level=... msg=... key=value``) in the real agent's
  words, without ``source=`` (the Go file and line); errors the stand-in cannot word as Go
  does (a failed dial, a JSON syntax error) keep Python's words after Go's prefix.

What it does not do: open shells (a ``CreateShell`` from GARM is read and ignored), keep its
state in bbolt (``state_db_path`` holds JSON), Gitea. It exits after :data:`DEADLINE_SECONDS`
in any case, so a test that failed to stop it leaves nothing for long. It never logs the token.

Standard library and ``websockets`` only: it runs as a program of its own.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime
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
# What cobra prints after a command's error (stderr), the daemon command's usage.
USAGE = """Usage:
  garm-agent daemon [flags]

Flags:
      --config string   The GARM agent configuration file. (default "/etc/garm/agent.toml")
  -h, --help            help for daemon

"""
FORGE_TYPES = ("github", "gitea")
# GitHubRunnerConfig's fields (service/runner/types.go), all Go strings.
RUNNER_STRING_FIELDS = ("agentId", "agentName", "ephemeral", "serverUrl")
LISTENING = re.compile("Listening for Jobs")
JOB_STARTED = re.compile(".* Running job: .*")
UNSAFE_ARGUMENT = re.compile(r"[;|&<>$`]")
# Go's error for a client that was never made (getClient), and for one no longer connected.
NO_CLIENT = "websocket client not connected"
NOT_RUNNING = "websocket is not running"


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


def go_os_error(op: str, path: str | Path, exc: OSError) -> str:
    """An ``*os.PathError`` as Go prints it: ``open /p: no such file or directory``."""
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    return f"{op} {path}: {reason[:1].lower()}{reason[1:]}"


def slog_value(value: str) -> str:
    """A value as slog's text handler writes it: quoted where it has spaces, quotes or '='."""
    if value and not re.search(r'[\s"=]', value) and value.isprintable():
        return value
    return json.dumps(value, ensure_ascii=False)


def slog_line(level: str, message: str, **attrs: str) -> str:
    """One line of slog's text handler (``AddSource`` aside): time, level, msg, attributes."""
    now = datetime.datetime.now().astimezone()
    stamp = now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    fields = [f"time={stamp}", f"level={level}", f"msg={slog_value(message)}"]
    fields += [f"{key}={slog_value(value)}" for key, value in attrs.items()]
    return " ".join(fields)


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
    """The agent ID from ``.runner``, refused where ``NewRunnerConfig`` refuses it."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RunnerConfigError(
            f"failed to read runner config: {go_os_error('open', path, exc)}"
        ) from None
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


def runner_command(work_dir: Path, cmdline: list[str]) -> int:
    """``NewRunnerCommand``: the agent ID, once ``.runner`` and ``runner_cmdline`` pass."""
    try:
        agent_id = read_runner_file(work_dir / ".runner")
    except RunnerConfigError as exc:
        raise RunnerConfigError(f"failed to read runner config: {exc}") from None
    check_cmdline(cmdline)
    return agent_id


def _server_url_problem(server_url: str) -> str | None:
    """``url.ParseRequestURI``'s refusal of the server URL, in Go's words, else None."""
    if not server_url:
        return 'parse "": empty url'
    parsed = urllib.parse.urlsplit(server_url)
    if not parsed.scheme and not server_url.startswith("/"):
        return f'parse "{server_url}": invalid URI for request'
    return None


class Config:
    """The agent's TOML, validated as ``config.Agent.Validate`` and ``ForgeType`` do."""

    def __init__(self, path: Path) -> None:
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"error decoding toml: {go_os_error('open', path, exc)}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"error decoding toml: {exc}") from None
        self.server_url = str(document.get("server_url", ""))
        self.token = str(document.get("token", ""))
        self.work_dir = str(document.get("work_dir", ""))
        self.log_file = str(document.get("log_file", ""))
        self.state_db_path = str(document.get("state_db_path", ""))
        self.enable_shell = bool(document.get("enable_shell", False))
        self.runner_cmdline = [str(a) for a in document.get("runner_cmdline") or []]
        problem = _server_url_problem(self.server_url)
        if problem is not None:
            raise ConfigError(f"error validating config: invalid server_url: {problem}")
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

    def open_state(self) -> bool:
        """``state.NewManager``: the state file opened (made if missing); job_started as kept."""
        path = self.state_db_path
        try:
            with open(path, "a+", encoding="utf-8") as state:
                state.seek(0)
                kept = state.read()
        except OSError as exc:
            raise ConfigError(
                "failed to create state manager: failed to open database: "
                f"{go_os_error('open', path, exc)}"
            ) from None
        try:
            return bool(json.loads(kept).get("job_started")) if kept else False
        except (ValueError, AttributeError):
            return False

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


class Ticker:
    """Go's ``time.Ticker`` as ``loop`` reads it: a tick on a grid from the agent's start.

    One tick waits while nobody reads (the agent is disconnected); later ones are dropped.
    """

    def __init__(self, period: float) -> None:
        self.start = time.monotonic()
        self.period = period
        self.seen = 0

    def due(self) -> float:
        """When the next tick not yet taken fires (monotonic clock)."""
        return self.start + (self.seen + 1) * self.period

    def take(self) -> bool:
        """True (once) when a tick fired since the last one taken."""
        fired = int((time.monotonic() - self.start) // self.period)
        if fired > self.seen:
            self.seen = fired
            return True
        return False


def exit_error(code: int) -> str:
    """An ``*exec.ExitError`` as Go prints it: ``exit status 1``, ``signal: terminated``."""
    if code >= 0:
        return f"exit status {code}"
    name = signal.strsignal(-code) or f"signal {-code}"
    return f"signal: {name[:1].lower()}{name[1:]}"


class Agent:
    """One agent process: its runner, its state and its connections to GARM."""

    def __init__(self, config: Config, job_started: bool) -> None:
        self.config = config
        self.deadline = time.monotonic() + DEADLINE_SECONDS
        self.has_shell = config.enable_shell and has_pty()
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        # The runner command's agent ID; None until ``.runner`` and the command line pass.
        self.agent_id: int | None = None
        self.runner: subprocess.Popen[bytes] | None = None
        self.runner_alive = False
        self.job_started = job_started
        self.socket: ClientConnection | None = None
        self.dialled = False
        self.ticker = Ticker(HEARTBEAT_SECONDS)

    def log(self, level: str, message: str, **attrs: str) -> None:
        """Write one line to the agent's log, as slog's text handler does."""
        print(slog_line(level, message, **attrs), flush=True)

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

    def snapshot(self) -> int | None:
        """``snapshot``: the runner command's agent ID, None while there is no runner command."""
        with self.lock:
            return self.agent_id

    def write(self, message: bytes, wrap: str) -> str | None:
        """Write one binary message to GARM; Go's error when it could not, else None."""
        with self.lock:
            socket = self.socket
        if socket is None:
            return f"{wrap}: {NOT_RUNNING}" if self.dialled else NO_CLIENT
        try:
            socket.send(message)
        except (ConnectionClosed, OSError) as exc:
            return f"{wrap}: {exc}"
        return None

    def send_heartbeat(self, agent_id: int) -> None:
        """``sendHeartbeat``: the agent's capabilities for its runner's agent ID."""
        error = self.write(heartbeat(agent_id, self.has_shell), "failed to send heartbeat")
        if error is not None:
            self.log("ERROR", "failed to send heartbeat", error=error)

    def send_status(self, status: str, message: str) -> None:
        """One runner status message for the runner's agent ID (there is one: it runs)."""
        frame_ = status_message(self.agent_id or 0, status, message)
        error = self.write(frame_, "failed to send runner status")
        if error is not None:
            self.log("ERROR", "failed to send status", error=error)

    def runner_started(self, alive: bool) -> None:
        """``SetRunnerStarted``: the runner went idle or stopped."""
        self.runner_alive = alive
        state = self.state()
        self.send_status(state, f"Agent update status to: {state}")

    def persist(self) -> None:
        """Keep ``job_started`` where the agent keeps its state."""
        Path(self.config.state_db_path).write_text(
            json.dumps({"job_started": self.job_started}), encoding="utf-8"
        )

    # ----------------------------------------------------------------- the runner

    def keep_runner_alive(self) -> None:
        """Make the runner command (retrying), then run it again whenever it ends."""
        while self.agent_id is None:
            if self.state() == "terminated":
                return
            try:
                agent_id = runner_command(Path(self.config.work_dir), self.config.runner_cmdline)
            except RunnerConfigError as exc:
                self.log("ERROR", "failed to create runner command", error=str(exc))
                if self.wait(RETRY_SECONDS):
                    return
                continue
            with self.lock:
                self.agent_id = agent_id
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
            # Go starts the command in the goroutine that follows it: a runner that cannot be
            # started ends as one that exited (offline), and is tried again.
            error = go_os_error("fork/exec", cmdline[0], exc)
            self.log("ERROR", "failed to start command", error=f"failed to start process: {error}")
            self.runner_started(False)
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
        if code:
            self.log("ERROR", "command failed", error=exit_error(code))
        # cleanup(): what is left of the runner's process group is told to stop.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)
        for reader in readers:
            reader.join(timeout=RUNNER_STOP_SECONDS)
        with self.lock:
            self.runner = None
        self.runner_started(False)
        if self.job_started:
            self.log("INFO", "runner has finished the job")
            self.send_status("terminated", "Job execution has finished")

    def follow(self, stream: IO[bytes] | None) -> None:
        """Read the runner's output: its idle and job-started lines change its state."""
        if stream is None:
            return
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.log("INFO", line)
            if JOB_STARTED.match(line):
                self.log("INFO", "runner is active")
                self.job_started = True
                self.persist()
                self.send_status("active", "runner is now executing a job")
            elif LISTENING.search(line):
                self.log("INFO", "runner is online and idle")
                self.runner_started(True)

    def stop_runner(self) -> None:
        """``cleanup``: SIGTERM the runner's process group, SIGKILL it if it lingers."""
        with self.lock:
            process = self.runner
        if process is None:
            return
        self.log("INFO", "stopping runner command")
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
        """Run the runner and the connection until stopped or the deadline; exit 0."""
        runner = threading.Thread(target=self.keep_runner_alive, daemon=True)
        runner.start()
        while not self.stopping.is_set() and self.remaining() > 0:
            # A dropped connection is dialled again at once, a failed dial after a pause.
            if not self.connect_once() and self.wait(RETRY_SECONDS):
                break
        self.stopping.set()
        self.log("INFO", "daemon is shutting down")
        self.stop_runner()
        runner.join(timeout=RUNNER_STOP_SECONDS * 2)
        return 0

    def connect_once(self) -> bool:
        """One connection; True when it was made (and has dropped or the agent stops)."""
        url = self.config.dial_url
        context = ssl.create_default_context() if url.startswith("wss:") else None
        headers = {"Authorization": f"Bearer {self.config.token}"}
        server = self.config.server_url
        self.log("INFO", "attempting to connect to GARM server", server=server)
        self.dialled = True
        try:
            with connect(
                url,
                additional_headers=headers,
                ssl=context,
                proxy=None,
                open_timeout=OPEN_TIMEOUT_SECONDS,
            ) as socket:
                self.log("INFO", "successfully connected to GARM", server=server)
                self.session(socket)
        except (InvalidHandshake, InvalidURI, OSError, TimeoutError) as exc:
            self.log("WARN", "failed to start websocket connection", error=f"{exc}")
            return False
        except ConnectionClosed:
            self.log("INFO", "remote host closed WS connection")
        finally:
            with self.lock:
                self.socket = None
        return True

    def session(self, socket: ClientConnection) -> None:
        """``loop`` on one connection; raises ConnectionClosed when GARM drops it.

        Heartbeat and status at once, then a heartbeat on each of the ticker's ticks; nothing
        while there is no runner command.
        """
        with self.lock:
            self.socket = socket
        agent_id = self.snapshot()
        if agent_id is not None:
            self.send_heartbeat(agent_id)
            state = self.state()
            self.send_status(state, f"Agent update status to: {state}")
        while not self.stopping.is_set() and self.remaining() > 0:
            if self.ticker.take():
                agent_id = self.snapshot()
                if agent_id is not None:
                    self.send_heartbeat(agent_id)
                continue
            wait = min(self.ticker.due(), self.deadline) - time.monotonic()
            try:
                socket.recv(timeout=max(min(wait, 1.0), 0.0))
            except TimeoutError:
                continue


def main(argv: list[str]) -> int:
    """``garm-agent daemon --config FILE``: run the agent; 1 on a usage or configuration error."""
    if len(argv) != 3 or argv[0] != "daemon" or argv[1] != "--config":
        sys.stderr.write(USAGE)
        return 1
    try:
        config = Config(Path(argv[2]))
    except ConfigError as exc:
        print(f"{time.strftime('%Y/%m/%d %H:%M:%S')} {exc}", file=sys.stderr)
        return 1
    if config.log_file:
        log = open(config.log_file, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        sys.stdout = log
    try:
        config.forge_type()
        job_started = config.open_state()
    except ConfigError as exc:
        sys.stderr.write(f"Error: {exc}\n{USAGE}")
        return 1
    if config.work_dir:
        try:
            os.chdir(config.work_dir)
        except OSError as exc:
            error = go_os_error("stat", config.work_dir, exc)
            print(
                slog_line(
                    "ERROR", "failed to access work_dir", work_dir=config.work_dir, error=error
                ),
                flush=True,
            )
            sys.stderr.write(f"Error: failed to start service: {error}\n{USAGE}")
            return 1
    agent = Agent(config, job_started)
    signal.signal(signal.SIGTERM, lambda *_: agent.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: agent.stopping.set())
    return agent.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
