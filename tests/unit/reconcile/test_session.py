"""The admin session: GARM reached, its admin created where asked, the login and its refusal."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

import pytest

from reconcile.session import (
    AdminRefusedError,
    GarmNotAnsweringError,
    GarmNotInitialisedError,
    admin_session,
)
from tests.garm_emulator import GarmEmulator
from tests.security_log import security_events
from tests.unit.conftest import ADMIN_PASSWORD, ADMIN_USERNAME


@dataclass(frozen=True)
class Admin:
    """The admin as the charm holds it (``secrets_store.AdminCredentials``' shape)."""

    username: str = ADMIN_USERNAME
    password: str = field(default=ADMIN_PASSWORD, repr=False)
    email: str = "admin@garm.local"
    full_name: str = "GARM Admin"
    source: str = "garm-admin-credentials"


def _paths(garm: GarmEmulator) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in garm.requests]


def test_a_fresh_garm_gets_its_admin_then_the_login(emulator: GarmEmulator):
    with admin_session(emulator.url, Admin(), ready_timeout=2, create_admin=True):
        pass
    assert _paths(emulator) == [
        ("GET", "/controller-info"),
        ("POST", "/first-run"),
        ("POST", "/auth/login"),
    ]


def test_without_create_admin_a_fresh_garm_is_not_initialised(emulator: GarmEmulator):
    with (
        pytest.raises(GarmNotInitialisedError),
        admin_session(emulator.url, Admin(), ready_timeout=2),
    ):
        pass
    assert emulator.writes() == []


def test_without_a_ready_wait_the_session_only_logs_in(ready_emulator: GarmEmulator):
    ready_emulator.clear_requests()
    with admin_session(ready_emulator.url, Admin()):
        pass
    assert _paths(ready_emulator) == [("POST", "/auth/login")]


def test_a_refused_login_is_a_security_event(
    ready_emulator: GarmEmulator, caplog: pytest.LogCaptureFixture
):
    wrong = Admin(password="Not-The-Admin-Password-1")  # test value
    with pytest.raises(AdminRefusedError), admin_session(ready_emulator.url, wrong):
        pass
    (event,) = security_events(caplog, "authn_login_fail")
    assert "garm-admin-credentials" in event["description"]


def test_a_garm_that_never_answers_is_named_so():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens on it once closed
    url = f"http://127.0.0.1:{port}/api/v1"
    with pytest.raises(GarmNotAnsweringError), admin_session(url, Admin(), ready_timeout=0.2):
        pass
