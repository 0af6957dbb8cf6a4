"""The entity reconciler (spec 13.2) against the emulator through the real client."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import pytest

from garm import GarmApiError, GarmClient, GarmConnectionError
from reconcile.credentials import CredentialReconciler
from reconcile.entities import EntityReconciler, EntityStep
from reconcile.writes import Writes
from tests.garm_emulator import GarmEmulator
from tests.log_secrets import register_secret
from vocabulary.desired_state import CredentialSpec, EntitySpec

MARKER = "Managed by garm"
HEX64 = re.compile(r"^[0-9a-f]{64}$")


@pytest.fixture
def garm(ready_emulator: GarmEmulator) -> GarmEmulator:
    """The emulator with two managed credentials and one an operator made by hand."""
    ready_emulator.add_credential("app-1-2", description=MARKER)
    ready_emulator.add_credential("app-3-4", description=MARKER)
    ready_emulator.add_credential("operator", description="made by hand")
    return ready_emulator


@pytest.fixture(autouse=True)
def _webhook_secrets_are_secret(ready_emulator: GarmEmulator) -> Iterator[None]:
    yield
    # The webhook secrets are generated during the test; register them for the suite's check,
    # which runs after this teardown.
    register_secret(*(e.webhook_secret for e in ready_emulator.state.entities.values()))


def org(name: str, creds: str = "app-1-2") -> EntitySpec:
    return EntitySpec("organization", name, creds)


def repo(name: str, creds: str = "app-1-2") -> EntitySpec:
    return EntitySpec("repository", name, creds)


def reconcile_entities(
    client: GarmClient, desired: list[EntitySpec], *, prune: bool = True
) -> set[str]:
    """One entity pass as the charm runs it, with GARM's scale sets as the live ones."""
    reconciler = EntityReconciler(client, client.list_credentials())
    reconciler.ensure(desired)
    if not prune:
        return set()
    return reconciler.prune(desired, client.list_scalesets())


def converge(
    client: GarmClient, credentials: list[CredentialSpec], desired: list[EntitySpec]
) -> None:
    """Credentials and entities in the charm's order: create both, then prune dependents first."""
    creds = CredentialReconciler(client)
    creds.ensure(credentials)
    entities = EntityReconciler(client, creds.listed)
    entities.ensure(desired)
    creds.prune(credentials, entities.prune(desired, client.list_scalesets()))


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def _entities(emulator: GarmEmulator) -> dict[str, str]:
    """Entity key -> credential name, for both kinds."""
    found = {o["name"]: o.get("credentials_name", "") for o in emulator.organizations()}
    for r in emulator.repositories():
        found[f"{r['owner']}/{r['name']}"] = r.get("credentials_name", "")
    return found


def test_creates_org_and_repo_with_fresh_webhook_secrets(
    garm: GarmEmulator, client: GarmClient, caplog: pytest.LogCaptureFixture
) -> None:
    reconcile_entities(client, [org("org-a"), repo("owner/repo", "app-3-4")])

    post_org, post_repo = garm.writes()
    assert (post_org.method, post_org.path) == ("POST", "/organizations")
    assert {k: v for k, v in post_org.body.items() if k != "webhook_secret"} == {
        "name": "org-a",
        "credentials_name": "app-1-2",
    }
    assert (post_repo.method, post_repo.path) == ("POST", "/repositories")
    assert {k: v for k, v in post_repo.body.items() if k != "webhook_secret"} == {
        "owner": "owner",
        "name": "repo",
        "credentials_name": "app-3-4",
    }
    secrets = [post_org.body["webhook_secret"], post_repo.body["webhook_secret"]]
    assert all(HEX64.match(s) for s in secrets)
    assert secrets[0] != secrets[1]
    assert _entities(garm) == {"org-a": "app-1-2", "owner/repo": "app-3-4"}
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any("org-a" in m for m in infos)
    assert any("owner/repo" in m for m in infos)


def test_converged_pass_makes_no_writes(garm: GarmEmulator, client: GarmClient) -> None:
    desired = [org("org-a"), repo("owner/repo")]
    reconcile_entities(client, desired)
    garm.clear_requests()
    reconcile_entities(client, desired)
    assert garm.writes() == []


@pytest.mark.parametrize("bad_name", ["no-slash", "a/b/c", "/repo", "owner/"])
def test_repository_without_owner_name_shape_is_skipped(
    garm: GarmEmulator, client: GarmClient, caplog: pytest.LogCaptureFixture, bad_name: str
) -> None:
    reconcile_entities(client, [repo(bad_name), org("org-a")])
    assert [(w.method, w.path) for w in garm.writes()] == [("POST", "/organizations")]
    assert any(bad_name in w and "owner/name" in w for w in _warnings(caplog))


def test_switches_credential_of_a_managed_entity(
    garm: GarmEmulator, client: GarmClient, caplog: pytest.LogCaptureFixture
) -> None:
    seeded_org = garm.add_organization("org-a", "app-1-2")
    seeded_repo = garm.add_repository("owner", "repo", "app-1-2")

    reconcile_entities(client, [org("org-a", "app-3-4"), repo("owner/repo", "app-3-4")])

    assert [(w.method, w.path, w.body) for w in garm.writes()] == [
        ("PUT", f"/organizations/{seeded_org['id']}", {"credentials_name": "app-3-4"}),
        ("PUT", f"/repositories/{seeded_repo['id']}", {"credentials_name": "app-3-4"}),
    ]
    assert _entities(garm) == {"org-a": "app-3-4", "owner/repo": "app-3-4"}
    assert any(
        r.levelno == logging.INFO and "org-a" in r.getMessage() and "app-3-4" in r.getMessage()
        for r in caplog.records
    )


def test_entity_on_unmanaged_credential_is_kept(
    garm: GarmEmulator, client: GarmClient, caplog: pytest.LogCaptureFixture
) -> None:
    garm.add_organization("org-a", "operator")
    reconcile_entities(client, [org("org-a", "app-1-2")])
    assert garm.writes() == []
    assert _entities(garm) == {"org-a": "operator"}
    assert any("org-a" in w and "operator" in w for w in _warnings(caplog))


def test_create_failure_is_deferred_and_next_entity_continues(
    garm: GarmEmulator, client: GarmClient, caplog: pytest.LogCaptureFixture
) -> None:
    garm.fail_next("POST", "/organizations", 500)
    garm.fail_next("POST", "/repositories", 400)

    reconcile_entities(client, [org("org-a"), repo("owner/first"), org("org-b")])

    assert _entities(garm) == {"org-b": "app-1-2"}
    warnings = _warnings(caplog)
    assert any("org-a" in w and "will retry" in w for w in warnings)
    assert any("owner/first" in w and "will retry" in w for w in warnings)

    caplog.clear()
    reconcile_entities(client, [org("org-a"), repo("owner/first"), org("org-b")])
    assert _entities(garm) == {"org-a": "app-1-2", "owner/first": "app-1-2", "org-b": "app-1-2"}
    assert _warnings(caplog) == []


def test_outage_during_create_aborts(garm: GarmEmulator, client: GarmClient) -> None:
    garm.drop_next("POST", "/organizations")
    with pytest.raises(GarmConnectionError):
        reconcile_entities(client, [org("org-a"), org("org-b")])
    assert _entities(garm) == {}


def test_unknown_credential_is_deferred(
    garm: GarmEmulator, client: GarmClient, caplog: pytest.LogCaptureFixture
) -> None:
    reconcile_entities(client, [org("org-a", "app-7-7"), org("org-b")])
    assert _entities(garm) == {"org-b": "app-1-2"}
    assert any("org-a" in w and "will retry" in w for w in _warnings(caplog))


def test_update_failure_is_deferred(
    garm: GarmEmulator, client: GarmClient, caplog: pytest.LogCaptureFixture
) -> None:
    garm.add_organization("org-a", "app-1-2")
    garm.add_repository("owner", "repo", "app-1-2")
    garm.fail_next("PUT", "/organizations/.+", 409, details="busy")

    reconcile_entities(client, [org("org-a", "app-3-4"), repo("owner/repo", "app-3-4")])

    assert _entities(garm) == {"org-a": "app-1-2", "owner/repo": "app-3-4"}
    assert any("org-a" in w and "will retry" in w and "busy" in w for w in _warnings(caplog))


def test_listing_failure_propagates(garm: GarmEmulator, client: GarmClient) -> None:
    garm.fail_next("GET", "/repositories", 500)
    with pytest.raises(GarmApiError):
        reconcile_entities(client, [org("org-a")])
    assert garm.writes() == []


def test_deletes_managed_orphans_only(
    garm: GarmEmulator, client: GarmClient, caplog: pytest.LogCaptureFixture
) -> None:
    gone_org = garm.add_organization("old-org", "app-1-2")
    gone_repo = garm.add_repository("owner", "old", "app-3-4")
    garm.add_organization("hand-org", "operator")
    garm.add_repository("owner", "hand", "operator")

    reconcile_entities(client, [org("org-a")])

    assert [(w.method, w.path) for w in garm.writes()] == [
        ("POST", "/organizations"),
        ("DELETE", f"/organizations/{gone_org['id']}"),
        ("DELETE", f"/repositories/{gone_repo['id']}"),
    ]
    assert _entities(garm) == {
        "org-a": "app-1-2",
        "hand-org": "operator",
        "owner/hand": "operator",
    }
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any("old-org" in m and gone_org["id"] in m for m in infos)


def test_no_delete_while_configurator_input_is_invalid(
    garm: GarmEmulator, client: GarmClient
) -> None:
    garm.add_organization("old-org", "app-1-2")

    reconcile_entities(client, [org("org-a")], prune=False)

    assert [(w.method, w.path) for w in garm.writes()] == [("POST", "/organizations")]
    assert "old-org" in _entities(garm)


def test_entity_with_a_scaleset_is_kept_without_a_delete(
    garm: GarmEmulator, client: GarmClient, caplog: pytest.LogCaptureFixture
) -> None:
    garm.add_organization("busy-org", "app-1-2")
    garm.add_scaleset("busy-set-1a2b3c4d", org="busy-org", enabled=False)

    in_use = reconcile_entities(client, [])

    # Not even tried: GARM would refuse to delete an organisation that has scale sets.
    assert garm.writes() == []
    assert _entities(garm) == {"busy-org": "app-1-2"}
    assert in_use == {"app-1-2"}
    assert any(
        r.levelno == logging.INFO
        and "busy-org" in r.getMessage()
        and "scale sets" in r.getMessage()
        for r in caplog.records
    )


def test_deletions_converge_in_one_pass_once_the_scaleset_is_gone(
    garm: GarmEmulator, client: GarmClient
) -> None:
    busy_org = garm.add_organization("busy-org", "app-1-2")
    scaleset = garm.add_scaleset("busy-set-1a2b3c4d", org="busy-org", enabled=False)
    ids = {c["name"]: c["id"] for c in garm.credentials()}

    # Nothing desired: the scale set holds the entity, which holds its credential; managed
    # credentials nobody uses go at once.
    converge(client, [], [])
    deleted = {(w.method, w.path) for w in garm.writes()}
    assert ("DELETE", f"/github/credentials/{ids['app-3-4']}") in deleted
    assert ("DELETE", f"/github/credentials/{ids['app-1-2']}") not in deleted
    assert not any(path.startswith("/organizations") for _, path in deleted)
    assert "busy-org" in _entities(garm)
    assert {"app-1-2", "operator"} <= {c["name"] for c in garm.credentials()}

    client.delete_scaleset(scaleset["id"])
    garm.clear_requests()
    converge(client, [], [])
    assert [(w.method, w.path) for w in garm.writes()] == [
        ("DELETE", f"/organizations/{busy_org['id']}"),
        ("DELETE", f"/github/credentials/{ids['app-1-2']}"),
    ]
    assert _entities(garm) == {}
    assert {c["name"] for c in garm.credentials()} == {"operator"}


def test_the_entity_step_beside_the_scale_sets_tells_each_entitys_new_id(
    garm: GarmEmulator, client: GarmClient
) -> None:
    writes = Writes(size=2)
    reconciler = EntityReconciler(client, client.list_credentials(), writes)
    step = EntityStep(reconciler, writes).prepare(
        [org("org-a"), org("org-b"), org("held"), org("no-cred", "missing")],
        held=[org("held").key],
        missing_credentials=["missing"],
    )
    assert garm.writes() == []  # nothing before the scale-set step starts it
    step.start()

    created = [step.created(org("org-a").key), step.created(org("org-b").key)]
    ids = {o["name"]: o["id"] for o in garm.organizations()}
    assert created == [ids["org-a"], ids["org-b"]]
    # Nothing registered for these, and nothing to wait for.
    assert step.created(org("held").key) is None
    assert step.created(org("no-cred").key) is None
    step.settled()
    assert sorted(ids) == ["org-a", "org-b"]
    assert [n.text for n in reconciler.notices] == ["waiting for credential missing"]


def test_an_entity_step_never_started_runs_when_it_is_waited_for(
    garm: GarmEmulator, client: GarmClient
) -> None:
    # The scale-set step starts it after its reads; when that step fails first (the charmed
    # template refused), the entities still go to GARM, as when they went first.
    writes = Writes(size=2)
    reconciler = EntityReconciler(client, client.list_credentials(), writes)
    step = EntityStep(reconciler, writes).prepare([org("org-a")])
    step.settled(quiet=True)
    assert [o["name"] for o in garm.organizations()] == ["org-a"]
