"""The reconcilers against each GARM backend, through the charm's real client.

Each story seeds GARM through its API only, runs reconciler passes, and checks what GARM
received (the proxy's record of writes and statuses) and what GARM then lists (the read views),
never the reconciler's own bookkeeping alone. Scale sets keep no idle runner, so no runner is
ever needed.
"""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Any

import pytest

from garm import (
    CreateCredentialParams,
    CreateScaleSetParams,
    CreateTemplateParams,
    GarmClient,
    GithubApp,
    UpdateCredentialParams,
    UpdateScaleSetParams,
)
from reconcile.credentials import CredentialReconciler
from reconcile.entities import EntityReconciler
from reconcile.scalesets.names import target_scaleset_name
from reconcile.scalesets.reconciler import ScalesetReconciler
from reconcile.scalesets.retirement import Handover, ScalesetProgress
from tests.conformance.conftest import PROVIDER_NAME, Garm
from tests.github_standin import GitHubStandin
from tests.rsa_keys import pkcs1_pem
from vocabulary.desired_state import AppKey, CredentialSpec, EntitySpec, ScalesetSpec, entity_key

MARKER = "Managed by garm"
CREDENTIAL = "app-1-2"
ORG = "acme"
REPO = "acme/widgets"
LABELS = ("linux", "x64")
NEW_LABELS = ("jammy", "self-hosted", "x64")


def b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def credential_spec(app_id: int, installation_id: int, key: int = 0) -> CredentialSpec:
    return CredentialSpec(
        name=f"app-{app_id}-{installation_id}",
        endpoint="github.com",
        app_id=app_id,
        installation_id=installation_id,
        key=AppKey.of(pkcs1_pem(key)),
        description=MARKER,
    )


def create_credential(client: GarmClient, name: str, description: str) -> int:
    """Seed a credential through GARM's API."""
    created = client.create_credential(
        CreateCredentialParams(
            name=name,
            description=description,
            endpoint="github.com",
            app=GithubApp(app_id=9, installation_id=9, private_key_bytes=b64(pkcs1_pem())),
        )
    )
    assert created.id is not None
    return created.id


def writes(garm: Garm) -> list[tuple[str, str, int]]:
    """GARM's state-changing calls since the last clear, as (method, path, status)."""
    return [(c.method, c.path, c.status) for c in garm.writes()]


def bodies(garm: Garm) -> list[Any]:
    return [c.body for c in garm.writes()]


# --- credentials ------------------------------------------------------------------------------


def test_a_rotated_key_is_sent_with_the_app_and_kept(client: GarmClient, ready_garm: Garm):
    old, new = credential_spec(1, 2, key=0), credential_spec(1, 2, key=1)
    first = CredentialReconciler(client, sent={})
    first.ensure([old])
    assert first.sent == {CREDENTIAL: old.fingerprint}
    ready_garm.clear_requests()
    # The same fingerprint: nothing is sent.
    CredentialReconciler(client, sent=first.sent).ensure([old])
    assert writes(ready_garm) == []
    rotated = CredentialReconciler(client, sent=first.sent)
    rotated.ensure([new])
    [(method, path, status)] = writes(ready_garm)
    assert (method, status) == ("PUT", 200)
    assert path.startswith("/github/credentials/")
    assert bodies(ready_garm)[0]["app"] == {
        "app_id": 1,
        "installation_id": 2,
        "private_key_bytes": b64(pkcs1_pem(1)),
    }
    assert rotated.sent == {CREDENTIAL: new.fingerprint}
    assert rotated.notices == []
    # GARM still lists it as the charm's, under the same id.
    [listed] = [c for c in client.list_credentials() if c.name == CREDENTIAL]
    assert listed.description == MARKER


def test_credential_reconciler_story(client: GarmClient, ready_garm: Garm):
    first, second = credential_spec(1, 2, key=0), credential_spec(3, 4, key=1)
    # Someone else's credential under a name a configurator asks for.
    foreign_id = create_credential(client, "app-5-6", "created by hand")
    taken = replace(credential_spec(5, 6), key=AppKey.of(pkcs1_pem(0)))
    ready_garm.clear_requests()

    CredentialReconciler(client).ensure([first, second, taken])
    assert writes(ready_garm) == [
        ("POST", "/github/credentials", 200),
        ("POST", "/github/credentials", 200),
    ]
    assert bodies(ready_garm)[0] == {
        "name": "app-1-2",
        "description": MARKER,
        "endpoint": "github.com",
        "auth_type": "app",
        "app": {"app_id": 1, "installation_id": 2, "private_key_bytes": b64(pkcs1_pem(0))},
    }
    assert bodies(ready_garm)[1]["app"]["private_key_bytes"] == b64(pkcs1_pem(1))
    listed = {c["name"]: c for c in ready_garm.credentials()}
    assert {name: c["description"] for name, c in listed.items()} == {
        "app-1-2": MARKER,
        "app-3-4": MARKER,
        "app-5-6": "created by hand",
    }
    assert listed["app-1-2"]["auth-type"] == "app"

    ready_garm.clear_requests()
    CredentialReconciler(client).ensure([first, second, taken])
    assert writes(ready_garm) == []

    # Description drift on a credential the charm may claim (emptied): updated in place.
    drifted_id = listed["app-3-4"]["id"]
    client.update_credential(drifted_id, UpdateCredentialParams(description=""))
    assert {c["name"]: c.get("description") for c in ready_garm.credentials()}["app-3-4"] in (
        "",
        None,
    )
    ready_garm.clear_requests()
    CredentialReconciler(client).ensure([first, second, taken])
    assert writes(ready_garm) == [("PUT", f"/github/credentials/{drifted_id}", 200)]
    assert bodies(ready_garm)[0] == {
        "description": MARKER,
        "app": {"app_id": 3, "installation_id": 4, "private_key_bytes": b64(pkcs1_pem(1))},
    }
    assert {c["name"]: c["description"] for c in ready_garm.credentials()}["app-3-4"] == MARKER

    # Prune with nothing desired: the one an organisation uses stays, without a call.
    client.create_organization(ORG, "app-3-4", "ab" * 32)
    ready_garm.clear_requests()
    CredentialReconciler(client).prune([], in_use={"app-3-4"})
    assert writes(ready_garm) == [
        ("DELETE", f"/github/credentials/{listed['app-1-2']['id']}", 204)
    ]
    assert sorted(c["name"] for c in ready_garm.credentials()) == ["app-3-4", "app-5-6"]
    assert {c["id"] for c in ready_garm.credentials()} >= {foreign_id, drifted_id}


def test_a_held_credential_is_not_deleted(client: GarmClient, ready_garm: Garm):
    # Managed, desired by nobody and used by no entity: only ``held`` keeps it.
    create_credential(client, CREDENTIAL, MARKER)
    ready_garm.clear_requests()
    CredentialReconciler(client).prune([], in_use=set(), held={CREDENTIAL})
    assert writes(ready_garm) == []
    assert [c["name"] for c in ready_garm.credentials()] == [CREDENTIAL]
    # Once its configurator's input is valid again (and desires nothing), it goes.
    CredentialReconciler(client).prune([], in_use=set())
    assert [(m, s) for m, _p, s in writes(ready_garm)] == [("DELETE", 204)]
    assert ready_garm.credentials() == []


# --- organisations and repositories -----------------------------------------------------------


def test_entity_reconciler_story(client: GarmClient, ready_garm: Garm):
    create_credential(client, "app-1-2", MARKER)
    create_credential(client, "app-3-4", MARKER)
    create_credential(client, "foreign", "created by hand")
    client.create_organization("other-org", "foreign", "cd" * 32)
    desired = [
        EntitySpec("organization", ORG, "app-1-2"),
        EntitySpec("repository", REPO, "app-1-2"),
    ]
    ready_garm.clear_requests()

    EntityReconciler(client, client.list_credentials()).ensure(desired)
    assert writes(ready_garm) == [("POST", "/organizations", 200), ("POST", "/repositories", 200)]
    org_body, repo_body = bodies(ready_garm)
    assert {k: v for k, v in org_body.items() if k != "webhook_secret"} == {
        "name": ORG,
        "credentials_name": "app-1-2",
    }
    assert {k: v for k, v in repo_body.items() if k != "webhook_secret"} == {
        "owner": "acme",
        "name": "widgets",
        "credentials_name": "app-1-2",
    }
    for body in (org_body, repo_body):
        assert len(body["webhook_secret"]) == 64
    assert org_body["webhook_secret"] != repo_body["webhook_secret"]
    orgs = {o["name"]: o for o in ready_garm.organizations()}
    assert orgs[ORG]["credentials_name"] == "app-1-2"
    ((repo),) = ready_garm.repositories()
    assert (repo["owner"], repo["name"], repo["credentials_name"]) == (
        "acme",
        "widgets",
        "app-1-2",
    )

    ready_garm.clear_requests()
    EntityReconciler(client, client.list_credentials()).ensure(desired)
    assert writes(ready_garm) == []

    # The organisation moves to another credential in place.
    switched = [EntitySpec("organization", ORG, "app-3-4"), desired[1]]
    EntityReconciler(client, client.list_credentials()).ensure(switched)
    assert writes(ready_garm) == [("PUT", f"/organizations/{orgs[ORG]['id']}", 200)]
    assert bodies(ready_garm) == [{"credentials_name": "app-3-4"}]
    assert {o["name"]: o["credentials_name"] for o in ready_garm.organizations()} == {
        ORG: "app-3-4",
        "other-org": "foreign",
    }

    # Nothing desired: the repository goes; the organisation keeps its live scale set.
    scaleset = client.create_org_scaleset(
        orgs[ORG]["id"],
        CreateScaleSetParams(
            name="keeper",
            provider_name=PROVIDER_NAME,
            image="ubuntu-24.04",
            flavor="small",
            os_type="linux",
            os_arch="amd64",
            max_runners=1,
            min_idle_runners=0,
            enabled=True,
            labels=["linux"],
        ),
    )
    assert scaleset.id is not None
    ready_garm.clear_requests()
    in_use = EntityReconciler(client, client.list_credentials()).prune([], client.list_scalesets())
    assert writes(ready_garm) == [("DELETE", f"/repositories/{repo['id']}", 200)]
    assert in_use == {"app-3-4", "foreign"}
    assert ready_garm.repositories() == []
    assert sorted(o["name"] for o in ready_garm.organizations()) == [ORG, "other-org"]

    # Once the scale set is gone, the organisation goes; the foreign one never does.
    client.update_scaleset(scaleset.id, UpdateScaleSetParams(enabled=False))
    client.delete_scaleset(scaleset.id)
    ready_garm.clear_requests()
    in_use = EntityReconciler(client, client.list_credentials()).prune([], client.list_scalesets())
    assert writes(ready_garm) == [("DELETE", f"/organizations/{orgs[ORG]['id']}", 200)]
    assert in_use == {"foreign"}
    assert [o["name"] for o in ready_garm.organizations()] == ["other-org"]

    # The credential pass that follows deletes what no entity uses any more.
    ready_garm.clear_requests()
    CredentialReconciler(client).prune([], in_use)
    assert [(m, p.rsplit("/", 1)[0], s) for m, p, s in writes(ready_garm)] == [
        ("DELETE", "/github/credentials", 204),
        ("DELETE", "/github/credentials", 204),
    ]
    assert [c["name"] for c in ready_garm.credentials()] == ["foreign"]


def test_held_entities_are_not_deleted(client: GarmClient, ready_garm: Garm):
    # Managed, desired by nobody and without a scale set: only ``held`` keeps them.
    create_credential(client, CREDENTIAL, MARKER)
    client.create_organization(ORG, CREDENTIAL, "ab" * 32)
    owner, _, name = REPO.partition("/")
    client.create_repository(owner, name, CREDENTIAL, "ab" * 32)
    held = {entity_key("organization", ORG), entity_key("repository", REPO)}
    ready_garm.clear_requests()
    in_use = EntityReconciler(client, client.list_credentials()).prune([], [], held=held)
    assert writes(ready_garm) == []
    assert [o["name"] for o in ready_garm.organizations()] == [ORG]
    assert [(r["owner"], r["name"]) for r in ready_garm.repositories()] == [(owner, name)]
    # What they use stays in use, so the credential pass keeps it too.
    assert in_use == {CREDENTIAL}
    # Once their configurator's input is valid again (and desires nothing), they go.
    EntityReconciler(client, client.list_credentials()).prune([], [])
    assert sorted(m for m, _p, _s in writes(ready_garm)) == ["DELETE", "DELETE"]
    assert ready_garm.organizations() == []
    assert ready_garm.repositories() == []


# --- scale sets -------------------------------------------------------------------------------


@pytest.fixture
def entities(client: GarmClient, ready_garm: Garm) -> dict[str, Any]:
    """A managed credential, an organisation, a repository and a charmed template.

    The charm always gives its scale sets its own template (``apply_charmed_template``), so
    the specs here name one too, made from GARM's ``github_linux``. The record is cleared.
    """
    create_credential(client, CREDENTIAL, MARKER)
    org = client.create_organization(ORG, CREDENTIAL, "ab" * 32)
    owner, _, name = REPO.partition("/")
    repo = client.create_repository(owner, name, CREDENTIAL, "ab" * 32)
    system = next(t for t in client.list_templates() if t.name == "github_linux")
    assert system.id is not None
    charmed = client.create_template(
        CreateTemplateParams(
            name="github_linux_charmed",
            description="charmed",
            data=client.get_template(system.id).data or "",
        )
    )
    assert org.id and repo.id and charmed.id
    ready_garm.clear_requests()
    return {"org": org.id, "repo": repo.id, "template": charmed.id}


def scaleset_spec(template_id: int, **overrides: Any) -> ScalesetSpec:
    values: dict[str, Any] = {
        "template_id": template_id,
        "name": "ci-runners",
        "provider_name": PROVIDER_NAME,
        "image": "ubuntu-24.04",
        "flavor": "small",
        "os_arch": "amd64",
        "min_idle_runners": 0,
        "max_runners": 2,
        "entity_type": "organization",
        "entity_name": ORG,
        "labels": LABELS,
    }
    values.update(overrides)
    return ScalesetSpec(**values)


def update_body(spec: ScalesetSpec, **extra: Any) -> dict[str, Any]:
    """The update the reconciler sends: every plain field, plus what changed otherwise.

    An unchanged template is not sent.
    """
    return {
        "enabled": True,
        "image": spec.image,
        "flavor": spec.flavor,
        "max_runners": spec.max_runners,
        "min_idle_runners": spec.min_idle_runners,
        **extra,
    }


def live(garm: Garm, name: str) -> dict[str, Any]:
    found = garm.scaleset_by_name(name)
    assert found is not None, f"GARM lists no scale set {name}"
    return found


def run_pass(
    reconciler: ScalesetReconciler, garm: Garm, specs: list[ScalesetSpec]
) -> list[ScalesetProgress]:
    garm.clear_requests()
    return reconciler.reconcile(specs).progress


def test_scaleset_created_then_updated_in_place(
    client: GarmClient, ready_garm: Garm, entities: dict[str, Any], github: GitHubStandin
):
    github.add_runner_group("ci")
    github.add_runner_group("gpu")
    reconciler = ScalesetReconciler(client)
    spec = scaleset_spec(entities["template"], labels=("x64", "linux"))
    name = target_scaleset_name(spec.name, spec.labels)

    assert run_pass(reconciler, ready_garm, [spec]) == []
    assert writes(ready_garm) == [("POST", f"/organizations/{entities['org']}/scalesets", 200)]
    assert bodies(ready_garm) == [
        {
            "name": name,
            "provider_name": PROVIDER_NAME,
            "image": "ubuntu-24.04",
            "flavor": "small",
            "os_type": "linux",
            "os_arch": "amd64",
            "max_runners": 2,
            "min_idle_runners": 0,
            "enabled": True,
            "labels": ["linux", "x64"],
            "template_id": entities["template"],
        }
    ]
    created = live(ready_garm, name)
    assert created["enabled"] is True
    assert created["github-runner-group"] == "Default"
    assert created["template_id"] == entities["template"]
    assert sorted(t["name"] for t in created["tags"]) == ["linux", "x64"]
    scaleset_path = f"/scalesets/{created['id']}"

    run_pass(reconciler, ready_garm, [spec])
    assert writes(ready_garm) == []

    # Plain fields are updated in place, on the same scale set.
    resized = replace(spec, image="ubuntu-22.04", flavor="large", max_runners=4)
    run_pass(reconciler, ready_garm, [resized])
    assert writes(ready_garm) == [("PUT", scaleset_path, 200)]
    assert bodies(ready_garm) == [update_body(resized)]
    listed = live(ready_garm, name)
    assert (listed["id"], listed["image"], listed["flavor"], listed["max_runners"]) == (
        created["id"],
        "ubuntu-22.04",
        "large",
        4,
    )
    run_pass(reconciler, ready_garm, [resized])
    assert writes(ready_garm) == []

    # Runner group: set, changed, cleared (GARM ignores "", so clearing names "Default").
    for group, sent, stored in (("ci", "ci", "ci"), ("gpu", "gpu", "gpu"), ("", "Default", None)):
        grouped = replace(resized, runner_group=group)
        run_pass(reconciler, ready_garm, [grouped])
        assert writes(ready_garm) == [("PUT", scaleset_path, 200)]
        assert bodies(ready_garm) == [update_body(grouped, runner_group=sent)]
        assert live(ready_garm, name)["github-runner-group"] == (stored or "Default")
        run_pass(reconciler, ready_garm, [grouped])
        assert writes(ready_garm) == []

    # Extra specs: a pre-install script is set, then cleared with an explicit {}.
    scripted = replace(resized, pre_install_scripts={"10-setup": "echo ready\n"})
    wanted_extra = {"pre_install_scripts": {"10-setup": b64("echo ready\n")}}
    run_pass(reconciler, ready_garm, [scripted])
    assert bodies(ready_garm) == [update_body(scripted, extra_specs=wanted_extra)]
    assert live(ready_garm, name)["extra_specs"] == wanted_extra
    run_pass(reconciler, ready_garm, [scripted])
    assert writes(ready_garm) == []
    run_pass(reconciler, ready_garm, [resized])
    assert writes(ready_garm) == [("PUT", scaleset_path, 200)]
    assert bodies(ready_garm) == [update_body(resized, extra_specs={})]
    assert live(ready_garm, name).get("extra_specs") == {}
    run_pass(reconciler, ready_garm, [resized])
    assert writes(ready_garm) == []
    assert [s["name"] for s in ready_garm.scalesets()] == [name]


def test_label_change_replaces_the_generation(
    client: GarmClient, ready_garm: Garm, entities: dict[str, Any]
):
    reconciler = ScalesetReconciler(client)
    spec = scaleset_spec(entities["template"], entity_type="repository", entity_name=REPO)
    old_name = target_scaleset_name(spec.name, spec.labels)
    run_pass(reconciler, ready_garm, [spec])
    assert writes(ready_garm) == [("POST", f"/repositories/{entities['repo']}/scalesets", 200)]
    old = live(ready_garm, old_name)
    assert old["repo_id"] == entities["repo"]

    changed = replace(spec, labels=NEW_LABELS)
    new_name = target_scaleset_name(spec.name, NEW_LABELS)
    # Pass 1: the replacement is created next to the predecessor, which stays enabled.
    assert run_pass(reconciler, ready_garm, [changed]) == [
        ScalesetProgress(spec.name, old_name, new_name, 0, Handover.PENDING)
    ]
    assert writes(ready_garm) == [("POST", f"/repositories/{entities['repo']}/scalesets", 200)]
    assert bodies(ready_garm)[0]["labels"] == sorted(NEW_LABELS)
    assert live(ready_garm, old_name)["enabled"] is True
    assert sorted(t["name"] for t in live(ready_garm, new_name)["tags"]) == sorted(NEW_LABELS)

    # Pass 2: the predecessor is disabled and zeroed.
    assert run_pass(reconciler, ready_garm, [changed]) == [
        ScalesetProgress(spec.name, old_name, new_name, 0, Handover.DONE)
    ]
    assert writes(ready_garm) == [("PUT", f"/scalesets/{old['id']}", 200)]
    assert bodies(ready_garm) == [{"enabled": False, "min_idle_runners": 0, "max_runners": 0}]
    assert "enabled" not in live(ready_garm, old_name)
    assert any(
        (c.method, c.path) == ("GET", f"/scalesets/{old['id']}/instances")
        for c in ready_garm.requests
    )

    # Pass 3: no runners left, so it is deleted; then nothing moves.
    assert run_pass(reconciler, ready_garm, [changed]) == []
    assert writes(ready_garm) == [("DELETE", f"/scalesets/{old['id']}", 200)]
    assert [s["name"] for s in ready_garm.scalesets()] == [new_name]
    assert live(ready_garm, new_name)["enabled"] is True
    run_pass(reconciler, ready_garm, [changed])
    assert writes(ready_garm) == []


def test_orphan_is_swept_and_a_gated_spec_creates_nothing(
    client: GarmClient, ready_garm: Garm, entities: dict[str, Any]
):
    reconciler = ScalesetReconciler(client)
    kept = scaleset_spec(entities["template"], name="kept")
    dropped = scaleset_spec(
        entities["template"], name="dropped", entity_type="repository", entity_name=REPO
    )
    run_pass(reconciler, ready_garm, [kept, dropped])
    assert [m for m, _p, _s in writes(ready_garm)] == ["POST", "POST"]
    orphan = live(ready_garm, target_scaleset_name("dropped", LABELS))

    # A provider GARM has not loaded: the spec waits, and claims nothing new.
    gated = scaleset_spec(entities["template"], name="gated", provider_name="garm-configurator-9")
    assert run_pass(reconciler, ready_garm, [kept, gated]) == []
    assert writes(ready_garm) == [
        ("PUT", f"/scalesets/{orphan['id']}", 200),
        ("DELETE", f"/scalesets/{orphan['id']}", 200),
    ]
    assert bodies(ready_garm) == [{"enabled": False, "min_idle_runners": 0}, None]
    # Disabled first, then checked for runners, then deleted.
    orphan_path = f"/scalesets/{orphan['id']}"
    assert [(c.method, c.path) for c in ready_garm.requests if c.path.startswith(orphan_path)] == [
        ("PUT", orphan_path),
        ("GET", f"{orphan_path}/instances"),
        ("DELETE", orphan_path),
    ]
    assert [s["name"] for s in ready_garm.scalesets()] == [target_scaleset_name("kept", LABELS)]

    run_pass(reconciler, ready_garm, [kept, gated])
    assert writes(ready_garm) == []
    assert ready_garm.scaleset_by_name(target_scaleset_name("gated", LABELS)) is None


def test_scaleset_without_a_template_converges(
    client: GarmClient, ready_garm: Garm, entities: dict[str, Any]
):
    # GARM stores github_linux's id for a scale set created without a template and refuses 0
    # as an id: the reconciler must read 0 as "GARM's choice", never as drift.
    reconciler = ScalesetReconciler(client)
    spec = scaleset_spec(0)
    run_pass(reconciler, ready_garm, [spec])
    assert [m for m, _p, s in writes(ready_garm) if s == 200] == ["POST"]
    run_pass(reconciler, ready_garm, [spec])
    assert writes(ready_garm) == []


@pytest.mark.parametrize("hold", ["name", "application"])
def test_a_held_scaleset_is_not_swept(
    client: GarmClient, ready_garm: Garm, entities: dict[str, Any], hold: str
):
    reconciler = ScalesetReconciler(client)
    spec = scaleset_spec(entities["template"], name="held-set")
    run_pass(reconciler, ready_garm, [spec])
    live_name = target_scaleset_name("held-set", LABELS)
    assert live(ready_garm, live_name)
    # Nothing desires it: held by its logical name, or as one of its configurator's (the
    # application its provider was derived from), it is left exactly as it is.
    held = {"held": {"held-set"}} if hold == "name" else {"held_apps": {"garm-configurator"}}
    ready_garm.clear_requests()
    reconciler.reconcile([], **held)
    assert writes(ready_garm) == []
    assert live(ready_garm, live_name)["enabled"] is True
    # Not held any more: the sweep disables and deletes it.
    ready_garm.clear_requests()
    reconciler.reconcile([])
    assert [m for m, _p, _s in writes(ready_garm)] == ["PUT", "DELETE"]
    assert ready_garm.scaleset_by_name(live_name) is None
