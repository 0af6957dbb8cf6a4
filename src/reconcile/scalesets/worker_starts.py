"""GARM's scale-set workers started: the gate before the charm disables or deletes a scale set.

GARM v0.2.1-afda4e76 starts each scale set's worker late: a new scale set's, and every one after
each start of GARM, is started by its organisation's retry loop, one after another, a few GitHub
round trips each (about three minutes for 500 scale sets of one organisation), and the loop
holds the organisation's controller meanwhile. A worker hears of its scale set's changes only
once it has registered its watcher, at the end of its start. A disable that reaches GARM before
then is never heard: the worker starts from the scale set as it was (enabled) and its listener
runs on. Deleting the scale set then crashes GARM (``DeleteMessageSession``: a nil answer
dereferenced after GitHub's 404), and deleting one whose worker has not started has the late
start register it on GitHub again, a scale set no one then owns
(``docs/reference/reconcile-cost.md``, "GARM's crash in a disable").

GARM's API says nothing of a worker: a scale set reads the same before and after its worker
started. The one thing it exposes is its Prometheus counter of its GitHub calls
(:meth:`garm.GarmClient.counters`): a worker's start looks its scale set up on GitHub
once (``GetRunnerScaleSetByNameAndRunnerGroup``), and an enabled worker's listener opens a
message session (``CreateMessageSession``) once the worker's watcher is registered; both are
counted since GARM's process started, for every organisation together. So the gate
(:class:`WorkerGate`) is open, and the pass may disable and delete, when:

- the lookups reach the scale sets GARM lists on providers it loaded (a scale set on another
  provider gets no worker) and those deleted since GARM started (``DeleteRunnerScaleSet``,
  counted the same way: their starts are in the lookups), and the sessions reach the enabled
  ones; after a wait, one :data:`SETTLE` more for the last start's watcher;
- or the lookups did not move for :data:`IDLE` seconds: GARM's retry loop (every 5 s) is
  starting no worker, and a disable of a worker that is not running is heard by the
  organisation's controller, which then makes the worker from the disabled scale set (no
  listener); such a worker starts after the disable, so the scale sets disabled in that pass
  are deleted in a later one (:attr:`WorkerGate.opened_idle`). GARM leaves a worker unstarted
  when its start fails before the lookup, or when the scale set was created between its
  organisation's controller listing the database and registering its watcher, at GARM's start;
  such a worker stays lost until a change to its scale set or GARM's next start, so the pass
  hands on what it found (:class:`IdleStarts`: GARM's process start, from the same
  ``/metrics``, and the lookups it stopped at) and a later pass of the same GARM process whose
  lookups have not moved goes on at once: one :data:`IDLE` wait per start of GARM, not per
  pass (the charm keeps it between hooks; GARM started again, or lookups that moved, and the
  gate judges afresh);
- or GARM's counters cannot be read (the charm's GARM always exports them): as before the gate.

Every step that disables or deletes waits for the gate, one decision a pass, within the pass's
budget; a wait the budget ended leaves the rest to the next pass, which comes at once
(``reconcile.writes``). A retried start is counted twice: a scale set created moments before it
is removed may still be removed before its worker started. Knows GARM through the client; must
not import ops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from garm import GarmClient, GarmCounters, ScaleSet
from reconcile.containment import contain
from reconcile.writes import Unfinished, Writes

logger = logging.getLogger(__name__)

# Once per worker start (``ensureScaleSetInGitHub``), before the worker's watcher is registered.
LOOKUP = "GetRunnerScaleSetByNameAndRunnerGroup"
# Once per listener start of an enabled worker, after its watcher is registered.
SESSION = "CreateMessageSession"
# Once per scale set deleted through GARM's API: its worker's start is in the lookups too.
DELETED = "DeleteRunnerScaleSet"
# Seconds the lookups stay put before GARM reads as starting no worker (its retry loop: 5 s).
IDLE = 15.0
# Seconds between two reads of GARM's counters while it starts workers.
POLL = 2.0
# Seconds after the counts reached the scale sets: the last start registers its watcher.
SETTLE = 1.0
# Seconds a pass without a budget (the removal of the application) waits, per sweep.
UNBUDGETED_WAIT = 20.0
# The status words of a pass that waited until its budget was spent.
WAITING_STEP = "waiting for GARM to start its scale sets"


def _pause(seconds: float) -> None:
    """Let GARM start workers (tests replace this and :func:`_monotonic` together)."""
    time.sleep(seconds)


def _monotonic() -> float:
    """The clock :func:`_pause` moves."""
    return time.monotonic()


@dataclass(frozen=True)
class IdleStarts:
    """GARM's retry loop found starting no worker, some left: in which process, at what count.

    Attributes:
        garm_started: when that GARM process started (its ``process_start_time_seconds``).
        lookups: GARM's worker lookups (:data:`LOOKUP`) when they had not moved for
            :data:`IDLE` seconds.
    """

    garm_started: float
    lookups: float


@dataclass(frozen=True)
class _Counts:
    lookups: float
    sessions: float
    deleted: float

    @classmethod
    def of(cls, counters: GarmCounters) -> _Counts:
        made = counters.operations
        return cls(made.get(LOOKUP, 0.0), made.get(SESSION, 0.0), made.get(DELETED, 0.0))


class WorkerGate:
    """Whether GARM has started the workers of the scale sets it lists, decided once a pass."""

    def __init__(
        self,
        client: GarmClient,
        writes: Writes,
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], float] | None = None,
        idle: IdleStarts | None = None,
    ) -> None:
        """Create the gate of one pass; :meth:`expect` tells it GARM's scale sets.

        Args:
            client: an authenticated GARM client.
            writes: the pass's writes: its budget bounds the wait, and a wait it cut is left
                to the next pass.
            sleep: waits so many seconds; :func:`_pause` when None.
            clock: monotonic seconds; :func:`_monotonic` when None.
            idle: what an earlier pass found GARM's retry loop idle at (:attr:`idle`), if any.
        """
        self._client = client
        self._remembered = idle
        self._kept = idle
        self._writes = writes
        self._sleep = sleep or _pause
        self._clock = clock or _monotonic
        self._lock = threading.Lock()
        self._workers = 0
        self._listeners = 0
        # True or False once decided for the pass; None while undecided.
        self._open: bool | None = None
        self._last: _Counts | None = None
        self._moved = 0.0
        self._idle = False

    def expect(self, listing: Iterable[ScaleSet], providers: Collection[str]) -> None:
        """GARM's scale sets as the pass listed them; only those on a loaded provider count."""
        started = [s for s in listing if s.id is not None and s.provider_name in providers]
        self._workers = len(started)
        self._listeners = sum(1 for s in started if s.enabled)

    def wait(self) -> bool:
        """Wait until the gate opens, within the pass's budget; whether it opened.

        A wait the budget (or :data:`UNBUDGETED_WAIT`) ended is left to the next pass.
        """
        with self._lock:
            if self._open is not None:
                return self._open
            began = self._clock()
            waited = False
            while not self._read():
                if self._writes.spent or self._clock() - began >= UNBUDGETED_WAIT:
                    self._open = False
                    self._writes.leave(self._cut())
                    return False
                waited = True
                self._sleep(POLL)
            if waited:
                self._sleep(SETTLE)
            self._open = True
            return True

    @property
    def opened_idle(self) -> bool:
        """Whether the gate opened with GARM starting no worker, some not started.

        A scale set whose worker GARM has not started (its start failed, or GARM lost the
        scale set's create at its own start) gets one when it is disabled: deleted before that
        start, it is registered on GitHub again. Its delete waits for a later pass.
        """
        with self._lock:
            return self._idle

    @property
    def idle(self) -> IdleStarts | None:
        """What the next pass is to know of GARM's idle retry loop (None: nothing).

        The decision this pass found or went on with; the one it was given while it has not
        read GARM's counters; None once the counts reached the scale sets, GARM started again
        or the lookups moved without going idle again.
        """
        with self._lock:
            return self._kept

    def _cut(self) -> Unfinished:
        started = int(self._last.lookups - self._last.deleted) if self._last else 0
        return Unfinished(WAITING_STEP, max(0, min(started, self._workers)), self._workers)

    def _read(self) -> bool:
        """Read GARM's counters once; whether the gate is open by them."""
        if not self._workers:
            return True
        counters = self._counters()
        if counters is None:
            return True
        now = _Counts.of(counters)
        if now.lookups >= self._workers + now.deleted and now.sessions >= self._listeners:
            self._kept = None
            return True
        return self._still_idle(counters.started, now) or self._gone_idle(counters.started, now)

    def _counters(self) -> GarmCounters | None:
        """GARM's counters; None when they cannot be read (the gate then goes on without)."""
        with contain() as refused:
            return self._client.counters()
        logger.warning(
            "Cannot read GARM's counters of its scale-set workers (%s); going on without",
            refused.error,
        )
        return None

    def _gone_idle(self, started: float | None, now: _Counts) -> bool:
        """Whether the lookups have not moved for :data:`IDLE` seconds in this pass."""
        self._kept = None
        if self._last is None or now.lookups != self._last.lookups:
            if self._last is None:
                logger.info(
                    "GARM has started %d of its %d scale sets' workers (%d deleted since; %d of "
                    "%d listeners); no scale set is disabled or deleted until it has started them",
                    now.lookups,
                    self._workers,
                    now.deleted,
                    now.sessions,
                    self._listeners,
                )
            self._last, self._moved = now, self._clock()
            return False
        self._last = now
        if self._clock() - self._moved < IDLE:
            return False
        logger.warning(
            "GARM has started %d of its %d scale sets' workers (%d deleted since) and started "
            "none for %.0f s; going on (the scale sets disabled now are deleted in a later pass)",
            now.lookups,
            self._workers,
            now.deleted,
            IDLE,
        )
        self._idle = True
        if started is not None:
            self._kept = IdleStarts(started, now.lookups)
        return True

    def _still_idle(self, started: float | None, now: _Counts) -> bool:
        """Whether an earlier pass found this GARM process idle at these very lookups."""
        remembered = self._remembered
        if remembered is None or self._last is not None:
            return False
        if started != remembered.garm_started or now.lookups != remembered.lookups:
            return False
        logger.info(
            "GARM has started %d of its %d scale sets' workers (%d deleted since) and none since "
            "an earlier pass found its retry loop idle; going on at once (the scale sets "
            "disabled now are deleted in a later pass)",
            now.lookups,
            self._workers,
            now.deleted,
        )
        self._idle = True
        return True
