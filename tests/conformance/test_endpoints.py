"""GARM's GitHub endpoints, as the charm relies on them for GitHub Enterprise Server (ADR 0014).

Both backends: a GHES endpoint created beside github.com, its CA bundle stored as GARM keeps it
(re-encoded, each certificate once; text without a PEM block dropped), rotated by an update and
never cleared; its URLs fixed once credentials use it; the same organisation name on two
endpoints as two organisations; and the endpoint deleted only once no credential or entity
uses it. Seeded through GARM's API only.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from garm import (
    CreateCredentialParams,
    CreateEndpointParams,
    GarmApiError,
    GarmClient,
    GarmConflictError,
    GarmNotFoundError,
    GithubApp,
    UpdateEndpointParams,
)
from tests.conformance.test_client import WEBHOOK_SECRET, key_b64, scaleset_params
from tests.github_standin import GitHubStandin
from tests.real_garm.tls_front import make_certificates
from vocabulary.github_endpoint import ca_certificates, endpoint_name

GHES = "https://ghes.example.com"
NAME = "ghes.example.com"
MARKER = "Managed by garm"


@pytest.fixture
def cas(tmp_path: Path) -> tuple[str, str]:
    first, _, _ = make_certificates(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    second, _, _ = make_certificates(other)
    return first.read_text(), second.read_text()


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def ghes_params(name: str = NAME, bundle: str | None = None) -> CreateEndpointParams:
    return CreateEndpointParams(
        name=name,
        description=MARKER,
        base_url=GHES,
        api_base_url=f"{GHES}/api/v3/",
        upload_base_url=f"{GHES}/api/uploads/",
        ca_cert_bundle=None if bundle is None else b64(bundle),
    )


def stored_certificates(client: GarmClient, name: str = NAME) -> tuple[bytes, ...]:
    (endpoint,) = [e for e in client.list_endpoints() if e.name == name]
    raw = base64.b64decode(endpoint.ca_cert_bundle or "").decode()
    return ca_certificates(raw)


def credential(name: str, endpoint: str, installation: int) -> CreateCredentialParams:
    app = GithubApp(app_id=1, installation_id=installation, private_key_bytes=key_b64())
    return CreateCredentialParams(name=name, description=MARKER, endpoint=endpoint, app=app)


def test_a_ghes_endpoint_and_its_ca_bundle(client: GarmClient, cas: tuple[str, str]) -> None:
    first, second = cas
    created = client.create_endpoint(ghes_params(bundle=first + first))
    assert (created.name, created.base_url, created.api_base_url, created.upload_base_url) == (
        NAME,
        GHES,
        f"{GHES}/api/v3/",
        f"{GHES}/api/uploads/",
    )
    # Stored re-encoded, each certificate once.
    assert stored_certificates(client) == ca_certificates(first)
    assert [e.name for e in client.list_endpoints()] == ["github.com", NAME]
    # Names are unique without regard to case.
    with pytest.raises(GarmConflictError) as duplicate:
        client.create_endpoint(ghes_params(name=NAME.upper()))
    assert duplicate.value.status == 409
    assert "already exists" in duplicate.value.details
    # A rotation is an update; the same certificates again change nothing.
    client.update_endpoint(NAME, UpdateEndpointParams(ca_cert_bundle=b64(second)))
    assert stored_certificates(client) == ca_certificates(second)
    # Text without a PEM block is ignored, and an empty bundle is refused: no way to clear one.
    client.update_endpoint(NAME, UpdateEndpointParams(ca_cert_bundle=b64("junk")))
    assert stored_certificates(client) == ca_certificates(second)
    with pytest.raises(GarmApiError) as cleared:
        client.update_endpoint(NAME, UpdateEndpointParams(ca_cert_bundle=""))
    assert (cleared.value.status, cleared.value.details) == (
        400,
        "failed to validate github endpoint params: invalid ca_cert_bundle",
    )
    # On create, text without a PEM block gives an endpoint without a bundle.
    client.create_endpoint(ghes_params(name="junk-bundle", bundle="junk"))
    assert stored_certificates(client, "junk-bundle") == ()
    with pytest.raises(GarmNotFoundError):
        client.update_endpoint("nope", UpdateEndpointParams(description="x"))


def test_credentials_and_entities_bind_an_endpoint(client: GarmClient) -> None:
    client.create_endpoint(ghes_params())
    client.create_credential(credential("app-1-2-ghes", NAME, 2))
    client.create_credential(credential("app-1-3", "github.com", 3))
    with pytest.raises(GarmNotFoundError) as unknown:
        client.create_credential(credential("app-1-4", "nope", 4))
    assert "github endpoint not found" in unknown.value.details
    listed = {c.name: c.endpoint.name if c.endpoint else None for c in client.list_credentials()}
    assert listed == {"app-1-2-ghes": NAME, "app-1-3": "github.com"}
    # The same organisation on two endpoints is two organisations; on one, a duplicate.
    on_ghes = client.create_organization("canonical", "app-1-2-ghes", WEBHOOK_SECRET)
    client.create_organization("canonical", "app-1-3", WEBHOOK_SECRET)
    with pytest.raises(GarmConflictError):
        client.create_organization("Canonical", "app-1-2-ghes", WEBHOOK_SECRET)
    endpoints = sorted(o.endpoint.name for o in client.list_organizations() if o.endpoint)
    assert endpoints == sorted(["github.com", NAME])
    assert on_ghes.id is not None
    # An organisation never moves to another endpoint's credential.
    with pytest.raises(GarmApiError) as moved:
        client.update_organization(on_ghes.id, credentials_name="app-1-3")
    assert (moved.value.status, moved.value.details) == (
        400,
        "error updating org: error saving org: endpoint mismatch",
    )
    # Its URLs are fixed while credentials use it; it is deleted only once nothing does.
    with pytest.raises(GarmApiError) as repointed:
        client.update_endpoint(NAME, UpdateEndpointParams(base_url="https://other.example"))
    assert repointed.value.status == 400
    assert "cannot update endpoint URLs with existing credentials" in repointed.value.details
    refused = "cannot delete endpoint with associated entities"
    with pytest.raises(GarmApiError) as in_use:
        client.delete_endpoint(NAME)
    assert (in_use.value.status, refused in in_use.value.details) == (400, True)
    client.delete_organization(on_ghes.id)
    with pytest.raises(GarmApiError) as credential_left:
        client.delete_endpoint(NAME)
    assert refused in credential_left.value.details
    (ghes_credential,) = [c for c in client.list_credentials() if c.name == "app-1-2-ghes"]
    assert ghes_credential.id is not None
    client.delete_credential(ghes_credential.id)
    client.delete_endpoint(NAME)
    client.delete_endpoint(NAME)  # an unknown endpoint is deleted already
    assert [e.name for e in client.list_endpoints()] == ["github.com"]


def test_a_scale_set_is_listed_on_its_organisation_s_endpoint(
    client: GarmClient, github: GitHubStandin
) -> None:
    # A GHES endpoint served over plain HTTP by the stand-in: GARM creates the scale set there.
    urls = github.endpoint_params()
    client.create_endpoint(CreateEndpointParams(name="ghes-plain", description=MARKER, **urls))
    client.create_credential(credential("app-1-5-ghes-plain", "ghes-plain", 5))
    org = client.create_organization("canonical", "app-1-5-ghes-plain", WEBHOOK_SECRET)
    assert org.id is not None
    client.create_org_scaleset(org.id, scaleset_params("on-ghes"))
    (listed,) = client.list_scalesets()
    assert (listed.org_name, listed.endpoint and listed.endpoint.name) == (
        "canonical",
        "ghes-plain",
    )


def test_an_ipv6_ghes_endpoint_by_its_derived_name(client: GarmClient) -> None:
    url = "https://[2001:db8::1]:8443"
    name = endpoint_name(url)
    assert name == "ipv6-2001-db8--1-8443"
    params = CreateEndpointParams(
        name=name,
        description=MARKER,
        base_url=url,
        api_base_url=f"{url}/api/v3/",
        upload_base_url=f"{url}/api/uploads/",
    )
    created = client.create_endpoint(params)
    assert (created.name, created.base_url, created.api_base_url) == (
        name,
        url,
        f"{url}/api/v3/",
    )
    client.create_credential(credential(f"app-1-1-{name}", name, 1))
    assert [c.endpoint.name for c in client.list_credentials() if c.endpoint] == [name]
