"""The real charm fed the databags a garm-configurator writes in its life, on each backend.

A configurator of two units publishes in phases: first its scale set without an image (its
image builder has not answered), then the image, its OpenStack provider (leader unit only) and
its GitHub App; later its App key is rotated (a new revision of the same secret), and when its
leader unit is removed the new leader publishes its own provider. The charm must wait, create,
rotate, and move the scale set to the new provider without touching a runner that runs a job,
keeping the old provider loaded until its scale set is gone.

On real GARM the GitHub stand-in verifies each App JWT GARM signs and runs the job; GARM stops
listening to a scale set once it is disabled, so a job that ends on it reaches GARM only through
its five-minute consolidation: the test then moves the charm's clock past the job limit instead
(as the simulation does). The emulator marks the runner busy and models the consolidation.
"""

from __future__ import annotations

import base64
from typing import Any

import ops
import pytest
from ops import testing

from tests.charm_driver import (
    PRIVATE_KEY_VALUE,
    CharmDriver,
    Configurator,
    configurator,
    first_phase,
    planned_providers,
)
from tests.conformance.backends import EMULATOR
from tests.conformance.conftest import Garm, hook_until
from tests.garm_emulator import GarmEmulator
from tests.github_standin import GitHubStandin, key_fingerprint
from tests.log_secrets import register_secret
from tests.rsa_keys import pkcs1_pem
from tests.simulate_backends import RealStoryGarm, StoryGarm, is_idle

APP = "cfg-a"
LOGICAL = "cfg-a-runners"
APP_ID = 101  # what tests.charm_driver.configurator publishes
CREDENTIAL = "app-101-202"
OLD_PROVIDER, NEW_PROVIDER = f"{APP}-0", f"{APP}-1"
ROTATED_KEY = pkcs1_pem(5)
register_secret(ROTATED_KEY)


class Statuses:
    """Every unit status the test's hooks produced, in order."""

    def __init__(self) -> None:
        self.seen: list[ops.StatusBase] = []

    def add(self, state: testing.State) -> testing.State:
        self.seen.append(state.unit_status)
        return state

    def messages(self) -> list[str]:
        return [status.message for status in self.seen]


def _only_scaleset(garm: Garm) -> dict[str, Any]:
    (scaleset,) = garm.scalesets()
    return scaleset


def _idle(garm: Garm, name: str) -> bool:
    return any(is_idle(r) for r in garm.instances(name))


def _stored_key(garm: Garm) -> str:
    emulator: GarmEmulator = garm.emulator  # pyright: ignore[reportAttributeAccessIssue]
    secrets = emulator.credential_secrets(CREDENTIAL)
    assert secrets is not None
    stored = secrets["app"]["private_key_bytes"]
    return stored.decode() if isinstance(stored, bytes) else base64.b64decode(stored).decode()


def _end_job(story: StoryGarm, scaleset: str, runner: str) -> None:
    if isinstance(story, RealStoryGarm):
        # GARM no longer listens to the disabled scale set: waiting for it tells nothing new.
        story.finish_job(scaleset, runner, wait=0)
    else:
        story.finish_job(scaleset, runner)


def first_phase_waits(driver: CharmDriver, garm: Garm, cfg: Configurator) -> None:
    """No image yet, so no provider and no App either: nothing reaches GARM."""
    state = driver.add_configurator(first_phase(cfg))
    assert state.unit_status == ops.ActiveStatus(f"{LOGICAL}: waiting for an image from {APP}")
    assert (garm.credentials(), garm.organizations(), garm.scalesets()) == ([], [], [])
    assert planned_providers(state) == []


def image_and_app_arrive(driver: CharmDriver, garm: Garm, cfg: Configurator) -> None:
    """The image, the leader unit's provider and the App: a scale set with an idle runner."""
    state = driver.publish(cfg.relation, cfg.relation.remote_units_data, remote_unit=0)
    assert state.unit_status == ops.ActiveStatus()
    assert planned_providers(state) == [OLD_PROVIDER]
    first = _only_scaleset(garm)
    assert first["provider_name"] == OLD_PROVIDER
    hook_until(driver, garm, "an idle runner", lambda _: _idle(garm, first["name"]))


def key_rotated(
    driver: CharmDriver, garm: Garm, cfg: Configurator, github: GitHubStandin | None
) -> None:
    """The operator adds a key on GitHub, the configurator publishes it, the old one goes.

    Then a label change has GARM create a scale set on GitHub, for which it needs a token.
    """
    if github is not None:
        github.add_app_key(APP_ID, ROTATED_KEY)
    state = driver.new_secret_revision(cfg.secrets[1], {"value": ROTATED_KEY})
    assert state.unit_status == ops.ActiveStatus()
    if github is not None:
        github.revoke_app_key(APP_ID, key_fingerprint(PRIVATE_KEY_VALUE))
        github.clear_requests()
    else:
        assert key_fingerprint(_stored_key(garm)) == key_fingerprint(ROTATED_KEY)
    statuses = Statuses()
    statuses.add(driver.change_relation(cfg.relation, labels="linux,x64,noble"))
    hook_until(
        driver,
        garm,
        "the relabelled scale set alone, with an idle runner",
        lambda s: statuses.add(s).unit_status == ops.ActiveStatus()
        and len(garm.scalesets()) == 1
        and _idle(garm, _only_scaleset(garm)["name"]),
    )
    if github is not None:
        checks = github.app_jwt_checks()
        assert checks
        assert {(c.accepted, c.key) for c in checks} == {(True, key_fingerprint(ROTATED_KEY))}
    assert not any(isinstance(s, ops.BlockedStatus) for s in statuses.seen), statuses.seen


def leader_unit_removed(
    driver: CharmDriver, garm: Garm, cfg: Configurator, story: StoryGarm
) -> Statuses:
    """While a job runs on its scale set, the leader unit goes and unit 1 leads.

    Unit 1 publishes its own provider; the scale set moves there. Returns the statuses seen.
    """
    old = _only_scaleset(garm)
    busy = story.start_job(old["name"])
    relation = driver.state.get_relation(cfg.relation.id)
    assert isinstance(relation, testing.Relation)
    unit0, unit1 = relation.remote_units_data[0], relation.remote_units_data[1]
    assert unit1["provider_name"] == NEW_PROVIDER
    provider_keys = {k: v for k, v in unit0.items() if k.startswith("openstack_")}
    statuses = Statuses()
    statuses.add(driver.unit_departs(cfg.relation, 0))
    state = statuses.add(driver.publish(cfg.relation, {1: {**unit1, **provider_keys}}, 1))
    assert sorted(planned_providers(state)) == [OLD_PROVIDER, NEW_PROVIDER]
    assert sorted(garm.providers()) == [OLD_PROVIDER, NEW_PROVIDER]
    (replacement,) = [s for s in garm.scalesets() if s["name"] != old["name"]]
    assert replacement["provider_name"] == NEW_PROVIDER

    def busy_and_kept() -> bool:
        runners = garm.instances(old["name"])
        return any(r["name"] == busy and r.get("runner_status") == "active" for r in runners)

    def drained_to_the_busy_runner(s: testing.State) -> bool:
        statuses.add(s)
        assert busy_and_kept()
        assert OLD_PROVIDER in planned_providers(s)
        disabled = not (garm.scaleset_by_name(old["name"]) or {}).get("enabled")
        # GARM started another idle runner when the job took this one; it reaps it once the
        # scale set is disabled.
        return disabled and [r["name"] for r in garm.instances(old["name"])] == [busy]

    hook_until(
        driver,
        garm,
        "the old scale set disabled, its busy runner alone",
        drained_to_the_busy_runner,
    )
    # Draining: more hooks leave the busy runner alone.
    for _ in range(2):
        statuses.add(driver.run(driver.ctx.on.update_status()))
        assert busy_and_kept()
    assert statuses.seen[-1] == ops.ActiveStatus(f"{LOGICAL}: draining 1 runner")
    assert not [c for c in garm.requests if c.method == "DELETE" and busy in c.path]

    _end_job(story, old["name"], busy)

    def old_gone(s: testing.State) -> bool:
        statuses.add(s)
        gone = garm.scaleset_by_name(old["name"]) is None
        assert gone or OLD_PROVIDER in planned_providers(s)
        return gone

    hook_until(driver, garm, "the old scale set deleted", old_gone)
    # The next hook drops the old provider: GARM restarts without it.
    state = statuses.add(driver.run(driver.ctx.on.update_status()))
    assert planned_providers(state) == [NEW_PROVIDER]
    assert garm.providers() == [NEW_PROVIDER]
    assert [s["name"] for s in garm.scalesets()] == [replacement["name"]]
    assert state.unit_status == ops.ActiveStatus()
    return statuses


def test_a_configurator_s_phases_from_first_image_to_a_new_leader_unit(
    runner_driver: CharmDriver, charm_garm: Garm, story: StoryGarm, request: pytest.FixtureRequest
):
    driver, garm = runner_driver, charm_garm
    github: GitHubStandin | None = None
    if garm.name != EMULATOR:
        github = request.getfixturevalue("github")
    cfg = configurator(APP, relation_id=1, units=2)

    first_phase_waits(driver, garm, cfg)
    image_and_app_arrive(driver, garm, cfg)
    key_rotated(driver, garm, cfg, github)
    statuses = leader_unit_removed(driver, garm, cfg, story)

    phases = [m for m in statuses.messages() if m.startswith(f"{LOGICAL}: ")]
    assert f"{LOGICAL}: creating replacement" in phases
    assert f"{LOGICAL}: draining 1 runner" in phases
    assert not any(isinstance(s, ops.BlockedStatus) for s in statuses.seen), statuses.seen
    assert not any("in GARM" in m or "taken" in m for m in statuses.messages())
    if github is not None:
        assert all(c.accepted for c in github.app_jwt_checks())
