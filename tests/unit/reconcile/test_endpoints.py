"""The GHES endpoint reconciler against the emulator through the real client (ADR 0014).

What the charm-level conformance test does not reach: an endpoint of the name made by someone
else (used when it points at the same server, else left alone and its credentials wait), a
bundle gone from the configurator (GARM keeps it: nothing is sent), and GARM refusing a create.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from garm import CreateEndpointParams, GarmClient
from reconcile.credentials import CredentialReconciler
from reconcile.endpoints import EndpointReconciler, stored_certificates
from tests.garm_emulator import GarmEmulator
from tests.real_garm.tls_front import make_certificates
from tests.rsa_keys import pkcs1_pem
from vocabulary.desired_state import AppKey, CredentialSpec, EndpointSpec
from vocabulary.github_endpoint import ca_certificates
from vocabulary.notices import Notice, Severity

URL = "https://ghes.example.com"
NAME = "ghes.example.com"


@pytest.fixture
def ca(tmp_path: Path) -> str:
    return make_certificates(tmp_path)[0].read_text()


def spec(bundle: str = "", url: str = URL) -> EndpointSpec:
    return EndpointSpec(NAME, url, bundle, source="cfg-ghes")


def credential() -> CredentialSpec:
    return CredentialSpec(
        name=f"app-1-2-{NAME}",
        endpoint=NAME,
        app_id=1,
        installation_id=2,
        key=AppKey.of(pkcs1_pem()),
        description="Managed by garm",
        source="cfg-ghes",
    )


def listed(client: GarmClient) -> dict[str, object]:
    return {e.name or "": e for e in client.list_endpoints()}


def foreign(client: GarmClient, url: str) -> None:
    client.create_endpoint(
        CreateEndpointParams(
            name=NAME,
            description="made by hand",
            base_url=url,
            api_base_url=f"{url}/api/v3/",
            upload_base_url=f"{url}/api/uploads/",
        )
    )


def test_a_removed_bundle_stays_and_nothing_is_sent(
    client: GarmClient, ready_emulator: GarmEmulator, ca: str
) -> None:
    EndpointReconciler(client).ensure([spec(ca)])
    ready_emulator.clear_requests()
    reconciler = EndpointReconciler(client)
    reconciler.ensure([spec("")])
    assert ready_emulator.writes() == []
    (endpoint,) = [e for e in client.list_endpoints() if e.name == NAME]
    assert stored_certificates(endpoint) == ca_certificates(ca)
    assert reconciler.missing == set() and reconciler.notices == []


def test_a_foreign_endpoint_of_the_same_server_is_used_as_it_is(
    client: GarmClient, ready_emulator: GarmEmulator, ca: str
) -> None:
    foreign(client, URL)
    ready_emulator.clear_requests()
    reconciler = EndpointReconciler(client)
    reconciler.ensure([spec(ca)])
    assert ready_emulator.writes() == []
    assert reconciler.missing == set()
    # Never deleted either, even when nobody wants it.
    EndpointReconciler(client).prune([], in_use=())
    assert NAME in listed(client)


def test_a_foreign_endpoint_elsewhere_holds_the_credentials(
    client: GarmClient, ready_emulator: GarmEmulator
) -> None:
    foreign(client, "https://elsewhere.example.com")
    endpoints = EndpointReconciler(client)
    endpoints.ensure([spec()])
    assert endpoints.missing == {NAME}
    assert endpoints.notices == [
        Notice(
            Severity.BLOCKED,
            "cfg-ghes",
            f"endpoint {NAME} is not the charm's and points elsewhere",
        )
    ]
    credentials = CredentialReconciler(client)
    credentials.ensure([credential()], missing_endpoints=endpoints.missing)
    assert client.list_credentials() == []
    assert credentials.notices == [
        Notice(Severity.WAITING, "cfg-ghes", f"waiting for endpoint {NAME}")
    ]


def test_a_refused_create_is_noted_and_the_credential_waits(
    client: GarmClient, ready_emulator: GarmEmulator
) -> None:
    endpoints = EndpointReconciler(client)
    endpoints.ensure([spec(url="https://")])  # GARM refuses a URL without a host
    assert endpoints.missing == {NAME}
    assert [n.subject for n in endpoints.notices] == ["cfg-ghes"]
    assert endpoints.notices[0].severity == Severity.BLOCKED


def test_an_endpoint_a_credential_is_on_is_kept_until_the_credential_goes(
    client: GarmClient, ready_emulator: GarmEmulator, ca: str
) -> None:
    EndpointReconciler(client).ensure([spec(ca)])
    CredentialReconciler(client).ensure([credential()])
    credentials = CredentialReconciler(client)
    EndpointReconciler(client).prune([], credentials.endpoints_in_use([]))
    assert NAME in listed(client)
    credentials.prune([], in_use=set())
    EndpointReconciler(client).prune([], credentials.endpoints_in_use([]))
    assert NAME not in listed(client)
