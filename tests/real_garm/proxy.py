"""A recording HTTP proxy on 127.0.0.1 in front of a GARM (real or emulated).

Tests read what GARM itself was asked, and what it answered, from this record rather than from
the charm's own counters: every call the charm makes passes through here unchanged. The record
holds the method, the path relative to ``/api/v1``, the query, the JSON body, GARM's status and,
for a refusal, GARM's ``error`` field.

Tests may also have the proxy refuse a call in GARM's place (:meth:`RecordingProxy.refuse_next`):
the call is answered with the given status and a GARM-shaped error body without reaching GARM,
and it is recorded with that status. The simulation uses it to show a phase that needs GARM to
refuse a delete, which real GARM cannot be made to do on demand.

Every token GARM issues at login joins the registry of secret values
(:mod:`tests.log_secrets`): it is an admin bearer token, and the suite fails a test that logs it.

One hook is offered for the real-GARM harness: a callable run after GARM accepted the controller
URLs (``PUT /api/v1/controller``), with the caller's ``Authorization`` header, before the answer
goes back. The harness uses it to point GARM's ``github.com`` endpoint at the GitHub stand-in at
the only moment GARM allows it: after the URLs are set and before any credential exists.

Faults, for the fault campaign (``tests/faults/``): the proxy numbers the calls of GARM's API
clients as they arrive (1, 2, ...; since :meth:`RecordingProxy.clear`), leaving out the calls a
runner makes (:data:`INSTANCE_PREFIXES`: a simulated runner VM calls back on its own clock), and
can act on one of them (:meth:`RecordingProxy.fault_at`):

- ``cut``: the call reaches GARM and GARM answers, but the connection is closed without the
  answer; the caller cannot know whether a write took effect. Recorded with status
  :data:`CUT_STATUS`.
- ``kill``: GARM is killed (``on_kill``, the harness's SIGKILL) when the call arrives, before it
  reaches GARM; the connection drops as with a GARM that is down.
- ``db-restart``: GARM's database server is stopped when the call arrives, the call goes to
  GARM while it is down, and the server is started again once GARM has answered, before the
  answer goes back (``on_db_restart``, a context manager: down inside, started on leaving).

and can answer every call ``latency`` seconds late (the call waits before it is forwarded).

Observers (``observers``) see every recorded call, GARM's status included, before its answer
goes back to the caller: what they do is in place when the caller goes on.
``tests.real_garm.github_apps`` uses this to give the GitHub stand-in the App keys GARM accepts.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.log_secrets import register_secret

API_PREFIX = "/api/v1"
WRITE_METHODS = frozenset({"POST", "PUT", "DELETE", "PATCH"})
LOGIN_PATH = "/auth/login"
# The routes a runner calls (its status, its metadata), not GARM's API clients.
INSTANCE_PREFIXES = ("/callbacks", "/metadata", "/agent", "/webhooks")
# The status recorded for a call whose answer the proxy cut off.
CUT_STATUS = 0
CUT = "cut"
KILL = "kill"
DB_RESTART = "db-restart"
FAULTS = (CUT, KILL, DB_RESTART)
CONTROLLER_PATH = "/controller"
# Headers that describe one hop, not the message: never forwarded.
_HOP_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",  # codespell:ignore te
        "upgrade",
        "proxy-connection",
    }
)


@dataclass(frozen=True)
class RecordedCall:
    """One call GARM received through the proxy, with GARM's answer status."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    status: int
    # GARM's ``error`` field when it refused the call, else empty.
    error: str = ""
    # When the call arrived and when GARM's answer was back (``time.monotonic()``): which
    # calls GARM had in hand at once.
    started: float = 0.0
    finished: float = 0.0

    @property
    def refused(self) -> bool:
        """Whether GARM answered with a client or server error."""
        return self.status >= 400


UrlsSetHook = Callable[[str], None]
Observer = Callable[[RecordedCall], None]


def is_instance_call(path: str) -> bool:
    """Whether an API path is one a runner calls (its callbacks), not an API client's."""
    return path.startswith(INSTANCE_PREFIXES)


class RecordingProxy:
    """Forward HTTP calls to ``upstream`` and remember each one.

    Args:
        upstream_port: the port GARM listens on, on 127.0.0.1; :meth:`retarget` changes it.
        listen_port: the proxy's own port (a free one by default; the packed charm's pod puts
            it where the charm reaches GARM, 8080).
    """

    def __init__(self, upstream_port: int = 0, *, listen_port: int = 0) -> None:
        self.upstream_port = upstream_port
        self.listen_port = listen_port
        self.on_urls_set: UrlsSetHook | None = None
        self.observers: list[Observer] = []
        self._calls: list[RecordedCall] = []
        self._refusals: list[tuple[str, re.Pattern[str], int]] = []
        self.on_kill: Callable[[], None] | None = None
        self.on_db_restart: Callable[[], AbstractContextManager[object]] | None = None
        self.latency = 0.0
        self._arrivals = 0
        self._faults: dict[int, str] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> RecordingProxy:
        """Listen on 127.0.0.1 (:attr:`listen_port`, by default a free port)."""
        server = ThreadingHTTPServer(("127.0.0.1", self.listen_port), _ProxyHandler)
        server.daemon_threads = True
        server.proxy = self  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), name="garm-proxy", daemon=True
        )
        self._thread.start()
        return self

    @property
    def listening(self) -> bool:
        """Whether the proxy has been started and not stopped."""
        return self._server is not None

    def stop(self) -> None:
        """Stop listening."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def retarget(self, upstream_port: int) -> None:
        """Send the next calls to another port (GARM restarted elsewhere)."""
        self.upstream_port = upstream_port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``, without the API prefix."""
        if self._server is None:
            raise RuntimeError("the proxy is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def calls(self) -> list[RecordedCall]:
        """Every call so far, oldest first (a copy)."""
        with self._lock:
            return list(self._calls)

    def clear(self) -> None:
        """Forget the calls recorded so far; number the next arriving client call 1."""
        with self._lock:
            self._calls.clear()
            self._arrivals = 0

    @property
    def arrivals(self) -> int:
        """How many API clients' calls arrived since :meth:`clear` (answered or not)."""
        with self._lock:
            return self._arrivals

    def fault_at(self, call: int, fault: str) -> None:
        """Act on the client call numbered ``call``: one of :data:`FAULTS`."""
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}")
        if fault == KILL and self.on_kill is None:
            raise RuntimeError("no on_kill: the proxy cannot kill this GARM")
        if fault == DB_RESTART and self.on_db_restart is None:
            raise RuntimeError("no on_db_restart: the proxy cannot restart this GARM's database")
        with self._lock:
            self._faults[call] = fault

    def clear_faults(self) -> None:
        """Drop the faults not reached yet and the latency."""
        with self._lock:
            self._faults.clear()
        self.latency = 0.0

    def arrive(self, path: str) -> str | None:
        """Number one arriving client call, make it late, kill GARM if planned (handler use).

        Returns the fault planned for the call.
        """
        if is_instance_call(path):
            return None
        with self._lock:
            self._arrivals += 1
            fault = self._faults.pop(self._arrivals, None)
        if self.latency:
            time.sleep(self.latency)
        if fault == KILL and self.on_kill is not None:
            self.on_kill()
        return fault

    def around(self, fault: str | None) -> AbstractContextManager[object]:
        """What the answer of a call with ``fault`` is made inside (handler use)."""
        if fault == DB_RESTART and self.on_db_restart is not None:
            return self.on_db_restart()
        return nullcontext()

    def refuse_next(self, method: str, path_regex: str, status: int = 500) -> None:
        """Refuse the next ``method`` call whose API path fully matches ``path_regex``.

        The call is answered with ``status`` in GARM's place and does not reach GARM.
        """
        with self._lock:
            self._refusals.append((method, re.compile(path_regex), status))

    def take_refusal(self, method: str, path: str) -> int | None:
        """Return (and forget) the injected status for this call, or None (handler use)."""
        with self._lock:
            for index, (wanted, pattern, status) in enumerate(self._refusals):
                if wanted == method and pattern.fullmatch(path):
                    del self._refusals[index]
                    return status
        return None

    def record(self, call: RecordedCall) -> None:
        """Remember one call (handler use)."""
        with self._lock:
            self._calls.append(call)

    def forward(
        self, method: str, target: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """Send one request to GARM and return its status, headers and body."""
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=60)
        try:
            conn.request(method, target, body=body or None, headers=headers)
            response = conn.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            conn.close()


def writes(calls: list[RecordedCall]) -> list[RecordedCall]:
    """The calls that change GARM's state, login excepted (it only issues a token)."""
    return [c for c in calls if c.method in WRITE_METHODS and c.path != LOGIN_PATH]


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes; with Nagle on, the client's delayed ACK would hold
    # the body back for tens of milliseconds on every call.
    disable_nagle_algorithm = True
    server: ThreadingHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: the record is the log."""

    def do_GET(self) -> None:
        self._relay()

    def do_POST(self) -> None:
        self._relay()

    def do_PUT(self) -> None:
        self._relay()

    def do_DELETE(self) -> None:
        self._relay()

    def do_PATCH(self) -> None:
        self._relay()

    def _relay(self) -> None:
        started = time.monotonic()
        proxy: RecordingProxy = self.server.proxy  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
        split = urlsplit(self.path)
        path = (
            split.path.removeprefix(API_PREFIX)
            if split.path.startswith(API_PREFIX)
            else split.path
        )
        fault = proxy.arrive(path)
        with proxy.around(fault):
            answered = self._answer(proxy, path, body, headers)
        if answered is None:
            # GARM is down: the client must see a dropped connection, as without us.
            self.close_connection = True
            return
        status, answer_headers, answer = answered
        if (
            self.command == "PUT"
            and path == CONTROLLER_PATH
            and status == 200
            and proxy.on_urls_set is not None
        ):
            proxy.on_urls_set(self.headers.get("Authorization", ""))
        if path == LOGIN_PATH and status == 200:
            _register_token(answer)
        if fault == CUT:
            status = CUT_STATUS
        call = RecordedCall(
            self.command,
            path,
            dict(parse_qsl(split.query)),
            _parse(body),
            status,
            _error_of(answer) if status >= 400 else "",
            started,
            time.monotonic(),
        )
        proxy.record(call)
        for observe in list(proxy.observers):
            observe(call)
        if fault == CUT:
            # GARM answered; the caller gets a closed connection instead.
            self.close_connection = True
            return
        self.send_response(status)
        for name, value in answer_headers:
            if name.lower() not in _HOP_HEADERS and name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def _answer(
        self, proxy: RecordingProxy, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, list[tuple[str, str]], bytes] | None:
        """GARM's answer, or the refusal injected in its place; None when GARM is down."""
        injected = proxy.take_refusal(self.command, path)
        if injected is not None:
            answer = json.dumps({"error": "Server error", "details": "injected by the test proxy"})
            return injected, [("Content-Type", "application/json")], answer.encode()
        try:
            return proxy.forward(self.command, self.path, body, headers)
        except OSError:
            return None


def _register_token(answer: bytes) -> None:
    """Add the session token of GARM's login answer to the secret registry."""
    data = _parse(answer)
    if isinstance(data, dict) and isinstance(data.get("token"), str):
        register_secret(data["token"])


def _error_of(answer: bytes) -> str:
    """GARM's ``error`` field of a refusal, empty when it has none."""
    data = _parse(answer)
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, str) else ""


def _parse(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")
