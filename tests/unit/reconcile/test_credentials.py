"""The credential reconciler (spec 13.1) against the emulator through the real client."""

from __future__ import annotations

import base64
import logging

import pytest

from garm import GarmApiError, GarmClient, GarmConnectionError
from reconcile.credentials import CredentialReconciler
from tests.garm_emulator import GarmEmulator
from tests.rsa_keys import pkcs1_pem
from vocabulary.desired_state import AppKey, CredentialSpec

MARKER = "Managed by garm"
PRIVATE_KEY = pkcs1_pem()  # registered as a secret, PEM and base64


def _spec(app_id: int = 1, installation_id: int = 2, description: str = MARKER) -> CredentialSpec:
    return CredentialSpec(
        name=f"app-{app_id}-{installation_id}",
        endpoint="github.com",
        app_id=app_id,
        installation_id=installation_id,
        key=AppKey.of(PRIVATE_KEY),
        description=description,
    )


def reconcile_credentials(
    client: GarmClient,
    desired: list[CredentialSpec],
    *,
    prune: bool = True,
    in_use: frozenset[str] = frozenset(),
) -> None:
    """One credential pass as the charm runs it: ensure first, prune last."""
    reconciler = CredentialReconciler(client)
    reconciler.ensure(desired)
    if prune:
        reconciler.prune(desired, in_use)


def _names(emulator: GarmEmulator) -> list[str]:
    return sorted(c["name"] for c in emulator.credentials())


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_creates_missing_credential_with_base64_key(
    ready_emulator: GarmEmulator, client: GarmClient, caplog: pytest.LogCaptureFixture
) -> None:
    reconcile_credentials(client, [_spec()])

    (post,) = ready_emulator.writes()
    assert (post.method, post.path) == ("POST", "/github/credentials")
    assert post.body == {
        "name": "app-1-2",
        "description": MARKER,
        "endpoint": "github.com",
        "auth_type": "app",
        "app": {
            "app_id": 1,
            "installation_id": 2,
            "private_key_bytes": base64.b64encode(PRIVATE_KEY.encode()).decode(),
        },
    }
    stored = ready_emulator.credential_secrets("app-1-2")
    assert stored is not None
    assert stored["app"]["private_key_bytes"] == PRIVATE_KEY.encode()
    assert any(r.levelno == logging.INFO and "app-1-2" in r.getMessage() for r in caplog.records)


def test_converged_pass_makes_no_writes(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    desired = [_spec(1, 2), _spec(3, 4)]
    reconcile_credentials(client, desired)
    assert _names(ready_emulator) == ["app-1-2", "app-3-4"]
    ready_emulator.clear_requests()

    reconcile_credentials(client, desired)

    assert ready_emulator.writes() == []


def test_refused_create_is_contained_and_noted(
    ready_emulator: GarmEmulator, client: GarmClient
) -> None:
    ready_emulator.fail_next("POST", "/github/credentials", 500)
    ready_emulator.fail_next(
        "POST", "/github/credentials", 400, details="invalid private_key_bytes"
    )
    reconciler = CredentialReconciler(client)
    reconciler.ensure([_spec(), _spec(app_id=3, installation_id=4), _spec(app_id=5)])
    assert _names(ready_emulator) == ["app-5-2"]
    assert reconciler.missing == {"app-1-2", "app-3-4"}
    assert [str(n) for n in reconciler.notices] == [
        "app-1-2: GARM refused the GitHub App (github_private_key_secret_uri)",
        "app-3-4: GARM refused the GitHub App (github_private_key_secret_uri)",
    ]


def test_outage_during_create_aborts(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    ready_emulator.drop_next("POST", "/github/credentials")
    with pytest.raises(GarmConnectionError):
        reconcile_credentials(client, [_spec(), _spec(app_id=5)])
    assert _names(ready_emulator) == []


def test_listing_failure_propagates(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    ready_emulator.drop_next("GET", "/github/credentials")
    with pytest.raises(GarmApiError):
        reconcile_credentials(client, [_spec()])
    assert ready_emulator.writes() == []


@pytest.mark.parametrize(
    ("observed_description", "desired_description"),
    [("", MARKER), (MARKER, "Managed by garm (renamed)")],
)
def test_updates_only_on_description_drift(
    ready_emulator: GarmEmulator,
    client: GarmClient,
    observed_description: str,
    desired_description: str,
) -> None:
    # GARM omits an empty description, so "" also covers a missing one.
    seeded = ready_emulator.add_credential("app-1-2", description=observed_description)
    desired = _spec(description=desired_description)
    reconcile_credentials(client, [desired])

    (put,) = ready_emulator.writes()
    assert (put.method, put.path) == ("PUT", f"/github/credentials/{seeded['id']}")
    assert put.body["description"] == desired.description
    assert put.body["app"]["app_id"] == 1
    assert ready_emulator.credentials()[0]["description"] == desired.description


def test_no_update_when_description_matches_or_is_unset(
    ready_emulator: GarmEmulator, client: GarmClient
) -> None:
    ready_emulator.add_credential("app-1-2", description=MARKER)
    reconcile_credentials(client, [_spec(description="")])
    assert ready_emulator.writes() == []  # an empty desired description never triggers an update
    reconcile_credentials(client, [_spec()])
    assert ready_emulator.writes() == []


def test_update_without_id_is_skipped_with_warning(
    ready_emulator: GarmEmulator, client: GarmClient, caplog: pytest.LogCaptureFixture
) -> None:
    seeded = ready_emulator.add_credential("app-1-2", description="")
    with ready_emulator.state.lock:
        ready_emulator.state.credentials[seeded["id"]].id = 0  # GARM omits a zero id

    reconcile_credentials(client, [_spec()])

    assert ready_emulator.writes() == []
    assert any("app-1-2" in w and "no id" in w for w in _warnings(caplog))


def test_unmanaged_name_taken_is_warned_and_untouched(
    ready_emulator: GarmEmulator, client: GarmClient, caplog: pytest.LogCaptureFixture
) -> None:
    ready_emulator.add_credential("app-1-2", description="hand-made by an operator")
    reconcile_credentials(client, [_spec()])
    assert ready_emulator.writes() == []
    assert ready_emulator.credentials()[0]["description"] == "hand-made by an operator"
    assert any("app-1-2" in w and "does not manage" in w for w in _warnings(caplog))


def test_unmanaged_undesired_credential_is_never_deleted(
    ready_emulator: GarmEmulator, client: GarmClient
) -> None:
    ready_emulator.add_credential("operator-creds", description="hand-made")
    ready_emulator.add_credential("no-description", description="")
    reconcile_credentials(client, [])
    assert ready_emulator.writes() == []
    assert _names(ready_emulator) == ["no-description", "operator-creds"]


def test_deletes_managed_unreferenced_credential(
    ready_emulator: GarmEmulator, client: GarmClient, caplog: pytest.LogCaptureFixture
) -> None:
    gone = ready_emulator.add_credential("app-9-9", description=MARKER)
    ready_emulator.add_credential("app-1-2", description=MARKER)

    reconcile_credentials(client, [_spec()])

    (delete,) = ready_emulator.writes()
    assert (delete.method, delete.path) == ("DELETE", f"/github/credentials/{gone['id']}")
    assert _names(ready_emulator) == ["app-1-2"]
    assert any(r.levelno == logging.INFO and "app-9-9" in r.getMessage() for r in caplog.records)


def test_no_delete_while_configurator_input_is_invalid(
    ready_emulator: GarmEmulator, client: GarmClient
) -> None:
    ready_emulator.add_credential("app-9-9", description=MARKER)
    ready_emulator.add_credential("app-1-2", description=MARKER)

    reconcile_credentials(client, [_spec()], prune=False)

    assert ready_emulator.writes() == []
    assert _names(ready_emulator) == ["app-1-2", "app-9-9"]


def test_credential_in_use_is_kept_without_a_delete_then_deleted(
    ready_emulator: GarmEmulator, client: GarmClient, caplog: pytest.LogCaptureFixture
) -> None:
    ready_emulator.add_credential("app-9-9", description=MARKER)
    org = ready_emulator.add_organization("still-here", credentials_name="app-9-9")

    reconcile_credentials(client, [], in_use=frozenset({"app-9-9"}))

    # Not even tried: GARM would refuse to delete a credential an organisation uses.
    assert ready_emulator.writes() == []
    assert _names(ready_emulator) == ["app-9-9"]
    assert any(
        r.levelno == logging.INFO
        and "app-9-9" in r.getMessage()
        and "still uses" in r.getMessage()
        for r in caplog.records
    )

    client.delete_organization(org["id"])
    caplog.clear()
    reconcile_credentials(client, [])

    assert _names(ready_emulator) == []
    assert _warnings(caplog) == []


def test_delete_failure_of_any_kind_is_contained(
    ready_emulator: GarmEmulator, client: GarmClient, caplog: pytest.LogCaptureFixture
) -> None:
    ready_emulator.add_credential("app-9-9", description=MARKER)
    ready_emulator.fail_next("DELETE", r"/github/credentials/\d+", 500)
    reconcile_credentials(client, [_spec()])
    assert _names(ready_emulator) == ["app-1-2", "app-9-9"]
    assert any("app-9-9" in w for w in _warnings(caplog))
