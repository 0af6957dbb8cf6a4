"""Retiring the generation a label change replaced: disable, drain, delete.

Owns the hand-over from a predecessor generation to its replacement and what the status says
of it (``ScalesetProgress``, ``draining_phase``): the predecessor is disabled only once the
replacement is live, drains its runners, has its idle runners removed past the drain deadline,
and is deleted with its template when empty. Knows GARM through the client; must not import ops.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta

from garm import GarmClient, ScaleSet, UpdateScaleSetParams
from reconcile.containment import contain
from reconcile.scalesets.custom_templates import CustomTemplates
from reconcile.scalesets.runners import MAX_JOB_RUNTIME, RunnerRemover, known_time
from reconcile.scalesets.worker_starts import WorkerGate
from vocabulary.desired_state import ScalesetSpec
from vocabulary.security_events import deleted

logger = logging.getLogger(__name__)

# A drained predecessor is given the longest job GitHub allows, and an hour, before its
# remaining idle runners are removed.
DRAIN_DEADLINE = MAX_JOB_RUNTIME + timedelta(hours=1)


class Handover(enum.Enum):
    """How far the hand-over from a predecessor generation to its replacement got."""

    PENDING = "pending"  # replacement not live yet; the predecessor stays enabled
    FAILED = "failed"  # GARM refused to disable the predecessor
    DEFERRED = "deferred"  # GARM may not have started the predecessor's worker yet
    DONE = "done"  # predecessor disabled; it drains, then gets deleted


@dataclass(frozen=True)
class ScalesetProgress:
    """One predecessor generation that is still on its way out.

    Attributes:
        logical_name: the logical scale set name.
        retiring_name: live name of the predecessor.
        replacement_name: live name of the current generation.
        remaining_runners: runners the predecessor still lists (0 for PENDING and FAILED).
        handover: the hand-over stage.
    """

    logical_name: str
    retiring_name: str
    replacement_name: str
    remaining_runners: int
    handover: Handover = Handover.DONE

    @property
    def phase(self) -> Phase:
        """Where this predecessor stands."""
        if self.handover is Handover.PENDING:
            return Phase.CREATING_REPLACEMENT
        if self.handover in (Handover.FAILED, Handover.DEFERRED):
            return Phase.RETIRING_PREDECESSOR
        return Phase.of_disabled(max(self.remaining_runners, 0))


class Phase(enum.IntEnum):
    """Where a generation on its way out stands; least advanced first.

    The status notices and the ``scaleset-status`` table both say a phase in these words.
    """

    CREATING_REPLACEMENT = 0
    RETIRING_PREDECESSOR = 1
    DRAINING = 2
    AWAITING_DELETION = 3

    @classmethod
    def of_disabled(cls, runners: int | None) -> Phase:
        """The phase of a disabled generation with this many runners left (None: unknown)."""
        return cls.AWAITING_DELETION if runners == 0 else cls.DRAINING

    def words(self, runners: int | None = None) -> str:
        """The phase as the status and the table say it; draining names its runners."""
        if self is Phase.DRAINING:
            if runners is None:
                return "draining ? runners"
            return f"draining {runners} runner{'' if runners == 1 else 's'}"
        return self.name.lower().replace("_", " ")


def draining_phase(runners: int | None) -> str:
    """Return the phase text of a disabled generation with this many runners left."""
    return Phase.of_disabled(runners).words(runners)


class Retirement:
    """Moves each predecessor generation one step further out, once per pass."""

    def __init__(
        self,
        client: GarmClient,
        clock: Callable[[], datetime],
        runners: RunnerRemover,
        templates: CustomTemplates,
        disabling: AbstractContextManager[object] | None = None,
        gate: WorkerGate | None = None,
    ) -> None:
        """Create the retirement of one pass.

        Args:
            client: an authenticated GARM client.
            clock: returns the current time (timezone-aware), for the drain deadline.
            runners: removes idle runners past the deadline.
            templates: the pass's custom templates; a deleted generation's goes with it.
            disabling: held around each disable, so that GARM gets one at a time (``sweep``).
            gate: whether GARM has started its scale sets' workers (``worker_starts``): no
                predecessor is disabled or deleted before; None: always.
        """
        self._client = client
        self._gate = gate
        self._clock = clock
        self._runners = runners
        self._templates = templates
        self._disabling = disabling or nullcontext()
        # The ids of the predecessors this pass deleted, for the pass's live listing.
        self.deleted_ids: set[int] = set()

    def retire_replaced(
        self,
        spec: ScalesetSpec,
        active: str,
        observed: Mapping[str, ScaleSet],
        family: Sequence[str],
    ) -> list[ScalesetProgress]:
        """Advance every predecessor of ``active`` in ``family``; return those still going."""
        # Pre-pass observation: the pass that creates or re-enables the replacement never
        # disables a predecessor.
        replacement_live = active in observed and observed[active].enabled is True
        progress: list[ScalesetProgress] = []
        for name in sorted(family):
            if name == active or name not in observed:
                continue
            if not replacement_live:
                progress.append(ScalesetProgress(spec.name, name, active, 0, Handover.PENDING))
                continue
            entry = self._advance_retirement(spec.name, observed[name], active)
            if entry is not None:
                progress.append(entry)
        return progress

    def _advance_retirement(
        self, logical: str, old: ScaleSet, active: str
    ) -> ScalesetProgress | None:
        name = old.name or ""
        if old.enabled:
            return self._disable(logical, old, active)
        remaining = self._remaining_runners(old)
        if remaining > 0:
            if old.id is None or not self._drain_deadline_passed(old) or not self._may_write():
                return ScalesetProgress(logical, name, active, remaining)
            logger.warning(
                "Scaleset %r still has %d runners past the drain deadline of %s; removing them",
                name,
                remaining,
                DRAIN_DEADLINE,
            )
            if self._runners.remove(old.id, name, past_deadline=True):
                return ScalesetProgress(logical, name, active, remaining)
            remaining = 0
        if not self._may_write() or not self._delete_drained(old):
            return ScalesetProgress(logical, name, active, remaining)
        return None

    def _disable(self, logical: str, old: ScaleSet, active: str) -> ScalesetProgress:
        name = old.name or ""
        if not self._may_write():
            return ScalesetProgress(logical, name, active, 0, Handover.DEFERRED)
        if not self._retire(old):
            return ScalesetProgress(logical, name, active, 0, Handover.FAILED)
        return ScalesetProgress(logical, name, active, self._remaining_runners(old))

    def _may_write(self) -> bool:
        # A disable or delete before GARM started the worker crashes GARM (``worker_starts``).
        return self._gate is None or self._gate.wait()

    def _retire(self, old: ScaleSet) -> bool:
        if old.id is None:
            logger.warning("Cannot retire scaleset %r: GARM lists it without an id", old.name)
            return False
        logger.info("Retiring scaleset %r (id=%s): disabling it", old.name, old.id)
        with self._disabling, contain() as refused:
            self._client.update_scaleset(
                old.id, UpdateScaleSetParams(enabled=False, min_idle_runners=0, max_runners=0)
            )
            return True
        logger.warning(
            "GARM refused to zero scaleset %r; disabling it without max_runners: %s",
            old.name,
            refused.error,
        )
        with self._disabling, contain() as refused:
            self._client.update_scaleset(
                old.id, UpdateScaleSetParams(enabled=False, min_idle_runners=0)
            )
            return True
        logger.warning("Failed to disable scaleset %r; will retry: %s", old.name, refused.error)
        return False

    def _remaining_runners(self, old: ScaleSet) -> int:
        if old.id is None:
            return 0
        with contain() as refused:
            return len(self._client.list_scaleset_instances(old.id))
        # An unknown count must never read as drained.
        logger.warning("Cannot list the runners of scaleset %r: %s", old.name, refused.error)
        return 1

    def _drain_deadline_passed(self, old: ScaleSet) -> bool:
        # A disabled predecessor is never rewritten, so updated_at is when it was disabled.
        disabled_at = known_time(old.updated_at)
        if disabled_at is None:
            return False
        return self._clock() - disabled_at > DRAIN_DEADLINE

    def _delete_drained(self, old: ScaleSet) -> bool:
        if old.id is None:
            return True
        logger.info("Deleting drained scaleset %r (id=%s)", old.name, old.id)
        with contain() as refused:
            self._client.delete_scaleset(old.id)
        if refused.error is not None:
            logger.warning("Failed to delete scaleset %r; will retry: %s", old.name, refused.error)
            return False
        self.deleted_ids.add(old.id)
        deleted("scaleset", old.name or "", old.id)
        self._templates.delete(old.name or "")
        return True
