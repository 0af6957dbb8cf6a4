"""The charm's GARM client (``src/garm_api.py``) against each GARM backend.

Every call passes the recording proxy, so the assertions read what GARM received and answered
(method, path, body, status) as well as what the client made of it. State is seeded only through
GARM's API, so the same body runs on real GARM and on the emulator.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import httpx
import pytest

from garm import (
    CreateCredentialParams,
    CreateScaleSetParams,
    CreateTemplateParams,
    GarmApiError,
    GarmClient,
    GarmConflictError,
    GarmNotFoundError,
    GarmUnauthorizedError,
    GithubApp,
    UpdateCredentialParams,
    UpdateScaleSetParams,
)
from tests.conformance.conftest import ADMIN_PASSWORD, ADMIN_USERNAME, PROVIDER_NAME, Garm
from tests.conformance.payloads import scaleset_body
from tests.github_standin import GitHubStandin
from tests.log_secrets import SECRET_VALUES
from tests.rsa_keys import pkcs1_pem

MARKER = "Managed by garm"
WEBHOOK_SECRET = "ab" * 32
UNKNOWN_UUID = str(uuid.UUID(int=7))
UNKNOWN_INT_ID = 987654


def key_b64(index: int = 0) -> str:
    """The base64 of a real PKCS#1 RSA key, as GARM wants ``private_key_bytes``."""
    return base64.b64encode(pkcs1_pem(index).encode("ascii")).decode("ascii")


def app_credential(name: str, description: str = MARKER, index: int = 0) -> CreateCredentialParams:
    return CreateCredentialParams(
        name=name,
        description=description,
        endpoint="github.com",
        app=GithubApp(
            app_id=100 + index, installation_id=200 + index, private_key_bytes=key_b64()
        ),
    )


def scaleset_params(name: str, **overrides: Any) -> CreateScaleSetParams:
    values = {"enabled": True, "labels": ["x64", "linux"], **overrides}
    return CreateScaleSetParams(**scaleset_body(name, **values))


def jwt_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT (header.claims.signature), signature not checked."""
    header, claims, signature = token.split(".")
    assert header and signature
    return json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))


def seen(garm: Garm) -> list[tuple[str, str, int]]:
    """What GARM received through the proxy, as (method, path, status)."""
    return [(c.method, c.path, c.status) for c in garm.requests]


def write_calls(garm: Garm) -> list[tuple[str, str, int]]:
    return [(c.method, c.path, c.status) for c in garm.writes()]


def test_bootstrap_story_from_a_fresh_garm(garm: Garm):
    base = "http://garm.test:8080"
    with GarmClient(garm.url) as client:
        assert client.is_initialized() is False
        assert client.wait_for_ready(timeout=2, interval=0.05) is False
        with pytest.raises(GarmConflictError) as before:
            client.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        assert (before.value.status, before.value.error) == (409, "init_required")

        with pytest.raises(GarmApiError) as weak:
            client.first_run(ADMIN_USERNAME, "weak", "admin@garm.test", "Admin")
        assert type(weak.value) is GarmApiError
        assert (weak.value.status, weak.value.error, weak.value.details) == (
            400,
            "Bad Request",
            "password is too weak",
        )

        client.first_run(ADMIN_USERNAME, ADMIN_PASSWORD, "admin@garm.test", "Admin")
        # Initialised but without URLs: GARM answers urls_required, which reads as initialised.
        assert client.is_initialized() is True
        assert client.wait_for_ready(timeout=2, interval=0.05) is True
        with pytest.raises(GarmConflictError) as again:
            client.first_run(ADMIN_USERNAME, ADMIN_PASSWORD, "admin@garm.test", "Admin")
        assert (again.value.status, again.value.details) == (409, "already initialized")

        with pytest.raises(GarmUnauthorizedError) as wrong:
            client.login(ADMIN_USERNAME, "Wrong-Passw0rd-for-the-admin")
        assert (wrong.value.status, wrong.value.error, wrong.value.details) == (
            401,
            "Not Authorized",
            "",
        )
        assert str(wrong.value) == "GARM answered 401: Not Authorized"

        token = client.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        garm.admin = (ADMIN_USERNAME, ADMIN_PASSWORD)  # for the read views
        assert jwt_claims(token)["iss"] == "garm"
        # An admin bearer token: the suite's log check knows it as soon as GARM issued it.
        assert token in SECRET_VALUES
        before_urls = client.get_controller()
        assert before_urls.controller_id
        assert before_urls.metadata_url is None
        assert before_urls.callback_url is None
        with pytest.raises(GarmConflictError) as gated:
            client.list_organizations()
        assert gated.value.error == "urls_required"

        updated = client.update_controller(
            metadata_url=f"{base}/api/v1/metadata",
            callback_url=f"{base}/api/v1/callbacks",
            webhook_url=f"{base}/webhooks",
            agent_url=f"{base}/agent",
        )
        assert updated.controller_id == before_urls.controller_id
        after = client.get_controller()
        assert (after.metadata_url, after.callback_url, after.webhook_url, after.agent_url) == (
            f"{base}/api/v1/metadata",
            f"{base}/api/v1/callbacks",
            f"{base}/webhooks",
            f"{base}/agent",
        )
        # With URLs set, the unauthenticated probe meets the auth middleware: 401.
        assert client.is_initialized() is True
        assert client.list_organizations() == []

    with GarmClient(garm.url, token="not-a-token") as stranger:
        with pytest.raises(GarmUnauthorizedError) as refused:
            stranger.list_scalesets()
        assert (refused.value.error, refused.value.details) == ("Authentication failed", "")

    assert seen(garm) == [
        ("GET", "/controller-info", 409),
        ("GET", "/controller-info", 409),
        ("POST", "/auth/login", 409),
        ("POST", "/first-run", 400),
        ("POST", "/first-run", 200),
        ("GET", "/controller-info", 409),
        ("GET", "/controller-info", 409),
        ("POST", "/first-run", 409),
        ("POST", "/auth/login", 401),
        ("POST", "/auth/login", 200),
        ("GET", "/controller", 200),
        ("GET", "/organizations", 409),
        ("PUT", "/controller", 200),
        ("GET", "/controller", 200),
        ("GET", "/controller-info", 401),
        ("GET", "/organizations", 200),
        ("GET", "/scalesets", 401),
    ]
    assert garm.controller()["metadata_url"] == f"{base}/api/v1/metadata"


def test_lists_on_an_empty_garm_and_templates(client: GarmClient, ready_garm: Garm):
    assert client.list_credentials() == []
    assert client.list_organizations() == []
    assert client.list_organizations(name="nobody") == []
    assert client.list_repositories() == []
    assert client.list_scalesets() == []
    assert client.list_scaleset_instances(UNKNOWN_INT_ID) == []
    assert [p.name for p in client.list_providers()] == [PROVIDER_NAME]
    # GARM answers a JSON null, not [], for an empty credentials list.
    raw = httpx.get(
        f"{ready_garm.url}/github/credentials",
        headers={"Authorization": f"Bearer {client.login(ADMIN_USERNAME, ADMIN_PASSWORD)}"},
    )
    assert (raw.status_code, raw.text.strip()) == (200, "null")

    templates = {t.name: t for t in client.list_templates()}
    system = templates["github_linux"]
    assert (system.os_type, system.forge_type) == ("linux", "github")
    assert not system.data  # the listing leaves bodies out
    assert system.id is not None
    fetched = client.get_template(system.id)
    assert base64.b64decode(fetched.data or "", validate=True).startswith(b"#!")

    body = b"#!/bin/bash\necho conformance\n"
    created = client.create_template(
        CreateTemplateParams(name="conformance", description="a test template", data=_b64(body))
    )
    assert created.id is not None
    assert (created.name, created.os_type, created.forge_type) == (
        "conformance",
        "linux",
        "github",
    )
    with pytest.raises(GarmConflictError):
        client.create_template(
            CreateTemplateParams(name="conformance", description="again", data=_b64(body))
        )
    new_body = b"#!/bin/bash\necho changed\n"
    client.update_template(created.id, _b64(new_body))
    assert base64.b64decode(client.get_template(created.id).data or "") == new_body
    assert "conformance" in {t.name for t in client.list_templates()}
    client.delete_template(created.id)
    with pytest.raises(GarmNotFoundError) as gone:
        client.get_template(created.id)
    assert gone.value.status == 404
    assert "conformance" not in {t.name for t in client.list_templates()}

    assert write_calls(ready_garm) == [
        ("POST", "/templates", 200),
        ("POST", "/templates", 409),
        ("PUT", f"/templates/{created.id}", 200),
        ("DELETE", f"/templates/{created.id}", 200),
    ]
    assert [c.body for c in ready_garm.writes()][2] == {"data": _b64(new_body)}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def test_credentials_organisations_and_repositories(client: GarmClient, ready_garm: Garm):
    first = client.create_credential(app_credential("app-1"))
    second = client.create_credential(app_credential("app-2", description="", index=1))
    assert (first.name, first.description, first.auth_type) == ("app-1", MARKER, "app")
    assert first.id is not None and second.id is not None
    posted = ready_garm.writes()[0].body
    assert posted["app"]["private_key_bytes"] == key_b64()
    assert posted["auth_type"] == "app"
    with pytest.raises(GarmConflictError):
        client.create_credential(app_credential("app-1"))

    updated = client.update_credential(second.id, UpdateCredentialParams(description=MARKER))
    assert updated.description == MARKER
    assert {c["name"]: c["description"] for c in ready_garm.credentials()} == {
        "app-1": MARKER,
        "app-2": MARKER,
    }
    assert sorted(c.name or "" for c in client.list_credentials()) == ["app-1", "app-2"]

    org = client.create_organization("acme", "app-1", WEBHOOK_SECRET)
    repo = client.create_repository("acme", "widgets", "app-1", WEBHOOK_SECRET)
    assert org.id and repo.id
    assert (org.name, org.credentials_name) == ("acme", "app-1")
    assert (repo.owner, repo.name, repo.credentials_name, repo.credentials_id) == (
        "acme",
        "widgets",
        "app-1",
        first.id,
    )
    assert [o.name for o in client.list_organizations(name="acme")] == ["acme"]
    assert client.list_organizations(name="other") == []
    assert [(r.owner, r.name) for r in client.list_repositories()] == [("acme", "widgets")]

    assert client.update_organization(org.id, "app-2").credentials_name == "app-2"
    assert client.update_repository(repo.id, "app-2").credentials_name == "app-2"
    assert [o["credentials_name"] for o in ready_garm.organizations()] == ["app-2"]
    assert [r["credentials_name"] for r in ready_garm.repositories()] == ["app-2"]

    # Refusals and unknown ids, as the client classifies them.
    with pytest.raises(GarmApiError) as refused:
        client.delete_credential(second.id)
    assert type(refused.value) is GarmApiError
    assert refused.value.status == 400
    assert "cannot delete credentials with" in refused.value.details
    for call in (
        lambda: client.update_credential(UNKNOWN_INT_ID, UpdateCredentialParams(description="x")),
        lambda: client.update_organization(UNKNOWN_UUID, "app-1"),
        lambda: client.update_repository(UNKNOWN_UUID, "app-1"),
        lambda: client.delete_organization(UNKNOWN_UUID),
        lambda: client.delete_repository(UNKNOWN_UUID),
    ):
        with pytest.raises(GarmNotFoundError) as missing:
            call()
        assert missing.value.status == 404
        assert missing.value.error == "Not Found"
    # GARM deletes unknown credentials without complaint.
    client.delete_credential(UNKNOWN_INT_ID)

    client.delete_repository(repo.id)
    client.delete_organization(org.id)
    client.delete_credential(second.id)
    client.delete_credential(first.id)
    assert client.list_organizations() == []
    assert client.list_repositories() == []
    assert client.list_credentials() == []

    assert write_calls(ready_garm) == [
        ("POST", "/github/credentials", 200),
        ("POST", "/github/credentials", 200),
        ("POST", "/github/credentials", 409),
        ("PUT", f"/github/credentials/{second.id}", 200),
        ("POST", "/organizations", 200),
        ("POST", "/repositories", 200),
        ("PUT", f"/organizations/{org.id}", 200),
        ("PUT", f"/repositories/{repo.id}", 200),
        ("DELETE", f"/github/credentials/{second.id}", 400),
        ("PUT", f"/github/credentials/{UNKNOWN_INT_ID}", 404),
        ("PUT", f"/organizations/{UNKNOWN_UUID}", 404),
        ("PUT", f"/repositories/{UNKNOWN_UUID}", 404),
        ("DELETE", f"/organizations/{UNKNOWN_UUID}", 404),
        ("DELETE", f"/repositories/{UNKNOWN_UUID}", 404),
        ("DELETE", f"/github/credentials/{UNKNOWN_INT_ID}", 204),
        ("DELETE", f"/repositories/{repo.id}", 200),
        ("DELETE", f"/organizations/{org.id}", 200),
        ("DELETE", f"/github/credentials/{second.id}", 204),
        ("DELETE", f"/github/credentials/{first.id}", 204),
    ]


def test_scaleset_lifecycle_on_an_organisation_and_a_repository(
    client: GarmClient, ready_garm: Garm, github: GitHubStandin
):
    github.add_runner_group("ci")
    client.create_credential(app_credential("app-1"))
    org = client.create_organization("acme", "app-1", WEBHOOK_SECRET)
    repo = client.create_repository("acme", "widgets", "app-1", WEBHOOK_SECRET)
    assert org.id and repo.id
    ready_garm.clear_requests()

    on_org = client.create_org_scaleset(org.id, scaleset_params("org-set"))
    grouped = scaleset_params("repo-set", extra_specs={"disk": 20})
    grouped = grouped.model_copy(update={"github_runner_group": "ci"})
    on_repo = client.create_repo_scaleset(repo.id, grouped)
    assert on_org.id is not None and on_repo.id is not None
    assert (on_org.org_id, on_org.repo_id) == (org.id, None)
    assert (on_repo.repo_id, on_repo.org_id) == (repo.id, None)
    assert on_org.enabled is True
    # No group given: GARM stores GitHub's default group by name.
    assert on_org.github_runner_group == "Default"
    assert on_repo.github_runner_group == "ci"
    assert sorted(t.name or "" for t in on_org.tags or []) == ["linux", "x64"]
    assert on_repo.extra_specs == {"disk": 20}
    assert on_org.min_idle_runners is None  # 0 is omitted
    assert {s.name: s.id for s in client.list_scalesets()} == {
        "org-set": on_org.id,
        "repo-set": on_repo.id,
    }
    assert client.list_scaleset_instances(on_org.id) == []

    changed = client.update_scaleset(
        on_org.id,
        UpdateScaleSetParams(
            image="ubuntu-22.04",
            flavor="large",
            max_runners=5,
            runner_group="ci",
            extra_specs={"disk": 40},
        ),
    )
    assert (changed.image, changed.flavor, changed.max_runners) == ("ubuntu-22.04", "large", 5)
    assert (changed.github_runner_group, changed.extra_specs) == ("ci", {"disk": 40})
    cleared = client.update_scaleset(
        on_org.id, UpdateScaleSetParams(extra_specs={}, runner_group="Default")
    )
    assert (cleared.github_runner_group, cleared.extra_specs) == ("Default", {})
    listed = ready_garm.scaleset_by_name("org-set")
    assert listed is not None
    assert (listed["image"], listed["github-runner-group"], listed["extra_specs"]) == (
        "ubuntu-22.04",
        "Default",
        {},
    )

    with pytest.raises(GarmApiError) as busy_org:
        client.delete_organization(org.id)
    assert (type(busy_org.value), busy_org.value.status, busy_org.value.details) == (
        GarmApiError,
        400,
        "organization has scale sets defined; delete them first",
    )
    with pytest.raises(GarmApiError) as enabled:
        client.delete_scaleset(on_org.id)
    assert (enabled.value.status, enabled.value.details) == (
        400,
        "scale set is enabled; disable it first",
    )
    with pytest.raises(GarmNotFoundError):
        client.update_scaleset(UNKNOWN_INT_ID, UpdateScaleSetParams(image="x"))

    for scaleset_id in (on_org.id, on_repo.id):
        disabled = client.update_scaleset(scaleset_id, UpdateScaleSetParams(enabled=False))
        assert disabled.enabled is None  # false is omitted
        client.delete_scaleset(scaleset_id)
    assert client.list_scalesets() == []
    client.delete_organization(org.id)

    assert write_calls(ready_garm) == [
        ("POST", f"/organizations/{org.id}/scalesets", 200),
        ("POST", f"/repositories/{repo.id}/scalesets", 200),
        ("PUT", f"/scalesets/{on_org.id}", 200),
        ("PUT", f"/scalesets/{on_org.id}", 200),
        ("DELETE", f"/organizations/{org.id}", 400),
        ("DELETE", f"/scalesets/{on_org.id}", 400),
        ("PUT", f"/scalesets/{UNKNOWN_INT_ID}", 404),
        ("PUT", f"/scalesets/{on_org.id}", 200),
        ("DELETE", f"/scalesets/{on_org.id}", 200),
        ("PUT", f"/scalesets/{on_repo.id}", 200),
        ("DELETE", f"/scalesets/{on_repo.id}", 200),
        ("DELETE", f"/organizations/{org.id}", 200),
    ]
    create_body = ready_garm.writes()[1].body
    assert create_body["github-runner-group"] == "ci"
    assert "github-runner-group" not in ready_garm.writes()[0].body


NO_SUITABLE_TEMPLATE = (
    "failed to find suitable template: failed to get template: failed to get template: not found"
)


def test_scaleset_without_a_template_gets_garms_system_template(
    client: GarmClient, ready_garm: Garm
):
    client.create_credential(app_credential("app-1"))
    org = client.create_organization("acme", "app-1", WEBHOOK_SECRET)
    assert org.id
    system = next(t for t in client.list_templates() if t.name == "github_linux")
    ready_garm.clear_requests()

    created = client.create_org_scaleset(org.id, scaleset_params("plain"))
    assert created.id is not None
    assert "template_id" not in ready_garm.writes()[0].body
    assert created.template_id == system.id
    assert live_template_id(ready_garm, "plain") == system.id
    # GARM looks template 0 up like any id: there is no "back to the default" through 0.
    with pytest.raises(GarmNotFoundError) as zero:
        client.update_scaleset(created.id, UpdateScaleSetParams(template_id=0))
    assert zero.value.details == NO_SUITABLE_TEMPLATE
    assert live_template_id(ready_garm, "plain") == system.id


def live_template_id(garm: Garm, name: str) -> int | None:
    listed = garm.scaleset_by_name(name)
    assert listed is not None
    return listed.get("template_id")
