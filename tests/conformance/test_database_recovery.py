"""GARM's database lost or restored under a converged deployment: runners come back alone.

Real GARM only: the emulator has no database to lose. GitHub (the stand-in) and the cloud (the
stand-in provider) keep their state across the loss, as the real ones do. The story steps are
those of ``tox -e simulate`` (:mod:`tests.simulate`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import ops
from ops import testing

from tests.simulate import Story, deploy, integrate, runners_come_up
from tests.simulate_backends import REAL, Backend, PodGarm, RealStoryGarm, open_backend
from workload import CONTAINER_NAME


def real_garm(backend: Backend) -> PodGarm:
    """The real GARM of a real backend."""
    assert isinstance(backend.garm, RealStoryGarm)
    return backend.garm.real


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
    assert isinstance(backend.garm, RealStoryGarm)
    return Counter(v.name for v in backend.garm.github.scalesets())


def test_lost_database_recovery_brings_the_scale_sets_back(tmp_path: Path):
    with open_backend(REAL, workdir=tmp_path) as backend:
        story = Story(backend.driver, backend.garm)
        deploy(story)
        integrate(story)
        runners_come_up(story)
        before = sorted(s["name"] for s in backend.garm.scalesets())

        print("\n=== The garm-data volume is replaced: GARM's SQLite file is gone")
        real_garm(backend).lose_database()
        states = [replace_pod(backend)]
        story.show(states[-1])
        while len(states) < 3 and states[-1].unit_status != ops.ActiveStatus():
            states.append(story.hook())

        assert states[-1].unit_status == ops.ActiveStatus()
        assert sorted(s["name"] for s in backend.garm.scalesets()) == before
        assert github_names(backend) == Counter(before)
