"""Tests of the GitHub stand-in over real HTTP, with GARM's paths, headers and field names."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.github_standin import GitHubStandin, StandinError, key_fingerprint, sign_app_jwt
from tests.github_standin.apps import DECODE_FAILED, EXP_INVALID, EXP_TOO_FAR, IAT_INVALID
from tests.github_standin.model import BadRequestError, ConflictError, NotFoundError
from tests.github_standin.tokens import jwt_claims, make_jwt
from tests.rsa_keys import pkcs1_pem, pkcs8_pem

POLL = 0.5
API_VERSION = {"api-version": "6.0-preview"}
APP_ID = 1234


@pytest.fixture
def standin() -> Iterator[GitHubStandin]:
    with GitHubStandin(poll_timeout=POLL) as github:
        yield github


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as client:
        yield client


class Actions:
    """The Actions service of one organisation, reached as GARM reaches it."""

    def __init__(self, standin: GitHubStandin, http: httpx.Client, org: str = "acme") -> None:
        self.http = http
        reg = http.post(
            f"{standin.api_url}orgs/{org}/actions/runners/registration-token",
            headers={"Authorization": "token pat"},
        ).json()["token"]
        answer = http.post(
            f"{standin.base_url}/actions/runner-registration",
            json={"url": f"{standin.base_url}/{org}", "runner_event": "register"},
            headers={"Authorization": f"RemoteAuth {reg}"},
        ).json()
        self.url: str = answer["url"]
        self.token: str = answer["token"]

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token}", **kwargs.pop("headers", {})}
        params = {**API_VERSION, **kwargs.pop("params", {})}
        return self.http.request(method, self.url + path, headers=headers, params=params, **kwargs)

    def create_set(self, name: str = "ss-one", **fields: Any) -> dict[str, Any]:
        body = {
            "name": name,
            "runnerGroupId": 1,
            "labels": [{"type": "System", "name": "linux"}],
            "RunnerSetting": {"ephemeral": True},
            "enabled": True,
            **fields,
        }
        response = self.call("POST", "_apis/runtime/runnerscalesets", json=body)
        assert response.status_code == 200, response.text
        return response.json()

    def open_session(self, set_id: int) -> dict[str, Any]:
        response = self.call(
            "POST", f"_apis/runtime/runnerscalesets/{set_id}/sessions", json={"ownerName": "o"}
        )
        assert response.status_code == 200, response.text
        return response.json()

    def poll(self, session: dict[str, Any], last: int = 0, **kwargs: Any) -> httpx.Response:
        params = {"lastMessageId": str(last)} if last else {}
        return self.http.get(
            session["messageQueueUrl"],
            params=params,
            headers={
                "Authorization": f"Bearer {session['messageQueueAccessToken']}",
                "X-ScaleSetMaxCapacity": "3",
            },
            **kwargs,
        )

    def ack(self, session: dict[str, Any], message_id: int) -> httpx.Response:
        return self.http.delete(
            f"{session['messageQueueUrl']}/{message_id}",
            headers={"Authorization": f"Bearer {session['messageQueueAccessToken']}"},
        )

    def jit(self, set_id: int, name: str) -> httpx.Response:
        return self.call(
            "POST",
            f"_apis/runtime/runnerscalesets/{set_id}/generatejitconfig",
            json={"name": name, "workFolder": "_work"},
        )


@pytest.fixture
def actions(standin: GitHubStandin, http: httpx.Client) -> Actions:
    return Actions(standin, http)


def jobs_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    assert message["messageType"] == "RunnerScaleSetJobMessages"
    return json.loads(message["body"])


def next_message(actions: Actions, session: dict[str, Any], last: int = 0) -> dict[str, Any]:
    response = actions.poll(session, last)
    assert response.status_code == 200, response.status_code
    return response.json()


# ----- where it listens


def test_urls_are_loopback_and_ghes_shaped(standin: GitHubStandin):
    assert standin.base_url.startswith("http://127.0.0.1:")
    assert standin.api_url == f"{standin.base_url}/api/v3/"
    assert standin.upload_url == f"{standin.base_url}/api/uploads/"
    assert standin.endpoint_params() == {
        "api_base_url": standin.api_url,
        "upload_base_url": standin.upload_url,
        "base_url": standin.base_url,
    }


def test_stop_releases_the_port():
    github = GitHubStandin().start()
    url = github.api_url + "rate_limit"
    github.stop()
    with pytest.raises(httpx.TransportError):
        httpx.get(url, timeout=2)


def test_latency_makes_every_answer_wait_and_can_be_changed_while_serving():
    with GitHubStandin(latency=0.25) as github:
        url = github.api_url + "rate_limit"
        started = time.monotonic()
        first = httpx.get(url, headers={"Authorization": "token pat"}, timeout=5)
        waited = time.monotonic() - started
        github.latency = 0.0
        second = httpx.get(url, headers={"Authorization": "token pat"}, timeout=5)
    assert (first.status_code, second.status_code) == (200, 200)
    # A lower bound only: the answer cannot come before the latency has passed.
    assert waited >= 0.25


# ----- REST API


def test_rate_limit_answers_resources_and_headers(standin: GitHubStandin, http: httpx.Client):
    response = http.get(standin.api_url + "rate_limit", headers={"Authorization": "token pat"})
    assert response.status_code == 200
    core = response.json()["resources"]["core"]
    assert {"limit", "remaining", "reset", "used"} <= core.keys()
    assert response.json()["rate"]["limit"] == core["limit"]
    assert int(response.headers["X-RateLimit-Remaining"]) > 0


def test_rest_without_credentials_is_401(standin: GitHubStandin, http: httpx.Client):
    response = http.get(standin.api_url + "rate_limit")
    assert response.status_code == 401
    assert "message" in response.json()


def app_jwt(key: int = 0, **claims: Any) -> str:
    """An App JWT as ghinstallation (GARM's client) makes it: iat 30 s back, exp 2 min on."""
    now = int(time.time())
    return sign_app_jwt(
        pkcs1_pem(key), {"iat": now - 30, "exp": now + 90, "iss": str(APP_ID)} | claims
    )


def token_request(standin: GitHubStandin, http: httpx.Client, jwt: str) -> httpx.Response:
    return http.post(
        standin.api_url + "app/installations/5678/access_tokens",
        headers={"Authorization": f"Bearer {jwt}"},
    )


def test_installation_token_for_a_jwt_signed_by_the_apps_key(
    standin: GitHubStandin, http: httpx.Client
):
    fingerprint = standin.add_app_key(APP_ID, pkcs1_pem(0))
    response = token_request(standin, http, app_jwt())
    assert response.status_code == 201
    body = response.json()
    expires = datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00"))
    assert expires > datetime.now(UTC)
    [check] = standin.app_jwt_checks()
    assert (check.accepted, check.key, check.app_id) == (True, fingerprint, str(APP_ID))
    assert check.header == {"alg": "RS256", "typ": "JWT"}
    assert standin.requests[-1].app_jwt == check
    # The token works for the REST API; an installation token it never issued does not.
    ok = http.get(
        standin.api_url + "rate_limit", headers={"Authorization": f"token {body['token']}"}
    )
    assert ok.status_code == 200
    forged = {"Authorization": "token ghs_forged"}
    assert http.get(standin.api_url + "rate_limit", headers=forged).status_code == 401


def test_installation_token_without_a_jwt_is_refused(standin: GitHubStandin, http: httpx.Client):
    url = standin.api_url + "app/installations/5678/access_tokens"
    standin.add_app_key(APP_ID, pkcs1_pem(0))
    for headers in ({}, {"Authorization": "Bearer not-a-jwt"}, {"Authorization": "token pat"}):
        response = http.post(url, headers=headers)
        assert response.status_code == 401
        assert response.json()["message"] == DECODE_FAILED
    unsigned = make_jwt({"iss": str(APP_ID), "iat": int(time.time()), "exp": int(time.time())})
    assert token_request(standin, http, unsigned).status_code == 401
    assert [c.refusal for c in standin.app_jwt_checks()] == [DECODE_FAILED] * 4


@pytest.mark.parametrize(
    ("jwt", "message"),
    [
        pytest.param(lambda: app_jwt(key=1), DECODE_FAILED, id="another-key"),
        pytest.param(lambda: app_jwt(iss="999"), DECODE_FAILED, id="unknown-app"),
        pytest.param(lambda: app_jwt(iss=None), DECODE_FAILED, id="no-iss"),
        pytest.param(
            lambda: sign_app_jwt(pkcs1_pem(0), {"iss": str(APP_ID)}, alg="HS256"),
            DECODE_FAILED,
            id="not-rs256",
        ),
        pytest.param(lambda: app_jwt(exp=int(time.time()) - 1), EXP_INVALID, id="expired"),
        pytest.param(lambda: app_jwt(exp=None), EXP_INVALID, id="no-exp"),
        pytest.param(lambda: app_jwt(exp=time.time() + 60), EXP_INVALID, id="fractional-exp"),
        pytest.param(lambda: app_jwt(exp=int(time.time()) + 660), EXP_TOO_FAR, id="exp-11-min"),
        pytest.param(lambda: app_jwt(iat=int(time.time()) + 60), IAT_INVALID, id="future-iat"),
        pytest.param(lambda: app_jwt(iat="now"), IAT_INVALID, id="text-iat"),
    ],
)
def test_github_refuses_the_app_jwt_in_its_words(
    standin: GitHubStandin, http: httpx.Client, jwt: Any, message: str
):
    standin.add_app_key(APP_ID, pkcs1_pem(0))
    response = token_request(standin, http, jwt())
    assert response.status_code == 401
    assert response.json() == {
        "message": message,
        "documentation_url": "https://docs.github.com/rest",
    }
    [check] = standin.app_jwt_checks()
    assert (check.accepted, check.refusal) == (False, message)


def test_exp_ten_minutes_ahead_and_a_numeric_iss_are_taken(
    standin: GitHubStandin, http: httpx.Client
):
    standin.add_app_key(APP_ID, pkcs1_pem(0))
    now = int(time.time())
    assert token_request(standin, http, app_jwt(iat=now - 60, exp=now + 590)).status_code == 201
    assert token_request(standin, http, app_jwt(iss=APP_ID)).status_code == 201


def test_a_revoked_key_is_refused_and_the_other_key_signs(
    standin: GitHubStandin, http: httpx.Client
):
    old = standin.add_app_key(APP_ID, pkcs1_pem(0))
    new = standin.add_app_key(APP_ID, pkcs1_pem(1))
    assert standin.app_keys(APP_ID) == [old, new]
    assert token_request(standin, http, app_jwt(key=0)).status_code == 201
    assert token_request(standin, http, app_jwt(key=1)).status_code == 201
    standin.revoke_app_key(APP_ID, old)
    refused = token_request(standin, http, app_jwt(key=0))
    assert (refused.status_code, refused.json()["message"]) == (401, DECODE_FAILED)
    assert token_request(standin, http, app_jwt(key=1)).status_code == 201
    checks = standin.app_jwt_checks()
    assert [(c.key, c.accepted) for c in checks] == [
        (old, True),
        (new, True),
        (None, False),
        (new, True),
    ]


def test_app_keys_as_github_manages_them(standin: GitHubStandin):
    fingerprint = standin.add_app_key(APP_ID, pkcs1_pem(0))
    # The same key from its PKCS#8 or public PEM, and the fingerprint GitHub shows.
    public = (
        serialization.load_pem_private_key(pkcs1_pem(0).encode(), password=None)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    assert key_fingerprint(pkcs8_pem(0)) == key_fingerprint(public) == fingerprint
    assert fingerprint.startswith("SHA256:")
    assert standin.add_app_key(str(APP_ID), public) == fingerprint
    assert standin.app_keys(APP_ID) == [fingerprint]
    with pytest.raises(ConflictError):  # the only key: GitHub wants a new one first
        standin.revoke_app_key(APP_ID, fingerprint)
    with pytest.raises(NotFoundError):
        standin.revoke_app_key(APP_ID, pkcs1_pem(1))
    with pytest.raises(BadRequestError):
        standin.add_app_key(APP_ID, "not a key")
    with pytest.raises(BadRequestError):
        standin.add_app_key("app-1", pkcs1_pem(0))
    standin.add_app_key(APP_ID, pkcs1_pem(1))
    standin.revoke_app_key(APP_ID, pkcs1_pem(0))
    assert standin.app_keys(APP_ID) == [key_fingerprint(pkcs1_pem(1))]
    assert standin.app_keys(999) == []


def test_an_app_takes_25_keys(standin: GitHubStandin):
    for _ in range(25):
        # Only counted, never trusted: small keys keep 25 generations quick.
        small = rsa.generate_private_key(public_exponent=65537, key_size=1024)  # noqa: S505
        pem = small.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        standin.add_app_key(APP_ID, pem.decode())
    with pytest.raises(BadRequestError):
        standin.add_app_key(APP_ID, pkcs1_pem(0))
    assert len(standin.app_keys(APP_ID)) == 25


@pytest.mark.parametrize("entity", ["orgs/acme", "repos/acme/app", "enterprises/big"])
def test_registration_token_per_entity(standin: GitHubStandin, http: httpx.Client, entity: str):
    response = http.post(
        f"{standin.api_url}{entity}/actions/runners/registration-token",
        headers={"Authorization": "token pat"},
    )
    assert response.status_code == 201
    assert response.json()["token"]
    assert response.json()["expires_at"].endswith("Z")


def test_runner_registration_answers_actions_url_and_jwt(standin: GitHubStandin, http):
    actions = Actions(standin, http, org="acme")
    assert actions.url.startswith(standin.base_url + "/")
    assert actions.url.endswith("/")
    claims = jwt_claims(actions.token)
    assert claims is not None
    assert claims["exp"] > time.time() + 60


def test_runner_registration_refuses_wrong_or_foreign_tokens(standin: GitHubStandin, http):
    reg = http.post(
        f"{standin.api_url}orgs/acme/actions/runners/registration-token",
        headers={"Authorization": "token pat"},
    ).json()["token"]
    url = f"{standin.base_url}/actions/runner-registration"
    for org, auth in (("acme", f"Bearer {reg}"), ("other", f"RemoteAuth {reg}")):
        body = {"url": f"{standin.base_url}/{org}", "runner_event": "register"}
        response = http.post(url, json=body, headers={"Authorization": auth})
        assert response.status_code == 401, (org, auth)


@pytest.mark.parametrize("entity", ["orgs/acme", "repos/acme/app"])
def test_runner_downloads(standin: GitHubStandin, http: httpx.Client, entity: str):
    response = http.get(
        f"{standin.api_url}{entity}/actions/runners/downloads",
        headers={"Authorization": "token pat"},
    )
    assert response.status_code == 200
    linux = [d for d in response.json() if (d["os"], d["architecture"]) == ("linux", "x64")]
    assert len(linux) == 1
    assert linux[0]["download_url"].endswith(linux[0]["filename"])
    assert len(linux[0]["sha256_checksum"]) == 64


def test_runner_groups_rest_and_actions(standin: GitHubStandin, http, actions: Actions):
    group_id = standin.add_runner_group("gpu")
    response = http.get(
        standin.api_url + "orgs/acme/actions/runner-groups",
        params={"per_page": "100"},
        headers={"Authorization": "token pat"},
    )
    groups = {g["name"]: g for g in response.json()["runner_groups"]}
    assert groups["Default"]["id"] == 1
    assert groups["Default"]["default"] is True
    assert groups["gpu"]["id"] == group_id
    found = actions.call("GET", "_apis/runtime/runnergroups/", params={"groupName": "gpu"})
    assert found.json() == {
        "count": 1,
        "value": [{"id": group_id, "name": "gpu", "size": 0, "isDefaultGroup": False}],
    }


# ----- scale sets


def test_scale_set_create_lookup_get(standin: GitHubStandin, actions: Actions):
    created = actions.create_set("ss-one")
    assert isinstance(created["id"], int)
    assert created["runnerGroupName"] == "Default"
    assert [label["name"] for label in created["labels"]] == ["linux"]
    assert created["enabled"] is True
    assert created["statistics"]["totalAssignedJobs"] == 0
    lookup = actions.call(
        "GET", "_apis/runtime/runnerscalesets", params={"runnerGroupId": "1", "name": "ss-one"}
    ).json()
    assert lookup["count"] == 1
    assert lookup["value"][0]["id"] == created["id"]
    missing = actions.call("GET", "_apis/runtime/runnerscalesets", params={"name": "nope"})
    assert missing.json() == {"count": 0, "value": []}
    got = actions.call("GET", f"_apis/runtime/runnerscalesets/{created['id']}").json()
    assert got["name"] == "ss-one"
    assert [s.name for s in standin.scalesets()] == ["ss-one"]
    assert standin.scalesets()[0].entity_url == f"{standin.base_url}/acme"


def test_scale_set_patch_and_duplicate_name(actions: Actions):
    one = actions.create_set("ss-one")
    actions.create_set("ss-two")
    path = f"_apis/runtime/runnerscalesets/{one['id']}"
    renamed = actions.call("PATCH", path, json={"name": "ss-renamed", "enabled": False})
    assert renamed.status_code == 200
    assert renamed.json()["name"] == "ss-renamed"
    assert renamed.json()["enabled"] is False
    assert renamed.json()["labels"][0]["name"] == "linux"  # absent fields stay
    duplicate = actions.call(
        "POST", "_apis/runtime/runnerscalesets", json={"name": "ss-two", "runnerGroupId": 1}
    )
    assert duplicate.status_code == 400
    assert "already exists" in duplicate.json()["message"]


def test_scale_set_delete_is_204_then_404(standin: GitHubStandin, actions: Actions):
    created = actions.create_set()
    path = f"_apis/runtime/runnerscalesets/{created['id']}"
    assert actions.call("DELETE", path).status_code == 204
    assert standin.scalesets() == []
    gone = actions.call("GET", path)
    assert gone.status_code == 404
    assert gone.json()["typeName"]
    assert actions.call("DELETE", path).status_code == 404


def test_scale_sets_are_scoped_to_their_entity(standin: GitHubStandin, http: httpx.Client):
    acme, other = Actions(standin, http, "acme"), Actions(standin, http, "other")
    created = acme.create_set()
    assert other.call("GET", f"_apis/runtime/runnerscalesets/{created['id']}").status_code == 404
    # A tenant's admin token does not open another tenant's API.
    other.token = acme.token
    assert other.call("GET", "_apis/runtime/runnerscalesets").status_code == 401


def test_actions_needs_a_jwt_bearer(actions: Actions):
    response = actions.call(
        "GET", "_apis/runtime/runnerscalesets", headers={"Authorization": "Bearer nope"}
    )
    assert response.status_code == 401


# ----- sessions and the message queue


def test_session_fields_and_single_live_session(actions: Actions):
    created = actions.create_set()
    session = actions.open_session(created["id"])
    assert session["ownerName"] == "o"
    assert session["runnerScaleSet"]["id"] == created["id"]
    assert jwt_claims(session["messageQueueAccessToken"])["exp"] > time.time()
    assert "totalAvailableJobs" in session["statistics"]
    second = actions.call(
        "POST", f"_apis/runtime/runnerscalesets/{created['id']}/sessions", json={"ownerName": "x"}
    )
    assert second.status_code == 409


def test_abandoned_session_does_not_block_a_new_one(http: httpx.Client):
    with GitHubStandin(poll_timeout=POLL, session_idle_timeout=0.2) as github:
        actions = Actions(github, http)
        created = actions.create_set()
        actions.open_session(created["id"])
        time.sleep(0.3)
        actions.open_session(created["id"])


def test_session_refresh_and_delete(actions: Actions):
    created = actions.create_set()
    session = actions.open_session(created["id"])
    path = f"_apis/runtime/runnerscalesets/{created['id']}/sessions/{session['sessionId']}"
    refreshed = actions.call("PATCH", path)
    assert refreshed.status_code == 200
    assert refreshed.json()["sessionId"] == session["sessionId"]
    assert refreshed.json()["messageQueueAccessToken"] != session["messageQueueAccessToken"]
    assert actions.poll(session).status_code == 401  # the old token no longer opens the queue
    assert actions.poll(refreshed.json()).status_code == 202
    assert actions.call("DELETE", path).status_code == 204
    assert actions.call("DELETE", path).status_code == 404
    assert actions.poll(refreshed.json()).status_code == 404
    actions.open_session(created["id"])  # free again


def test_session_of_unknown_scale_set_is_404(actions: Actions):
    response = actions.call("POST", "_apis/runtime/runnerscalesets/99/sessions", json={})
    assert response.status_code == 404


def test_empty_long_poll_waits_then_answers_202_empty(standin: GitHubStandin, actions):
    session = actions.open_session(actions.create_set()["id"])
    started = time.monotonic()
    response = actions.poll(session)
    elapsed = time.monotonic() - started
    assert response.status_code == 202
    assert response.content == b""
    assert POLL * 0.8 <= elapsed < POLL + 2
    assert standin.scalesets()[0].max_capacity == 3


def test_long_poll_returns_when_a_message_arrives(http: httpx.Client):
    with GitHubStandin(poll_timeout=8) as github:
        actions = Actions(github, http)
        session = actions.open_session(actions.create_set("ss-one")["id"])
        timer = threading.Timer(0.3, github.queue_job, args=("ss-one",))
        timer.start()
        started = time.monotonic()
        response = actions.poll(session)
        elapsed = time.monotonic() - started
        timer.join()
    assert response.status_code == 200
    assert 0.2 < elapsed < 4
    [job] = jobs_of(response.json())
    assert job["messageType"] == "JobAvailable"


def test_job_available_message_shape(standin: GitHubStandin, actions: Actions):
    session = actions.open_session(actions.create_set("ss-one")["id"])
    job_id = standin.queue_job("ss-one", labels=["linux", "x64"])
    message = next_message(actions, session)
    assert message["statistics"]["totalAvailableJobs"] == 1
    [job] = jobs_of(message)
    assert job["jobId"] == str(job_id)  # GARM decodes jobId as a string
    assert job["runnerRequestId"] == job_id
    assert job["requestLabels"] == ["linux", "x64"]
    assert job["ownerName"] == "acme"


def test_ack_and_last_message_id(standin: GitHubStandin, actions: Actions):
    session = actions.open_session(actions.create_set("ss-one")["id"])
    standin.queue_job("ss-one")
    standin.queue_job("ss-one")
    first = next_message(actions, session)
    second = next_message(actions, session, last=first["messageId"])
    assert second["messageId"] > first["messageId"]
    assert next_message(actions, session)["messageId"] == first["messageId"]  # not deleted yet
    assert actions.ack(session, first["messageId"]).status_code == 204
    assert actions.ack(session, first["messageId"]).status_code == 404
    assert next_message(actions, session)["messageId"] == second["messageId"]
    assert actions.ack(session, second["messageId"]).status_code == 204
    assert actions.poll(session).status_code == 202


def test_stop_ends_a_long_poll_at_once(http: httpx.Client):
    github = GitHubStandin(poll_timeout=30).start()
    actions = Actions(github, http)
    session = actions.open_session(actions.create_set()["id"])
    outcome: list[object] = []

    def poll() -> None:
        try:
            outcome.append(actions.poll(session).status_code)
        except httpx.TransportError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=poll)
    thread.start()
    time.sleep(0.3)
    started = time.monotonic()
    github.stop()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert time.monotonic() - started < 5
    assert outcome


# ----- jobs and runners


def test_acquire_posts_job_assigned(standin: GitHubStandin, actions: Actions):
    set_id = actions.create_set("ss-one")["id"]
    session = actions.open_session(set_id)
    job_id = standin.queue_job("ss-one")
    listed = actions.call("GET", f"_apis/runtime/runnerscalesets/{set_id}/acquirablejobs")
    assert [j["runnerRequestId"] for j in listed.json()["value"]] == [job_id]
    available = next_message(actions, session)
    acquired = actions.call(
        "POST",
        f"_apis/runtime/runnerscalesets/{set_id}/acquirejobs",
        json=[job_id, 999],
        headers={"Authorization": f"Bearer {session['messageQueueAccessToken']}"},
    )
    assert acquired.json() == {"count": 1, "value": [job_id]}
    assigned = next_message(actions, session, last=available["messageId"])
    assert [j["messageType"] for j in jobs_of(assigned)] == ["JobAssigned"]
    assert assigned["statistics"]["totalAssignedJobs"] == 1
    assert assigned["statistics"]["totalAvailableJobs"] == 0
    assert [j.state for j in standin.jobs()] == ["assigned"]
    again = actions.call(
        "POST", f"_apis/runtime/runnerscalesets/{set_id}/acquirejobs", json=[job_id]
    )
    assert again.json() == {"count": 0, "value": []}


def test_generatejitconfig_registers_a_runner(standin: GitHubStandin, actions: Actions):
    set_id = actions.create_set("ss-one")["id"]
    response = actions.jit(set_id, "garm-abc")
    assert response.status_code == 200
    runner = response.json()["runner"]
    assert runner["name"] == "garm-abc"
    assert runner["runnerScaleSetId"] == set_id
    assert runner["status"] == "offline"
    assert runner["busy"] is False
    files = json.loads(base64.b64decode(response.json()["encodedJITConfig"]))
    assert all(isinstance(v, str) for v in files.values())
    assert ".runner" in files
    [view] = standin.runners()
    assert (view.id, view.name, view.scale_set_id) == (runner["id"], "garm-abc", set_id)
    assert actions.jit(set_id, "garm-abc").status_code == 409
    assert actions.jit(99, "garm-x").status_code == 404


def test_jit_runner_files_are_written_as_github_writes_them(actions: Actions):
    set_id = actions.create_set("ss-one")["id"]
    answer = actions.jit(set_id, "garm-abc").json()
    files = json.loads(base64.b64decode(answer["encodedJITConfig"]))
    raw = base64.b64decode(files[".runner"])
    assert not raw.startswith(b"\xef\xbb\xbf")  # no BOM: garm-agent's json.Unmarshal refuses one
    runner = json.loads(raw.decode("utf-8"))
    assert runner["agentId"] == str(answer["runner"]["id"])
    assert runner["agentName"] == "garm-abc"
    assert runner["ephemeral"] == "True"
    assert all(isinstance(v, str) for v in runner.values())
    # One key per line: GARM's install script greps the agent ID out of the file.
    [line] = [ln for ln in raw.decode().splitlines() if "agentId" in ln]
    assert "".join(ch for ch in line if ch.isdigit()) == runner["agentId"]
    credentials = json.loads(base64.b64decode(files[".credentials"]))
    assert credentials["scheme"] == "OAuth"
    assert all(isinstance(v, str) for v in credentials["data"].values())


def test_agents_get_list_by_name_delete(actions: Actions):
    set_id = actions.create_set()["id"]
    agent_id = actions.jit(set_id, "garm-abc").json()["runner"]["id"]
    actions.jit(set_id, "garm-def")
    agents = "_apis/distributedtask/pools/0/agents"
    by_name = actions.call("GET", agents, params={"agentName": "garm-abc"}).json()
    assert by_name["count"] == 1
    assert by_name["value"][0]["id"] == agent_id
    assert actions.call("GET", agents).json()["count"] == 2
    assert actions.call("GET", f"{agents}/{agent_id}").json()["name"] == "garm-abc"
    assert actions.call("DELETE", f"{agents}/{agent_id}").status_code == 204
    assert actions.call("GET", f"{agents}/{agent_id}").status_code == 404
    assert actions.call("DELETE", f"{agents}/{agent_id}").status_code == 404


def test_job_runs_on_a_runner_busy_then_gone(standin: GitHubStandin, actions: Actions):
    set_id = actions.create_set("ss-one")["id"]
    session = actions.open_session(set_id)
    job_id = standin.queue_job("ss-one")
    runner_id = actions.jit(set_id, "garm-abc").json()["runner"]["id"]
    with pytest.raises(StandinError):
        standin.start_job(job_id, "garm-abc")  # not acquired yet
    actions.call("POST", f"_apis/runtime/runnerscalesets/{set_id}/acquirejobs", json=[job_id])
    last = next_message(actions, session, last=next_message(actions, session)["messageId"])
    standin.start_job(job_id, "garm-abc")
    started = next_message(actions, session, last=last["messageId"])
    [job] = jobs_of(started)
    assert (job["messageType"], job["runnerName"], job["runnerId"]) == (
        "JobStarted",
        "garm-abc",
        runner_id,
    )
    assert started["statistics"]["totalBusyRunners"] == 1
    assert standin.runners()[0].busy is True
    agent = f"_apis/distributedtask/pools/0/agents/{runner_id}"
    assert actions.call("GET", agent).json()["status"] == "online"
    assert actions.call("DELETE", agent).status_code == 409  # busy runners stay
    standin.complete_job(job_id, result="failed")
    completed = next_message(actions, session, last=started["messageId"])
    [job] = jobs_of(completed)
    assert (job["messageType"], job["result"], job["runnerName"]) == (
        "JobCompleted",
        "failed",
        "garm-abc",
    )
    assert completed["statistics"]["totalAssignedJobs"] == 0
    assert standin.runners() == []  # ephemeral: unregistered after its job
    assert [(j.state, j.result) for j in standin.jobs()] == [("completed", "failed")]
    with pytest.raises(StandinError):
        standin.complete_job(job_id)


def test_control_api_refuses_unknown_names(standin: GitHubStandin, actions: Actions):
    actions.create_set("ss-one")
    with pytest.raises(StandinError):
        standin.queue_job("nope")
    with pytest.raises(StandinError):
        standin.set_runner_status("nobody", "online")
    assert standin.jobs() == []


def test_set_runner_status_shows_in_agents(standin: GitHubStandin, actions: Actions):
    set_id = actions.create_set()["id"]
    agent_id = actions.jit(set_id, "garm-abc").json()["runner"]["id"]
    standin.set_runner_status("garm-abc", "online")
    agent = actions.call("GET", f"_apis/distributedtask/pools/0/agents/{agent_id}").json()
    assert agent["status"] == "online"


# ----- the record


def test_unknown_route_is_404_json_and_recorded(standin: GitHubStandin, http: httpx.Client):
    response = http.get(standin.api_url + "orgs/acme/hooks", params={"per_page": "100"})
    assert response.status_code == 404
    assert "Not Found" in response.json()["message"]
    [unknown] = standin.unknown_requests
    assert (unknown.method, unknown.path, unknown.query, unknown.status) == (
        "GET",
        "/api/v3/orgs/acme/hooks",
        "per_page=100",
        404,
    )
    assert unknown.route is None


def test_requests_are_recorded_in_order_and_cleared(standin: GitHubStandin, actions: Actions):
    actions.create_set()
    routes = [r.route for r in standin.requests]
    assert routes == ["registration_token", "runner_registration", "create_scale_set"]
    assert standin.requests[-1].query == "api-version=6.0-preview"
    assert standin.requests[-1].status == 200
    standin.clear_requests()
    assert standin.requests == []
    assert standin.handler_errors == []


def test_a_held_route_answers_once_released(standin: GitHubStandin, http: httpx.Client):
    actions = Actions(standin, http)
    actions.create_set("held")
    lookup = standin.hold("list_scale_sets")
    answers: list[int] = []
    caller = threading.Thread(
        target=lambda: answers.append(
            actions.call(
                "GET", "_apis/runtime/runnerscalesets", params={"name": "held"}
            ).status_code
        )
    )
    caller.start()
    assert lookup.arrived.wait(5)
    # Other routes are not held.
    assert actions.call("GET", "_apis/runtime/runnerscalesets/1").status_code == 200
    time.sleep(0.2)
    assert answers == []
    lookup.release()
    caller.join(5)
    assert answers == [200]
    # Later calls pass at once.
    assert actions.call("GET", "_apis/runtime/runnerscalesets").status_code == 200


def test_stopping_releases_a_hold_and_only_routes_can_be_held(standin: GitHubStandin):
    with pytest.raises(ValueError, match="no route"):
        standin.hold("no_such_route")
    lookup = standin.hold("list_scale_sets")
    standin.stop()
    assert lookup.released.is_set()
