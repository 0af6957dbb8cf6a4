"""The emulator: GARM's HTTP surface on 127.0.0.1 plus a Python control API for tests."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from container_scripts.garm_entrypoint import joined_providers_json

from . import routes
from .state import (
    DEFAULT_RUNNER_GROUP,
    INVALID_REQUEST,
    ApiError,
    Credential,
    Entity,
    GarmState,
    InstanceRow,
    ScaleSetRow,
    dumps,
)
from .wire import DecodeError, decode_request, error_body

API_PREFIX = "/api/v1"
# A test fixture value; real GARM accepts it (zxcvbn score 4), unlike "Adm1n-pass-word!!".
DEFAULT_ADMIN_PASSWORD = "Emulated-GARM-admin-7qX!"
METRICS_BODY = (
    b"# HELP garm_health Emulated GARM health.\n# TYPE garm_health gauge\ngarm_health 1\n"
)
WRITE_METHODS = frozenset({"POST", "PUT", "DELETE"})


@dataclass(frozen=True)
class RecordedRequest:
    """One call the emulator received.

    ``path`` is relative to ``/api/v1`` (``/scalesets/3``); ``/metrics`` is recorded as is.
    ``body`` is the parsed JSON body, the raw text when it is not JSON, or ``None`` when empty.
    """

    method: str
    path: str
    query: dict[str, str]
    body: Any


@dataclass
class _Fault:
    method: str
    pattern: re.Pattern[str]
    remaining: int
    status: int = 0
    error: str | None = None
    details: str = ""
    drop: bool = False
    garble: bool = False

    def matches(self, method: str, path: str) -> bool:
        return self.method in ("*", method) and self.pattern.fullmatch(path) is not None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    emulator: GarmEmulator


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # One buffered write per answer and no Nagle delay: keeps each call well under a millisecond.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True
    server: _Server  # pyright: ignore[reportIncompatibleVariableOverride]

    def setup(self) -> None:
        super().setup()
        self.server.emulator.track_connection(self.connection, opened=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.emulator.track_connection(self.connection, opened=False)

    def log_message(self, format: str, *args: Any) -> None:
        # Silence the per-request stderr lines; the request log records calls instead.
        return

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self, method: str) -> None:
        raw = self._read_body()
        parts = urlsplit(self.path)
        # Go's router matches the decoded path (``%7B`` is ``{``).
        path = unquote(parts.path).rstrip("/") or "/"
        if path.startswith(API_PREFIX + "/"):
            path = path.removeprefix(API_PREFIX)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        outcome = self.server.emulator.handle(
            method,
            path,
            query,
            raw,
            self.headers.get("Authorization"),
            {name.lower(): value for name, value in self.headers.items()},
        )
        if outcome is None:
            # An injected drop: hang up without answering.
            self.close_connection = True
            return
        status, content_type, payload = outcome
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _seed_key() -> bytes:
    from tests.rsa_keys import pkcs1_pem

    return pkcs1_pem().encode("ascii")


def _parse_body(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return raw.decode("utf-8", errors="replace")


class GarmEmulator:
    """An in-process GARM speaking GARM's wire format over real HTTP.

    Args:
        providers: the external providers GARM loaded at (simulated) process start.
    """

    def __init__(self, providers: list[str] | tuple[str, ...] = ()) -> None:
        self.state = GarmState(list(providers))
        self._requests: list[RecordedRequest] = []
        self._faults: list[_Fault] = []
        self._log_lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> GarmEmulator:
        """Listen on an ephemeral port of 127.0.0.1 and serve from a daemon thread."""
        if self._server is not None:
            return self
        server = _Server(("127.0.0.1", 0), _Handler)
        server.emulator = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), name="garm-emulator", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and hang up every open connection (clients then see GARM down)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self._log_lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> GarmEmulator:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def track_connection(self, conn: socket.socket, opened: bool) -> None:
        """Remember open client connections so :meth:`stop` can close them (server use)."""
        with self._log_lock:
            if opened:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    @property
    def port(self) -> int:
        """The port the emulator listens on."""
        if self._server is None:
            raise RuntimeError("emulator is not started")
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (no API prefix)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The API base URL, ``http://127.0.0.1:<port>/api/v1``."""
        return self.base_url + API_PREFIX

    def restart(self, providers: list[str] | tuple[str, ...]) -> None:
        """Simulate a GARM process restart with a new provider set.

        The database (every row, the admin user and the controller URLs) survives, and so do
        issued tokens: GARM's JWTs are signed with a secret that outlives the process.
        """
        with self.state.lock:
            self.state.providers = list(providers)
            # Each scale-set worker starts again from the database's row.
            for row in self.state.scalesets.values():
                row.worker_demand = row.desired_runner_count
            self.state.workers.restarted(self.state.worker_rows())

    def replan(self, environment: Mapping[str, str]) -> None:
        """Restart as GARM does when Pebble replans with ``environment``: new providers only."""
        raw = joined_providers_json(environment) or "[]"
        self.restart(providers=[p["unit_name"] for p in json.loads(raw)])

    @property
    def providers(self) -> list[str]:
        """The providers loaded by the current (simulated) process."""
        with self.state.lock:
            return list(self.state.providers)

    # ---- HTTP entry point -----------------------------------------------------------------

    def handle(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        raw: bytes,
        authorization: str | None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, str, bytes] | None:
        """Answer one request: ``(status, content type, body)``, or ``None`` to hang up."""
        body = _parse_body(raw)
        with self._log_lock:
            self._requests.append(RecordedRequest(method, path, dict(query), body))
        fault = self._take_fault(method, path)
        if fault is not None:
            if fault.drop:
                return None
            if fault.garble:
                return 200, "text/html", b"<html>not GARM</html>"
            return self._error(ApiError(fault.status, fault.details, fault.error))
        if path == "/metrics" and method == "GET":
            with self.state.lock:
                counted = self.state.workers.exposition().encode()
            return 200, "text/plain; version=0.0.4", METRICS_BODY + counted
        try:
            return self._dispatch(method, path, query, raw, body, authorization, headers or {})
        except ApiError as exc:
            return self._error(exc)

    def _dispatch(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        raw: bytes,
        body: Any,
        authorization: str | None,
        headers: Mapping[str, str],
    ) -> tuple[int, str, bytes]:
        found = routes.find_route(method, path)
        if found is None:
            raise ApiError(404, "Resource not found")
        route, params = found
        with self.state.lock:
            routes.check_gate(self.state, route.gate, authorization)
            decoded: dict[str, Any] = {}
            if route.raw_body:
                decoded = {"content": raw, "headers": dict(headers)}
            elif route.request_struct is not None:
                # GARM answers any body its JSON decoder refuses with ErrBadRequest.
                if not isinstance(body, dict) or not raw:
                    raise ApiError(400, INVALID_REQUEST)
                try:
                    decoded = decode_request(route.request_struct, body)
                except DecodeError:
                    raise ApiError(400, INVALID_REQUEST) from None
            status, payload = route.handler(self.state, params, query, decoded)
        content = b"" if payload is None else dumps(payload)
        return status, "application/json", content

    @staticmethod
    def _error(exc: ApiError) -> tuple[int, str, bytes]:
        return exc.status, "application/json", dumps(error_body(exc.error, exc.details))

    def _take_fault(self, method: str, path: str) -> _Fault | None:
        with self._log_lock:
            for fault in self._faults:
                if fault.matches(method, path):
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    # ---- fault injection ------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        path_regex: str,
        status: int,
        count: int = 1,
        error: str | None = None,
        details: str = "injected failure",
    ) -> None:
        r"""Answer the next ``count`` matching calls with ``status`` and GARM's error envelope.

        ``path_regex`` must match the whole path relative to ``/api/v1`` (``/scalesets/\d+``);
        ``method`` may be ``"*"``. ``error`` defaults to GARM's name for the status. Injected
        failures come before every middleware.
        """
        self._add_fault(
            _Fault(method.upper(), re.compile(path_regex), count, status, error, details)
        )

    def drop_next(self, method: str, path_regex: str, count: int = 1) -> None:
        """Close the connection without answering the next ``count`` matching calls."""
        self._add_fault(_Fault(method.upper(), re.compile(path_regex), count, drop=True))

    def garble_next(self, method: str, path_regex: str, count: int = 1) -> None:
        """Answer the next ``count`` matching calls with 200 and a body that is not JSON.

        What a proxy or a wrong service in front of GARM would answer; GARM itself never does.
        """
        self._add_fault(_Fault(method.upper(), re.compile(path_regex), count, garble=True))

    def clear_faults(self) -> None:
        """Forget every pending injected failure."""
        with self._log_lock:
            self._faults.clear()

    def _add_fault(self, fault: _Fault) -> None:
        if fault.remaining < 1:
            raise ValueError("count must be at least 1")
        with self._log_lock:
            self._faults.append(fault)

    # ---- request log ----------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every call received so far, oldest first (a copy)."""
        with self._log_lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        """Empty the request log."""
        with self._log_lock:
            self._requests.clear()

    def writes(self) -> list[RecordedRequest]:
        """The POST/PUT/DELETE calls, except ``/auth/login``."""
        return [r for r in self.requests if r.method in WRITE_METHODS and r.path != "/auth/login"]

    # ---- clock ----------------------------------------------------------------------------

    @property
    def now(self) -> datetime:
        """The simulated clock (aware UTC); starts at the real time of construction."""
        with self.state.lock:
            return self.state.now

    def advance(self, delta: timedelta = timedelta(seconds=30)) -> None:
        """Move the clock forward by ``delta``, then run one tick of GARM's workers."""
        with self.state.lock:
            self.state.now += delta
            self.state.tick()

    def tick(self) -> None:
        """Run one tick of GARM's workers without moving the clock."""
        with self.state.lock:
            self.state.tick()

    # ---- bootstrap ------------------------------------------------------------------------

    def bootstrap(
        self,
        username: str = "admin",
        password: str = DEFAULT_ADMIN_PASSWORD,
        urls: bool = True,
        email: str = "admin@garm.local",
        full_name: str = "GARM Admin",
        base_url: str | None = None,
    ) -> str:
        """Do first-run (and, with ``urls``, set the controller URLs) directly in state.

        URLs are derived from ``base_url`` (default: the emulator's own address) the way the
        charm derives them. Returns a valid bearer token for the admin.
        """
        with self.state.lock:
            if not self.state.initialised:
                self.state.first_run(
                    {
                        "username": username,
                        "password": password,
                        "email": email,
                        "full_name": full_name,
                    }
                )
            if urls:
                base = (base_url or self.base_url).rstrip("/")
                ctl = self.state.controller
                ctl.metadata_url = f"{base}/api/v1/metadata"
                ctl.callback_url = f"{base}/api/v1/callbacks"
                ctl.webhook_url = f"{base}/webhooks"
                ctl.agent_url = f"{base}/agent"
            return self.state.login({"username": username, "password": password})

    # ---- read-only views (wire JSON, as GARM serialises it) -------------------------------

    def controller(self) -> dict[str, Any]:
        """The ControllerInfo answer."""
        with self.state.lock:
            return self.state.controller_wire()

    def endpoints(self) -> list[dict[str, Any]]:
        """The GitHub endpoints list answer."""
        with self.state.lock:
            return self.state.list_endpoints()

    def credentials(self) -> list[dict[str, Any]]:
        """The credentials list answer."""
        with self.state.lock:
            return [self.state.credential_wire(c) for c in self.state.credentials.values()]

    def credential_secrets(self, name: str) -> dict[str, Any] | None:
        """What GARM stored for a credential's auth (app/pat), never sent over the wire."""
        with self.state.lock:
            cred = self.state.credential_by_name(name)
            return None if cred is None else {"app": dict(cred.app), "pat": dict(cred.pat)}

    def organizations(self) -> list[dict[str, Any]]:
        """The organizations list answer."""
        with self.state.lock:
            return self.state.list_entities("organization", {})

    def repositories(self) -> list[dict[str, Any]]:
        """The repositories list answer."""
        with self.state.lock:
            return self.state.list_entities("repository", {})

    def scalesets(self) -> list[dict[str, Any]]:
        """The scale sets list answer."""
        with self.state.lock:
            rows = sorted(self.state.scalesets.values(), key=lambda r: r.id)
            return [self.state.scaleset_wire(r) for r in rows]

    def scaleset_by_name(self, name: str) -> dict[str, Any] | None:
        """The named scale set as GARM serialises it, or ``None``."""
        with self.state.lock:
            row = self.state.scaleset_by_name(name)
            return None if row is None else self.state.scaleset_wire(row)

    def tools(self) -> list[dict[str, Any]]:
        """The garm-agent tools GARM stores, as its admin listing shows them (newest first)."""
        with self.state.lock:
            page = self.state.tools.page({}, self.state.controller.metadata_url)
            return page["results"] or []

    def instances(self, scaleset_name: str | None = None) -> list[dict[str, Any]]:
        """Instances of one scale set (or of all, when ``None``) as GARM serialises them."""
        with self.state.lock:
            rows = list(self.state.instances.values())
            if scaleset_name is not None:
                row = self.state.scaleset_by_name(scaleset_name)
                rows = [i for i in rows if row is not None and i.scaleset_id == row.id]
            return [self.state.instance_wire(i) for i in rows]

    def instance(self, name: str) -> dict[str, Any] | None:
        """One instance as GARM serialises it, or ``None``."""
        with self.state.lock:
            inst = self.state.instances.get(name)
            return None if inst is None else self.state.instance_wire(inst)

    def templates(self) -> list[dict[str, Any]]:
        """Every template with its body (as ``GET /templates/{id}`` answers)."""
        with self.state.lock:
            rows = sorted(self.state.templates.values(), key=lambda t: t.id)
            return [self.state.template_wire(t) for t in rows]

    def template_by_name(self, name: str) -> dict[str, Any] | None:
        """One template with its body, or ``None``."""
        return next((t for t in self.templates() if t["name"] == name), None)

    def template_body(self, name: str) -> bytes | None:
        """The decoded body of the named template, or ``None``."""
        with self.state.lock:
            tpl = next((t for t in self.state.templates.values() if t.name == name), None)
            return None if tpl is None else tpl.data

    # ---- seeding helpers (bypass HTTP and validation) -------------------------------------

    def add_credential(
        self, name: str, description: str = "Managed by garm", app_id: int = 1
    ) -> dict[str, Any]:
        """Store a GitHub App credential on the github.com endpoint."""
        with self.state.lock:
            cred_id = self.state.next_id("credential")
            cred = Credential(
                id=cred_id,
                name=name,
                description=description,
                auth_type="app",
                app={
                    "app_id": app_id,
                    "installation_id": 1,
                    # GARM holds only keys that parse (tests.rsa_keys imports cryptography).
                    "private_key_bytes": _seed_key(),
                },
                pat={},
                created_at=self.state.now,
                updated_at=self.state.now,
            )
            self.state.credentials[cred_id] = cred
            return self.state.credential_wire(cred)

    def _seed_entity(self, kind: str, owner: str, name: str, credentials_name: str) -> Entity:
        cred = self.state.credential_by_name(credentials_name)
        if cred is None:
            self.add_credential(credentials_name)
            cred = self.state.credential_by_name(credentials_name)
        assert cred is not None
        key = f"{owner}/{name}" if kind == "repository" else name
        for entity in self.state.entities.values():
            if entity.kind == kind and entity.full_name == key:
                return entity
        entity = Entity(
            id=str(uuid.uuid4()),
            kind=kind,
            name=name,
            owner=owner,
            credentials_id=cred.id,
            webhook_secret="seeded",
            created_at=self.state.now,
            updated_at=self.state.now,
        )
        self.state.entities[entity.id] = entity
        return entity

    def add_organization(self, name: str, credentials_name: str = "seed-creds") -> dict[str, Any]:
        """Store an organization (creating the named credential when missing)."""
        with self.state.lock:
            return self.state.entity_wire(
                self._seed_entity("organization", "", name, credentials_name)
            )

    def add_repository(
        self, owner: str, name: str, credentials_name: str = "seed-creds"
    ) -> dict[str, Any]:
        """Store a repository (creating the named credential when missing)."""
        with self.state.lock:
            return self.state.entity_wire(
                self._seed_entity("repository", owner, name, credentials_name)
            )

    def add_scaleset(
        self,
        name: str,
        *,
        org: str | None = None,
        repo: str | None = None,
        provider_name: str | None = None,
        image: str = "ubuntu-24.04",
        flavor: str = "small",
        max_runners: int = 2,
        min_idle_runners: int = 0,
        enabled: bool = True,
        labels: list[str] | tuple[str, ...] = (),
        template_id: int | None = None,
        extra_specs: dict[str, Any] | None = None,
        runner_group: str = "",
        updated_at: datetime | None = None,
    ) -> dict[str, Any]:
        """Store a scale set without GARM's checks (any provider, even ``""`` for legacy rows).

        The entity is the organization ``org``, the repository ``repo`` (``owner/name``) or, when
        neither is given, the organization ``seed-org``; it is created when missing. Without
        ``template_id`` the scale set gets the system template GARM would pick (``github_linux``).
        """
        with self.state.lock:
            if repo is not None:
                owner, _, repo_name = repo.partition("/")
                entity = self._seed_entity("repository", owner, repo_name, "seed-creds")
            else:
                entity = self._seed_entity("organization", "", org or "seed-org", "seed-creds")
            if provider_name is None:
                provider_name = self.state.providers[0] if self.state.providers else ""
            row = self.state.insert_scaleset(
                name=name,
                entity_id=entity.id,
                provider_name=provider_name,
                image=image,
                flavor=flavor,
                max_runners=max_runners,
                min_idle_runners=min_idle_runners,
                enabled=enabled,
                labels=list(labels),
                template_id=self.state.default_template_id("linux")
                if template_id is None
                else template_id,
                extra_specs=None if extra_specs is None else json.dumps(extra_specs),
                # GARM never stores an empty group: it creates scale sets in "Default".
                runner_group=runner_group or DEFAULT_RUNNER_GROUP,
            )
            if updated_at is not None:
                row.updated_at = updated_at
            return self.state.scaleset_wire(row)

    def add_instance(
        self,
        scaleset_name: str,
        status: str = "running",
        runner_status: str = "idle",
        updated_at: datetime | None = None,
        provider_fault: bytes | None = None,
    ) -> dict[str, Any]:
        """Store a runner of the named scale set in the given state (and provider fault)."""
        with self.state.lock:
            inst = self.state.insert_instance(self._row(scaleset_name), status, runner_status)
            if updated_at is not None:
                inst.updated_at = updated_at
            inst.provider_fault = provider_fault
            return self.state.instance_wire(inst)

    def hold_worker_starts(self) -> None:
        """GARM busy starting other workers: no scale set's worker starts until released.

        What real GARM does for minutes after its start with hundreds of scale sets in one
        organisation (``workers.py``): its ``/metrics`` counts the starts, its API shows none.
        """
        with self.state.lock:
            self.state.workers.hold()

    def release_worker_starts(self, count: int | None = None) -> None:
        """Start ``count`` held workers, oldest first (all, and stop holding, when None)."""
        with self.state.lock:
            self.state.workers.release(count)

    def forget_worker(self, scaleset_name: str) -> None:
        """GARM without a worker for this scale set (lost at its start: ``workers.py``)."""
        with self.state.lock:
            self.state.workers.forget(self._row(scaleset_name).id)

    def stall_demand(self, scaleset_name: str, count: int, recorded_at: datetime) -> None:
        """GARM's stale desired count: the database records ``count``, the worker never hears.

        What the race in GARM's scale-set worker leaves (``tests/conformance/stall.py``): the
        row holds the demand and the time it was recorded, the worker keeps scaling to its old
        copy until an update that changes the row, or a restart, makes it read the row again.
        """
        with self.state.lock:
            row = self._row(scaleset_name)
            row.desired_runner_count, row.updated_at = count, recorded_at

    def add_template(self, name: str, data: bytes, description: str = "") -> dict[str, Any]:
        """Store a user template."""
        with self.state.lock:
            if self.state.user is None:
                raise RuntimeError("bootstrap the emulator before seeding templates")
            return self.state.create_template(
                {"name": name, "description": description, "os_type": "linux", "data": data}
            )

    # ---- runner control -------------------------------------------------------------------

    def _row(self, scaleset_name: str) -> ScaleSetRow:
        row = self.state.scaleset_by_name(scaleset_name)
        if row is None:
            raise KeyError(f"no scale set named {scaleset_name!r}")
        return row

    def _inst(self, name: str) -> InstanceRow:
        try:
            return self.state.instances[name]
        except KeyError:
            raise KeyError(f"no instance named {name!r}") from None

    def mark_busy(self, instance_name: str) -> None:
        """A job starts on the runner: runner_status ``active``, job ``in_progress``."""
        with self.state.lock:
            inst = self._inst(instance_name)
            inst.runner_status = "active"
            self.state.set_job(inst, "in_progress")

    def finish_job(self, instance_name: str) -> None:
        """The runner's job ends; the ephemeral runner goes ``pending_delete``.

        On a disabled scale set GARM does not hear it at once: it stops a disabled scale set's
        message listener, and only its runner consolidation (every few minutes) notices, so the
        runner stays busy until :data:`~.state.CONSOLIDATION_INTERVAL` of simulated time passed.
        """
        with self.state.lock:
            inst = self._inst(instance_name)
            row = self.state.scalesets.get(inst.scaleset_id)
            if row is not None and not row.enabled:
                inst.unheard_job_end = self.state.now
                return
            self.state.end_job(inst)

    def refuse_provider(self, command: str, stderr: str | None, provider: str = "") -> None:
        """Make the provider fail ``command`` with ``stderr`` (exit 1); None lets it succeed.

        ``command`` is ``CreateInstance`` (the runner ends in ``error`` with GARM's provider
        fault, then is deleted and replaced) or ``DeleteInstance`` (a plain delete stays
        ``pending_delete`` with the fault; a forced one goes through). ``provider`` defaults to
        every loaded provider.
        """
        with self.state.lock:
            for name in [provider] if provider else self.state.providers:
                if stderr is None:
                    self.state.provider_refusals.pop((name, command), None)
                else:
                    self.state.provider_refusals[(name, command)] = stderr

    def set_github_unauthorized(self, instance_name: str, unauthorized: bool = True) -> None:
        """Make GitHub answer 401 when GARM deregisters this runner (until bypassed)."""
        with self.state.lock:
            self._inst(instance_name).github_unauthorized = unauthorized
