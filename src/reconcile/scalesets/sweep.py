"""The orphan sweep: a scale set no spec claims is disabled, emptied of idle runners, deleted.

Owns the removal of unclaimed scale sets and the notices they leave while they drain. The
caller decides what is unclaimed and whether sweeping is allowed this pass; :meth:`OrphanSweep.run`
disables the orphans one at a time and deletes each once GARM has settled after its own disable
(:meth:`OrphanSweep.settled`), while the next disable runs (ADR 0015). Knows GARM through the
client; must not import ops.

Why one disable at a time, and the settle: GARM stops a scale set's message listener when it
sees the scale set disabled, deleting its message session on GitHub, in the scale set's worker,
after the update was answered. When the scale set is deleted while its listener still runs,
GARM deletes the session of a scale set GitHub no longer has, gets 404 and, in v0.2.1-afda4e76,
dereferences a nil answer and crashes (``DeleteMessageSession``,
``util/github/scalesets/message_sessions.go``). Measured on real GARM with the GitHub stand-in
answering after 100 ms (``docs/reference/reconcile-cost.md``): with disables four or eight at
once GARM crashed in every removal of 30 configurators, a settle of 3 s or not; with one disable
at a time and the deletes eight at once, in none (three removals of 30); with GitHub answering
at once, in none either way. So disables go one at a time (the lock, shared with the
label-change retirement), and an orphan is deleted :data:`DISABLE_SETTLE` after its own disable
at the soonest (3 s in those measurements; 1 s is still several of GARM's round trips to
GitHub). A delete goes to GARM while the next orphan's disable runs: GARM did not crash in
three removals of 100 configurators and one of 500 measured so (2026-12-06). It still did when
a disable reached GARM before it had started the scale set's worker, which it does late, one
after another, after each of its own starts: so nothing is disabled or deleted until GARM's
counters say it has started them (``worker_starts``, :class:`WorkerGate`, issue 56).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext

from garm import GarmClient, ScaleSet, UpdateScaleSetParams
from reconcile.containment import contain
from reconcile.scalesets.names import logical_of
from reconcile.scalesets.retirement import Phase, draining_phase
from reconcile.scalesets.runners import RunnerRemover
from reconcile.scalesets.worker_starts import WorkerGate
from reconcile.writes import Unfinished, Writes
from vocabulary.notices import Notice, Severity
from vocabulary.security_events import deleted

logger = logging.getLogger(__name__)

# Seconds between the last disable of a pass and its first delete (the module docstring).
DISABLE_SETTLE = 1.0
# The step's words when the pass's budget cuts it (``reconcile.writes``).
SWEEP_STEP = "deleting scale sets"


class OrphanSweep:
    """Removes unclaimed scale sets, one step per pass, never a runner that may hold a job."""

    def __init__(
        self,
        client: GarmClient,
        runners: RunnerRemover,
        sleep: Callable[[float], None] | None = None,
        disabling: AbstractContextManager[object] | None = None,
        gate: WorkerGate | None = None,
    ) -> None:
        """Create the sweep of one pass.

        Args:
            client: an authenticated GARM client.
            runners: removes the idle runners of a disabled scale set.
            sleep: waits so many seconds (:meth:`settle`); ``time.sleep`` when None.
            disabling: held around each disable, so that GARM gets one at a time.
            gate: whether GARM has started its scale sets' workers: the sweep waits for it
                (within the pass's budget) before any disable or delete; None: never waits.
        """
        self._client = client
        self._runners = runners
        self._sleep = sleep or time.sleep
        self._disabling = disabling or nullcontext()
        self._gate = gate
        # What the sweep leaves for the pass: notices while a scale set drains, deleted ids.
        self.notices: list[Notice] = []
        self.deleted_ids: set[int] = set()
        # The orphans disabled this pass, and when.
        self._disabled: dict[int, float] = {}

    def run(
        self, writes: Writes, orphans: Sequence[ScaleSet], deleted: Callable[[str], None]
    ) -> None:
        """Disable the orphans one at a time, each deleted once GARM settled after its disable.

        Args:
            writes: the pass's writes: the disables run beside the deletes, on its slots.
            orphans: the scale sets to remove.
            deleted: told the name of each orphan deleted (its template goes with it).

        Raises:
            GarmApiError: a pass-ending failure (``reconcile.containment``).
        """
        gate = self._gate
        # Left to the next pass when the budget ends the wait (the gate says so).
        if not orphans or (gate is not None and not gate.wait()):
            return
        # GARM started none of the workers left for a while: one disabled now gets its worker
        # after the disable, so its delete waits for the next pass (``worker_starts``).
        held = gate is not None and gate.opened_idle

        def ready(scaleset: ScaleSet) -> None:
            disabling.wait(id(scaleset))
            self.settled(scaleset)

        def delete(scaleset: ScaleSet, _: list[Notice]) -> None:
            if held and (scaleset.id or 0) in self._disabled:
                return
            if self.delete_orphaned(scaleset):
                deleted(scaleset.name or "")

        disabling = writes.beside(
            SWEEP_STEP, orphans, lambda scaleset, _: self.disable(scaleset), id, one_at_a_time=True
        )
        disabling.start()
        try:
            writes.each(SWEEP_STEP, orphans, delete, ready=ready)
        except BaseException:
            disabling.join(quiet=True)  # the first failure is the pass's
            raise
        disabling.join()
        if held and self._disabled:
            writes.leave(Unfinished(SWEEP_STEP, len(self.deleted_ids), len(orphans)))

    def disable(self, scaleset: ScaleSet) -> None:
        """Disable ``scaleset`` (and drop its idle runners) where GARM still has it enabled."""
        if scaleset.id is None or not _needs_disable(scaleset):
            return
        if self._disable(scaleset.id, scaleset.name or ""):
            self._disabled[scaleset.id] = time.monotonic()

    def settled(self, scaleset: ScaleSet) -> None:
        """Wait until :data:`DISABLE_SETTLE` seconds after ``scaleset``'s disable, if any."""
        disabled = self._disabled.get(scaleset.id or 0)
        if disabled is not None:
            self._sleep(max(0.0, disabled + DISABLE_SETTLE - time.monotonic()))

    def delete_orphaned(self, scaleset: ScaleSet) -> bool:
        """Take one step towards deleting ``scaleset``; True once it is deleted."""
        logger.info(
            "Scaleset %r (id=%s) is not claimed by any spec; removing it",
            scaleset.name,
            scaleset.id,
        )
        if scaleset.id is None:
            logger.warning("Cannot remove scaleset %r: GARM lists it without an id", scaleset.name)
            return False
        name = scaleset.name or ""
        subject = logical_of(name)
        if _needs_disable(scaleset) and scaleset.id not in self._disabled:
            self.notices.append(Notice(Severity.WAITING, subject, "removal deferred"))
            return False
        remaining = self._runners.remove(scaleset.id, name)
        if remaining:
            phase = draining_phase(remaining if remaining > 0 else None)
            text = f"{phase} (no longer configured)"
            self.notices.append(Notice(Severity.PROGRESS, subject, text))
            return False
        with contain() as refused:
            self._client.delete_scaleset(scaleset.id)
        if refused.error is not None:
            logger.warning("Failed to delete scaleset %r; will retry: %s", name, refused.error)
            self.notices.append(
                Notice(Severity.PROGRESS, subject, Phase.AWAITING_DELETION.words())
            )
            return False
        logger.info("Deleted scaleset %r (id=%s)", name, scaleset.id)
        deleted("scaleset", name, scaleset.id)
        self.deleted_ids.add(scaleset.id)
        return True

    def _disable(self, scaleset_id: int, name: str) -> bool:
        with self._disabling, contain() as refused:
            self._client.update_scaleset(
                scaleset_id, UpdateScaleSetParams(enabled=False, min_idle_runners=0)
            )
        if refused.error is not None:
            logger.warning(
                "Failed to disable scaleset %r; deleting it is deferred because GARM refuses to "
                "delete an enabled scaleset: %s",
                name,
                refused.error,
            )
            return False
        return True


def _needs_disable(scaleset: ScaleSet) -> bool:
    """Whether GARM still has the orphan enabled or keeping idle runners.

    An orphan drains for as long as its busy runners run (days, at most): rewriting it on every
    pass would be a write in every converged hook.
    """
    return bool(scaleset.enabled) or bool(scaleset.min_idle_runners)
