"""The HTTP server and the :class:`GitHubStandin` facade tests use.

Owns the socket (127.0.0.1, a free port), request dispatch to the route tables, the record of
every answered request, the error bodies, and the test-facing control API and views.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from . import actions_routes, rest_routes, wire
from .model import (
    AppJwtCheck,
    JobView,
    RecordedRequest,
    RunnerView,
    ScaleSetView,
    StandinError,
)
from .routing import REST, Call, Reply, Route, Urls
from .state import StandinSnapshot, StandinState

ROUTES: tuple[Route, ...] = (*rest_routes.routes.table, *actions_routes.routes.table)
# A held request is answered after this long at most, so no server thread waits forever.
HOLD_LIMIT = 120.0


def match(method: str, path: str) -> tuple[Route | None, dict[str, str]]:
    """Return the route answering ``method`` on ``path`` and its path parameters."""
    for route in ROUTES:
        found = route.pattern.match(path)
        if found and route.method == method:
            return route, found.groupdict()
    return None, {}


class Hold:
    """Requests to one route wait until :meth:`release` (see :meth:`GitHubStandin.hold`)."""

    def __init__(self, route: str) -> None:
        self.route = route
        self.arrived = threading.Event()
        self.released = threading.Event()

    def wait_released(self) -> None:
        """Note a request's arrival and wait until the hold is released (handler threads)."""
        self.arrived.set()
        self.released.wait(HOLD_LIMIT)

    def release(self) -> None:
        """Let the held requests through, and every later one at once."""
        self.released.set()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, standin: GitHubStandin) -> None:
        self.standin = standin
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignore a client that went away (GARM cancels a long poll by closing it)."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def close_connections(self) -> None:
        with self.connections_lock:
            for conn in self.connections:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.server.connections_lock:
                self.server.connections.discard(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: tokens travel in URLs and bodies; the request record is the log."""

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def _serve(self) -> None:
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        standin = self.server.standin
        route, params = match(self.command, split.path)
        call = Call(
            method=self.command,
            path=split.path,
            query=parse_qs(split.query, keep_blank_values=True),
            headers=self.headers,
            body=body,
            state=standin.state,
            urls=standin.urls,
            params=params,
        )
        reply = standin.dispatch(route, call)
        name = route.name if route else None
        standin.record(
            RecordedRequest(
                self.command, split.path, split.query, reply.status, name, call.app_jwt
            )
        )
        self._send(reply)

    def _send(self, reply: Reply) -> None:
        data = b"" if reply.body is None else json.dumps(reply.body).encode()
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if data:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)


class GitHubStandin:
    """GitHub and the GitHub Actions service, in memory, over HTTP on 127.0.0.1.

    Args:
        poll_timeout: how long a message queue long poll waits for a message (seconds).
        token_lifetime: lifetime of every token handed out (seconds); GARM refreshes tokens
            that expire within minutes, so a short lifetime exercises its refresh paths.
        session_idle_timeout: a message session not polled for this long counts as abandoned,
            so a new session for its scale set is no longer refused.
        latency: every answer waits this long first (seconds), as GitHub's own answers take
            100-300 ms; 0 answers at once. :attr:`latency` may be changed while serving.
    """

    def __init__(
        self,
        *,
        poll_timeout: float = 1.5,
        token_lifetime: float = 3600.0,
        session_idle_timeout: float = 30.0,
        latency: float = 0.0,
    ) -> None:
        self.urls = Urls("http://127.0.0.1:0")
        self.state = StandinState(
            actions_url=lambda tenant_id: self.urls.actions(tenant_id),
            poll_timeout=poll_timeout,
            token_lifetime=token_lifetime,
            session_idle_timeout=session_idle_timeout,
        )
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._requests: list[RecordedRequest] = []
        self._errors: list[str] = []
        self._holds: dict[str, Hold] = {}
        self._lock = threading.Lock()
        self.latency = latency

    # ----- life cycle

    def start(self) -> GitHubStandin:
        """Listen on a free port of 127.0.0.1 and serve in a background thread."""
        if self._server is not None:
            raise RuntimeError("the GitHub stand-in is already started")
        self._server = _Server(self)
        self.urls = Urls(f"http://127.0.0.1:{self._server.server_address[1]}")
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="github-standin",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: end long polls, close connections, release the port."""
        server, self._server = self._server, None
        if server is None:
            return
        with self._lock:
            holds, self._holds = list(self._holds.values()), {}
        for hold in holds:
            hold.release()
        self.state.close()
        server.shutdown()
        server.close_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> GitHubStandin:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ----- where it is

    def serve_as(self, base_url: str) -> None:
        """Answer as the server at ``base_url``, a TLS front relaying to this stand-in.

        The URLs it hands out from then on (the Actions service, message queues, downloads)
        point there, as a GitHub Enterprise Server's point at itself.
        """
        self.urls = Urls(base_url.rstrip("/"))

    @property
    def base_url(self) -> str:
        """The web base URL, e.g. ``http://127.0.0.1:PORT`` (entity URLs hang off it)."""
        return self.urls.base

    @property
    def api_url(self) -> str:
        """The REST API base, ``{base_url}/api/v3/`` (GitHub Enterprise Server layout)."""
        return self.urls.api

    @property
    def upload_url(self) -> str:
        """The upload API base, ``{base_url}/api/uploads/``."""
        return self.urls.upload

    def endpoint_params(self) -> dict[str, str]:
        """Body for GARM's ``PUT /api/v1/github/endpoints/{name}`` pointing at this stand-in."""
        return {
            "api_base_url": self.api_url,
            "upload_base_url": self.upload_url,
            "base_url": self.base_url,
        }

    # ----- dispatch and the record

    def dispatch(self, route: Route | None, call: Call) -> Reply:
        """Run a route's handler and turn refusals and crashes into JSON answers."""
        if self.latency > 0:
            # Each request waits in its own handler thread, so concurrent callers overlap.
            time.sleep(self.latency)
        if route is None:
            return Reply(404, wire.rest_error(f"Not Found: {call.method} {call.path}"))
        with self._lock:
            hold = self._holds.get(route.name)
        if hold is not None:
            hold.wait_released()
        try:
            reply = route.handler(call)
        except StandinError as err:
            body = (
                wire.rest_error(err.message)
                if route.flavor == REST
                else wire.error(err.type_name, err.message)
            )
            reply = Reply(err.status, body)
        except Exception:  # a stand-in bug: answer 500 and keep it for the test to see
            with self._lock:
                self._errors.append(traceback.format_exc())
            reply = Reply(500, wire.rest_error("github-standin: handler crashed"))
        if route.flavor == REST:
            reply.headers = {**rest_routes.rate_headers(), **reply.headers}
        return reply

    def record(self, entry: RecordedRequest) -> None:
        """Append one answered request to the record."""
        with self._lock:
            self._requests.append(entry)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every answered request so far, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def unknown_requests(self) -> list[RecordedRequest]:
        """Requests no route matched (answered 404)."""
        return [r for r in self.requests if r.route is None]

    @property
    def handler_errors(self) -> list[str]:
        """Tracebacks of handler crashes (answered 500); empty unless the stand-in has a bug."""
        with self._lock:
            return list(self._errors)

    def clear_requests(self) -> None:
        """Forget the recorded requests."""
        with self._lock:
            self._requests.clear()

    # ----- control API for tests

    def hold(self, route: str) -> Hold:
        """Hold every request to the route named ``route`` until the hold is released.

        GARM's calls to GitHub then take as long as the test needs, which widens a race of
        GARM's own (its ``arrived`` event says a call is waiting). Route names are the handler
        names (``list_scale_sets``, ``create_session``, ...). Stopping the stand-in releases it.
        """
        if route not in {r.name for r in ROUTES}:
            raise ValueError(f"no route named {route!r}")
        held = Hold(route)
        with self._lock:
            self._holds[route] = held
        return held

    def snapshot(self) -> StandinSnapshot:
        """Copy the world (scale sets, sessions, jobs, runners, tokens), App keys aside."""
        return self.state.snapshot()

    def restore(self, snapshot: StandinSnapshot) -> None:
        """Put the world back as :meth:`snapshot` copied it and forget the record."""
        self.state.restore(snapshot)
        self.clear_requests()

    def queue_job(
        self, scaleset_name: str, labels: list[str] | None = None, repository: str = "repo"
    ) -> int:
        """Queue a job for the scale set named ``scaleset_name``; return its id.

        Posts JobAvailable to the scale set's queue. When GARM acquires the job the stand-in
        posts JobAssigned, which raises ``totalAssignedJobs`` (GARM's desired runner count).
        ``labels`` default to the scale set's name, as ``runs-on: <scale set>`` would give.
        """
        return self.state.queue_job(scaleset_name, labels, repository)

    def assign_job_heard(self, scaleset_name: str) -> int:
        """An assigned job whose messages GARM has handled already (none is posted); its id.

        What GitHub holds when GARM's worker lost the job's demand (``conformance/stall.py``).
        """
        return self.state.assign_job_heard(scaleset_name)

    def start_job(self, job_id: int, runner_name: str) -> None:
        """Start an acquired job on a runner GARM created (JobStarted; runner online, busy)."""
        self.state.start_job(job_id, runner_name)

    def complete_job(self, job_id: int, result: str = "succeeded") -> None:
        """Complete a job (JobCompleted); its runner, ephemeral, is unregistered.

        GitHub removes an ephemeral runner once its one job is done, so the runner leaves
        :meth:`runners`; GARM's later delete of it gets the 404 it tolerates.
        """
        self.state.complete_job(job_id, result)

    def set_runner_status(self, runner_name: str, status: str) -> None:
        """Mark a runner ``online`` or ``offline``, as a booting or vanished runner would."""
        self.state.set_runner_status(runner_name, status)

    def add_runner_group(self, name: str) -> int:
        """Create a runner group besides ``Default`` (id 1); return its id."""
        return self.state.add_runner_group(name)

    def add_scale_set(self, name: str, *, entity: str, runner_group: str = "Default") -> int:
        """Register a scale set as someone other than GARM would; return GitHub's id for it."""
        return self.state.add_foreign_scale_set(entity, name, runner_group)

    def delete_scale_set_by_name(self, name: str) -> None:
        """Delete the scale sets of ``name`` as a person would in GitHub's settings."""
        self.state.delete_scale_set_named(name)

    def add_app_key(self, app_id: int | str, pem: str) -> str:
        """Give GitHub App ``app_id`` a key; return its fingerprint (``SHA256:<base64>``).

        The App exists from its first key. ``pem`` is the App's private key (PKCS#1 or PKCS#8;
        only its public half is kept) or its public key. An App takes up to 25 keys and any of
        them signs; an App JWT whose ``iss`` names no App with a key is refused, as GitHub
        refuses an unknown App.
        """
        return self.state.apps.add_key(app_id, pem)

    def revoke_app_key(self, app_id: int | str, key: str) -> None:
        """Delete one key of an App, named by fingerprint or PEM: JWTs it signs are refused.

        Refused (ConflictError) for the App's only key, as GitHub refuses it: add the new key
        first.
        """
        self.state.apps.revoke_key(app_id, key)

    def app_keys(self, app_id: int | str) -> list[str]:
        """Fingerprints of an App's keys, oldest first."""
        return self.state.apps.keys(app_id)

    def app_jwt_checks(self) -> list[AppJwtCheck]:
        """Every App JWT judged so far (installation token requests), oldest first.

        Each names the key that verified it (``key``) and GitHub's refusal, if any.
        """
        return [r.app_jwt for r in self.requests if r.app_jwt is not None]

    def scalesets(self) -> list[ScaleSetView]:
        """Snapshot of the scale sets."""
        return self.state.scale_set_views()

    def runners(self) -> list[RunnerView]:
        """Snapshot of the runners (agents)."""
        return self.state.runner_views()

    def jobs(self) -> list[JobView]:
        """Snapshot of the jobs."""
        return self.state.job_views()

    def wait_until(
        self, predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.05
    ) -> bool:
        """Poll ``predicate`` until it holds or ``timeout`` passes; return whether it held."""
        deadline = time.monotonic() + timeout
        while True:
            if predicate():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(interval)
