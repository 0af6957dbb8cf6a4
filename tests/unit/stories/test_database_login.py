"""GARM does not answer on PostgreSQL: the charm tells a refused database login apart.

A small server on 127.0.0.1 plays PostgreSQL's side of the login as a server without TLS
does (SSL refused, then an ``ErrorResponse`` with the SQLSTATE given, or ``AuthenticationOk``
and ``ReadyForQuery``), so the charm's probe runs for real; GARM is an address where nothing
listens, as when it exited at start. The charm runs through ``ops.testing`` with the charm
driver. The same status on real GARM and a real PostgreSQL server is in
``tests/conformance/test_postgresql.py``.
"""

from __future__ import annotations

import dataclasses
import socket
import struct
import threading
from collections.abc import Mapping
from pathlib import Path

import ops
import pytest
from ops import testing

from charm_pass import garm_sync
from relations import database, postgres_login
from tests.charm_driver import CharmDriver, base_state
from tests.log_secrets import register_secret
from tests.real_garm.ports import reserved_port
from workload.pebble_layer import DatabaseConfig

PASSWORD = "Pg-unit-password-7c1e"  # test value
register_secret(PASSWORD)
SSL_REQUEST = struct.pack("!ii", 8, 80877103)


class FakePostgres:
    """Answers each login with ``error_code`` (an ErrorResponse), or accepts it when empty."""

    def __init__(self, error_code: str) -> None:
        self.error_code = error_code
        self.logins = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self._stopped = threading.Event()
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> FakePostgres:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)
        self._listener.close()

    def _serve(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        # GARM's sslmode=prefer asks for TLS first; this server, like one without TLS, refuses.
        if conn.recv(8) != SSL_REQUEST:
            return
        conn.sendall(b"N")
        (length,) = struct.unpack("!i", conn.recv(4))
        conn.recv(length - 4)  # StartupMessage
        self.logins += 1
        if not self.error_code:
            # AuthenticationOk, then ReadyForQuery (idle): the session has started.
            conn.sendall(b"R" + struct.pack("!ii", 8, 0) + b"Z" + struct.pack("!i", 5) + b"I")
            conn.recv(5)  # Terminate
            return
        fields = b"SFATAL\0C" + self.error_code.encode() + b"\0Mrefused\0\0"
        conn.sendall(b"E" + struct.pack("!i", len(fields) + 4) + fields)


class NoGarm:
    """A GARM backend that never answers (it exited at start): a port held, nobody listening."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/api/v1"

    def replan(self, environment: Mapping[str, str]) -> None:
        """Pebble restarts GARM, which exits again."""


def postgresql_relation(port: int) -> testing.Relation:
    return testing.Relation(
        "postgresql",
        remote_app_name="postgresql-k8s",
        id=91,
        remote_app_data={
            "endpoints": f"127.0.0.1:{port}",
            "database": "garm",
            "username": "garm",
            "password": PASSWORD,
        },
    )


def run_pebble_ready(tmp_path: Path, relations: set[testing.Relation]) -> testing.State:
    with reserved_port() as garm_port:
        state = base_state(tmp_path, relations=relations)
        driver = CharmDriver(NoGarm(garm_port), state, ready_timeout=0.2)
        driver.run(driver.ctx.on.install())
        return driver.run(driver.ctx.on.pebble_ready(driver.state.get_container("garm")))


@pytest.mark.parametrize("code", ["28P01", "28000"])
def test_refused_login_blocks_with_the_database_status(tmp_path: Path, code: str):
    with FakePostgres(code) as server:
        state = run_pebble_ready(tmp_path, {postgresql_relation(server.port)})
    assert state.unit_status == ops.BlockedStatus(database.DATABASE_LOGIN_REFUSED)
    assert server.logins >= 1


def test_accepted_login_keeps_waiting_for_garm(tmp_path: Path):
    with FakePostgres("") as server:
        state = run_pebble_ready(tmp_path, {postgresql_relation(server.port)})
    assert state.unit_status == ops.WaitingStatus(garm_sync.WAITING_READY)


def test_unreachable_database_keeps_waiting_for_garm(tmp_path: Path):
    with reserved_port() as nobody:
        state = run_pebble_ready(tmp_path, {postgresql_relation(nobody)})
    assert state.unit_status == ops.WaitingStatus(garm_sync.WAITING_READY)


def test_sqlite_never_probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def fail(_config: DatabaseConfig, timeout: float = 0) -> postgres_login.LoginProbe:
        raise AssertionError("probed on SQLite")

    monkeypatch.setattr(database, "probe_login", fail)
    state = run_pebble_ready(tmp_path, set())
    assert state.unit_status == ops.WaitingStatus(garm_sync.WAITING_READY)


def test_other_server_errors_are_not_read_as_a_refused_login():
    with FakePostgres("53300") as server:  # too_many_connections
        config = DatabaseConfig(
            backend="postgresql", host="127.0.0.1", port=server.port, password=PASSWORD
        )
        assert postgres_login.probe_login(config) is postgres_login.LoginProbe.UNKNOWN


def test_probe_tells_accepted_refused_and_unreachable_apart():
    config = DatabaseConfig(backend="postgresql", host="127.0.0.1", password=PASSWORD)
    with FakePostgres("") as server:
        accepted = postgres_login.probe_login(dataclasses.replace(config, port=server.port))
    with FakePostgres("28P01") as server:  # invalid_password
        refused = postgres_login.probe_login(dataclasses.replace(config, port=server.port))
    with reserved_port() as nobody:
        unreachable = postgres_login.probe_login(dataclasses.replace(config, port=nobody))
    assert accepted is postgres_login.LoginProbe.ACCEPTED
    assert refused is postgres_login.LoginProbe.REFUSED
    assert unreachable is postgres_login.LoginProbe.UNREACHABLE


def test_a_server_that_never_answers_is_not_a_refused_login():
    with socket.create_server(("127.0.0.1", 0)) as listener:  # accepts through its backlog only
        config = DatabaseConfig(
            backend="postgresql",
            host="127.0.0.1",
            port=listener.getsockname()[1],
            password=PASSWORD,
        )
        assert postgres_login.probe_login(config, timeout=0.3) is postgres_login.LoginProbe.UNKNOWN
