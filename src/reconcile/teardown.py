"""Remove from GARM what the charm put there, before the application's pod goes away.

Every scale set in the charm's GARM is the charm's (the orphan sweep treats them all so): each
is disabled, its idle runners are removed and it is deleted, by the scale-set reconciler's own
sweep run with nothing desired. Busy runners are never removed; the sweep is repeated until no
scale set is left or the time bound passes. Then the organisations and repositories bound to a
managed credential, then the managed credentials and GitHub Enterprise Server endpoints, then
the charmed template, are deleted:
dependents first, as in every reconcile pass. Nothing the charm did not create is touched.

When a scale set outlives the bound, :class:`TeardownBlockedError` names every scale set and
runner in the way and how to finish by hand; nothing under those scale sets has been deleted.
This module knows nothing about Juju.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from garm import GarmClient, Instance, ScaleSet
from reconcile.charmed_template import GARM_CHARMED_TEMPLATE_NAME
from reconcile.containment import contain
from reconcile.credentials import CredentialReconciler, is_managed
from reconcile.endpoints import EndpointReconciler
from reconcile.entities import EntityReconciler
from reconcile.scalesets.reconciler import ScalesetReconciler
from reconcile.writes import Writes

logger = logging.getLogger(__name__)

TEARDOWN_TIMEOUT = 300.0
POLL_INTERVAL = 5.0


def _wait(seconds: float) -> None:
    """Let GARM work between two sweeps (tests replace this and :func:`_monotonic` together)."""
    time.sleep(seconds)


def _monotonic() -> float:
    """The clock the timeout is measured on: the one :func:`_wait` moves."""
    return time.monotonic()


@dataclass(frozen=True)
class BlockingRunner:
    """A runner still listed under a scale set that teardown could not delete."""

    name: str
    status: str
    runner_status: str
    job_status: str

    def describe(self) -> str:
        """One phrase for the error message."""
        parts = [f"status {self.status or '?'}", f"runner {self.runner_status or '?'}"]
        if self.job_status:
            parts.append(f"job {self.job_status}")
        return f"runner {self.name!r} ({', '.join(parts)})"


@dataclass(frozen=True)
class BlockedScaleset:
    """A scale set that is still in GARM when the bound passed."""

    name: str
    id: int | None
    runners: tuple[BlockingRunner, ...]

    def describe(self) -> str:
        """One sentence for the error message, with the commands that finish it by hand."""
        head = f"scale set {self.name!r} (id={self.id})"
        if not self.runners:
            return f"{head}: no runner listed, GARM refused the delete (see the log)"
        held = "; ".join(r.describe() for r in self.runners)
        by_hand = " && ".join(
            [f"garm-cli runner delete {r.name} --force-remove-runner" for r in self.runners]
            + [f"garm-cli scaleset delete {self.id}"]
        )
        api = ", ".join(
            [f"DELETE /api/v1/instances/{r.name}?forceRemove=true" for r in self.runners]
            + [f"DELETE /api/v1/scalesets/{self.id}"]
        )
        return f"{head} is held by {held}; to end it by hand (kills the job): {by_hand} ({api})"


class TeardownError(Exception):
    """Teardown did not finish; the message says what is left. Retrying continues it."""


class TeardownBlockedError(TeardownError):
    """Scale sets outlived the bound, most likely held by busy runners."""

    def __init__(self, blocked: Sequence[BlockedScaleset], timeout: float) -> None:
        """Build the message naming every blocking scale set and runner."""
        self.blocked = tuple(blocked)
        details = " | ".join(b.describe() for b in self.blocked)
        super().__init__(
            f"{len(self.blocked)} scale set(s) still in GARM after {timeout:.0f} s; busy "
            f"runners are never removed, so removal resumes when their jobs end (retry the "
            f"hook: juju resolve <unit>): {details}"
        )


@dataclass(frozen=True)
class TeardownResult:
    """What a finished teardown deleted (counts from GARM's listings)."""

    passes: int
    entities_left: int
    credentials_left: int


def remove_managed(
    client: GarmClient,
    *,
    timeout: float = TEARDOWN_TIMEOUT,
    poll_interval: float = POLL_INTERVAL,
    clock: Callable[[], datetime] | None = None,
) -> TeardownResult:
    """Delete every scale set, then the managed entities and credentials, within ``timeout``.

    Args:
        client: an authenticated GARM client.
        timeout: seconds the scale sets get to drain before the teardown gives up.
        poll_interval: seconds between two sweeps.
        clock: the scale-set reconciler's clock (runner staleness); its default when None.

    Returns:
        How many sweeps it took; managed entities and credentials left are 0.

    Raises:
        TeardownBlockedError: scale sets were left after ``timeout`` (nothing under them, nor
            any entity or credential, was deleted).
        TeardownError: a managed entity or credential could not be deleted.
        GarmApiError: GARM failed a listing or became unreachable.
    """
    # The removal cannot be continued by a later hook: the pool, and no budget.
    writes = Writes()
    reconciler = (
        ScalesetReconciler(client, writes=writes)
        if clock is None
        else ScalesetReconciler(client, clock, writes)
    )
    deadline = _monotonic() + timeout
    passes = 0
    while True:
        passes += 1
        live = reconciler.reconcile([], prune=True).live
        if not live:
            break
        if _monotonic() >= deadline:
            error = TeardownBlockedError([_blocked(client, s) for s in live], timeout)
            logger.error("Teardown blocked: %s", error)
            raise error
        logger.info("Teardown: %d scale set(s) still draining; sweeping again", len(live))
        _wait(poll_interval)
    logger.info("Teardown: no scale set left after %d sweep(s)", passes)
    _delete_entities_and_credentials(client, writes)
    _delete_charmed_template(client)
    entities_left, credentials_left = _managed_left(client)
    if entities_left or credentials_left:
        raise TeardownError(
            f"GARM kept {entities_left} managed organisation(s)/repository(ies) and "
            f"{credentials_left} managed credential(s); see the log, retry the hook"
        )
    return TeardownResult(passes, entities_left, credentials_left)


def _blocked(client: GarmClient, scaleset: ScaleSet) -> BlockedScaleset:
    name = scaleset.name or "(no name)"
    if scaleset.id is None:
        return BlockedScaleset(name, None, ())
    instances: list[Instance] = []
    with contain() as refused:
        instances = client.list_scaleset_instances(scaleset.id)
    if refused.error is not None:
        logger.warning("Cannot list the runners of scale set %r: %s", name, refused.error)
    runners = tuple(
        BlockingRunner(
            name=i.name or "(no name)",
            status=(i.status or "").lower(),
            runner_status=(i.runner_status or "").lower(),
            job_status=((i.job.status or "") if i.job else "").lower(),
        )
        for i in instances
    )
    return BlockedScaleset(name, scaleset.id, runners)


def _delete_entities_and_credentials(client: GarmClient, writes: Writes) -> None:
    endpoints = EndpointReconciler(client)
    credentials = CredentialReconciler(client, writes=writes)
    entities = EntityReconciler(client, credentials.listed, writes)
    in_use = entities.prune([], [])
    credentials.prune([], in_use)
    endpoints.prune([], credentials.endpoints_in_use([]))


def _delete_charmed_template(client: GarmClient) -> None:
    for template in client.list_templates():
        if template.name != GARM_CHARMED_TEMPLATE_NAME or template.id is None:
            continue
        logger.info("Deleting template %r (id=%s)", template.name, template.id)
        with contain() as refused:
            client.delete_template(template.id)
        if refused.error is not None:
            # The charm's template holds nothing up; a leftover is harmless.
            logger.warning("Cannot delete template %r: %s", template.name, refused.error)


def _managed_left(client: GarmClient) -> tuple[int, int]:
    credentials = client.list_credentials()
    managed_ids = {c.id for c in credentials if c.id is not None and is_managed(c)}
    entities = [o.credentials_id for o in client.list_organizations()] + [
        r.credentials_id for r in client.list_repositories()
    ]
    entities_left = sum(1 for cid in entities if cid in managed_ids)
    return entities_left, len(managed_ids)
