"""The GARM client against the emulator: every call once, each error class, wire quirks."""

from __future__ import annotations

import base64
import http.server
import socket
import threading
import types

import httpx
import pytest

from garm import (
    CreateCredentialParams,
    CreateScaleSetParams,
    CreateTemplateParams,
    GarmApiError,
    GarmClient,
    GarmConflictError,
    GarmConnectionError,
    GarmNotFoundError,
    GarmUnauthorizedError,
    GithubApp,
    UpdateCredentialParams,
    UpdateScaleSetParams,
)
from garm import client as garm_client
from tests.garm_emulator import (
    DEFAULT_ADMIN_PASSWORD,
    SYSTEM_TEMPLATE_BODY,
    SYSTEM_TEMPLATE_ID,
    SYSTEM_TEMPLATE_NAME,
    GarmEmulator,
)
from tests.rsa_keys import pkcs1_pem
from tests.sleep_clock import SleepClock

ADMIN = "admin"
PRIVATE_KEY = pkcs1_pem()  # real GARM refuses an App key that does not parse
PROVIDER = "garm-configurator-0"
# GARM's system templates as it lists them (measured on v0.2.1-afda4e76).
GARM_SYSTEM_TEMPLATES = [
    (1, "github_windows"),
    (2, "github_linux"),
    (3, "gitea_linux"),
    (4, "gitea_windows"),
]


def _dead_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _app(key: str = PRIVATE_KEY, app_id: int = 11) -> GithubApp:
    encoded = base64.b64encode(key.encode()).decode()
    return GithubApp(app_id=app_id, installation_id=22, private_key_bytes=encoded)


def _credential(client: GarmClient, name: str = "app-11-22") -> int:
    created = client.create_credential(
        CreateCredentialParams(
            name=name, description="Managed by garm", endpoint="github.com", app=_app()
        )
    )
    assert created.id is not None
    return created.id


def _scaleset_params(name: str, **overrides: object) -> CreateScaleSetParams:
    values: dict[str, object] = {
        "name": name,
        "provider_name": PROVIDER,
        "image": "noble",
        "flavor": "small",
        "os_type": "linux",
        "os_arch": "amd64",
        "max_runners": 3,
        "min_idle_runners": 1,
        "enabled": True,
        "labels": ["x64", "noble"],
    }
    values.update(overrides)
    return CreateScaleSetParams.model_validate(values)


# --- bootstrap ---------------------------------------------------------------------------------


def test_bootstrap_first_run_then_initialised(emulator: GarmEmulator) -> None:
    with GarmClient(emulator.url) as garm:
        assert garm.is_initialized() is False
        garm.first_run(ADMIN, DEFAULT_ADMIN_PASSWORD, "admin@garm.local", "GARM Admin")
        # URLs are not set yet: GARM answers 409 urls_required, which means initialised.
        assert garm.is_initialized() is True
    first_run = [r for r in emulator.requests if r.path == "/first-run"]
    assert [r.body for r in first_run] == [
        {
            "username": ADMIN,
            "password": DEFAULT_ADMIN_PASSWORD,
            "email": "admin@garm.local",
            "full_name": "GARM Admin",
        }
    ]
    assert emulator.state.user is not None


def test_is_initialized_reads_urls_required_as_initialised(emulator: GarmEmulator) -> None:
    emulator.bootstrap(urls=False)
    with GarmClient(emulator.url) as garm:
        assert garm.is_initialized() is True
        # The answer that led there really was the URLs gate, not a 401 or a 200.
        raw = httpx.get(emulator.url + "/controller-info")
    assert raw.status_code == 409
    assert raw.json()["error"] == "urls_required"


def test_is_initialized_reads_401_as_initialised(ready_emulator: GarmEmulator) -> None:
    with GarmClient(ready_emulator.url) as garm:
        garm.login(ADMIN, DEFAULT_ADMIN_PASSWORD)
        # /controller-info is always asked without a token: GARM answers 401.
        assert garm.is_initialized() is True
    last = ready_emulator.requests[-1]
    assert last.path == "/controller-info"
    assert httpx.get(ready_emulator.url + "/controller-info").status_code == 401


def test_is_initialized_other_conflict_and_server_error_raise(emulator: GarmEmulator) -> None:
    emulator.fail_next("GET", "/controller-info", 409, error="something_else")
    emulator.fail_next("GET", "/controller-info", 500)
    with GarmClient(emulator.url) as garm:
        with pytest.raises(GarmConflictError) as conflict:
            garm.is_initialized()
        assert conflict.value.error == "something_else"
        with pytest.raises(GarmApiError) as server:
            garm.is_initialized()
    assert server.value.status == 500
    assert type(server.value) is GarmApiError


def test_login_returns_and_uses_token(ready_emulator: GarmEmulator) -> None:
    with GarmClient(ready_emulator.url) as garm:
        token = garm.login(ADMIN, DEFAULT_ADMIN_PASSWORD)
        assert token in ready_emulator.state.tokens
        garm.list_credentials()
    login = [r for r in ready_emulator.requests if r.path == "/auth/login"]
    assert login[0].body == {"username": ADMIN, "password": DEFAULT_ADMIN_PASSWORD}


def test_login_with_wrong_password_is_unauthorized(ready_emulator: GarmEmulator) -> None:
    with GarmClient(ready_emulator.url) as garm, pytest.raises(GarmUnauthorizedError) as err:
        garm.login(ADMIN, "not-the-password")
    assert err.value.status == 401
    assert "not-the-password" not in str(err.value)


def test_get_and_update_controller(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    before = client.get_controller()
    assert before.metadata_url == f"{ready_emulator.base_url}/api/v1/metadata"
    after = client.update_controller(
        metadata_url="http://garm.example:8080/api/v1/metadata",
        callback_url="http://garm.example:8080/api/v1/callbacks",
        webhook_url="http://garm.example:8080/webhooks",
        agent_url="http://garm.example:8080/agent",
    )
    assert after.agent_url == "http://garm.example:8080/agent"
    assert client.get_controller().callback_url == "http://garm.example:8080/api/v1/callbacks"
    assert ready_emulator.controller()["webhook_url"] == "http://garm.example:8080/webhooks"


def test_controller_is_reachable_before_urls_are_set(emulator: GarmEmulator) -> None:
    emulator.bootstrap(urls=False)
    with GarmClient(emulator.url) as garm:
        garm.login(ADMIN, DEFAULT_ADMIN_PASSWORD)
        assert garm.get_controller().metadata_url is None
        with pytest.raises(GarmConflictError) as gated:
            garm.list_credentials()
    assert gated.value.error == "urls_required"


# --- wait_for_ready ----------------------------------------------------------------------------


def test_wait_for_ready_times_out_on_dead_port(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = SleepClock()
    monkeypatch.setattr(garm_client, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    url = f"http://127.0.0.1:{_dead_port()}/api/v1"
    with GarmClient(url) as garm, pytest.raises(GarmConnectionError):
        garm.wait_for_ready(timeout=30, interval=1, sleep=clock.sleep)
    assert clock.sleeps == [1] * 30


def test_wait_for_ready_answers_at_once_when_garm_is_up(emulator: GarmEmulator) -> None:
    clock = SleepClock()
    with GarmClient(emulator.url) as garm:
        assert garm.wait_for_ready(sleep=clock.sleep) is False
    assert clock.sleeps == []


def test_wait_for_ready_retries_dropped_connections(emulator: GarmEmulator) -> None:
    clock = SleepClock()
    emulator.drop_next("GET", "/controller-info", count=2)
    with GarmClient(emulator.url) as garm:
        assert garm.wait_for_ready(sleep=clock.sleep) is False
    assert clock.sleeps == [1.0, 1.0]


def test_wait_for_ready_does_not_retry_api_errors(emulator: GarmEmulator) -> None:
    clock = SleepClock()
    emulator.fail_next("GET", "/controller-info", 500)
    with GarmClient(emulator.url) as garm, pytest.raises(GarmApiError) as err:
        garm.wait_for_ready(sleep=clock.sleep)
    assert err.value.status == 500
    assert clock.sleeps == []


# --- providers and credentials -----------------------------------------------------------------


def test_list_providers(client: GarmClient) -> None:
    assert [p.name for p in client.list_providers()] == [PROVIDER]


def test_credentials_lifecycle(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    cred_id = _credential(client)
    stored = ready_emulator.credential_secrets("app-11-22")
    assert stored is not None
    assert stored["app"]["private_key_bytes"] == PRIVATE_KEY.encode()
    listed = client.list_credentials()
    assert [(c.id, c.name, c.description, c.auth_type) for c in listed] == [
        (cred_id, "app-11-22", "Managed by garm", "app")
    ]

    updated = client.update_credential(
        cred_id, UpdateCredentialParams(description="something else")
    )
    assert updated.description == "something else"
    put = ready_emulator.writes()[-1]
    assert (put.method, put.path, put.body) == (
        "PUT",
        f"/github/credentials/{cred_id}",
        {"description": "something else"},
    )

    client.delete_credential(cred_id)
    assert client.list_credentials() == []


def test_create_credential_body_is_garm_shape(ready_emulator: GarmEmulator) -> None:
    with GarmClient(ready_emulator.url) as garm:
        garm.login(ADMIN, DEFAULT_ADMIN_PASSWORD)
        _credential(garm)
    post = ready_emulator.writes()[-1]
    assert post.body == {
        "name": "app-11-22",
        "description": "Managed by garm",
        "endpoint": "github.com",
        "auth_type": "app",
        "app": {
            "app_id": 11,
            "installation_id": 22,
            "private_key_bytes": base64.b64encode(PRIVATE_KEY.encode()).decode(),
        },
    }


def test_private_key_is_hidden_from_repr() -> None:
    assert "MIIE" not in repr(_app())


# --- organisations and repositories ------------------------------------------------------------


def test_organizations_lifecycle(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    cred_id = _credential(client)
    _credential(client, "app-other")
    org = client.create_organization("Org-A", "app-11-22", "s" * 64)
    ready_emulator.add_organization("org-b", "app-11-22")
    assert org.id
    assert (org.name, org.credentials_name, org.credentials_id) == ("Org-A", "app-11-22", cred_id)
    assert sorted(o.name or "" for o in client.list_organizations()) == ["Org-A", "org-b"]

    # GARM's filter matches the stored case only (tests/conformance/test_entity_name_case.py).
    assert client.list_organizations(name="org-a") == []
    filtered = client.list_organizations(name="Org-A")
    assert [o.id for o in filtered] == [org.id]
    assert ready_emulator.requests[-1].query == {"name": "Org-A"}

    moved = client.update_organization(org.id, "app-other")
    assert moved.credentials_name == "app-other"
    client.delete_organization(org.id)
    assert [o.name for o in client.list_organizations()] == ["org-b"]


def test_repositories_lifecycle(client: GarmClient) -> None:
    _credential(client)
    _credential(client, "app-other")
    repo = client.create_repository("owner", "repo", "app-11-22", "s" * 64)
    assert repo.id
    assert (repo.owner, repo.name, repo.credentials_name) == ("owner", "repo", "app-11-22")
    assert [(r.owner, r.name) for r in client.list_repositories()] == [("owner", "repo")]
    assert client.update_repository(repo.id, "app-other").credentials_name == "app-other"
    client.delete_repository(repo.id)
    assert client.list_repositories() == []


# --- scale sets and instances ------------------------------------------------------------------


def test_scalesets_lifecycle(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    _credential(client)
    org = client.create_organization("org-a", "app-11-22", "s" * 64)
    repo = client.create_repository("owner", "repo", "app-11-22", "s" * 64)
    assert org.id and repo.id
    on_org = client.create_org_scaleset(org.id, _scaleset_params("org-set-1a2b3c4d"))
    on_repo = client.create_repo_scaleset(
        repo.id, _scaleset_params("repo-set-1a2b3c4d", extra_specs={"k": "v"})
    )
    assert on_org.id and on_repo.id
    assert on_org.enabled is True
    assert sorted(t.name or "" for t in on_org.tags or []) == ["noble", "x64"]
    assert on_repo.extra_specs == {"k": "v"}
    assert [s.name for s in client.list_scalesets()] == ["org-set-1a2b3c4d", "repo-set-1a2b3c4d"]

    # An explicit 0 is sent, not dropped; GARM looks template 0 up like any id and refuses it.
    with pytest.raises(GarmNotFoundError):
        client.update_scaleset(on_org.id, UpdateScaleSetParams(template_id=0))
    assert ready_emulator.writes()[-1].body == {"template_id": 0}
    changed = client.update_scaleset(
        on_org.id, UpdateScaleSetParams(enabled=False, min_idle_runners=0)
    )
    assert ready_emulator.writes()[-1].body == {"enabled": False, "min_idle_runners": 0}
    assert changed.enabled is None
    assert changed.min_idle_runners is None
    client.delete_scaleset(on_org.id)
    assert [s.name for s in client.list_scalesets()] == ["repo-set-1a2b3c4d"]


def test_disabled_scaleset_reads_enabled_none(
    ready_emulator: GarmEmulator, client: GarmClient
) -> None:
    """GARM omits ``enabled`` for a disabled scale set and ``min_idle_runners`` when it is 0."""
    ready_emulator.add_scaleset("off-1a2b3c4d", enabled=False, min_idle_runners=0)
    token = client.login(ADMIN, DEFAULT_ADMIN_PASSWORD)
    raw = httpx.get(
        ready_emulator.url + "/scalesets", headers={"Authorization": f"Bearer {token}"}
    ).json()
    assert len(raw) == 1
    assert "enabled" not in raw[0]
    assert "min_idle_runners" not in raw[0]

    (scaleset,) = client.list_scalesets()
    assert scaleset.name == "off-1a2b3c4d"
    assert scaleset.enabled is None
    assert not scaleset.enabled
    assert scaleset.min_idle_runners is None
    assert (scaleset.min_idle_runners or 0) == 0
    assert scaleset.max_runners == 2


def test_instances_list_and_delete(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    scaleset = ready_emulator.add_scaleset("set-1a2b3c4d", enabled=False)
    runner = ready_emulator.add_instance("set-1a2b3c4d", status="running", runner_status="idle")
    (listed,) = client.list_scaleset_instances(scaleset["id"])
    assert (listed.name, listed.status, listed.runner_status) == (
        runner["name"],
        "running",
        "idle",
    )
    assert listed.job is None
    assert listed.provider_fault is None

    client.delete_instance(runner["name"], force_remove=True, bypass_github_unauthorized=True)
    last = ready_emulator.requests[-1]
    assert (last.method, last.path) == ("DELETE", f"/instances/{runner['name']}")
    assert last.query == {"forceRemove": "true", "bypassGHUnauthorized": "true"}
    assert client.list_scaleset_instances(scaleset["id"])[0].status == "pending_force_delete"


def test_instance_job_is_read(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    scaleset = ready_emulator.add_scaleset("set-1a2b3c4d")
    runner = ready_emulator.add_instance("set-1a2b3c4d")
    ready_emulator.mark_busy(runner["name"])
    (listed,) = client.list_scaleset_instances(scaleset["id"])
    assert listed.runner_status == "active"
    assert listed.job is not None
    assert listed.job.status == "in_progress"
    assert listed.job.updated_at is not None


# --- templates ---------------------------------------------------------------------------------


def test_templates_lifecycle(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    listed = client.list_templates()
    assert [(t.id, t.name) for t in listed] == GARM_SYSTEM_TEMPLATES
    assert (SYSTEM_TEMPLATE_ID, SYSTEM_TEMPLATE_NAME) in GARM_SYSTEM_TEMPLATES
    assert not any(t.data for t in listed)  # list answers leave the body out
    system = client.get_template(SYSTEM_TEMPLATE_ID)
    assert base64.b64decode(system.data or "") == SYSTEM_TEMPLATE_BODY

    created = client.create_template(
        CreateTemplateParams(
            name="mine", description="test", data=base64.b64encode(b"#!/bin/sh\n").decode()
        )
    )
    assert created.id
    assert (created.os_type, created.forge_type) == ("linux", "github")
    client.update_template(created.id, base64.b64encode(b"#!/bin/sh\necho hi\n").decode())
    assert ready_emulator.template_body("mine") == b"#!/bin/sh\necho hi\n"
    assert client.get_template(created.id).id == created.id
    client.delete_template(created.id)
    assert [(t.id, t.name) for t in client.list_templates()] == GARM_SYSTEM_TEMPLATES


# --- error classes -----------------------------------------------------------------------------


def test_dead_port_is_connection_error() -> None:
    url = f"http://127.0.0.1:{_dead_port()}/api/v1"
    with GarmClient(url) as garm, pytest.raises(GarmConnectionError) as err:
        garm.list_credentials()
    assert err.value.status is None


def test_dropped_connection_is_connection_error(
    ready_emulator: GarmEmulator, client: GarmClient
) -> None:
    ready_emulator.drop_next("GET", "/github/credentials")
    with pytest.raises(GarmConnectionError):
        client.list_credentials()
    assert client.list_credentials() == []


def test_missing_token_is_unauthorized(ready_emulator: GarmEmulator) -> None:
    with GarmClient(ready_emulator.url) as garm, pytest.raises(GarmUnauthorizedError) as err:
        garm.list_scalesets()
    assert err.value.status == 401
    # GARM's auth middleware says "Authentication failed" (handlers say "Not Authorized").
    assert err.value.error == "Authentication failed"


def test_unknown_id_is_not_found(client: GarmClient) -> None:
    with pytest.raises(GarmNotFoundError) as err:
        client.get_template(999)
    assert err.value.status == 404
    assert err.value.details == "failed to get template: failed to get template: not found"


def test_deleting_unknown_credentials_is_done(client: GarmClient) -> None:
    # GARM answers 204 to deleting credentials that do not exist.
    client.delete_credential(999)


def test_conflict_carries_garm_error_and_details(client: GarmClient) -> None:
    _credential(client)
    with pytest.raises(GarmConflictError) as err:
        _credential(client)
    assert err.value.status == 409
    assert err.value.error == "Conflict"
    assert err.value.details == "github credentials already exists"
    assert "already exists" in str(err.value)
    # The error never carries the request body.
    assert "MIIE" not in str(err.value)
    assert base64.b64encode(PRIVATE_KEY.encode()).decode() not in str(err.value)


def test_injected_failure_maps_status(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    ready_emulator.fail_next("GET", "/templates", 404, details="gone")
    with pytest.raises(GarmNotFoundError) as err:
        client.list_templates()
    assert (err.value.error, err.value.details) == ("Not Found", "gone")


class _BrokenGarm(http.server.BaseHTTPRequestHandler):
    """Answers 200 with bodies GARM never sends: not JSON, or the wrong field types."""

    def do_GET(self) -> None:
        body = b"<html>proxy error</html>" if "controller" in self.path else b'[{"id": "x"}]'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        return


def test_answers_garm_cannot_send_are_garm_errors() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _BrokenGarm)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with GarmClient(f"http://127.0.0.1:{server.server_address[1]}/api/v1") as broken:
            with pytest.raises(GarmApiError, match="not JSON"):
                broken.get_controller()
            with pytest.raises(GarmApiError, match="unexpected shape"):
                broken.list_scalesets()
    finally:
        server.shutdown()
        server.server_close()
