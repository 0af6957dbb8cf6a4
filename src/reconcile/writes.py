"""The pass's GARM writes: one bounded pool of concurrent objects, and the pass's time budget.

Owns how the objects of one step of the chain (the credentials, the organisations and
repositories, the scale sets, the deletions) go to GARM: concurrently, at most
:data:`POOL_SIZE` at a time, each object's own calls in their order inside one task. Steps stay
in the chain's order (an object's dependencies are written in an earlier step, so they exist
before it starts). No object starts once the pass's budget is spent: the objects left wait for
the next pass, which the charm asks for at once, and :attr:`Writes.unfinished` says how far the
step got. A pass-ending failure (``reconcile.containment``) starts nothing more and is raised
once every started object has finished. Results and notices come back in the objects' order,
whatever order GARM finished them in, so a pass reads the same however it was interleaved.

Each task runs in a copy of the caller's context, so its GARM calls' trace spans sit under the
step's span. Must not import ops.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
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
        self.unfinished: list[Unfinished] = []

    @property
    def spent(self) -> bool:
        """Whether the budget is spent: no object starts any more this pass."""
        return self._deadline is not None and self._clock() >= self._deadline

    def each(
        self,
        step: str,
        items: Sequence[_T],
        task: Callable[[_T, list[Notice]], _R],
        notices: list[Notice] | None = None,
        *,
        one_at_a_time: bool = False,
    ) -> list[_R | None]:
        """Run ``task`` on every item, at most :attr:`size` at once, within the budget.

        Args:
            step: the step's words for the status when the budget cuts it.
            items: the objects, in the order their results and notices come back.
            task: one object's calls; it appends the object's notices to the list it is given.
            notices: where every object's notices go, in the items' order.
            one_at_a_time: run the objects one after another (GARM cannot take them at once).

        Returns:
            Each item's result, None for an item not started (budget spent).

        Raises:
            GarmApiError: the first pass-ending failure, once the started objects finished.
        """
        tasks = [_Task[_R]() for _ in items]

        def run(index: int) -> None:
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
        return self._collect(step, tasks, notices)

    def _collect(
        self, step: str, tasks: Sequence[_Task[_R]], notices: list[Notice] | None
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
            self.unfinished.append(cut)
        return [slot.result for slot in tasks]
