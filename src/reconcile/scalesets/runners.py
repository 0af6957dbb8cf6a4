"""Guarded runner removal: a runner that may hold a job is never deleted.

Owns the rule for which runners of a scale set may go (a status GARM can delete, no job it
may still run, judged against a five-day job limit with unknown ages never expiring) and the
delete call with its GitHub fallback. Used by the label-change retirement, the orphan sweep
and, through them, removal cleanup. Knows GARM through the client; must not import ops.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from garm import (
    GarmClient,
    GarmNotFoundError,
    GarmUnauthorizedError,
    Instance,
)
from reconcile.containment import contain

logger = logging.getLogger(__name__)

# GitHub cancels a job after five days at most, so a job older than that holds no runner.
MAX_JOB_RUNTIME = timedelta(days=5)
RUNNER_STATUS_ACTIVE = "active"
JOB_STATUSES_HOLDING_RUNNER = frozenset({"queued", "in_progress"})
DELETABLE_RUNNER_STATUSES = frozenset(
    {"running", "error", "pending_delete", "pending_force_delete"}
)
PENDING_DELETE_STATUSES = frozenset({"pending_delete", "pending_force_delete"})
PENDING_FORCE_DELETE_STATUS = "pending_force_delete"


class RunnerRemover:
    """Removes the idle runners of a scale set, never one that may hold a job."""

    def __init__(self, client: GarmClient, clock: Callable[[], datetime]) -> None:
        """Create the remover.

        Args:
            client: an authenticated GARM client.
            clock: returns the current time (timezone-aware), to judge stale runners and jobs.
        """
        self._client = client
        self._clock = clock

    def remove(self, scaleset_id: int, name: str, past_deadline: bool = False) -> int:
        """Remove the runners that hold no job; return how many were listed (-1: unknown).

        Runners deleted in this pass still count until a later listing drops them, so only 0
        means the scale set is empty.
        """
        with contain() as refused:
            instances = self._client.list_scaleset_instances(scaleset_id)
        if refused.error is not None:
            logger.warning(
                "Cannot list the runners of scaleset %r; will retry: %s", name, refused.error
            )
            return -1
        refused_level = logging.ERROR if past_deadline else logging.INFO
        for instance in instances:
            if not instance.name:
                logger.warning("Skipping a runner of scaleset %r that has no name", name)
                continue
            status = (instance.status or "").lower()
            if status not in DELETABLE_RUNNER_STATUSES:
                logger.log(
                    refused_level,
                    "Leaving runner %r of scaleset %r in place: status %r cannot be deleted",
                    instance.name,
                    name,
                    status,
                )
                continue
            if self._is_running_job(instance):
                logger.info(
                    "Leaving runner %r of scaleset %r in place: it is running a job",
                    instance.name,
                    name,
                )
                continue
            self._delete_runner(instance.name, instance, name, refused_level)
        return len(instances)

    def _is_stale(self, moment: datetime | None) -> bool:
        # An unknown age never reads as expired.
        known = known_time(moment)
        if known is None:
            return False
        return self._clock() - known > MAX_JOB_RUNTIME

    def _is_running_job(self, instance: Instance) -> bool:
        runner_status = (instance.runner_status or "").lower()
        if runner_status == RUNNER_STATUS_ACTIVE and not self._is_stale(instance.updated_at):
            return True
        job = instance.job
        return (
            job is not None
            and (job.status or "").lower() in JOB_STATUSES_HOLDING_RUNNER
            and not self._is_stale(job.updated_at)
        )

    @staticmethod
    def _is_delete_stuck(instance: Instance) -> bool:
        status = (instance.status or "").lower()
        if status not in PENDING_DELETE_STATUSES:
            return False
        return status == PENDING_FORCE_DELETE_STATUS or bool(instance.provider_fault)

    def _delete_runner(
        self, runner: str, instance: Instance, scaleset_name: str, refused_level: int
    ) -> None:
        force = self._is_delete_stuck(instance)
        logger.info("Removing runner %r of scaleset %r (force=%s)", runner, scaleset_name, force)
        if self._try_delete_runner(runner, force, refused_level, bypass_github=False):
            return
        logger.warning(
            "GitHub rejected deregistering runner %r; removing it from GARM anyway, it may "
            "stay registered in GitHub",
            runner,
        )
        self._try_delete_runner(runner, force, refused_level, bypass_github=True)

    def _try_delete_runner(
        self, runner: str, force: bool, refused_level: int, *, bypass_github: bool
    ) -> bool:
        """Ask GARM to remove a runner; False only when GitHub refused and no bypass was asked."""
        try:
            with contain() as refused:
                self._client.delete_instance(
                    runner, force_remove=force, bypass_github_unauthorized=bypass_github
                )
        except GarmUnauthorizedError:
            # Without the bypass, GARM relays GitHub's refusal to deregister the runner as a
            # 401; with it, a 401 can only be GARM rejecting the token, which ends the pass.
            if bypass_github:
                raise
            return False
        if isinstance(refused.error, GarmNotFoundError):
            logger.info("Runner %r is already gone", runner)
        elif refused.error is not None:
            # Past the deadline a refusal is an error.
            logger.log(
                max(refused_level, logging.WARNING),
                "Failed to remove runner %r; will retry: %s",
                runner,
                refused.error,
            )
        return True


def known_time(moment: datetime | None) -> datetime | None:
    """Return the timestamp in UTC, or None when GARM does not know it.

    Go never omits a ``time.Time``: an unset one arrives as year 1 and must read as unknown,
    never as "older than any deadline".
    """
    if moment is None or moment.year <= 1:
        return None
    return _as_utc(moment)


def _as_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
