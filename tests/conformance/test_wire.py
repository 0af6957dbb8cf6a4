"""GARM's wire answers, pinned on both backends: status codes and ``error``/``details`` bodies.

Each fact here was measured on the real GARM binary (``../shared/garm/README.md``); the same
test body runs against the emulator, so a difference is an emulator defect. Requests are raw
HTTP through the recording proxy, so nothing of the charm's client stands between the test and
GARM's answer. State is seeded through GARM's API only. Generated values (ids, uuids, times)
differ between backends and are checked for their shape.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conformance import payloads
from tests.conformance.conftest import ADMIN_PASSWORD, ADMIN_USERNAME, Garm
from tests.github_standin import GitHubStandin
from tests.rsa_keys import pkcs1_pem, pkcs8_pem

EMAIL = "admin@garm.test"
URLS_REQUIRED = "Missing required URLs. Make sure you update the metadata and callback URLs"
ENDPOINT = "/github/endpoints/github.com"
WEBHOOK_SECRET = "cd" * 32


def answer(response: httpx.Response) -> tuple[int, Any]:
    """GARM's status and decoded JSON body."""
    return response.status_code, response.json()


def refusal(status: int, error: str, details: str) -> tuple[int, dict[str, str]]:
    """GARM's error answer, as :func:`answer` reads it."""
    return status, {"error": error, "details": details}


def is_uuid(value: Any) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


def b64(text: str) -> str:
    return base64.b64encode(text.encode("ascii")).decode("ascii")


def new_user(**overrides: str) -> dict[str, str]:
    return {
        "username": ADMIN_USERNAME,
        "password": ADMIN_PASSWORD,
        "email": EMAIL,
        "full_name": "GARM admin",
        **overrides,
    }


def app_credential(name: str, key_bytes: str, index: int = 0) -> dict[str, Any]:
    """A create body for App credentials; ``key_bytes`` goes to GARM as sent."""
    return {
        "name": name,
        "description": "wire test",
        "endpoint": "github.com",
        "auth_type": "app",
        "app": {
            "app_id": 10 + index,
            "installation_id": 20 + index,
            "private_key_bytes": key_bytes,
        },
    }


@pytest.fixture
def anon(garm: Garm) -> Iterator[httpx.Client]:
    """An HTTP client for GARM's API, through the proxy, with no token."""
    with httpx.Client(base_url=garm.url, timeout=30) as http:
        yield http


def login(http: httpx.Client) -> str:
    """Log in as the admin; return the token after checking it is a JWT."""
    status, body = answer(
        http.post("/auth/login", json={"username": ADMIN_USERNAME, "password": ADMIN_PASSWORD})
    )
    assert status == 200
    assert body["token"].count(".") == 2
    return body["token"]


def first_run_and_login(garm: Garm, anon: httpx.Client) -> httpx.Client:
    """First-run as the admin over HTTP; return a client carrying the admin's token."""
    assert anon.post("/first-run", json=new_user()).status_code == 200
    garm.admin = (ADMIN_USERNAME, ADMIN_PASSWORD)
    return httpx.Client(
        base_url=garm.url, timeout=30, headers={"Authorization": f"Bearer {login(anon)}"}
    )


def test_first_run_refusals_then_the_admin(garm: Garm, anon: httpx.Client):
    bad_user = "invalid username"
    bad_email = "invalid email address"
    missing = "missing username or email"
    cases = [
        # (overrides, details): GARM checks presence, then email, then username, then strength.
        ({"email": ""}, missing),
        ({"username": "", "password": "weak"}, missing),
        ({"email": "not-an-email"}, bad_email),
        ({"email": "Admin <admin@garm.test>"}, bad_email),
        ({"email": "a b@garm.test", "username": "ad-min", "password": "weak"}, bad_email),
        ({"username": "ad-min"}, bad_user),
        ({"username": "ad.min"}, bad_user),
        ({"username": "_admin", "password": "weak"}, bad_user),
        ({"username": "a" * 65}, bad_user),
        ({"password": "weak"}, "password is too weak"),
        ({"password": "Password1!"}, "password is too weak"),
        ({"password": "aaaaaaaaaaaaaaaaaaaa"}, "password is too weak"),
    ]
    for overrides, details in cases:
        sent = anon.post("/first-run", json=new_user(**overrides))
        assert answer(sent) == refusal(400, "Bad Request", details), overrides
    # None of those initialised GARM.
    assert answer(anon.get("/controller-info"))[0] == 409

    status, user = answer(anon.post("/first-run", json=new_user()))
    assert status == 200
    assert set(user) == {
        "id",
        "created_at",
        "updated_at",
        "email",
        "username",
        "full_name",
        "enabled",
        "is_admin",
    }
    assert is_uuid(user["id"])
    assert (user["username"], user["email"], user["enabled"], user["is_admin"]) == (
        ADMIN_USERNAME,
        EMAIL,
        True,
        True,
    )
    assert answer(anon.post("/first-run", json=new_user())) == refusal(
        409, "Conflict", "already initialized"
    )


def test_auth_answers_and_the_url_gate(garm: Garm, anon: httpx.Client):
    admin = first_run_and_login(garm, anon)
    # This test sets the URLs one at a time: the real harness's hook (re-point github.com once
    # the URLs are set) would fire on the first, which GARM still gates. Nothing here needs it.
    garm.proxy.on_urls_set = None
    with admin:
        gated = refusal(409, "urls_required", URLS_REQUIRED)
        # The URL gate answers before authentication.
        assert answer(admin.get("/organizations")) == gated
        assert answer(anon.get("/organizations")) == gated
        assert answer(admin.get("/controller-info")) == gated

        metadata = {"metadata_url": "http://garm.test:8080/api/v1/metadata"}
        assert admin.put("/controller", json=metadata).status_code == 200
        assert answer(admin.get("/organizations")) == gated

        # Metadata and callback URLs open the gate; the agent URL is not part of it.
        callback = {"callback_url": "http://garm.test:8080/api/v1/callbacks"}
        assert admin.put("/controller", json=callback).status_code == 200
        assert answer(admin.get("/organizations")) == (200, [])

        # The auth middleware's 401 and the login handler's 401 say different things.
        failed = refusal(401, "Authentication failed", "")
        assert answer(anon.get("/organizations")) == failed
        assert answer(anon.get("/controller-info")) == failed
        forged = {"Authorization": "Bearer not.a.token"}
        assert answer(anon.get("/organizations", headers=forged)) == failed
        wrong = {"username": ADMIN_USERNAME, "password": "Wrong-Passw0rd-for-the-admin"}
        assert answer(anon.post("/auth/login", json=wrong)) == refusal(401, "Not Authorized", "")
        nobody = {"username": "nobody", "password": ADMIN_PASSWORD}
        assert answer(anon.post("/auth/login", json=nobody)) == refusal(401, "Not Authorized", "")


def test_endpoint_repointing_and_app_key_checks(
    garm: Garm, anon: httpx.Client, github: GitHubStandin
):
    standin = github.endpoint_params()
    with first_run_and_login(garm, anon) as admin:
        assert answer(admin.put(ENDPOINT, json=standin)) == refusal(
            409, "urls_required", URLS_REQUIRED
        )
        urls = {
            "metadata_url": "http://garm.test:8080/api/v1/metadata",
            "callback_url": "http://garm.test:8080/api/v1/callbacks",
            "webhook_url": "http://garm.test:8080/webhooks",
            "agent_url": "http://garm.test:8080/agent",
        }
        assert admin.put("/controller", json=urls).status_code == 200

        # No credentials yet: the endpoint can be re-pointed (http:// is fine).
        status, moved = answer(admin.put(ENDPOINT, json=standin))
        assert status == 200
        assert {key: moved[key] for key in standin} == standin
        assert moved["name"] == "github.com"

        # No credentials is null, not [].
        listed = admin.get("/github/credentials")
        assert (listed.status_code, listed.text.strip()) == (200, "null")

        # Only a PKCS#1 PEM RSA key is a valid App key.
        garbage = "-----BEGIN RSA PRIVATE KEY-----\nMIIfake\n-----END RSA PRIVATE KEY-----\n"
        invalid_key = (
            "failed to validate github credentials params: invalid app: invalid private_key_bytes"
        )
        for key_bytes, expected in (
            (b64(garbage), refusal(400, "Bad Request", invalid_key)),
            (b64("PRIVATE"), refusal(400, "Bad Request", invalid_key)),
            ("not base64!!", refusal(400, "Bad Request", "invalid request")),
            (b64(pkcs8_pem()), refusal(500, "Server error", "")),
        ):
            sent = admin.post("/github/credentials", json=app_credential("app", key_bytes))
            assert answer(sent) == expected
        assert admin.get("/github/credentials").text.strip() == "null"
        status, created = answer(
            admin.post("/github/credentials", json=app_credential("app", b64(pkcs1_pem())))
        )
        assert status == 200
        assert created["name"] == "app"
        assert created["endpoint"]["api_base_url"] == standin["api_base_url"]

        # Credentials use it now: the same URLs are accepted, other URLs are refused.
        assert admin.put(ENDPOINT, json=standin).status_code == 200
        elsewhere = {**standin, "base_url": "http://127.0.0.1:9/"}
        assert answer(admin.put(ENDPOINT, json=elsewhere)) == refusal(
            400,
            "Bad Request",
            "failed to update github endpoint: error updating github endpoint: cannot update "
            "endpoint URLs with existing credentials: invalid request",
        )


def scaleset_body(name: str, **overrides: Any) -> dict[str, Any]:
    return payloads.scaleset_body(name, labels=["linux", "x64", "noble"], **overrides)


def test_scaleset_defaults_refusals_and_refused_deletes(ready_garm: Garm, github: GitHubStandin):
    github.add_runner_group("ci")
    with httpx.Client(base_url=ready_garm.url, timeout=30) as anon:
        token = login(anon)
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=ready_garm.url, timeout=30, headers=headers) as admin:
        org_key, repo_key = b64(pkcs1_pem(0)), b64(pkcs1_pem(1))
        org_cred = admin.post("/github/credentials", json=app_credential("org-app", org_key))
        repo_cred = admin.post(
            "/github/credentials", json=app_credential("repo-app", repo_key, index=1)
        )
        assert (org_cred.status_code, repo_cred.status_code) == (200, 200)
        org = admin.post(
            "/organizations",
            json={"name": "acme", "credentials_name": "org-app", "webhook_secret": WEBHOOK_SECRET},
        )
        repo = admin.post(
            "/repositories",
            json={
                "owner": "acme",
                "name": "widgets",
                "credentials_name": "repo-app",
                "webhook_secret": WEBHOOK_SECRET,
            },
        )
        assert (org.status_code, repo.status_code) == (200, 200)
        org_scalesets = f"/organizations/{org.json()['id']}/scalesets"

        # GARM's database refuses these after GitHub made the scale set: 500, no details.
        for overrides in ({"max_runners": 0}, {"min_idle_runners": 3}):
            sent = admin.post(org_scalesets, json=scaleset_body("refused", **overrides))
            assert answer(sent) == refusal(500, "Server error", ""), overrides

        # No runner group and no bootstrap timeout sent: GARM's defaults come back.
        status, created = answer(admin.post(org_scalesets, json=scaleset_body("ci-runners")))
        assert status == 200
        assert created["github-runner-group"] == "Default"
        assert created["runner_bootstrap_timeout"] == 20
        # Labels come back as tags, in no fixed order.
        assert sorted(t["name"] for t in created["tags"]) == ["linux", "noble", "x64"]
        assert all(set(t) == {"id", "name"} and is_uuid(t["id"]) for t in created["tags"])

        # An empty runner group on update changes nothing.
        scaleset = f"/scalesets/{created['id']}"
        for sent_group, kept in (("", "Default"), ("ci", "ci"), ("", "ci")):
            status, updated = answer(admin.put(scaleset, json={"runner_group": sent_group}))
            assert (status, updated["github-runner-group"]) == (200, kept), sent_group
        assert admin.get(scaleset).json()["github-runner-group"] == "ci"

        repo_scalesets = f"/repositories/{repo.json()['id']}/scalesets"
        assert admin.post(repo_scalesets, json=scaleset_body("repo-runners")).status_code == 200

        # Refused deletes are 400 with GARM's texts.
        cannot = "failed to delete github credentials: error deleting github credentials: "
        assert answer(admin.delete(f"/github/credentials/{org_cred.json()['id']}")) == refusal(
            400,
            "Bad Request",
            cannot + "cannot delete credentials with organizations: invalid request",
        )
        assert answer(admin.delete(f"/github/credentials/{repo_cred.json()['id']}")) == refusal(
            400,
            "Bad Request",
            cannot + "cannot delete credentials with repositories: invalid request",
        )
        assert answer(admin.delete(f"/organizations/{org.json()['id']}")) == refusal(
            400, "Bad Request", "organization has scale sets defined; delete them first"
        )
        assert answer(admin.delete(f"/repositories/{repo.json()['id']}")) == refusal(
            400, "Bad Request", "repo has scale sets defined; delete them first"
        )

        # A provider GARM has not loaded is not checked at create.
        status, unloaded = answer(
            admin.post(org_scalesets, json=scaleset_body("elsewhere", provider_name="gone-9"))
        )
        assert (status, unloaded["provider_name"]) == (200, "gone-9")
