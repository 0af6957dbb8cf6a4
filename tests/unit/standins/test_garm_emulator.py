"""Fidelity tests for the GARM emulator: wire format, GARM's refusals and the runner lifecycle."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from records.secrets_store import generate_admin_password
from tests.garm_emulator import (
    SYSTEM_TEMPLATE_BODY,
    SYSTEM_TEMPLATE_ID,
    GarmEmulator,
    RecordedRequest,
    to_wire,
)
from tests.garm_emulator.password import is_too_weak
from tests.garm_emulator.wire import go_time
from tests.rsa_keys import pkcs1_pem, pkcs8_pem
from tests.unit.conftest import ADMIN_PASSWORD

PROVIDER = "garm-configurator-0"
PRIVATE_KEY = pkcs1_pem()
URLS = {
    "metadata_url": "http://garm.example/api/v1/metadata",
    "callback_url": "http://garm.example/api/v1/callbacks",
    "webhook_url": "http://garm.example/webhooks",
    "agent_url": "http://garm.example/agent",
}
FIRST_RUN = {
    "username": "admin",
    "password": ADMIN_PASSWORD,
    "email": "admin@garm.local",
    "full_name": "GARM Admin",
}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def raw_client(emulator: GarmEmulator, token: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=emulator.url, headers=headers, timeout=10)


def login(emulator: GarmEmulator) -> str:
    with raw_client(emulator) as anon:
        answer = anon.post("/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD})
    assert answer.status_code == 200
    return answer.json()["token"]


@pytest.fixture
def api(ready_emulator: GarmEmulator) -> Iterator[httpx.Client]:
    """An httpx client holding a token obtained through POST /auth/login."""
    with raw_client(ready_emulator, login(ready_emulator)) as client:
        yield client


def credential_body(name: str) -> dict[str, Any]:
    """A GitHub App credential on github.com, as GARM takes it."""
    return {
        "name": name,
        "description": "Managed by garm",
        "endpoint": "github.com",
        "auth_type": "app",
        "app": {"app_id": 1, "installation_id": 2, "private_key_bytes": b64(PRIVATE_KEY.encode())},
    }


def create_credential(api: httpx.Client, name: str = "creds") -> dict[str, Any]:
    answer = api.post("/github/credentials", json=credential_body(name))
    assert answer.status_code == 200, answer.text
    return answer.json()


def create_org(api: httpx.Client, name: str = "my-org", creds: str = "creds") -> dict[str, Any]:
    answer = api.post(
        "/organizations", json={"name": name, "credentials_name": creds, "webhook_secret": "s3"}
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def scaleset_body(name: str = "my-scaleset-18515357", **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "provider_name": PROVIDER,
        "image": "noble",
        "flavor": "small",
        "os_type": "linux",
        "os_arch": "amd64",
        "max_runners": 3,
        "min_idle_runners": 1,
        "enabled": True,
        "labels": ["linux", "x64"],
    }
    body.update(overrides)
    return body


@pytest.fixture
def org(api: httpx.Client) -> dict[str, Any]:
    create_credential(api)
    return create_org(api)


def create_scaleset(api: httpx.Client, org: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    answer = api.post(f"/organizations/{org['id']}/scalesets", json=scaleset_body(**overrides))
    assert answer.status_code == 200, answer.text
    return answer.json()


def assert_error(answer: httpx.Response, status: int, error: str, details: str | None = None):
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"error", "details"}
    assert body["error"] == error
    if details is not None:
        assert body["details"] == details


# ---- the wire serialiser ------------------------------------------------------------------


def test_to_wire_follows_go_omitempty_rules():
    moment = datetime(2026, 1, 2, 3, 4, 5, 500000, tzinfo=UTC)
    wire = to_wire(
        "ScaleSet",
        {"id": 0, "name": "x", "enabled": False, "min_idle_runners": 0, "updated_at": moment},
    )
    # omitempty scalars at their zero value vanish; non-omitempty ones and structs stay.
    assert "enabled" not in wire
    assert "min_idle_runners" not in wire
    assert "id" not in wire
    assert wire["name"] == "x"
    assert wire["updated_at"] == "2026-01-02T03:04:05.5Z"
    assert wire["created_at"] == "0001-01-01T00:00:00Z"
    assert "status_messages" in wire
    assert "endpoint" in wire


def test_to_wire_keeps_false_behind_a_pointer_and_encodes_bytes():
    assert (
        to_wire("ForgeEndpoint", {"use_internal_tools_metadata": False}).get(
            "use_internal_tools_metadata"
        )
        is False
    )
    assert to_wire("Template", {"data": b"#!"})["data"] == b64(b"#!")
    assert to_wire("Template", {})["data"] is None  # []byte without omitempty: null
    assert go_time(datetime(2026, 1, 1, tzinfo=UTC)) == "2026-01-01T00:00:00Z"


# ---- middleware order and bootstrap refusals ----------------------------------------------


def test_before_first_run_everything_but_first_run_is_init_required(emulator: GarmEmulator):
    with raw_client(emulator) as anon:
        for method, path in [
            ("GET", "/controller-info"),
            ("GET", "/scalesets"),
            ("GET", "/providers"),
            ("GET", "/controller"),
            ("POST", "/auth/login"),
        ]:
            body = {"username": "admin", "password": "x"} if method == "POST" else None
            answer = anon.request(method, path, json=body)
            assert_error(answer, 409, "init_required", "Missing superuser")
        assert anon.post("/first-run", json=FIRST_RUN).status_code == 200


def test_second_first_run_is_a_conflict(emulator: GarmEmulator):
    with raw_client(emulator) as anon:
        first = anon.post("/first-run", json=FIRST_RUN)
        assert first.status_code == 200
        assert first.json()["username"] == "admin"
        assert "password" not in first.json()
        assert_error(anon.post("/first-run", json=FIRST_RUN), 409, "Conflict")


def test_urls_gate_comes_before_auth(emulator: GarmEmulator):
    emulator.bootstrap(password=ADMIN_PASSWORD, urls=False)
    token = login(emulator)
    with raw_client(emulator) as anon, raw_client(emulator, token) as admin:
        for path in ["/controller-info", "/github/credentials", "/scalesets", "/templates"]:
            assert_error(anon.get(path), 409, "urls_required")
        for path in ["/organizations", "/repositories", "/providers", "/scalesets/1/instances"]:
            assert_error(admin.get(path), 409, "urls_required")
        assert_error(admin.delete("/instances/x"), 409, "urls_required")
        # /controller is behind init and auth only.
        assert_error(anon.get("/controller"), 401, "Authentication failed", "")
        assert admin.get("/controller").status_code == 200
        assert admin.put("/controller", json={"metadata_url": URLS["metadata_url"]}).is_success
        assert_error(
            anon.get("/controller-info"),
            409,
            "urls_required",
            "Missing required URLs. Make sure you update the metadata and callback URLs",
        )
        # The agent URL is not part of the gate: metadata and callback open it.
        assert admin.put("/controller", json={"callback_url": URLS["callback_url"]}).is_success
        assert_error(anon.get("/controller-info"), 401, "Authentication failed", "")
        assert admin.get("/controller-info").status_code == 200


def test_auth_refuses_missing_and_bad_tokens(ready_emulator: GarmEmulator):
    with raw_client(ready_emulator) as anon, raw_client(ready_emulator, "forged") as forged:
        # The auth middleware's 401 differs from a handler's (measured on GARM).
        assert_error(anon.get("/scalesets"), 401, "Authentication failed", "")
        assert_error(forged.get("/scalesets"), 401, "Authentication failed", "")
        assert_error(forged.get("/controller"), 401, "Authentication failed", "")
        bad_login = anon.post("/auth/login", json={"username": "admin", "password": "wrong"})
        assert_error(bad_login, 401, "Not Authorized", "")
        nobody = anon.post("/auth/login", json={"username": "nobody", "password": "wrong"})
        assert_error(nobody, 401, "Not Authorized", "")
        empty = anon.post("/auth/login", json={"username": "", "password": ""})
        assert_error(empty, 401, "Not Authorized", "")
        assert_error(
            anon.post("/auth/login", content=b"not json"), 400, "Bad Request", "invalid request"
        )
        assert anon.get("/metrics").status_code == 200
        assert anon.get("/metrics").headers["content-type"].startswith("text/plain")


def test_put_controller_changes_only_sent_keys(emulator: GarmEmulator):
    emulator.bootstrap(password=ADMIN_PASSWORD, urls=False)
    with raw_client(emulator, login(emulator)) as admin:
        assert admin.put("/controller", json=URLS).status_code == 200
        answer = admin.put("/controller", json={"webhook_url": "http://other/webhooks"})
        assert answer.status_code == 200
        info = admin.get("/controller").json()
    assert info["webhook_url"] == "http://other/webhooks"
    assert info["metadata_url"] == URLS["metadata_url"]
    assert info["agent_url"] == URLS["agent_url"]
    assert emulator.controller() == info


def test_fresh_controller_info_omits_unset_urls(emulator: GarmEmulator):
    emulator.bootstrap(password=ADMIN_PASSWORD, urls=False)
    with raw_client(emulator, login(emulator)) as admin:
        info = admin.get("/controller").json()
        assert_error(admin.put("/controller", json={"metadata_url": ""}), 400, "Bad Request")
    assert "metadata_url" not in info
    assert "agent_url" not in info
    assert info["controller_id"]


def test_bootstrap_sets_the_urls_from_the_emulator_address(ready_emulator: GarmEmulator):
    info = ready_emulator.controller()
    assert info["metadata_url"] == f"{ready_emulator.base_url}/api/v1/metadata"
    assert info["callback_url"] == f"{ready_emulator.base_url}/api/v1/callbacks"
    assert info["webhook_url"] == f"{ready_emulator.base_url}/webhooks"
    assert info["agent_url"] == f"{ready_emulator.base_url}/agent"


# ---- scale set wire shape and updates -----------------------------------------------------


def test_created_scaleset_is_returned_in_garm_shape(api: httpx.Client, org: dict[str, Any]):
    created = create_scaleset(api, org)
    assert isinstance(created["id"], int)
    assert created["name"] == "my-scaleset-18515357"
    assert created["enabled"] is True
    assert created["provider_name"] == PROVIDER
    assert created["max_runners"] == 3
    assert created["min_idle_runners"] == 1
    # GARM returns tags in no fixed order (the emulator reverses them).
    assert sorted(t["name"] for t in created["tags"]) == ["linux", "x64"]
    assert all(set(t) == {"id", "name"} and t["id"] for t in created["tags"])
    assert created["org_id"] == org["id"]
    # GARM's defaults when none is sent.
    assert created["github-runner-group"] == "Default"
    assert created["runner_bootstrap_timeout"] == 20
    # Nothing sent, nothing returned: omitempty drops them.
    for key in ("extra_specs", "instances"):
        assert key not in created
    # No template sent: GARM stores its system template for the OS and forge.
    assert (created["template_id"], created["template_name"]) == (
        SYSTEM_TEMPLATE_ID,
        "github_linux",
    )
    assert api.get("/scalesets").json() == [created]


def test_disabled_scaleset_with_no_idle_runners_has_no_enabled_key(
    api: httpx.Client, org: dict[str, Any]
):
    created = create_scaleset(api, org, enabled=False, min_idle_runners=0)
    assert "enabled" not in created
    assert "min_idle_runners" not in created
    listed = api.get("/scalesets").json()[0]
    assert "enabled" not in listed
    assert "min_idle_runners" not in listed


def test_scaleset_update_uses_pointer_semantics(
    ready_emulator: GarmEmulator, api: httpx.Client, org: dict[str, Any]
):
    created = create_scaleset(api, org, extra_specs={"disable_updates": True})
    assert created["extra_specs"] == {"disable_updates": True}
    ready_emulator.advance(timedelta(minutes=5))
    template = api.post(
        "/templates",
        json={"name": "t", "description": "", "os_type": "linux", "data": b64(b"#!/bin/sh\n")},
    ).json()
    url = f"/scalesets/{created['id']}"
    answer = api.put(
        url, json={"enabled": False, "min_idle_runners": 0, "template_id": template["id"]}
    )
    assert answer.status_code == 200
    updated = answer.json()
    assert "enabled" not in updated
    assert "min_idle_runners" not in updated
    assert (updated["template_id"], updated["template_name"]) == (template["id"], "t")
    assert updated["image"] == "noble"  # absent keys change nothing
    assert updated["max_runners"] == 3
    assert updated["extra_specs"] == {"disable_updates": True}
    assert updated["updated_at"] == go_time(ready_emulator.now)
    assert updated["updated_at"] != created["updated_at"]

    cleared = api.put(
        url, json={"extra_specs": {}, "runner_group": "grp", "max_runners": 5}
    ).json()
    assert cleared.get("extra_specs") == {}  # GARM keeps and echoes the empty object
    assert cleared["template_id"] == template["id"]  # absent: unchanged
    assert cleared["github-runner-group"] == "grp"
    assert cleared["max_runners"] == 5
    # 0 is looked up as an id like any other: refused, and the template stays.
    assert_error(api.put(url, json={"template_id": 0}), 404, "Not Found")
    assert api.get(url).json()["template_id"] == template["id"]
    assert (
        api.put(url, json={"template_id": SYSTEM_TEMPLATE_ID}).json()["template_id"]
        == SYSTEM_TEMPLATE_ID
    )
    assert ready_emulator.scaleset_by_name(created["name"]) == api.get(url).json()


def test_scaleset_update_rejects_wrong_json_types_and_unknown_templates(
    api: httpx.Client, org: dict[str, Any]
):
    url = f"/scalesets/{create_scaleset(api, org)['id']}"
    assert_error(api.put(url, json={"enabled": "yes"}), 400, "Bad Request")
    assert_error(api.put(url, json={"max_runners": -1}), 400, "Bad Request")
    assert_error(api.put(url, json={"max_runners": 2.0}), 400, "Bad Request")
    assert_error(api.put(url, json={"template_id": 999}), 404, "Not Found")
    assert_error(api.put(url, json={"min_idle_runners": 9}), 400, "Bad Request")
    assert_error(api.put("/scalesets/999", json={"enabled": True}), 404, "Not Found")


# ---- refusals -----------------------------------------------------------------------------


def test_entity_create_refusals(api: httpx.Client):
    create_credential(api)
    no_secret = api.post(
        "/organizations", json={"name": "o", "credentials_name": "creds", "webhook_secret": ""}
    )
    assert_error(no_secret, 400, "Bad Request")
    repo = {"owner": "me", "name": "r", "credentials_name": "creds"}
    assert_error(api.post("/repositories", json=repo), 400, "Bad Request")
    unknown_creds = {"name": "o", "credentials_name": "nope", "webhook_secret": "s"}
    assert_error(api.post("/organizations", json=unknown_creds), 400, "Bad Request")
    create_org(api, "o")
    assert_error(
        api.post(
            "/organizations",
            json={"name": "o", "credentials_name": "creds", "webhook_secret": "s"},
        ),
        409,
        "Conflict",
    )
    repo["webhook_secret"] = "s"
    assert api.post("/repositories", json=repo).status_code == 200
    assert_error(api.post("/repositories", json=repo), 409, "Conflict")


def test_scaleset_create_refusals(api: httpx.Client, org: dict[str, Any]):
    url = f"/organizations/{org['id']}/scalesets"
    # GARM's database refuses these after the scale set was made on GitHub: 500, no details.
    assert_error(api.post(url, json=scaleset_body(max_runners=0)), 500, "Server error", "")
    assert_error(api.post(url, json=scaleset_body(min_idle_runners=4)), 500, "Server error", "")
    # GARM parses the organization id as a UUID: malformed is 400, unknown 404.
    assert_error(
        api.post("/organizations/no-such-org/scalesets", json=scaleset_body()),
        400,
        "Bad Request",
        "error getting entity: error failed to get entity from db: error fetching org: "
        "error parsing id: invalid request",
    )
    assert_error(
        api.post(f"/organizations/{uuid.UUID(int=9)}/scalesets", json=scaleset_body()),
        404,
        "Not Found",
    )
    assert_error(api.post(url, json=scaleset_body(template_id=77)), 404, "Not Found")
    assert api.post(url, json=scaleset_body()).status_code == 200
    # A taken name is GitHub's refusal, which GARM passes on as 400.
    assert_error(api.post(url, json=scaleset_body()), 400, "Bad Request")


def test_scaleset_delete_refusals(
    ready_emulator: GarmEmulator, api: httpx.Client, org: dict[str, Any]
):
    assert api.delete("/scalesets/4242").status_code == 200  # unknown id: success
    created = create_scaleset(api, org, min_idle_runners=1)
    url = f"/scalesets/{created['id']}"
    ready_emulator.advance()
    assert len(ready_emulator.instances(created["name"])) == 1
    # Runners are checked before the enabled flag.
    assert_error(api.delete(url), 400, "Bad Request", "scale set has runners")
    api.put(url, json={"enabled": False, "min_idle_runners": 0})
    assert_error(api.delete(url), 400, "Bad Request", "scale set has runners")
    ready_emulator.advance()  # pending_create boots, then GARM marks it for deletion
    ready_emulator.advance()
    assert ready_emulator.instances(created["name"]) == []
    api.put(url, json={"enabled": True})
    assert_error(api.delete(url), 400, "Bad Request", "scale set is enabled; disable it first")
    api.put(url, json={"enabled": False})
    assert api.delete(url).status_code == 200
    assert api.get("/scalesets").json() == []


def test_references_block_deletes(api: httpx.Client, org: dict[str, Any]):
    # GARM refuses these with 400, not 409 (measured).
    creds = api.get("/github/credentials").json()[0]
    assert_error(
        api.delete(f"/github/credentials/{creds['id']}"),
        400,
        "Bad Request",
        "failed to delete github credentials: error deleting github credentials: "
        "cannot delete credentials with organizations: invalid request",
    )
    created = create_scaleset(api, org, enabled=False)
    assert_error(
        api.delete(f"/organizations/{org['id']}"),
        400,
        "Bad Request",
        "organization has scale sets defined; delete them first",
    )
    assert api.delete(f"/scalesets/{created['id']}").status_code == 200
    assert api.delete(f"/organizations/{org['id']}").status_code == 200
    assert api.delete(f"/github/credentials/{creds['id']}").status_code == 204
    # Deleting credentials or a template that do not exist is done; an organisation is not.
    assert api.delete(f"/github/credentials/{creds['id']}").status_code == 204
    assert_error(
        api.delete(f"/organizations/{org['id']}"),
        404,
        "Not Found",
        "error fetching org: error fetching org: not found",
    )
    assert_error(
        api.delete("/repositories/nope"),
        400,
        "Bad Request",
        "error fetching repo: error fetching repo: error parsing id: invalid UUID length: 4",
    )
    assert_error(api.delete(f"/repositories/{uuid.UUID(int=9)}"), 404, "Not Found")
    assert api.delete("/templates/99").status_code == 200


def test_duplicate_credentials_and_templates_conflict(api: httpx.Client):
    first = create_credential(api, "dup")
    again = api.post("/github/credentials", json=credential_body("dup"))
    assert_error(again, 409, "Conflict")
    assert [c["id"] for c in api.get("/github/credentials").json()] == [first["id"]]
    assert_error(
        api.post(
            "/github/credentials",
            json={"name": "dup", "endpoint": "github.com", "auth_type": "app", "app": {}},
        ),
        400,
        "Bad Request",
    )
    tpl = {"name": "t", "description": "", "os_type": "linux", "data": b64(b"#!")}
    assert api.post("/templates", json=tpl).status_code == 200
    assert_error(api.post("/templates", json=tpl), 409, "Conflict")
    assert_error(api.post("/templates", json={**tpl, "name": "github_linux"}), 409, "Conflict")


# ---- entities and credentials -------------------------------------------------------------


def test_entities_carry_credentials_and_string_ids(api: httpx.Client, org: dict[str, Any]):
    creds = api.get("/github/credentials").json()[0]
    assert isinstance(creds["id"], int)
    assert isinstance(org["id"], str)
    assert org["credentials_name"] == "creds"
    assert org["credentials_id"] == creds["id"]
    create_org(api, "other-org")
    filtered = api.get("/organizations", params={"name": "my-org"}).json()
    assert [o["name"] for o in filtered] == ["my-org"]
    assert len(api.get("/organizations").json()) == 2
    repo = api.post(
        "/repositories",
        json={"owner": "me", "name": "r", "credentials_name": "creds", "webhook_secret": "x"},
    ).json()
    assert isinstance(repo["id"], str)
    assert (repo["owner"], repo["name"], repo["credentials_id"]) == ("me", "r", creds["id"])
    create_credential(api, "second")
    moved = api.put(f"/repositories/{repo['id']}", json={"credentials_name": "second"}).json()
    assert moved["credentials_name"] == "second"


def test_credentials_never_return_keys(ready_emulator: GarmEmulator, api: httpx.Client):
    created = create_credential(api)
    text = api.get("/github/credentials").text
    assert b64(PRIVATE_KEY.encode()) not in text
    assert "private_key" not in text
    assert created["auth-type"] == "app"
    rotated = pkcs1_pem(1).encode()
    # GARM validates the app it is sent on its own: the key alone is refused.
    key_only = {"description": "new", "app": {"private_key_bytes": b64(rotated)}}
    assert_error(
        api.put(f"/github/credentials/{created['id']}", json=key_only),
        400,
        "Bad Request",
        "failed to validate github credentials params: invalid app: missing app_id",
    )
    full = {"app_id": 1, "installation_id": 2, "private_key_bytes": b64(rotated)}
    updated = api.put(
        f"/github/credentials/{created['id']}", json={"description": "new", "app": full}
    ).json()
    assert updated["description"] == "new"
    assert b64(rotated) not in json.dumps(updated)
    secrets = ready_emulator.credential_secrets("creds")
    assert secrets is not None
    assert secrets["app"]["private_key_bytes"] == rotated


# ---- templates ----------------------------------------------------------------------------


def test_system_template_list_omits_bodies(api: httpx.Client):
    listed = api.get("/templates").json()
    # GARM's four system templates, in its ids (measured).
    assert [
        (t["id"], t["name"], t["os_type"], t["forge_type"], t["owner_id"]) for t in listed
    ] == [
        (1, "github_windows", "windows", "github", "system"),
        (SYSTEM_TEMPLATE_ID, "github_linux", "linux", "github", "system"),
        (3, "gitea_linux", "linux", "gitea", "system"),
        (4, "gitea_windows", "windows", "gitea", "system"),
    ]
    assert all(t["data"] is None for t in listed)
    full = api.get(f"/templates/{SYSTEM_TEMPLATE_ID}").json()
    body = base64.b64decode(full["data"])
    assert body == SYSTEM_TEMPLATE_BODY
    assert body.startswith(b"#!/bin/bash\n")
    assert (full["os_type"], full["forge_type"]) == ("linux", "github")


def test_template_update_replaces_body_in_place(ready_emulator: GarmEmulator, api: httpx.Client):
    created = api.post(
        "/templates",
        json={
            "name": "github_linux_charmed",
            "description": "d",
            "forge_type": "github",
            "os_type": "linux",
            "data": b64(b"#!/bin/bash\necho one\n"),
        },
    ).json()
    assert isinstance(created["id"], int)
    ready_emulator.advance()
    updated = api.put(
        f"/templates/{created['id']}", json={"data": b64(b"#!/bin/bash\necho two\n")}
    ).json()
    assert updated["id"] == created["id"]
    assert updated["updated_at"] == go_time(ready_emulator.now)
    fetched = api.get(f"/templates/{created['id']}").json()
    assert base64.b64decode(fetched["data"]) == b"#!/bin/bash\necho two\n"
    assert ready_emulator.template_body("github_linux_charmed") == b"#!/bin/bash\necho two\n"
    assert api.delete(f"/templates/{created['id']}").status_code == 200
    assert_error(api.get(f"/templates/{created['id']}"), 404, "Not Found")


# ---- providers and restarts ---------------------------------------------------------------


def test_providers_are_fixed_until_restart(ready_emulator: GarmEmulator, api: httpx.Client):
    assert api.get("/providers").json() == [
        {"name": PROVIDER, "type": "external", "description": f"external provider {PROVIDER}"}
    ]
    create_credential(api)
    org = create_org(api)
    ready_emulator.restart(providers=["cfg-b-0"])
    assert ready_emulator.providers == ["cfg-b-0"]
    assert [p["name"] for p in api.get("/providers").json()] == ["cfg-b-0"]
    # GARM does not check at create that the provider is loaded (measured).
    unloaded = api.post(
        f"/organizations/{org['id']}/scalesets", json=scaleset_body(name="unloaded")
    )
    assert unloaded.status_code == 200
    accepted = api.post(
        f"/organizations/{org['id']}/scalesets", json=scaleset_body(provider_name="cfg-b-0")
    )
    assert accepted.status_code == 200
    # The database and the issued token survived the restart.
    assert [o["name"] for o in api.get("/organizations").json()] == ["my-org"]


# ---- instances on the clock ---------------------------------------------------------------


def statuses(emulator: GarmEmulator, name: str) -> list[tuple[str, str]]:
    return sorted((i["status"], i.get("runner_status", "")) for i in emulator.instances(name))


def test_scaleset_scales_toward_min_idle_capped_by_max(ready_emulator: GarmEmulator):
    ready_emulator.add_scaleset("ss", min_idle_runners=2, max_runners=3)
    ready_emulator.advance()
    assert statuses(ready_emulator, "ss") == [("pending_create", "pending")] * 2
    ready_emulator.advance()
    assert statuses(ready_emulator, "ss") == [("running", "idle")] * 2
    names = sorted(i["name"] for i in ready_emulator.instances("ss"))
    assert names == ["ss-1", "ss-2"]
    ready_emulator.mark_busy("ss-1")
    ready_emulator.advance()  # one more to keep two idle, reaching max_runners
    ready_emulator.advance()
    assert len(ready_emulator.instances("ss")) == 3
    ready_emulator.mark_busy("ss-2")
    ready_emulator.advance()
    assert len(ready_emulator.instances("ss")) == 3  # capped


def test_busy_runner_job_shape_and_finish(ready_emulator: GarmEmulator):
    ready_emulator.add_scaleset("ss", min_idle_runners=0)
    runner = ready_emulator.add_instance("ss")["name"]
    assert "job" not in ready_emulator.instance(runner)  # type: ignore[operator]
    ready_emulator.mark_busy(runner)
    inst = ready_emulator.instance(runner)
    assert inst is not None
    assert inst["runner_status"] == "active"
    assert inst["job"]["status"] == "in_progress"
    assert inst["job"]["updated_at"] == go_time(ready_emulator.now)
    ready_emulator.advance()
    assert ready_emulator.instance(runner) is not None  # GARM leaves busy runners alone
    ready_emulator.finish_job(runner)
    assert ready_emulator.instance(runner)["status"] == "pending_delete"  # type: ignore[index]
    ready_emulator.advance()
    assert ready_emulator.instance(runner) is None


def test_disabled_scaleset_keeps_its_idle_target(ready_emulator: GarmEmulator):
    # Disabling stops new runners only; the idle target still holds the runners it covers.
    ready_emulator.add_scaleset("ss", min_idle_runners=1, max_runners=2, enabled=False)
    ready_emulator.add_instance("ss")
    ready_emulator.advance()
    ready_emulator.advance()
    assert statuses(ready_emulator, "ss") == [("running", "idle")]


def test_zeroed_counts_remove_idle_runners_over_two_ticks(ready_emulator: GarmEmulator):
    ready_emulator.add_scaleset("ss", min_idle_runners=0, max_runners=2, enabled=False)
    ready_emulator.add_instance("ss")
    ready_emulator.advance()
    assert statuses(ready_emulator, "ss") == [("pending_delete", "idle")]
    ready_emulator.advance()
    assert ready_emulator.instances("ss") == []


def test_runner_delete_refusals_and_force(ready_emulator: GarmEmulator, api: httpx.Client):
    ready_emulator.add_scaleset("ss", min_idle_runners=0)
    busy = ready_emulator.add_instance("ss")["name"]
    booting = ready_emulator.add_instance("ss", status="pending_create", runner_status="")
    ready_emulator.mark_busy(busy)
    assert_error(api.delete("/instances/nope"), 404, "Not Found")
    assert_error(api.delete(f"/instances/{booting['name']}"), 400, "Bad Request")
    assert_error(
        api.delete(f"/instances/{busy}", params={"forceRemove": "false"}), 400, "Bad Request"
    )
    forced = api.delete(f"/instances/{busy}", params={"forceRemove": "true"})
    assert forced.status_code == 200
    assert ready_emulator.instance(busy)["status"] == "pending_force_delete"  # type: ignore[index]


def test_github_unauthorized_needs_the_bypass(ready_emulator: GarmEmulator, api: httpx.Client):
    ready_emulator.add_scaleset("ss", min_idle_runners=0)
    runner = ready_emulator.add_instance("ss")["name"]
    ready_emulator.set_github_unauthorized(runner)
    url = f"/instances/{runner}"
    assert_error(api.delete(url, params={"forceRemove": "false"}), 401, "Not Authorized")
    bypassed = api.delete(url, params={"forceRemove": "false", "bypassGHUnauthorized": "true"})
    assert bypassed.status_code == 200
    assert ready_emulator.instance(runner)["status"] == "pending_delete"  # type: ignore[index]


def test_missing_provider_leaves_deletes_stuck(ready_emulator: GarmEmulator, api: httpx.Client):
    ss = ready_emulator.add_scaleset("ss", min_idle_runners=0, max_runners=3, enabled=False)
    first = ready_emulator.add_instance("ss")["name"]
    second = ready_emulator.add_instance("ss")["name"]
    ready_emulator.restart(providers=[])
    ready_emulator.advance()
    # GARM cannot act for a scale set whose provider is not loaded: idle runners stay.
    assert statuses(ready_emulator, "ss") == [("running", "idle")] * 2
    assert api.delete(f"/instances/{first}").status_code == 200
    ready_emulator.advance()
    stuck = ready_emulator.instance(first)
    assert stuck is not None
    assert stuck["status"] == "pending_delete"
    # GARM skips the runners of a provider it has not loaded: nothing records a fault.
    assert "provider_fault" not in stuck
    listed = api.get(f"/scalesets/{ss['id']}/instances").json()
    assert {i["name"] for i in listed} == {first, second}
    assert isinstance(listed[0]["id"], str)
    ready_emulator.restart(providers=[PROVIDER])
    ready_emulator.advance()
    assert ready_emulator.instance(first) is None
    assert ready_emulator.instance(second)["status"] == "pending_delete"  # type: ignore[index]


CREATE_REFUSAL = (
    "failed to run command: failed to create instance in provider: failed to resolve image "
    "info: failed to find image with name or id ubuntu-99.04 and visibility 'public'"
)


def test_a_refused_create_leaves_garm_s_provider_fault_then_a_new_runner(
    ready_emulator: GarmEmulator, api: httpx.Client
):
    ready_emulator.add_scaleset("ss", min_idle_runners=1, max_runners=2, enabled=True)
    ready_emulator.refuse_provider("CreateInstance", CREATE_REFUSAL)
    ready_emulator.advance()  # scale up: a runner to create
    ready_emulator.advance()  # the provider refuses it
    (failed,) = api.get("/instances").json()
    assert (failed["status"], failed["runner_status"]) == ("error", "pending")
    assert "provider_id" not in failed
    assert base64.b64decode(failed["provider_fault"]).decode() == (
        "creating instance in provider: provider binary "
        "/usr/local/bin/garm-provider-openstack-shim returned error: provider binary failed "
        f"with stdout: ; stderr: {CREATE_REFUSAL}: exit status 1"
    )
    ready_emulator.refuse_provider("CreateInstance", None)
    ready_emulator.advance()  # GARM deletes the failed runner and asks for another
    names = [i["name"] for i in api.get("/instances").json()]
    assert failed["name"] not in names
    ready_emulator.advance()
    (replacement,) = api.get("/instances").json()
    assert (replacement["status"], replacement["runner_status"]) == ("running", "idle")
    assert "provider_fault" not in replacement


def test_a_refused_delete_stays_pending_with_the_fault_unless_forced(
    ready_emulator: GarmEmulator, api: httpx.Client
):
    ready_emulator.add_scaleset("ss", min_idle_runners=0, max_runners=3, enabled=False)
    plain = ready_emulator.add_instance("ss")["name"]
    forced = ready_emulator.add_instance("ss")["name"]
    ready_emulator.refuse_provider("DeleteInstance", "failed to run command: boom", PROVIDER)
    assert api.delete(f"/instances/{plain}").status_code == 200
    assert api.delete(f"/instances/{forced}", params={"forceRemove": "true"}).status_code == 200
    ready_emulator.advance()
    assert ready_emulator.instance(forced) is None
    stuck = ready_emulator.instance(plain)
    assert stuck is not None
    assert stuck["status"] == "pending_delete"
    assert (
        base64.b64decode(stuck["provider_fault"])
        .decode()
        .startswith("deleting instance in provider: provider binary ")
    )
    ready_emulator.refuse_provider("DeleteInstance", None)
    ready_emulator.advance()
    assert ready_emulator.instance(plain) is None


def test_legacy_scaleset_without_provider_name(ready_emulator: GarmEmulator, api: httpx.Client):
    ready_emulator.add_scaleset("legacy", provider_name="")
    listed = api.get("/scalesets").json()
    assert "provider_name" not in listed[0]
    assert listed[0]["name"] == "legacy"


# ---- fault injection and the request log --------------------------------------------------


def test_fail_next_answers_n_failures_then_recovers(
    ready_emulator: GarmEmulator, api: httpx.Client
):
    ready_emulator.fail_next("GET", "/scalesets", 503, count=2, error="Unavailable", details="x")
    for _ in range(2):
        assert_error(api.get("/scalesets"), 503, "Unavailable", "x")
    assert api.get("/scalesets").status_code == 200
    ready_emulator.fail_next("PUT", r"/scalesets/\d+", 500)
    answer = api.put("/scalesets/7", json={"enabled": True})
    assert_error(answer, 500, "Server error")
    assert_error(api.put("/scalesets/7", json={"enabled": True}), 404, "Not Found")


def test_drop_next_is_a_transport_error(ready_emulator: GarmEmulator, api: httpx.Client):
    ready_emulator.drop_next("GET", "/providers")
    with pytest.raises(httpx.TransportError):
        api.get("/providers")
    assert api.get("/providers").status_code == 200


def test_garble_next_answers_200_with_a_body_that_is_not_json(
    ready_emulator: GarmEmulator, api: httpx.Client
):
    ready_emulator.garble_next("GET", "/providers")
    answer = api.get("/providers")
    assert answer.status_code == 200
    with pytest.raises(ValueError):
        answer.json()
    assert api.get("/providers").json() is not None


def test_stopped_emulator_refuses_connections(ready_emulator: GarmEmulator, api: httpx.Client):
    assert api.get("/providers").status_code == 200
    ready_emulator.stop()
    with pytest.raises(httpx.TransportError):
        api.get("/providers")


def test_request_log_records_every_call(ready_emulator: GarmEmulator, api: httpx.Client):
    ready_emulator.clear_requests()
    create_credential(api)
    api.get("/organizations", params={"name": "x"})
    api.delete("/instances/gone", params={"forceRemove": "true"})
    with raw_client(ready_emulator) as anon:
        anon.post("/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD})
    log = ready_emulator.requests
    assert [(r.method, r.path) for r in log] == [
        ("POST", "/github/credentials"),
        ("GET", "/organizations"),
        ("DELETE", "/instances/gone"),
        ("POST", "/auth/login"),
    ]
    assert log[0].body["name"] == "creds"
    assert log[1] == RecordedRequest("GET", "/organizations", {"name": "x"}, None)
    assert [r.path for r in ready_emulator.writes()] == ["/github/credentials", "/instances/gone"]
    ready_emulator.clear_requests()
    assert ready_emulator.requests == []


# ---- fidelity to real GARM (each answer measured on the GARM binary, 2026-12) -------------

# zxcvbn-go scores these below 4: real GARM refuses each (400 "password is too weak").
WEAK_PASSWORDS = [
    "abc",
    "password",
    "Password1!",
    "aaaaaaaaaaaaaaaaaaaa",
    "12345678901234567890",
    "abcdefghijklmnopqrstuvwxyz",
    "Summer2024!",
    "P@ssw0rd-P@ssw0rd",
    "letmein-letmein-1",
    "Welcome123456!",
]
# Real GARM accepts each of these (score 4).
STRONG_PASSWORDS = ["Tr0ub4dor&3", "Xk9#mP2q", "tZ4#pW9x!Lm2@Qv7", "aBbC6smCO4ycf#P+vPXV"]


@pytest.mark.parametrize("password", WEAK_PASSWORDS)
def test_first_run_refuses_a_weak_password(emulator: GarmEmulator, password: str):
    with raw_client(emulator) as anon:
        answer = anon.post("/first-run", json={**FIRST_RUN, "password": password})
    assert_error(answer, 400, "Bad Request", "password is too weak")
    assert not emulator.state.initialised


@pytest.mark.parametrize("password", [*STRONG_PASSWORDS, ADMIN_PASSWORD])
def test_first_run_accepts_a_strong_password(emulator: GarmEmulator, password: str):
    with raw_client(emulator) as anon:
        assert anon.post("/first-run", json={**FIRST_RUN, "password": password}).is_success


def test_first_run_accepts_what_the_charm_generates():
    # The charm's generator: 20 characters of four classes; the stand-in rule never refuses one.
    for _ in range(200):
        assert not is_too_weak(generate_admin_password())


def test_first_run_without_email_is_refused(emulator: GarmEmulator):
    with raw_client(emulator) as anon:
        answer = anon.post("/first-run", json={**FIRST_RUN, "email": ""})
    assert_error(answer, 400, "Bad Request", "missing username or email")


def app_credential(key: str | bytes, name: str = "creds") -> dict[str, Any]:
    key_text = key if isinstance(key, str) else b64(key)
    return {
        "name": name,
        "endpoint": "github.com",
        "auth_type": "app",
        "app": {"app_id": 1, "installation_id": 2, "private_key_bytes": key_text},
    }


def test_app_key_must_be_a_pkcs1_rsa_key(api: httpx.Client):
    invalid = (
        "failed to validate github credentials params: invalid app: invalid private_key_bytes"
    )
    garbage_pem = b"-----BEGIN RSA PRIVATE KEY-----\nMIIfake\n-----END RSA PRIVATE KEY-----"
    assert_error(
        api.post("/github/credentials", json=app_credential(garbage_pem)),
        400,
        "Bad Request",
        invalid,
    )
    assert_error(
        api.post("/github/credentials", json=app_credential(b"PRIVATE")),
        400,
        "Bad Request",
        invalid,
    )
    # Not base64 at all: Go's JSON decoder refuses the []byte field.
    assert_error(
        api.post("/github/credentials", json=app_credential("not base64!!")),
        400,
        "Bad Request",
        "invalid request",
    )
    # A PEM block that decodes but is not PKCS#1: GARM answers 500 with no details.
    pkcs8 = pkcs8_pem().encode()
    assert_error(
        api.post("/github/credentials", json=app_credential(pkcs8)), 500, "Server error", ""
    )
    truncated = (
        b"-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n"
    )
    assert_error(
        api.post("/github/credentials", json=app_credential(truncated)), 500, "Server error", ""
    )
    assert api.get("/github/credentials").json() is None
    assert api.post("/github/credentials", json=app_credential(PRIVATE_KEY.encode())).is_success


def test_app_key_update_is_checked_too(api: httpx.Client):
    cred_id = create_credential(api)["id"]
    app = {"app_id": 1, "installation_id": 2, "private_key_bytes": b64(pkcs8_pem().encode())}
    assert_error(
        api.put(f"/github/credentials/{cred_id}", json={"app": app}), 500, "Server error", ""
    )


def test_empty_lists_are_null_only_for_credentials(emulator: GarmEmulator):
    emulator.restart(providers=[])
    emulator.bootstrap(password=ADMIN_PASSWORD)
    with raw_client(emulator, login(emulator)) as admin:
        assert admin.get("/github/credentials").text == "null"
        for path in [
            "/organizations",
            "/repositories",
            "/scalesets",
            "/instances",
            "/providers",
            "/scalesets/7/instances",
        ]:
            answer = admin.get(path)
            assert (answer.status_code, answer.text) == (200, "[]"), path
        create_credential(admin)
        org = create_org(admin)
        assert admin.get(f"/organizations/{org['id']}/scalesets").text == "[]"
        assert api_list_names(admin.get("/templates")) == [
            "github_windows",
            "github_linux",
            "gitea_linux",
            "gitea_windows",
        ]


def api_list_names(answer: httpx.Response) -> list[str]:
    assert answer.status_code == 200
    return [item["name"] for item in answer.json()]


def test_tags_do_not_come_back_in_the_order_sent(api: httpx.Client, org: dict[str, Any]):
    labels = ["linux", "x64", "noble", "big"]
    created = create_scaleset(api, org, labels=labels)
    names = [t["name"] for t in created["tags"]]
    assert sorted(names) == sorted(labels)
    assert names != labels
    assert [t["name"] for t in api.get(f"/scalesets/{created['id']}").json()["tags"]] == names


def test_empty_runner_group_on_update_leaves_the_group(api: httpx.Client, org: dict[str, Any]):
    created = create_scaleset(api, org)
    url = f"/scalesets/{created['id']}"
    assert api.put(url, json={"runner_group": ""}).json()["github-runner-group"] == "Default"
    assert api.put(url, json={"runner_group": "grp"}).json()["github-runner-group"] == "grp"
    assert api.put(url, json={"runner_group": ""}).json()["github-runner-group"] == "grp"


def test_credentials_used_by_a_repository_cannot_be_deleted(api: httpx.Client):
    cred_id = create_credential(api)["id"]
    repo = {"owner": "me", "name": "r", "credentials_name": "creds", "webhook_secret": "s"}
    assert api.post("/repositories", json=repo).is_success
    create_org(api)
    # GARM checks repositories before organizations.
    assert_error(
        api.delete(f"/github/credentials/{cred_id}"),
        400,
        "Bad Request",
        "failed to delete github credentials: error deleting github credentials: "
        "cannot delete credentials with repositories: invalid request",
    )


def test_github_endpoint_can_be_repointed_until_credentials_use_it(emulator: GarmEmulator):
    emulator.bootstrap(password=ADMIN_PASSWORD, urls=False)
    standin = {
        "api_base_url": "http://127.0.0.1:9/api/v3/",
        "upload_base_url": "http://127.0.0.1:9/uploads/",
        "base_url": "http://127.0.0.1:9/",
    }
    url = "/github/endpoints/github.com"
    with raw_client(emulator, login(emulator)) as admin:
        assert_error(admin.put(url, json=standin), 409, "urls_required")
        assert admin.put("/controller", json=URLS).is_success
        (listed,) = admin.get("/github/endpoints").json()
        assert listed == admin.get(url).json()
        assert set(listed) == {
            "name",
            "description",
            "api_base_url",
            "upload_base_url",
            "base_url",
            "created_at",
            "updated_at",
            "endpoint_type",
        }
        assert (listed["name"], listed["description"], listed["base_url"]) == (
            "github.com",
            "The github.com endpoint",
            "https://github.com",
        )
        moved = admin.put(url, json=standin)
        assert moved.status_code == 200
        assert {k: moved.json()[k] for k in standin} == standin
        cred = create_credential(admin)
        assert cred["base_url"] == standin["base_url"]
        assert cred["endpoint"]["api_base_url"] == standin["api_base_url"]
        # Credentials use it now: the URLs cannot change; the same values and the description can.
        assert_error(
            admin.put(url, json={"base_url": "http://127.0.0.1:10/"}),
            400,
            "Bad Request",
            "failed to update github endpoint: error updating github endpoint: cannot update "
            "endpoint URLs with existing credentials: invalid request",
        )
        assert admin.put(url, json=standin).status_code == 200
        assert admin.put(url, json={"description": "changed"}).json()["description"] == "changed"
        assert_error(
            admin.put(url, json={"base_url": "ftp://x/"}),
            400,
            "Bad Request",
            "failed to validate github endpoint params: invalid api_base_url",
        )
        assert_error(admin.get("/github/endpoints/nope"), 404, "Not Found")


def test_wrong_json_types_answer_invalid_request(api: httpx.Client, org: dict[str, Any]):
    url = f"/organizations/{org['id']}/scalesets"
    assert_error(
        api.post(url, json=scaleset_body(max_runners=2.0)), 400, "Bad Request", "invalid request"
    )
    assert_error(api.get("/scalesets/abc"), 400, "Bad Request", "invalid request")


def test_unknown_ids_answer_garm_details(api: httpx.Client):
    assert_error(
        api.get("/github/credentials/999"),
        404,
        "Not Found",
        "failed to get github credentials: github credentials not found: not found",
    )
    assert_error(
        api.put("/github/credentials/999", json={"description": "x"}),
        404,
        "Not Found",
        "failed to update github credentials: error updating github credentials: "
        "github credentials not found: not found",
    )
    assert_error(
        api.get("/scalesets/999"),
        404,
        "Not Found",
        "error fetching scale set: error fetching scale set by ID: not found",
    )
    assert_error(
        api.put("/scalesets/999", json={"max_runners": 1}),
        404,
        "Not Found",
        "error fetching scale set: error fetching scale set by ID: not found",
    )
    assert_error(
        api.get("/templates/999"),
        404,
        "Not Found",
        "failed to get template: failed to get template: not found",
    )
