"""GARM's database lost or restored under a converged deployment: runners come back alone.

Real GARM only: the emulator has no database to lose, and no GitHub. GitHub (the stand-in) and
the cloud (the stand-in provider) keep their state across the loss, as the real ones do; nothing
in GitHub is touched by the test. The story steps are those of ``tox -e simulate``
(:mod:`tests.simulate`). ADR 0016 records the decision these tests pin.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import ops
import pytest
from ops import testing

from tests.charm_driver import configurator, replaced_database
from tests.simulate import Story, change_labels, deploy, integrate, live_name, runners_come_up
from tests.simulate_backends import (
    REAL,
    Backend,
    PodGarm,
    RealStoryGarm,
    is_idle,
    open_backend,
)
from workload import CONTAINER_NAME

# The done-when of issue 42: both scale sets back within three hooks of the new pod's.
HOOKS = 3


def real_garm(backend: Backend) -> PodGarm:
    """The real GARM of a real backend."""
    assert isinstance(backend.garm, RealStoryGarm)
    return backend.garm.real


def story_garm(backend: Backend) -> RealStoryGarm:
    """The real backend's story surface (GARM and its stand-ins)."""
    assert isinstance(backend.garm, RealStoryGarm)
    return backend.garm


def replace_pod(backend: Backend) -> testing.State:
    """A new pod: no Pebble plan; Juju's memory (relations, secrets, peer data) is kept."""
    driver = backend.driver
    old = driver.state.get_container(CONTAINER_NAME)
    fresh = testing.Container(CONTAINER_NAME, can_connect=True, mounts=old.mounts)
    driver.state = dataclasses.replace(driver.state, containers={fresh})
    driver.run(driver.ctx.on.start())
    return driver.run(driver.ctx.on.pebble_ready(fresh))


def github_names(backend: Backend) -> Counter[str]:
    """How many scale sets of each name GitHub holds."""
    return Counter(v.name for v in story_garm(backend).github.scalesets())


def github_ids(backend: Backend) -> dict[str, int]:
    """GitHub's id of each scale set, by name."""
    return {v.name: v.id for v in story_garm(backend).github.scalesets()}


def github_deletes(backend: Backend) -> list[str]:
    """The scale-set deletions GitHub was asked for, as paths."""
    return [
        r.path
        for r in story_garm(backend).github.requests
        if r.method == "DELETE" and re.search(r"/runnerscalesets/\d+$", r.path)
    ]


def settled(status: ops.StatusBase) -> bool:
    """Active, with nothing under way but the naming of a replaced database's machines."""
    parts = [p for p in status.message.split("; ") if p]
    return isinstance(status, ops.ActiveStatus) and all(
        p.startswith("GARM: runner machines of its replaced database") for p in parts
    )


def until_active(story: Story, first: testing.State) -> list[testing.State]:
    """``first`` and the update-status hooks after it, up to :data:`HOOKS` in all."""
    states = [first]
    while len(states) < HOOKS and not settled(states[-1].unit_status):
        story.garm.let_work(None)
        states.append(story.hook())
    return states


def a_queued_job_gets_a_runner(backend: Backend, scaleset: str) -> str:
    """Queue a job for ``scaleset`` once GARM has an idle runner; the runner it starts on."""
    garm = story_garm(backend)

    def idle() -> bool:
        return any(is_idle(r) for r in garm.instances(scaleset))

    assert garm.await_state(f"an idle runner of {scaleset}", idle)
    return garm.start_job(scaleset)


def security_events(caplog: pytest.LogCaptureFixture, name: str) -> list[dict[str, object]]:
    """The security events named ``name`` the charm logged."""
    found: list[dict[str, object]] = []
    for record in caplog.records:
        if record.name != "garm-charm.security":
            continue
        event = json.loads(record.getMessage())
        if str(event["event"]).startswith(name):
            found.append(event)
    return found


def converged(tmp_path: Path, body: Callable[[Backend, Story], None]) -> None:
    """Run ``body`` on a deployment of cfg-a and cfg-b converged with idle runners."""
    with open_backend(REAL, workdir=tmp_path) as backend:
        story = Story(backend.driver, backend.garm)
        deploy(story)
        integrate(story)
        runners_come_up(story)
        body(backend, story)


def test_lost_database_recovery_brings_the_scale_sets_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    def lost(backend: Backend, story: Story) -> None:
        before = sorted(s["name"] for s in backend.garm.scalesets())
        stale = github_ids(backend)
        old_runners = {r.name for r in story_garm(backend).github.runners()}
        old_controller = real_garm(backend).controller()["controller_id"]

        print("\n=== The garm-data volume is replaced: GARM's SQLite file is gone")
        real_garm(backend).lose_database()
        states = until_active(story, replace_pod(backend))

        # Active, naming the machines the lost database leaves in the cloud by their tag.
        assert states[-1].unit_status == replaced_database(old_controller)
        assert real_garm(backend).controller()["controller_id"] != old_controller
        assert sorted(s["name"] for s in backend.garm.scalesets()) == before
        # GitHub holds exactly one scale set of each name: the lost GARM's were deleted by the
        # charm (their ids, nothing else) and registered again.
        assert github_names(backend) == Counter(before)
        assert sorted(github_deletes(backend)) == sorted(
            d for d in github_deletes(backend) if int(d.rsplit("/", 1)[1]) in stale.values()
        )
        assert all(github_ids(backend)[name] != stale[name] for name in before)
        deleted = {str(e["object"]) for e in security_events(caplog, "sensitive_delete")}
        assert {f"github-scale-set/{name}" for name in before} <= deleted
        logged = [r.getMessage() for r in caplog.records]
        assert any("GARM's database was replaced" in line for line in logged)
        # The lost database's runner machines are named by the tag they carry in the cloud.
        assert any(f"garm-controller-id={old_controller}" in line for line in logged)
        # The recovered scale sets run jobs again.
        runner = a_queued_job_gets_a_runner(backend, before[0])
        assert runner not in old_runners

    converged(tmp_path, lost)


def test_restored_database_from_before_a_label_change_recovery(tmp_path: Path):
    def restored(backend: Backend, story: Story) -> None:
        copy = tmp_path / "backup"
        real_garm(backend).back_up_database(copy)
        story.garm.let_work(None)
        story.hook()
        cfg_a = configurator("cfg-a", relation_id=1, org="org-a", labels="linux,x64")
        change_labels(story, cfg_a)
        after = sorted(s["name"] for s in backend.garm.scalesets())

        print("\n=== GARM's database is restored from the copy taken before the label change")
        real_garm(backend).restore_database(copy)
        until_active(story, replace_pod(backend))

        active = live_name(backend.garm, "cfg-a-runners-")
        current = {s["name"] for s in backend.garm.scalesets()}
        assert set(after) <= current
        # The active generation is back, registered once in GitHub, and runs jobs.
        assert github_names(backend)[active] == 1
        assert github_names(backend)[next(n for n in after if n.startswith("cfg-b"))] == 1
        a_queued_job_gets_a_runner(backend, next(n for n in after if n.startswith("cfg-a")))
        # The restored GARM still has the old generation: the charm retires it as after any
        # label change (disabled, drained, deleted).
        state = story.hook()
        for _ in range(4):
            if sorted(s["name"] for s in backend.garm.scalesets()) == after:
                break
            story.garm.let_work(None)
            state = story.hook()
        lingering = [
            r.get("status")
            for s in backend.garm.scalesets()
            if s["name"] not in after
            for r in backend.garm.instances(s["name"])
        ]
        if lingering and set(lingering) == {"pending_delete"}:
            pytest.xfail(
                "measured on GARM afda4e76: the restored database's runner of the old"
                " generation (its machine and GitHub registration gone since the copy) stays"
                f" pending_delete, so its drain waits for the drain deadline: {state.unit_status}"
            )
        assert sorted(s["name"] for s in backend.garm.scalesets()) == after
        assert github_names(backend) == Counter(after)

    converged(tmp_path, restored)


def test_a_foreign_github_scale_set_of_a_managed_name_is_never_deleted_recovery(
    tmp_path: Path,
):
    def foreign(backend: Backend, story: Story) -> None:
        before = sorted(s["name"] for s in backend.garm.scalesets())
        github = story_garm(backend).github
        real_garm(backend).lose_database()
        # Someone else (another GARM, a person) takes cfg-b's name in GitHub meanwhile.
        b_name = next(n for n in before if n.startswith("cfg-b"))
        b_id = github_ids(backend)[b_name]
        github.delete_scale_set_by_name(b_name)
        foreign_id = github.add_scale_set(b_name, entity="org-b")

        states = until_active(story, replace_pod(backend))
        state = story.hook()

        assert github_ids(backend)[b_name] == foreign_id != b_id
        assert all(not d.endswith(f"/{foreign_id}") for d in github_deletes(backend))
        assert state.unit_status == ops.BlockedStatus(
            f"cfg-b-runners: GitHub holds {b_name} in runner group Default (id {foreign_id}),"
            " not this charm's: delete it in GitHub;"
            " GARM: recovering 1 scale set(s) GARM's database lost; +1 more"
        )
        # cfg-a, whose stale scale set is the charm's own, is back and untouched by cfg-b's.
        assert live_name(backend.garm, "cfg-a") in before
        assert [s["name"] for s in backend.garm.scalesets()] == [
            n for n in before if n.startswith("cfg-a")
        ]
        assert states

    converged(tmp_path, foreign)


def test_restored_database_from_before_a_configurator_came_back_recovery(tmp_path: Path):
    """GARM restored with a scale set under a GitHub id the charm has replaced since.

    cfg-a left and was related again after the copy: GitHub holds its scale set under the new
    id, the restored GARM under the old one, and GARM's worker refuses to run it ("scale set
    already exists in github and it differs from the ID we know"). The later registration is
    the charm's and no GARM uses it: the charm deletes it, GARM registers the scale set again.
    """

    def came_back(backend: Backend, story: Story) -> None:
        copy = tmp_path / "backup"
        real_garm(backend).back_up_database(copy)
        story.garm.let_work(None)
        story.hook()
        a_name = live_name(backend.garm, "cfg-a")
        restored = (backend.garm.scaleset_by_name(a_name) or {}).get("scale_set_id")
        cfg_a = configurator("cfg-a", relation_id=1, org="org-a", labels="linux,x64")
        backend.driver.remove_relation(cfg_a.relation)
        story.until(
            "cfg-a's scale set gone",
            lambda _: backend.garm.scaleset_by_name(a_name) is None,
            awaiting=f"GARM to remove the idle runner of the disabled {a_name}",
        )
        cfg_a = configurator("cfg-a", relation_id=3, org="org-a", labels="linux,x64")
        backend.driver.add_configurator(cfg_a)
        later = github_ids(backend)[a_name]

        print("\n=== GARM's database is restored from the copy taken before cfg-a left")
        real_garm(backend).restore_database(copy)
        states = until_active(story, replace_pod(backend))

        def registered_again() -> bool:
            scaleset = backend.garm.scaleset_by_name(a_name) or {}
            held = github_ids(backend).get(a_name)
            return held is not None and held == scaleset.get("scale_set_id") != restored

        assert story.garm.await_state("GARM registers cfg-a's scale set again", registered_again)
        assert later != restored
        assert github_names(backend)[a_name] == 1
        assert github_ids(backend)[a_name] not in (later, restored)
        assert states[-1].unit_status == ops.ActiveStatus()
        a_queued_job_gets_a_runner(backend, a_name)

    converged(tmp_path, came_back)
