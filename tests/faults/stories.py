"""The campaign's stories: the preconditions built once and the steps faulted.

Two configurators, ``cfg-a`` and ``cfg-b``, each with its own GitHub App, organisation and
OpenStack provider. Their scale sets keep no idle runner (``min_idle_runner`` 0, at most one
runner): the one runner of a story is the busy one, brought up by a job, so nothing else of
GARM's own runs on a clock while the hooks run, and a step's calls are the same every time.

- (a) ``deploy``: from a bootstrapped charm with no configurator, both configurators arrive
  (relation-joined and relation-changed each).
- (b) ``relabel``: ``cfg-a`` changes its labels while a job runs on its runner.
- (c) ``unrelate``: ``cfg-a``'s relation is removed while a job runs on its runner.
- (d) ``remove``: the application is removed (the leader's ``stop`` with no planned unit).
- ``pod``: after (a), the pod is replaced (:func:`_replace_pod`); the whole step is the fault.

Preconditions: ``empty`` (deployed, bootstrapped), ``two`` (after (a), converged), ``busy``
(``two`` and a job started on ``cfg-a``'s runner).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ops import testing

from tests.charm_driver import Configurator, configurator
from tests.faults.world import World
from tests.real_garm.job_demand import RECORDED, demand_recorded
from tests.simulate_backends import is_busy, is_idle
from workload.pebble_layer import CONTAINER_NAME

CFG_A, CFG_B = "cfg-a", "cfg-b"
EMPTY, TWO, BUSY = "empty", "two", "busy"
NO_IDLE = {"min_idle_runner": "0", "max_runner": "1"}


def configurators() -> dict[str, Configurator]:
    """The two configurators, each with its own App, organisation and provider."""
    return {
        CFG_A: configurator(
            CFG_A, relation_id=1, org="org-a", app_id="101", installation_id="201", extra=NO_IDLE
        ),
        CFG_B: configurator(
            CFG_B, relation_id=2, org="org-b", app_id="102", installation_id="202", extra=NO_IDLE
        ),
    }


@dataclass(frozen=True)
class Story:
    """One faulted step: where it starts, what it does, what a later hook is."""

    key: str
    title: str
    start: str
    step: Callable[[World], None]
    retry: Callable[[World], None]
    # The configurators the step leaves alone: nothing of theirs may be written.
    unchanged: tuple[str, ...] = ()
    # The step's second writing hook makes the first one's calls again: fault only its writes.
    repeats: bool = False


def update_status(world: World) -> None:
    """One update-status hook."""
    world.driver.run(world.driver.ctx.on.update_status())


def _deploy(world: World) -> None:
    for cfg in configurators().values():
        world.driver.add_configurator(cfg)


def _relabel(world: World) -> None:
    relation = configurators()[CFG_A].relation
    world.driver.change_relation(relation, labels="linux,x64,noble")


def _unrelate(world: World) -> None:
    world.driver.remove_relation(configurators()[CFG_A].relation)


def _stop_removed(world: World) -> None:
    """The leader's stop hook while the whole application is being removed."""
    world.driver.state = dataclasses.replace(world.driver.state, planned_units=0)
    world.driver.run(world.driver.ctx.on.stop())


def _replace_pod(world: World) -> None:
    """The pod is replaced: no GARM, an empty configuration directory, no Pebble plan.

    The ``garm-data`` storage (GARM's SQLite file) and everything Juju keeps (relations,
    secrets, the peer databag) stay; the stand-in provider's servers are the cloud's, not the
    pod's. The new pod's charm gets ``start`` and ``garm-pebble-ready``.
    """
    world.garm.halt()
    config = world.garm.workdir / "etc"
    for path in sorted(config.rglob("*"), reverse=True):
        if ".standin-" in path.name:
            continue
        if path.is_dir():
            if not any(path.iterdir()):
                path.rmdir()
        else:
            path.unlink()
    old = world.driver.state.get_container(CONTAINER_NAME)
    fresh = testing.Container(CONTAINER_NAME, can_connect=True, mounts=old.mounts)
    world.driver.state = dataclasses.replace(world.driver.state, containers={fresh})
    world.driver.run(world.driver.ctx.on.start())
    world.driver.run(world.driver.ctx.on.pebble_ready(fresh))


STORIES = (
    Story("a", "first deployment of two configurators", EMPTY, _deploy, update_status, (), True),
    Story("b", "label change of cfg-a, its runner busy", BUSY, _relabel, update_status, (CFG_B,)),
    Story("c", "cfg-a removed, its runner busy", BUSY, _unrelate, update_status, (CFG_B,)),
    Story("d", "application removal", TWO, _stop_removed, _stop_removed),
    Story("pod", "pod replaced after (a)", TWO, _replace_pod, update_status, (CFG_A, CFG_B)),
)


def story(key: str) -> Story:
    """The story named ``key``."""
    return next(s for s in STORIES if s.key == key)


def start_busy_runner(world: World) -> dict[str, Any]:
    """Queue a job for ``cfg-a``'s scale set; GARM brings a runner up; the job starts on it.

    Call it on a world just put back (:meth:`World.restore`).
    """
    garm = world.garm
    (scaleset,) = [s for s in garm.scalesets() if s["name"].startswith(CFG_A)]
    # Measured on v0.2.1-afda4e76: a job assigned to a scale set before GARM (just started)
    # has its entity's runner tools gets no runner, and nothing makes GARM look at it again.
    # The world was just put back (the stand-in's record with it): GARM's fetch is in it.
    world.await_state(
        "GARM to fetch org-a's runner tools",
        lambda: any(
            r.route == "runner_downloads" and r.status == 200 and "/orgs/org-a/" in r.path
            for r in world.github.requests
        ),
    )
    job = world.github.queue_job(scaleset["name"])
    world.await_state(
        f"GARM to acquire job {job}",
        lambda: any(j.id == job and j.state == "assigned" for j in world.github.jobs()),
    )
    # GARM can keep a stale desired count of 0 (tests/real_garm/job_demand.py): once it has
    # recorded the count, a restart makes its worker read it.
    world.await_state(
        RECORDED.format(count=1, name=scaleset["name"]),
        demand_recorded(garm, world.github, scaleset["name"], 1),
    )
    world.restart_garm()
    idle = world.await_state(
        "a runner of cfg-a up",
        lambda: next((r for r in garm.instances(scaleset["name"]) if is_idle(r)), None),
    )
    world.github.start_job(job, idle["name"])
    return world.await_state(
        f"GARM to mark {idle['name']} busy",
        lambda: next(
            (
                r
                for r in garm.instances(scaleset["name"])
                if r["name"] == idle["name"] and is_busy(r)
            ),
            None,
        ),
    )


def busy_runners(world: World) -> list[str]:
    """Names of the runners GARM lists as running a job."""
    return sorted(r["name"] for r in world.garm.instances() if is_busy(r))


def the_state(world: World) -> testing.State:
    """The charm's Juju state now."""
    return world.driver.state
