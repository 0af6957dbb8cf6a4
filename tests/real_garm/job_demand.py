"""A job's demand on real GARM: when GARM has recorded it, and why the tests then restart GARM.

Measured on v0.2.1-afda4e76: GARM's scale-set worker scales to its own copy of the scale set,
refreshed by the database's update events, which GARM hands over each on its own goroutine, in
no fixed order. Handling a ``JobAssigned`` message writes the last message id (an event still
carrying the old desired count) and then the new desired count (an event carrying it); when the
first event is applied last, the worker keeps the old target and never looks again, while
GARM's database holds the new count. Once GARM has recorded the count and acknowledged the
message, a restart makes the worker read the scale set from the database.

A story that queues a job on real GARM (the simulation, the fault campaign) awaits
:func:`demand_recorded`, restarts GARM, and awaits :func:`listening`, so that it cannot flake
on that race. The charm recovers such a stall itself (``reconcile.scalesets.stall``), but only
once GARM has sat on the demand for minutes; the stories restart GARM so as not to wait.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.github_standin import GitHubStandin
from tests.github_standin.model import ASSIGNED, RUNNING
from tests.real_garm.harness import RealGarm

# What the message's handling and the restart are awaited as, in a story's output.
RECORDED = "GARM to record {count} desired runner(s) of {name} and acknowledge the message"
LISTENING = "GARM, restarted, to listen to {name} again"


def demand_recorded(
    garm: RealGarm, github: GitHubStandin, name: str, count: int
) -> Callable[[], bool]:
    """A probe: GARM's database wants ``count`` runners of scale set ``name``, its queue empty."""

    def probe() -> bool:
        scaleset = garm.scaleset_by_name(name) or {}
        views = [v for v in github.scalesets() if v.name == name]
        return (
            scaleset.get("desired_runner_count") == count
            and len(views) == 1
            and views[0].queued_messages == 0
        )

    return probe


def open_jobs(github: GitHubStandin, name: str) -> int:
    """How many jobs of scale set ``name`` the stand-in has assigned and not seen complete."""
    ids = {v.id for v in github.scalesets() if v.name == name}
    open_states = {ASSIGNED, RUNNING}
    return sum(1 for j in github.jobs() if j.scale_set_id in ids and j.state in open_states)


def listening(github: GitHubStandin, name: str) -> Callable[[], bool]:
    """A probe: GARM holds a live message session for scale set ``name``."""
    return lambda: any(v.name == name and v.has_session for v in github.scalesets())
