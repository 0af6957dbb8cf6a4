"""The story of GARM's database lost or restored under a converged deployment (real GARM).

Shared by ``test_database_recovery.py`` (lost, foreign) and ``test_database_restore.py``
(restored): two files, so that ``tox -e real-garm``'s workers, one file each, run them side by
side. GitHub (the stand-in) and the cloud (the stand-in provider) keep their state across the
loss, as the real ones do; nothing in GitHub is touched by the tests. The story steps are those
of ``tox -e simulate`` (:mod:`tests.simulate`). ADR 0016 records the decision these tests pin.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import ops
from ops import testing

from tests.simulate import Story, deploy, integrate, runners_come_up
from tests.simulate_backends import (
    REAL,
    Backend,
    PodGarm,
    RealStoryGarm,
    is_idle,
    open_backend,
)
from workload.pebble_layer import CONTAINER_NAME

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


def converged(tmp_path: Path, body: Callable[[Backend, Story], None]) -> None:
    """Run ``body`` on a deployment of cfg-a and cfg-b converged with idle runners."""
    with open_backend(REAL, workdir=tmp_path) as backend:
        story = Story(backend.driver, backend.garm)
        deploy(story)
        integrate(story)
        runners_come_up(story)
        body(backend, story)
