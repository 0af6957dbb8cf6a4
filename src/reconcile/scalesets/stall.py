"""Scale sets GARM has stopped scaling: seen, named and recovered.

GARM's scale-set worker (v0.2.1-afda4e76) scales to its own copy of the scale set, refreshed by
database events that are handed over in no fixed order; when a job's events land out of order
the worker keeps the old desired count while GARM's database (and API) holds the new one, and
no runner comes until something makes the worker read the row again
(``docs/reference/garm-stall.md``). Measured on real GARM: an update that changes a field of the
scale set makes GARM write the row and tell the worker, which then scales; an update that
changes nothing is not written and tells the worker nothing; a restart makes every worker read
its row.

A scale set is **stalled** when GARM wants more runners of it than it lists (``min(min idle +
desired runner count, max runners)``), none of its runners is being created, no provider fault
explains it, and GARM recorded that demand (the scale set's ``updated_at``) at least
:data:`STALL_AFTER` ago: the worker would have created the runners within seconds. A scale set
that is only slow (a runner pending or being created) is never stalled.

Recovery, once per stall (:class:`Recovery`, kept by the charm between passes): first a
targeted update (``runner_bootstrap_timeout`` up one minute and back, a field the charm does
not manage, so the row is written twice and ends as it was); if the scale set is still stalled
:data:`STALL_AFTER` later, a GARM restart, asked of the charm, only when no other scale set is
mid-change and no restart for a stall happened within :data:`RESTART_BACKOFF`; then nothing
more until that back-off has passed. A pass with no stall writes nothing.

Owns the rule, the recovery steps and the notice; makes its GARM writes through the client and
must not import ops.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from garm import GarmClient, Instance, ScaleSet, UpdateScaleSetParams
from reconcile.containment import contain
from reconcile.scalesets.names import logical_of
from vocabulary.notices import Notice, Severity

logger = logging.getLogger(__name__)

# GARM's worker creates a missing runner within one autoscale tick (5 s); a demand it has not
# acted on for this long is not slowness.
STALL_AFTER = timedelta(minutes=3)
# One autoscale tick of GARM's worker (5 s), and a margin: what a stall is looked at again after.
RECHECK_AFTER = timedelta(seconds=6)
# At most one GARM restart for stalled scale sets in this time.
RESTART_BACKOFF = timedelta(hours=1)
# Runners on their way up: their scale set is scaling.
_CREATING = frozenset({"pending_create", "creating"})
# Runners GARM is creating or deleting: a restart would cut the provider call short.
_IN_FLIGHT = _CREATING | {"pending_delete", "pending_force_delete", "deleting"}
_SINCE_FORMAT = "%Y-%m-%d %H:%M UTC"
# What GARM gives a scale set created without a bootstrap timeout (minutes).
GARM_BOOTSTRAP_TIMEOUT = 20


class Step(enum.StrEnum):
    """The last recovery step taken for a stall."""

    UPDATED = "updated"
    RESTARTED = "restarted"


@dataclass(frozen=True)
class Recovery:
    """What the charm did about one stalled scale set, kept while it has too few runners.

    Attributes:
        step: the last step taken.
        at: when it was taken.
        since: when GARM recorded the demand it did not act on (the first sighting's).
    """

    step: Step
    at: datetime
    since: datetime


@dataclass(frozen=True)
class Stall:
    """One scale set GARM is not scaling.

    Attributes:
        scaleset: its live name.
        wants: the runners GARM's database asks for.
        has: the runners GARM lists for it.
        since: when GARM recorded that demand.
    """

    scaleset: str
    wants: int
    has: int
    since: datetime

    def words(self) -> str:
        """The status words: ``GARM is not scaling (wants 1, has 0, since ...)``."""
        since = self.since.strftime(_SINCE_FORMAT)
        return f"GARM is not scaling (wants {self.wants}, has {self.has}, since {since})"


@dataclass(frozen=True)
class Shortfall:
    """A scale set with fewer runners than GARM wants and none being created.

    ``stall`` is set once GARM has sat on the demand for :data:`STALL_AFTER`.
    """

    scaleset: ScaleSet
    scaleset_id: int
    wants: int
    has: int
    stall: Stall | None


@dataclass
class StallWatch:
    """One pass's view of stalled scale sets and what it did about them.

    Attributes:
        stalls: the stalled scale sets, by live name.
        recoveries: the memory for the next pass (only scale sets still short of runners).
        restart: whether the charm should restart GARM now.
        notices: one per logical scale set stalled, and any refused recovery update.
    """

    stalls: list[Stall] = field(default_factory=list[Stall])
    recoveries: dict[str, Recovery] = field(default_factory=dict[str, Recovery])
    restart: bool = False
    notices: list[Notice] = field(default_factory=list[Notice])


def wanted_runners(scaleset: ScaleSet) -> int:
    """The runners GARM's worker aims at: idle runners plus assigned jobs, up to the maximum."""
    demand = (scaleset.min_idle_runners or 0) + max(scaleset.desired_runner_count or 0, 0)
    return min(demand, scaleset.max_runners or 0)


def shortfalls(
    scalesets: Iterable[ScaleSet],
    instances: Sequence[Instance],
    now: datetime,
    *,
    eligible: Collection[str] | None = None,
    faulted: Collection[str] = (),
) -> list[Shortfall]:
    """The enabled scale sets short of runners with none being created, by live name.

    Args:
        scalesets: GARM's scale set listing.
        instances: GARM's instance listing.
        now: the current time (timezone-aware).
        eligible: logical names to look at; None for every scale set.
        faulted: live names whose runners fail to start (the provider explains those).
    """
    found: list[Shortfall] = []
    for scaleset in scalesets:
        name, scaleset_id = scaleset.name, scaleset.id
        if not name or scaleset_id is None or scaleset.enabled is not True or name in faulted:
            continue
        if eligible is not None and logical_of(name) not in eligible:
            continue
        mine = [i for i in instances if i.scale_set_id == scaleset_id]
        wants = wanted_runners(scaleset)
        if wants <= len(mine) or any(_status(i) in _CREATING for i in mine):
            continue
        since = scaleset.updated_at
        stalled = since is not None and since.year > 1 and now - since >= STALL_AFTER
        stall = Stall(name, wants, len(mine), since) if stalled and since else None
        found.append(Shortfall(scaleset, scaleset_id, wants, len(mine), stall))
    return sorted(found, key=lambda s: s.scaleset.name or "")


def confirmed(
    client: GarmClient, found: Sequence[Shortfall], now: datetime
) -> tuple[list[Shortfall], list[Instance] | None]:
    """Look at GARM's runners once more before naming a stall; the new listing if read.

    A runner GARM has just deleted (its job done, its create failed) leaves its scale set short
    until the worker's next autoscale tick, at most 5 s later. A stall seen again after
    :data:`RECHECK_AFTER` is no such gap.
    """
    if not any(s.stall is not None for s in found):
        return list(found), None
    _pause(RECHECK_AFTER.total_seconds())
    instances = client.list_instances()
    again = shortfalls([s.scaleset for s in found], instances, now)
    still = {s.scaleset_id for s in again if s.stall is not None}
    kept = [s for s in again if s.scaleset_id in still or s.stall is None]
    return kept, instances


def _pause(seconds: float) -> None:
    """Let GARM's worker act (tests replace this)."""
    time.sleep(seconds)


def watch_stalls(
    client: GarmClient,
    found: Sequence[Shortfall],
    remembered: Mapping[str, Recovery],
    *,
    instances: Sequence[Instance],
    changing: bool,
    now: datetime,
) -> StallWatch:
    """Name the stalled scale sets and take the next recovery step for each, once.

    Args:
        client: a logged-in GARM client (the targeted updates).
        found: this pass's shortfalls (:func:`shortfalls`).
        remembered: what earlier passes did, by live name.
        instances: GARM's instance listing (a restart waits while runners are in flight).
        changing: whether a scale set is mid-change otherwise (a changeover under way).
        now: the current time.

    Returns:
        The stalls, the memory to keep, whether to restart GARM, and the notices.

    Raises:
        GarmApiError: a pass-ending failure of an update (``reconcile.containment``).
    """
    watch = StallWatch()
    restarted_lately = any(
        r.step is Step.RESTARTED and now - r.at < RESTART_BACKOFF for r in remembered.values()
    )
    stalled_ids = {s.scaleset.id for s in found if s.stall is not None}
    in_flight = changing or any(
        _status(i) in _IN_FLIGHT and i.scale_set_id not in stalled_ids for i in instances
    )
    for shortfall in found:
        name = shortfall.scaleset.name or ""
        before = remembered.get(name)
        if shortfall.stall is None:
            # Short but not for long (or just updated by the charm): keep what was done.
            if before is not None:
                watch.recoveries[name] = before
            continue
        since = before.since if before is not None else shortfall.stall.since
        stall = Stall(name, shortfall.wants, shortfall.has, since)
        watch.stalls.append(stall)
        recovery = _next(before, now, since, restart_allowed=not (restarted_lately or in_flight))
        acted = recovery is not before
        if acted and recovery.step is Step.UPDATED:
            if not _update(client, shortfall, watch.notices):
                recovery = before  # the next pass tries the update again
        elif acted:
            watch.restart = restarted_lately = True
        if recovery is not None:
            watch.recoveries[name] = recovery
        exhausted = recovery is not None and recovery.step is Step.RESTARTED and not acted
        severity = Severity.BLOCKED if exhausted else Severity.WAITING
        retry = severity is Severity.WAITING
        watch.notices.append(Notice(severity, logical_of(name), stall.words(), retry=retry))
    if watch.restart:
        logger.warning(
            "GARM is not scaling %s although it was updated; restarting GARM",
            ", ".join(s.scaleset for s in watch.stalls),
        )
    return watch


def _next(
    before: Recovery | None, now: datetime, since: datetime, *, restart_allowed: bool
) -> Recovery:
    """The recovery after this pass: ``before`` itself when no step is due."""
    if before is None:
        return Recovery(Step.UPDATED, now, since)
    if before.step is Step.UPDATED:
        # Still stalled STALL_AFTER after the update (which moved updated_at): restart.
        return Recovery(Step.RESTARTED, now, since) if restart_allowed else before
    if now - before.at >= RESTART_BACKOFF:
        return Recovery(Step.UPDATED, now, since)
    return before


def _update(client: GarmClient, shortfall: Shortfall, notices: list[Notice]) -> bool:
    """Write the scale set twice (bootstrap timeout up one, then back) so its worker reads it.

    Returns whether GARM took both writes; a refusal or failure is the scale set's notice.
    """
    scaleset = shortfall.scaleset
    timeout = scaleset.runner_bootstrap_timeout or GARM_BOOTSTRAP_TIMEOUT
    logger.warning(
        "GARM is not scaling scale set %r (wants %d runner(s)); updating it so that GARM's"
        " worker reads it again",
        scaleset.name,
        wanted_runners(scaleset),
    )
    logical = logical_of(scaleset.name or "")
    with contain(notices, logical, "the update that restarts its scaling") as refused:
        for minutes in (timeout + 1, timeout):
            client.update_scaleset(
                shortfall.scaleset_id, UpdateScaleSetParams(runner_bootstrap_timeout=minutes)
            )
    if refused.error is not None:
        logger.warning("GARM refused the update of scale set %r: %s", scaleset.name, refused.error)
        return False
    return True


def _status(instance: Instance) -> str:
    return (instance.status or "").lower()
