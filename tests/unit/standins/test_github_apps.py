"""The real-GARM glue that has each App credential GARM accepts exist on the GitHub stand-in."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest

from garm import (
    CreateCredentialParams,
    GarmApiError,
    GarmClient,
    GithubApp,
    UpdateCredentialParams,
)
from tests.garm_emulator import GarmEmulator
from tests.github_standin import GitHubStandin, key_fingerprint
from tests.real_garm.github_apps import register_configured_apps
from tests.real_garm.proxy import API_PREFIX, RecordingProxy
from tests.rsa_keys import pkcs1_pem, pkcs8_pem
from tests.unit.conftest import ADMIN_PASSWORD, ADMIN_USERNAME
from vocabulary.desired_state import MANAGED_CREDENTIAL_DESCRIPTION


@pytest.fixture
def github() -> Iterator[GitHubStandin]:
    with GitHubStandin() as standin:
        yield standin


@pytest.fixture
def proxied(ready_emulator: GarmEmulator, github: GitHubStandin) -> Iterator[GarmClient]:
    """The charm's client, reaching the emulator through a proxy that registers App keys."""
    proxy = RecordingProxy(ready_emulator.port).start()
    register_configured_apps(proxy, github)
    try:
        with GarmClient(proxy.base_url + API_PREFIX) as client:
            client.login(ADMIN_USERNAME, ADMIN_PASSWORD)
            yield client
    finally:
        proxy.stop()


def _app(app_id: int, pem: str) -> GithubApp:
    key = base64.b64encode(pem.encode()).decode()
    return GithubApp(app_id=app_id, installation_id=2, private_key_bytes=key)


def _create(client: GarmClient, name: str, app: GithubApp) -> int:
    credential = client.create_credential(
        CreateCredentialParams(
            name=name, description=MANAGED_CREDENTIAL_DESCRIPTION, endpoint="github.com", app=app
        )
    )
    assert credential.id is not None
    return credential.id


def test_an_accepted_credential_makes_its_app_exist_with_its_key(
    proxied: GarmClient, github: GitHubStandin
):
    credential_id = _create(proxied, "app-7-2", _app(7, pkcs1_pem(0)))
    assert github.app_keys(7) == [key_fingerprint(pkcs1_pem(0))]
    # A later key is the test's to add on GitHub, as an operator generates it there first.
    proxied.update_credential(credential_id, UpdateCredentialParams(app=_app(7, pkcs1_pem(1))))
    assert github.app_keys(7) == [key_fingerprint(pkcs1_pem(0))]


def test_a_refused_credential_makes_no_app(proxied: GarmClient, github: GitHubStandin):
    with pytest.raises(GarmApiError):  # GARM takes only PKCS#1 keys
        _create(proxied, "app-8-2", _app(8, pkcs8_pem(0)))
    assert github.app_keys(8) == []
