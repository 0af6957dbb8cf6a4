"""The pass's GARM writes: one bounded pool of concurrent objects, and the pass's time budget.

Owns how the objects of the chain's steps (the credentials, the organisations and
repositories, the scale sets, the deletions) go to GARM: concurrently, at most
:data:`POOL_SIZE` objects of the whole pass in GARM's hands at once (the slots, handed on in
the order they were asked for), each object's own calls in their order inside one task. A step
may run beside a later one (:meth:`Writes.beside`): an object of the later step then waits for
what it depends on (``ready``) before it asks for a slot, so waiting holds none (ADR 0015). No
object starts once the pass's budget is spent: the objects left wait for the next pass, which
the charm asks for at once, and :attr:`Writes.unfinished` says how far each step got. A
pass-ending failure (``reconcile.containment``) starts nothing more in any step and is raised
once every started object of its step has finished. Results and notices come back in the
objects' order, whatever order GARM finished them in, so a pass reads the same however it was
interleaved.

Each task runs in a copy of the caller's context, so its GARM calls' trace spans sit under the
step's span. Must not import ops.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from vocabulary.notices import Notice

logger = logging.getLogger(__name__)

# How many objects of one step are in GARM's hands at once; chosen from the measurement on real
# GARM with SQLite and with PostgreSQL (docs/reference/reconcile-cost.md, "Concurrency").
POOL_SIZE = 8
# After this many seconds a pass starts no new object (docs/reference/reconcile-cost.md, "The
# budget"): with the objects already started, the listings after them and the rest of the hook,
# a hook stays well under 45 s at GitHub's latency.
PASS_BUDGET = 20.0

_T = TypeVar("_T")
_R = TypeVar("_R")
_K = TypeVar("_K")


@dataclass(frozen=True)
class Unfinished:
    """A step the budget cut: ``done`` of its ``total`` objects were started this pass.

    Attributes:
        step: what the step does, as the status says it (``creating scale sets``).
        done: the objects started.
        total: the objects the step had.
    """

    step: str
    done: int
    total: int

    def __str__(self) -> str:
        """Return ``creating scale sets: 180 of 500``."""
        return f"{self.step}: {self.done} of {self.total}"


class _Slots:
    """At most ``size`` holders at once; a freed slot goes to the one that asked first."""

    def __init__(self, size: int) -> None:
        self._free = size
        self._lock = threading.Lock()
        self._queue: deque[threading.Event] = deque()

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            turn = None
            if self._free and not self._queue:
                self._free -= 1
            else:
                turn = threading.Event()
                self._queue.append(turn)
        if turn is not None:
            turn.wait()
        try:
            yield
        finally:
            with self._lock:
                if self._queue:
                    # Handed on, never freed: a thread that asks later cannot take it first.
                    self._queue.popleft().set()
                else:
                    self._free += 1


class Background(Generic[_K]):
    """A step running beside the caller (:meth:`Writes.beside`), with its objects by key.

    An object is done once :meth:`mark` says so or the step has ended (the budget or a
    pass-ending failure may leave some unstarted): :meth:`wait` never outlasts the step.
    """

    def __init__(self, run: Callable[[], object], keys: Iterable[_K]) -> None:
        """Ready ``run`` with its objects' ``keys``; :meth:`start` starts it."""
        self._done = {key: threading.Event() for key in keys}
        self._error: BaseException | None = None
        context = contextvars.copy_context()

        def body() -> None:
            try:
                context.run(run)
            except BaseException as exc:  # raised again in the caller, by join()
                self._error = exc
            finally:
                for done in self._done.values():
                    done.set()

        self._thread = threading.Thread(target=body, name="garm-step", daemon=True)

    def start(self) -> None:
        """Start the step, once (whoever marks its objects must reach it first)."""
        if self._thread.ident is None:
            self._thread.start()

    def mark(self, key: _K) -> None:
        """Say the object ``key`` is done."""
        if key in self._done:
            self._done[key].set()

    def wait(self, key: _K) -> None:
        """Wait until the object ``key`` is done (at once for a key the step does not have)."""
        if key in self._done:
            self._done[key].wait()

    def join(self, *, quiet: bool = False) -> None:
        """Wait for the step.

        Args:
            quiet: drop its failure (the caller is raising another).

        Raises:
            GarmApiError: the step's pass-ending failure, unless ``quiet``.
        """
        self._thread.join()
        if self._error is not None and not quiet:
            raise self._error


@dataclass
class _Task(Generic[_R]):
    started: bool = False
    result: _R | None = None
    notices: list[Notice] = field(default_factory=list[Notice])
    error: BaseException | None = None


class Writes:
    """The writes of one pass: its pool size, its budget, and the steps the budget cut."""

    def __init__(
        self,
        size: int | None = None,
        budget: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Start the pass's clock.

        Args:
            size: at most this many objects at once (1: one after another); None:
                :data:`POOL_SIZE`.
            budget: seconds after which no object starts; None for no budget (the removal
                of the application, which cannot be continued later).
            clock: monotonic seconds.
        """
        self.size = max(1, POOL_SIZE if size is None else size)
        self._deadline = None if budget is None else clock() + budget
        self._clock = clock
        self._stopped = threading.Event()
        self._slots = _Slots(self.size)
        self._steps = 0
        self._cut: list[tuple[int, Unfinished]] = []
        self._lock = threading.Lock()

    @property
    def unfinished(self) -> list[Unfinished]:
        """The steps the budget cut, in the order the steps started."""
        with self._lock:
            return [cut for _, cut in sorted(self._cut, key=lambda entry: entry[0])]

    @property
    def spent(self) -> bool:
        """Whether the budget is spent: no object starts any more this pass."""
        return self._deadline is not None and self._clock() >= self._deadline

    def leave(self, cut: Unfinished) -> None:
        """Leave ``cut`` to the next pass, as a spent budget would: the next pass comes at once.

        For a step that waited for GARM until the budget was spent, or found it not ready.
        """
        logger.info("Left for the next pass: %s", cut)
        with self._lock:
            self._cut.append((self._steps, cut))
            self._steps += 1

    def beside(
        self,
        step: str,
        items: Sequence[_T],
        task: Callable[[_T, list[Notice]], object],
        key: Callable[[_T], _K],
        notices: list[Notice] | None = None,
        *,
        one_at_a_time: bool = False,
    ) -> Background[_K]:
        """The step :meth:`each` would run, to run beside the caller, on the pass's slots.

        Args:
            step: as :meth:`each`'s.
            items: as :meth:`each`'s.
            task: as :meth:`each`'s.
            key: an item's key, by which a later step's objects wait for it
                (:meth:`Background.wait`): marked done once its task has ended.
            notices: as :meth:`each`'s.
            one_at_a_time: as :meth:`each`'s.

        Returns:
            The step, not started (:meth:`Background.start`); :meth:`Background.join` raises
            what it raised.
        """

        def marked(item: _T, its_notices: list[Notice]) -> object:
            try:
                return task(item, its_notices)
            finally:
                background.mark(key(item))

        def run() -> None:
            self.each(step, items, marked, notices, one_at_a_time=one_at_a_time)

        background = Background(run, [key(item) for item in items])
        return background

    def each(
        self,
        step: str,
        items: Sequence[_T],
        task: Callable[[_T, list[Notice]], _R],
        notices: list[Notice] | None = None,
        *,
        one_at_a_time: bool = False,
        ready: Callable[[_T], object] | None = None,
    ) -> list[_R | None]:
        """Run ``task`` on every item, at most :attr:`size` at once, within the budget.

        Args:
            step: the step's words for the status when the budget cuts it.
            items: the objects, in the order their results and notices come back.
            task: one object's calls; it appends the object's notices to the list it is given.
            notices: where every object's notices go, in the items' order.
            one_at_a_time: run the objects one after another (GARM cannot take them at once).
            ready: waits until an item may start (what it depends on, in a step running
                beside this one, is done); called before the item takes a slot.

        Returns:
            Each item's result, None for an item not started (budget spent).

        Raises:
            GarmApiError: the first pass-ending failure, once the started objects finished.
        """
        tasks = [_Task[_R]() for _ in items]
        with self._lock:
            order = self._steps
            self._steps += 1

        def run(index: int) -> None:
            if self._stopped.is_set() or self.spent:
                return
            if ready is not None:
                ready(items[index])
            with self._slots.held():
                if self._stopped.is_set() or self.spent:
                    return
                slot = tasks[index]
                slot.started = True
                try:
                    slot.result = task(items[index], slot.notices)
                except BaseException as exc:
                    # Only what contain() let through arrives here: stop starting new objects.
                    self._stopped.set()
                    slot.error = exc

        if one_at_a_time or self.size == 1 or len(items) <= 1:
            for index in range(len(items)):
                run(index)
        else:
            with ThreadPoolExecutor(self.size, thread_name_prefix="garm-write") as pool:
                for index in range(len(items)):
                    pool.submit(contextvars.copy_context().run, run, index)
        return self._collect(step, order, tasks, notices)

    def _collect(
        self, step: str, order: int, tasks: Sequence[_Task[_R]], notices: list[Notice] | None
    ) -> list[_R | None]:
        for slot in tasks:
            if notices is not None:
                notices.extend(slot.notices)
        failure = next((slot.error for slot in tasks if slot.error is not None), None)
        if failure is not None:
            raise failure
        done = sum(slot.started for slot in tasks)
        if done < len(tasks):
            cut = Unfinished(step, done, len(tasks))
            logger.info("Pass budget spent while %s; the next pass goes on", cut)
            with self._lock:
                self._cut.append((order, cut))
        return [slot.result for slot in tasks]
