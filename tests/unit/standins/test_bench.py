"""The bench's reading of what GARM received: the wall it spent on each kind of write."""

from __future__ import annotations

from tests.bench import busy_walls
from tests.real_garm.proxy import RecordedCall


def call(method: str, path: str, started: float, finished: float) -> RecordedCall:
    return RecordedCall(method, path, {}, None, 200, started=started, finished=finished)


def test_busy_wall_is_the_union_of_each_kinds_intervals():
    calls = [
        call("POST", "/organizations", 0.0, 1.0),
        call("POST", "/organizations", 0.5, 2.0),  # overlaps the first
        call("POST", "/organizations", 1.2, 1.5),  # inside the second
        call("POST", "/organizations", 3.0, 4.0),  # after a gap
        call("PUT", "/scalesets/7", 0.0, 10.0),  # another kind, counted apart
        call("GET", "/organizations", 0.0, 50.0),  # reads are not writes
        call("POST", "/organizations", 5.0, 0.0),  # never answered: not counted
    ]
    assert busy_walls(calls) == {"POST /organizations": 3.0, "PUT /scalesets/{id}": 10.0}
