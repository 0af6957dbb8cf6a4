"""One configurator's mistake never touches another's runners, on each GARM backend.

Two configurators, ``cfg-a`` (related first, the lower relation id) and ``cfg-b``, each run a
scale set in its own organisation on its own OpenStack provider with its own GitHub App (its
own key), and a job runs on a runner of each. One of them publishes, as its own, the other's
scale-set name, organisation, provider or App id (keeping its own key): the one whose live
scale sets, provider or credential hold it keeps it, whatever the relation order, and the one
reaching for it is held and Blocked. Nothing of either is created, updated, disabled or deleted
(the recording proxy sees no write from the charm: the holder's credential is never rewritten
with the other's key), no runner is marked for deletion, and fixing the data recovers in one
hook. All eight mistakes run on one GARM, one after the other: for each field, the lower
relation id errs first, then the higher one. Then a configurator changes only the letter case
of its organisation: the same organisation to GitHub and GARM, so nothing is created or
replaced.

The real charm runs through ``ops.testing`` with the ``garm-peers`` relation Juju always gives
it (it remembers there who holds what) and an ingress URL runners can call back to. On real
GARM the runners come up through the provider stand-in and the jobs run on the GitHub
stand-in; the emulator marks a runner busy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ops
from ops import testing

from relations.configurator_contract import PRIVATE_KEY_FIELD
from tests.charm_driver import CharmDriver, configurator
from tests.conformance.conftest import Garm, hook_until
from tests.rsa_keys import pkcs1_pem, rewrapped
from tests.simulate_backends import StoryGarm, is_busy, is_idle
from vocabulary.desired_state import credential_name

A, B = "cfg-a", "cfg-b"
ORGS = {A: "org-a", B: "org-b"}
RELATION_IDS = {A: 1, B: 2}
APP_IDS = {A: 11, B: 22}
INSTALLATION_ID = 202  # what tests.charm_driver.configurator publishes
KEYS = {A: pkcs1_pem(0), B: pkcs1_pem(1)}
# Runner states GARM gives a runner it is about to remove.
LEAVING = ("pending_delete", "deleting", "pending_force_delete")


def _logical(app: str) -> str:
    return f"{app}-runners"


@dataclass(frozen=True)
class Seen:
    """What GARM lists of both configurators: scale sets, their runners, organisations."""

    scalesets: dict[str, tuple[Any, ...]]
    runners: dict[str, dict[str, tuple[str, str]]]
    organizations: dict[str, tuple[Any, ...]]


def _look(garm: Garm, live: dict[str, str]) -> Seen:
    by_name = {s["name"]: s for s in garm.scalesets()}
    scalesets = {
        app: (s["id"], s["enabled"], s["provider_name"], s["org_name"])
        for app, name in live.items()
        if (s := by_name.get(name)) is not None
    }
    runners = {
        app: {r["name"]: (r["status"], r["runner_status"]) for r in garm.instances(name)}
        for app, name in live.items()
    }
    organizations = {o["name"]: (o["id"], o["credentials_name"]) for o in garm.organizations()}
    return Seen(scalesets, runners, organizations)


def _settled(garm: Garm, live: dict[str, str], busy: dict[str, str]) -> bool:
    """Each scale set runs its job and has an idle runner beside it (GARM's minimum idle)."""
    for app, name in live.items():
        runners = garm.instances(name)
        if not any(r["name"] == busy[app] and is_busy(r) for r in runners):
            return False
        if not any(is_idle(r) for r in runners):
            return False
    return True


def both_deployed_with_a_job_each(
    driver: CharmDriver, garm: Garm, story: StoryGarm
) -> tuple[dict[str, str], dict[str, str]]:
    """Both configurators related, a job on a runner of each; their live and busy runner names."""
    for app, relation_id in RELATION_IDS.items():
        cfg = configurator(
            app,
            relation_id=relation_id,
            org=ORGS[app],
            app_id=str(APP_IDS[app]),
            private_key=KEYS[app],
        )
        assert driver.add_configurator(cfg).unit_status == ops.ActiveStatus()
    live = {
        app: name
        for app in RELATION_IDS
        for name in (s["name"] for s in garm.scalesets())
        if name.startswith(f"{_logical(app)}-")
    }
    assert sorted(live) == [A, B] and len(garm.scalesets()) == 2, garm.scalesets()

    def idle_everywhere(_: testing.State) -> bool:
        return all(any(is_idle(r) for r in garm.instances(name)) for name in live.values())

    hook_until(driver, garm, "an idle runner in each scale set", idle_everywhere)
    busy = {app: story.start_job(name) for app, name in live.items()}
    state = hook_until(
        driver, garm, "a busy and an idle runner in each", lambda _: _settled(garm, live, busy)
    )
    assert state.unit_status == ops.ActiveStatus()
    return live, busy


def _publish(driver: CharmDriver, app: str, field: str, value: str) -> testing.State:
    relation = driver.state.get_relation(RELATION_IDS[app])
    assert isinstance(relation, testing.Relation)
    return driver.change_relation(relation, **{field: value})


def _untouched(garm: Garm, before: Seen, live: dict[str, str], busy: dict[str, str]) -> None:
    """Both configurators' scale sets, runners and organisations are as they were."""
    after = _look(garm, live)
    assert after.scalesets == before.scalesets
    assert all(enabled for _, enabled, *_ in after.scalesets.values()), after.scalesets
    assert after.organizations == before.organizations
    for app, runners in before.runners.items():
        now = after.runners[app]
        # GARM may have started a runner meanwhile; none of those it had is leaving.
        assert set(runners) <= set(now), (app, runners, now)
        assert not [r for r, (status, _) in now.items() if status in LEAVING], now
        assert now[busy[app]] == ("running", "active")


def a_typo_is_refused(
    driver: CharmDriver,
    garm: Garm,
    found: tuple[dict[str, str], dict[str, str]],
    erring: str,
    field: str,
) -> None:
    """``erring`` publishes the other's value of ``field``; fixing it recovers in one hook.

    ``field`` is ``name`` (the scale-set name), ``org`` (the organisation, with the erring
    configurator's own App), ``provider_name`` (the provider its scale set runs on) or
    ``github_app_id`` (the App, with the erring configurator's own key).
    """
    live, busy = found
    holder = B if erring == A else A
    own, typo, refusal = {
        "name": (
            _logical(erring),
            _logical(holder),
            f"scale set {_logical(holder)} belongs to {holder}",
        ),
        "org": (ORGS[erring], ORGS[holder], f"organization {ORGS[holder]} belongs to {holder}"),
        "provider_name": (
            f"{erring}-0",
            f"{holder}-0",
            f"provider {holder}-0 belongs to {holder}",
        ),
        "github_app_id": (
            str(APP_IDS[erring]),
            str(APP_IDS[holder]),
            f"GitHub App {APP_IDS[holder]} belongs to {holder}; "
            f"the key in {PRIVATE_KEY_FIELD} differs",
        ),
    }[field]
    before = _look(garm, live)
    # Each scale set in its own organisation, bound to its own App.
    assert {app: row[3] for app, row in before.scalesets.items()} == ORGS
    assert {org: row[1] for org, row in before.organizations.items()} == {
        ORGS[app]: credential_name(APP_IDS[app], INSTALLATION_ID) for app in ORGS
    }
    garm.clear_requests()

    state = _publish(driver, erring, field, typo)
    for _ in range(2):
        garm.settle()
        state = driver.run(driver.ctx.on.update_status())
    assert [(w.method, w.path) for w in garm.writes()] == []
    _untouched(garm, before, live, busy)
    assert state.unit_status == ops.BlockedStatus(f"{erring}: {refusal}")

    state = _publish(driver, erring, field, own)
    assert state.unit_status == ops.ActiveStatus()
    assert [(w.method, w.path) for w in garm.writes()] == []
    _untouched(garm, before, live, busy)


def test_a_typo_reaching_for_another_s_name_or_organisation_leaves_the_holder_untouched(
    runner_driver: CharmDriver, charm_garm: Garm, story: StoryGarm
):
    driver, garm = runner_driver, charm_garm
    found = both_deployed_with_a_job_each(driver, garm, story)
    # The lower relation id reaches for the higher one's, then the other way round.
    for field in ("name", "org", "provider_name", "github_app_id"):
        for erring in (A, B):
            a_typo_is_refused(driver, garm, found, erring, field)
    a_case_only_change_is_the_same_organisation(driver, garm, found)


def a_case_only_change_is_the_same_organisation(
    driver: CharmDriver, garm: Garm, found: tuple[dict[str, str], dict[str, str]]
) -> None:
    """``cfg-b`` spells its organisation in other letter case: nothing in GARM changes."""
    live, busy = found
    before = _look(garm, live)
    garm.clear_requests()

    state = _publish(driver, B, "org", ORGS[B].title())
    for _ in range(2):
        garm.settle()
        state = driver.run(driver.ctx.on.update_status())
    assert state.unit_status == ops.ActiveStatus()
    assert [(w.method, w.path) for w in garm.writes()] == []
    _untouched(garm, before, live, busy)


def test_an_app_shared_with_the_same_key_converges_and_a_converged_hook_writes_nothing(
    driver: CharmDriver, charm_garm: Garm
):
    # cfg-b holds cfg-a's App key in another PEM layout: the same key, so it shares the App.
    shared = rewrapped(KEYS[A])
    assert shared != KEYS[A]
    for app, key in ((A, KEYS[A]), (B, shared)):
        cfg = configurator(
            app, relation_id=RELATION_IDS[app], org=ORGS[app], app_id="101", private_key=key
        )
        assert driver.add_configurator(cfg).unit_status == ops.ActiveStatus()
    assert [c["name"] for c in charm_garm.credentials()] == ["app-101-202"]
    assert {o["name"]: o["credentials_name"] for o in charm_garm.organizations()} == {
        ORGS[A]: "app-101-202",
        ORGS[B]: "app-101-202",
    }
    for _ in range(2):
        charm_garm.clear_requests()
        state = driver.run(driver.ctx.on.update_status())
        assert state.unit_status == ops.ActiveStatus()
        assert [(w.method, w.path) for w in charm_garm.writes()] == []
