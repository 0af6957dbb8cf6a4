#!/usr/bin/env python3
"""Stand-in for garm-agent (cloudbase/garm-agent), for tests only: connects, heartbeats.

A runner of an entity in agent mode downloads garm-agent from GARM and runs it as
``garm-agent daemon --config <toml>``; the agent holds a websocket to GARM's agent URL and
tells GARM, in every heartbeat, whether it offers a shell. This script is that program as far
as GARM can see it: tests upload it to GARM as the garm-agent binary (:func:`executable`), the
provider stand-in's simulated runner downloads it through GARM's metadata route and runs it.

What it does, as garm-agent (``fda6cd6``) does:

- Reads the TOML the install script writes (``server_url``, ``token``, ``work_dir``,
  ``enable_shell``, ``log_file``, ``runner_cmdline``) and refuses it as the agent does:
  an unparsable ``server_url``, no ``token``, a token that is not a JWT scoped to an agent
  (``is_agent``; its signature is not checked, GARM does that), no ``runner_cmdline``.
- Offers a shell only when ``enable_shell`` is on, a PTY can be opened (``/dev/ptmx``) and the
  server URL is ``https`` or ``wss``; otherwise it logs why and reports ``has_shell`` false.
  The URL check is garm-agent's head (commit 53198b4 added it): the tagged ``v0.1.0-beta1``
  the image pins offers a shell over any URL, which is why the charm withholds
  ``enable_shell`` unless its URL is ``https`` (ADR 0011). The wire format is the same in both.
- Dials ``wss://`` for an ``https`` server URL and ``ws://`` for anything else (``wss``
  included: garm-provider-common's websocket reader maps only ``https``), with
  ``Authorization: Bearer <token>``; TLS is verified against the system's trust store
  (``SSL_CERT_FILE`` when set, as Go and OpenSSL both read it).
- Reads the runner's agent ID from ``<work_dir>/.runner`` (the JIT file the install script
  downloaded); until it has one it sends nothing, as the real agent sends no heartbeat before
  its runner command exists.
- On every connection sends a heartbeat at once, then every :data:`HEARTBEAT_SECONDS`: one
  binary message, byte ``0x01``, the agent ID as 8 big-endian bytes, then the JSON
  ``{"has_shell": <bool>}``. A refused or dropped connection is tried again after
  :data:`RECONNECT_SECONDS`.

What it does not do: run the GitHub runner or send runner status messages, open shells, keep
state. It exits after :data:`DEADLINE_SECONDS` in any case; the provider stand-in stops it
sooner when its server is deleted, and the harness at teardown. It never logs the token.

Standard library and ``websockets`` only: it runs as a program of its own.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import ssl
import sys
import time
import tomllib
import urllib.parse
from pathlib import Path
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import ClientConnection, connect

HEARTBEAT_MESSAGE = 0x01
# garm-agent heartbeats every 30 s; the stand-in sooner, so a test sees a second heartbeat (and
# knows GARM stored what the first one said) in a few seconds. GARM reads no meaning in the pace.
HEARTBEAT_SECONDS = 2.0
RECONNECT_SECONDS = 1.0
DEADLINE_SECONDS = 300.0
OPEN_TIMEOUT_SECONDS = 10.0
SECURE_SCHEMES = ("https", "wss")
USAGE = "usage: garm-agent daemon --config FILE"


class ConfigError(Exception):
    """The configuration is refused, in garm-agent's words."""


def executable() -> bytes:
    """This script with a shebang naming the running interpreter: the 'binary' tests upload."""
    source = Path(__file__).read_text(encoding="utf-8")
    body = source.split("\n", 1)[1] if source.startswith("#!") else source
    return f"#!{sys.executable}\n{body}".encode()


def heartbeat(agent_id: int, has_shell: bool) -> bytes:
    """One heartbeat message as garm-agent marshals it."""
    payload = json.dumps({"has_shell": has_shell}, separators=(",", ":")).encode()
    return bytes([HEARTBEAT_MESSAGE]) + agent_id.to_bytes(8, "big") + payload


def _token_claims(token: str) -> dict[str, Any]:
    parts = token.split(".")
    if len(parts) != 3:
        raise ConfigError("failed to parse token: token is malformed")
    padded = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(padded))
    except (binascii.Error, ValueError):
        raise ConfigError("failed to parse token: token is malformed") from None
    if not isinstance(claims, dict):
        raise ConfigError("failed to parse token: token is malformed")
    return claims


class Config:
    """The agent's TOML, validated as ``config.Agent.Validate`` does."""

    def __init__(self, path: Path) -> None:
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"error decoding toml: {exc}") from None
        self.server_url = str(document.get("server_url", ""))
        self.token = str(document.get("token", ""))
        self.work_dir = Path(str(document.get("work_dir", "")))
        self.log_file = str(document.get("log_file", ""))
        self.enable_shell = bool(document.get("enable_shell", False))
        self.runner_cmdline = list(document.get("runner_cmdline") or [])
        parsed = urllib.parse.urlsplit(self.server_url)
        if not parsed.scheme or not (parsed.netloc or parsed.path.startswith("/")):
            raise ConfigError("error validating config: invalid server_url")
        if not self.token:
            raise ConfigError("error validating config: missing token")
        if not _token_claims(self.token).get("is_agent"):
            raise ConfigError(
                "error validating config: failed to parse token: token is not agent scoped"
            )
        if not self.runner_cmdline:
            raise ConfigError("error validating config: runner_cmdline is not set")

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
    """One agent process: its configuration, the shell it offers and its connections."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.deadline = time.monotonic() + DEADLINE_SECONDS
        self.has_shell = config.enable_shell and has_pty()
        if self.has_shell and urllib.parse.urlsplit(config.server_url).scheme not in (
            SECURE_SCHEMES
        ):
            self.log("shell disabled: enable_shell requires a secure (wss/https) server URL")
            self.has_shell = False

    def log(self, message: str) -> None:
        """Write one timestamped line to the agent's log (stdout)."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        print(f"{stamp} garm-agent: {message}", flush=True)

    def agent_id(self) -> int | None:
        """The runner's agent ID from ``.runner`` in the work directory, once it is there."""
        try:
            document = json.loads((self.config.work_dir / ".runner").read_text("utf-8-sig"))
            agent_id = int(str(document.get("agentId", "0")))
        except (OSError, ValueError, AttributeError):
            return None
        return agent_id if 0 < agent_id < 2**32 else None

    def remaining(self) -> float:
        """Seconds left before the agent's deadline."""
        return self.deadline - time.monotonic()

    def run(self) -> None:
        """Connect and heartbeat until the deadline, again after every refusal or drop."""
        self.log(f"starting; has_shell={str(self.has_shell).lower()}")
        while self.remaining() > 0:
            agent_id = self.agent_id()
            if agent_id is None:
                self.log("no runner agent ID yet")
            else:
                self.connect_once(agent_id)
            time.sleep(min(RECONNECT_SECONDS, max(self.remaining(), 0)))
        self.log("deadline reached, exiting")

    def connect_once(self, agent_id: int) -> None:
        """One connection: heartbeat at once and then periodically, until it ends."""
        url = self.config.dial_url
        context = ssl.create_default_context() if url.startswith("wss:") else None
        headers = {"Authorization": f"Bearer {self.config.token}"}
        try:
            with connect(
                url,
                additional_headers=headers,
                ssl=context,
                proxy=None,
                open_timeout=OPEN_TIMEOUT_SECONDS,
            ) as socket:
                self.log(f"successfully connected to GARM at {url}")
                self.heartbeat_loop(socket, agent_id)
        except InvalidHandshake as exc:
            self.log(f"failed to start websocket connection: {exc}")
        except ConnectionClosed as exc:
            self.log(f"remote host closed WS connection: {exc}")
        except (OSError, TimeoutError) as exc:
            self.log(f"failed to connect to {url}: {exc}")

    def heartbeat_loop(self, socket: ClientConnection, agent_id: int) -> None:
        """Send a heartbeat now and every :data:`HEARTBEAT_SECONDS`; ignore what GARM sends."""
        while self.remaining() > 0:
            socket.send(heartbeat(agent_id, self.has_shell))
            self.log(f"heartbeat sent (agent ID {agent_id})")
            due = time.monotonic() + HEARTBEAT_SECONDS
            while (wait := min(due, self.deadline) - time.monotonic()) > 0:
                try:
                    socket.recv(timeout=wait)
                except TimeoutError:
                    break


def main(argv: list[str]) -> int:
    """``garm-agent daemon --config FILE``: run the agent; 1 on a usage or configuration error."""
    if len(argv) != 3 or argv[0] != "daemon" or argv[1] != "--config":
        print(USAGE, file=sys.stderr)
        return 1
    try:
        config = Config(Path(argv[2]))
    except ConfigError as exc:
        print(f"failed to validate agent config: {exc}", file=sys.stderr)
        return 1
    if config.log_file:
        log = open(config.log_file, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        sys.stdout = sys.stderr = log
    Agent(config).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
