"""The pass's writes: concurrency within its bound, order kept, the budget, failures."""

from __future__ import annotations

import contextvars
import threading
import time
from typing import TypeVar

import pytest

from garm import GarmApiError, GarmConnectionError
from reconcile.writes import Unfinished, Writes
from vocabulary.notices import Notice, Severity

_Item = TypeVar("_Item")

LABEL: contextvars.ContextVar[str] = contextvars.ContextVar("label", default="")


class Overlap:
    """A task that records the most objects running at once (``peak``)."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self._lock = threading.Lock()

    def task(self, item: int, _: list[Notice]) -> int:
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        time.sleep(0.005)
        with self._lock:
            self.running -= 1
        return item


def test_objects_overlap_up_to_the_pool_size_and_no_further() -> None:
    running = 0
    peak = 0
    lock = threading.Lock()
    all_in = threading.Barrier(4, timeout=5)

    def task(item: int, _: list[Notice]) -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        if item < 4:
            all_in.wait()  # the first four are in GARM's hands at once
        time.sleep(0.01)
        with lock:
            running -= 1
        return item * 2

    results = Writes(size=4).each("step", list(range(12)), task)

    assert results == [i * 2 for i in range(12)]
    assert peak == 4


def test_results_and_notices_come_back_in_the_objects_order() -> None:
    def task(item: int, notices: list[Notice]) -> str:
        time.sleep(0.002 * (5 - item))  # the last finishes first
        notices.append(Notice(Severity.WAITING, f"s{item}", "waiting"))
        return f"r{item}"

    notices: list[Notice] = []
    results = Writes(size=5).each("step", list(range(5)), task, notices)

    assert results == ["r0", "r1", "r2", "r3", "r4"]
    assert [n.subject for n in notices] == ["s0", "s1", "s2", "s3", "s4"]


def test_no_object_starts_once_the_budget_is_spent() -> None:
    now = [0.0]
    writes = Writes(size=1, budget=10.0, clock=lambda: now[0])
    started: list[int] = []

    def task(item: int, _: list[Notice]) -> int:
        started.append(item)
        now[0] += 4.0  # each object takes 4 s of the budget
        return item

    results = writes.each("creating scale sets", list(range(5)), task)

    # Started at 0, 4 and 8 s; at 12 s the budget of 10 s is spent.
    assert started == [0, 1, 2]
    assert results == [0, 1, 2, None, None]
    assert writes.unfinished == [Unfinished("creating scale sets", 3, 5)]
    assert str(writes.unfinished[0]) == "creating scale sets: 3 of 5"
    assert writes.each("deleting scale sets", [9], task) == [None]
    assert str(writes.unfinished[-1]) == "deleting scale sets: 0 of 1"


def test_a_step_that_finishes_within_the_budget_is_not_unfinished() -> None:
    writes = Writes(size=3, budget=60.0)
    assert writes.each("step", [1, 2, 3], lambda item, _: item) == [1, 2, 3]
    assert writes.unfinished == []
    assert not writes.spent


def test_a_pass_ending_failure_starts_nothing_more_and_is_raised_after_the_started() -> None:
    finished: list[int] = []
    in_flight = threading.Event()
    release = threading.Event()

    def task(item: int, _: list[Notice]) -> int:
        if item == 0:
            in_flight.wait(5)
            raise GarmConnectionError("GARM is unreachable")
        if item == 1:
            in_flight.set()
            release.wait(5)  # still in GARM's hands when the failure arrives
        finished.append(item)
        return item

    writes = Writes(size=2)
    timer = threading.Timer(0.2, release.set)
    timer.start()
    try:
        with pytest.raises(GarmApiError, match="unreachable"):
            writes.each("step", list(range(50)), task)
    finally:
        timer.cancel()
    # The object in flight finished first; none of the 48 queued behind them started.
    assert finished == [1]


def test_each_object_runs_in_the_callers_context() -> None:
    LABEL.set("pass-42")
    seen = Writes(size=3).each("step", [1, 2, 3], lambda _item, _n: LABEL.get())
    assert seen == ["pass-42"] * 3


def test_a_step_garm_cannot_take_at_once_runs_one_object_after_another() -> None:
    overlap = Overlap()
    task = overlap.task

    assert Writes(size=8).each("step", list(range(6)), task, one_at_a_time=True) == list(range(6))
    assert overlap.peak == 1


def itself(item: _Item) -> _Item:
    """An object's key when the object is its own key."""
    return item


def test_a_step_beside_another_shares_the_pass_slots() -> None:
    # The entity step runs beside the scale sets (ADR 0015): both together keep the bound.
    overlap = Overlap()
    task = overlap.task

    writes = Writes(size=2)
    beside = writes.beside("first", list(range(8)), task, itself)
    beside.start()
    assert writes.each("second", list(range(8)), task) == list(range(8))
    beside.join()
    assert 1 <= overlap.peak <= 2


def test_an_object_waiting_for_another_steps_object_holds_no_slot() -> None:
    # One slot: had the waiting object taken it, the object it waits for could never start.
    writes = Writes(size=1)
    order: list[str] = []
    registered = threading.Event()

    def register(item: str, _: list[Notice]) -> None:
        order.append(item)
        registered.set()

    entities = writes.beside("entities", ["org"], register, itself)

    def ready(_: str) -> None:
        entities.start()  # only now does the entity ask for the slot
        assert registered.wait(5)

    writes.each("scale sets", ["set"], lambda item, _: order.append(item), ready=ready)
    entities.join()
    assert order == ["org", "set"]


def test_objects_the_budget_left_are_done_once_their_step_ends() -> None:
    now = [0.0]
    writes = Writes(size=1, budget=1.0, clock=lambda: now[0])

    def task(_item: str, _: list[Notice]) -> None:
        now[0] = 5.0  # the budget is spent by the first object

    step = writes.beside("entities", ["a", "b"], task, itself)
    step.start()
    step.wait("b")  # never started, and still no wait beyond the step's end
    step.wait("not-an-object")
    step.join()
    assert writes.unfinished == [Unfinished("entities", 1, 2)]


def test_a_pass_ending_failure_beside_stops_the_other_step_and_is_raised_by_join() -> None:
    writes = Writes(size=2)

    def down(_item: int, _: list[Notice]) -> None:
        raise GarmConnectionError("GARM is unreachable")

    step = writes.beside("entities", [1], down, itself)
    step.start()
    step.wait(1)
    started: list[int] = []
    writes.each("scale sets", [1, 2], lambda item, _: started.append(item))
    assert started == []
    step.join(quiet=True)
    with pytest.raises(GarmApiError, match="unreachable"):
        step.join()


def test_an_object_beside_is_done_as_soon_as_its_own_task_ended() -> None:
    writes = Writes(size=2)
    release = threading.Event()

    def task(item: str, _: list[Notice]) -> None:
        if item == "b":
            assert release.wait(5)  # the step goes on after "a"

    step = writes.beside("entities", ["a", "b"], task, itself, one_at_a_time=True)
    step.start()
    waited = threading.Thread(target=step.wait, args=("a",))
    waited.start()
    waited.join(5)
    a_done_while_b_ran = not waited.is_alive()
    release.set()
    step.join()
    assert a_done_while_b_ran
