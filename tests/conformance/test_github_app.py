"""Which GitHub App key real GARM signs with, as GitHub (the stand-in) verifies it.

GARM trades an App JWT for an installation token before it creates a scale set on GitHub. The
stand-in verifies that JWT as GitHub does (RS256 against the App's registered keys, ``iss``,
``iat``, ``exp``) and records which key signed it, so these tests read what GARM sent and whose
key it was. Real GARM only: the emulator does not talk to GitHub.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest

from garm import (
    CreateCredentialParams,
    CreateScaleSetParams,
    GarmApiError,
    GarmClient,
    GithubApp,
    UpdateCredentialParams,
)
from tests.conformance.backends import REAL
from tests.conformance.conftest import PROVIDER_NAME
from tests.github_standin import AppJwtCheck, GitHubStandin, key_fingerprint
from tests.github_standin.apps import DECODE_FAILED
from tests.real_garm.harness import SKIP_REASON, RealGarm, garm_binary
from tests.rsa_keys import pkcs1_pem
from vocabulary.desired_state import MANAGED_CREDENTIAL_DESCRIPTION

APP_ID, INSTALLATION_ID = 41, 42
CREDENTIAL = f"app-{APP_ID}-{INSTALLATION_ID}"
TOKEN_PATH = f"/api/v3/app/installations/{INSTALLATION_ID}/access_tokens"


@pytest.fixture(params=[REAL])
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Real GARM only (the emulator never asks GitHub for a token)."""
    if garm_binary() is None:
        pytest.skip(SKIP_REASON)
    yield request.param


def _app(key: int) -> GithubApp:
    pem = base64.b64encode(pkcs1_pem(key).encode()).decode()
    return GithubApp(app_id=APP_ID, installation_id=INSTALLATION_ID, private_key_bytes=pem)


def _org_with_app_credentials(client: GarmClient) -> str:
    client.create_credential(
        CreateCredentialParams(
            name=CREDENTIAL,
            description=MANAGED_CREDENTIAL_DESCRIPTION,
            endpoint="github.com",
            app=_app(0),
        )
    )
    org = client.create_organization("app-org", CREDENTIAL, "c3" * 32)
    assert org.id is not None
    return org.id


def _create_scaleset(client: GarmClient, org_id: str, name: str) -> None:
    client.create_org_scaleset(
        org_id,
        CreateScaleSetParams(
            name=name,
            provider_name=PROVIDER_NAME,
            image="ubuntu-24.04",
            flavor="m1.small",
            os_type="linux",
            os_arch="amd64",
            max_runners=1,
            min_idle_runners=0,
            enabled=True,
            labels=["linux"],
        ),
    )


def _token_requests(github: GitHubStandin) -> list[AppJwtCheck]:
    return [r.app_jwt for r in github.requests if r.path == TOKEN_PATH and r.app_jwt]


def test_garm_signs_with_the_apps_key_and_is_refused_once_github_revoked_it(
    ready_garm: RealGarm, client: GarmClient, github: GitHubStandin
):
    first, second = key_fingerprint(pkcs1_pem(0)), key_fingerprint(pkcs1_pem(1))
    org_id = _org_with_app_credentials(client)
    assert github.app_keys(APP_ID) == [first]  # the App exists on GitHub with GARM's key

    # GARM builds a new GitHub client, so asks for a new installation token, per operation.
    _create_scaleset(client, org_id, "signed-1")
    checks = _token_requests(github)
    assert checks
    assert {(c.accepted, c.key, c.app_id) for c in checks} == {(True, first, str(APP_ID))}
    # What ghinstallation (GARM's GitHub App client) sends: iss is the App id as a string,
    # iat 30 s in the past, exp 2 minutes after iat.
    for check in checks:
        assert check.header == {"alg": "RS256", "typ": "JWT"}
        assert set(check.claims) == {"iss", "iat", "exp"}
        assert check.claims["iss"] == str(APP_ID)
        assert check.claims["exp"] - check.claims["iat"] == 120
        assert 30 <= check.at - check.claims["iat"] < 40  # 30 s back, plus transit

    # The operator generates a second key on GitHub and deletes the one GARM holds.
    github.add_app_key(APP_ID, pkcs1_pem(1))
    github.revoke_app_key(APP_ID, first)
    github.clear_requests()
    with pytest.raises(GarmApiError) as refused:
        _create_scaleset(client, org_id, "signed-2")
    assert refused.value.status == 500  # GARM's answer is a bare "Server error"
    refusal = f"could not refresh installation id {INSTALLATION_ID}'s token"
    assert f'{refusal}: received non 2xx response status \\"401 Unauthorized\\"' in (
        ready_garm.log_path.read_text()
    )
    checks = _token_requests(github)
    assert checks
    assert {(c.accepted, c.key, c.refusal) for c in checks} == {(False, None, DECODE_FAILED)}
    assert [s.name for s in github.scalesets()] == ["signed-1"]

    # Once GARM holds the new key, its token requests are signed with it.
    credential = next(c for c in client.list_credentials() if c.name == CREDENTIAL)
    assert credential.id is not None
    client.update_credential(credential.id, UpdateCredentialParams(app=_app(1)))
    github.clear_requests()
    _create_scaleset(client, org_id, "signed-3")
    assert {c.key for c in _token_requests(github) if c.accepted} == {second}
    assert [s.name for s in github.scalesets()] == ["signed-1", "signed-3"]
