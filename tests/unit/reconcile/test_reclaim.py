"""The reclaim of the charm's own stale GitHub scale sets, against the GitHub stand-in.

The charm's GitHub door (``github_actions``) speaks real HTTP to the stand-in, which verifies
the App JWT as GitHub does and refuses a duplicate name in a runner group. ADR 0016.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from garm import GarmApiError, ScaleSet
from garm.models import EndpointRef
from github_actions import ActionsClient, GitHubTarget, app_jwt
from reconcile.scalesets.reclaim import Reclaim, Registration, Verdict, record
from tests.github_standin import GitHubStandin
from tests.rsa_keys import pkcs1_pem
from vocabulary.desired_state import ScalesetSpec
from vocabulary.notices import Severity

APP_ID = 101
NAME = "cfg-a-runners-18515357"
TAKEN = GarmApiError(
    "GARM answered 400: Bad Request (error creating runner scale set: ... a runner scale set"
    f" named '{NAME}' already exists in runner group 1)",
    status=400,
)


@pytest.fixture
def github() -> Iterator[GitHubStandin]:
    with GitHubStandin() as standin:
        standin.add_app_key(APP_ID, pkcs1_pem(0))
        yield standin


def spec() -> ScalesetSpec:
    return ScalesetSpec(
        name="cfg-a-runners",
        provider_name="cfg-a-0",
        image="noble",
        flavor="small",
        os_arch="amd64",
        min_idle_runners=1,
        max_runners=2,
        entity_type="organization",
        entity_name="org-a",
        source="cfg-a",
    )


def door(github: GitHubStandin, key: str | None = None) -> ActionsClient:
    return ActionsClient(
        GitHubTarget(
            api_url=github.api_url,
            base_url=github.base_url,
            ca_bundle="",
            app_id=APP_ID,
            installation_id=7,
            private_key=key or pkcs1_pem(0),
            entity_type="organization",
            entity_name="org-a",
        )
    )


def registered(*ids: int) -> dict[str, Registration]:
    return {NAME: Registration("github.com", "Default", ids)}


def test_the_charm_s_own_stale_scale_set_is_deleted_in_github(github: GitHubStandin):
    stale = github.add_scale_set(NAME, entity="org-a")
    notices: list = []

    verdict = Reclaim(registered(stale), lambda _: door(github)).reclaim(
        spec(), NAME, TAKEN, notices
    )

    assert verdict is Verdict.RECLAIMED
    assert [v.name for v in github.scalesets()] == []
    assert notices == []
    # The App JWT GitHub judged was signed by the App's key.
    assert [c.refusal for c in github.app_jwt_checks()] == [None]


def test_a_scale_set_the_charm_never_registered_is_never_deleted(github: GitHubStandin):
    foreign = github.add_scale_set(NAME, entity="org-a")
    notices: list = []

    verdict = Reclaim(registered(foreign + 100), lambda _: door(github)).reclaim(
        spec(), NAME, TAKEN, notices
    )

    assert verdict is Verdict.HELD
    assert [v.id for v in github.scalesets()] == [foreign]
    assert [(n.severity, n.subject, n.text) for n in notices] == [
        (
            Severity.BLOCKED,
            "cfg-a-runners",
            f"GitHub holds {NAME} in runner group Default (id {foreign}), not this charm's:"
            " delete it in GitHub",
        )
    ]


def test_a_registration_on_another_endpoint_is_not_the_charm_s_here(github: GitHubStandin):
    stale = github.add_scale_set(NAME, entity="org-a")
    elsewhere = {NAME: Registration("ghes.example.com", "Default", (stale,))}

    verdict = Reclaim(elsewhere, lambda _: door(github)).reclaim(spec(), NAME, TAKEN, [])

    assert verdict is Verdict.HELD
    assert [v.id for v in github.scalesets()] == [stale]


def test_other_refusals_are_left_to_the_usual_notice(github: GitHubStandin):
    other = GarmApiError("GARM answered 400: Bad Request (invalid labels)", status=400)

    verdict = Reclaim(registered(1), lambda _: door(github)).reclaim(spec(), NAME, other, [])

    assert verdict is Verdict.NOT_TAKEN
    assert github.requests == []


def test_github_refusing_the_app_is_a_retried_notice(github: GitHubStandin):
    github.add_scale_set(NAME, entity="org-a")
    notices: list = []

    verdict = Reclaim(registered(1), lambda _: door(github, pkcs1_pem(1))).reclaim(
        spec(), NAME, TAKEN, notices
    )

    assert verdict is Verdict.HELD
    assert [(n.severity, n.retry) for n in notices] == [(Severity.WAITING, True)]
    assert notices[0].text == (
        f"GitHub holds a scale set named {NAME}; GitHub failed (401); will retry"
    )
    assert pkcs1_pem(1) not in str(notices)


def test_without_an_app_the_charm_cannot_tell_whose_it_is(github: GitHubStandin):
    notices: list = []

    verdict = Reclaim(registered(1), lambda _: None).reclaim(spec(), NAME, TAKEN, notices)

    assert verdict is Verdict.HELD
    assert notices[0].severity is Severity.BLOCKED


def test_the_app_jwt_is_what_github_accepts(github: GitHubStandin):
    target = GitHubTarget(github.api_url, github.base_url, "", APP_ID, 7, pkcs1_pem(0), "", "")
    token = app_jwt(target)

    assert github.state.apps.verify(f"Bearer {token}").refusal is None


def test_registrations_follow_garm_and_keep_what_a_lost_database_leaves():
    before = {
        NAME: Registration("github.com", "Default", (3,)),
        "cfg-old-runners-1": Registration("github.com", "Default", (1,)),
    }
    live = [
        ScaleSet(name=NAME, scale_set_id=9, provider_name="cfg-a-0"),
        ScaleSet(name="by-hand", scale_set_id=5, provider_name="manual"),
        ScaleSet(
            name="cfg-b-runners-1",
            scale_set_id=4,
            provider_name="cfg-b-0",
            endpoint=EndpointRef(name="GHES.example.com"),
            **{"github-runner-group": "big"},
        ),
    ]

    after = record(before, live, wanted={NAME, "cfg-c-runners-2"})

    assert after == {
        NAME: Registration("github.com", "Default", (3, 9)),
        "cfg-b-runners-1": Registration("ghes.example.com", "big", (4,)),
    }
    many = record({NAME: Registration("github.com", "Default", (1, 2, 3, 4))}, live, set())
    assert many[NAME].ids == (2, 3, 4, 9)
    moved = record({NAME: Registration("github.com", "Default", (9, 3))}, live, {NAME})
    assert moved[NAME].ids == (3, 9)
    unsettled = record({NAME: Registration("github.com", "Default", (9, 3))}, live, {NAME}, {NAME})
    assert unsettled[NAME].ids == (9, 3)


def restored(scale_set_id: int) -> ScaleSet:
    """GARM's record of the scale set, as a database restored from a copy holds it."""
    return ScaleSet(name=NAME, scale_set_id=scale_set_id, provider_name="cfg-a-0")


def test_a_later_registration_of_the_charm_s_is_deleted_for_garm_s_older_one(
    github: GitHubStandin,
):
    later = github.add_scale_set(NAME, entity="org-a")
    older = later + 100  # an id GitHub gave before (the stand-in's ids start at 1)
    reclaim = Reclaim(registered(older, later), lambda _: door(github))
    notices: list = []

    reclaim.outdated(spec(), restored(older), notices)

    assert github.scalesets() == []
    assert reclaim.unsettled == {NAME}
    assert notices == []


def test_garm_s_id_held_by_github_settles_the_name(github: GitHubStandin):
    held = github.add_scale_set(NAME, entity="org-a")
    reclaim = Reclaim(registered(held, held + 1), lambda _: door(github))

    reclaim.outdated(spec(), restored(held), [])

    assert [v.id for v in github.scalesets()] == [held]
    assert reclaim.unsettled == set()


def test_a_later_registration_the_charm_never_made_is_never_deleted(github: GitHubStandin):
    foreign = github.add_scale_set(NAME, entity="org-a")
    reclaim = Reclaim(registered(foreign + 1, foreign + 2), lambda _: door(github))
    notices: list = []

    reclaim.outdated(spec(), restored(foreign + 1), notices)

    assert [v.id for v in github.scalesets()] == [foreign]
    assert [(n.severity, n.subject) for n in notices] == [(Severity.BLOCKED, "cfg-a-runners")]


def test_garm_holding_the_latest_id_asks_github_nothing(github: GitHubStandin):
    reclaim = Reclaim(registered(3, 9), lambda _: door(github))

    reclaim.outdated(spec(), restored(9), [])
    reclaim.outdated(spec(), ScaleSet(name="by-hand", scale_set_id=3), [])

    assert github.requests == []
    assert reclaim.unsettled == set()


def test_github_failing_on_an_older_id_is_the_retried_notice_of_a_reclaim(
    github: GitHubStandin,
):
    later = github.add_scale_set(NAME, entity="org-a")
    reclaim = Reclaim(registered(later + 100, later), lambda _: door(github, pkcs1_pem(1)))
    notices: list = []

    reclaim.outdated(spec(), restored(later + 100), notices)

    assert [v.id for v in github.scalesets()] == [later]
    assert reclaim.unsettled == {NAME}
    assert [(n.severity, n.retry, n.text) for n in notices] == [
        (
            Severity.WAITING,
            True,
            f"GitHub holds a scale set named {NAME}; GitHub failed (401); will retry",
        )
    ]
