"""The bench's own parts: the wall GARM spent per kind of write, the fleets, the timed hook."""

from __future__ import annotations

import gc
from typing import cast

from tests.bench import SHARED_ORG, busy_walls, relations, timed_hook
from tests.charm_driver import CharmDriver
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


def test_shared_org_puts_every_scale_set_in_one_organisation():
    each = {c.relation.remote_units_data[0]["org"] for c in relations(3)}
    shared = {c.relation.remote_units_data[0]["org"] for c in relations(3, shared_org=True)}
    assert each == {"org-0", "org-1", "org-2"}
    assert shared == {SHARED_ORG}


def test_a_timed_hook_leaves_nothing_frozen_out_of_the_collector():
    class Driver:
        def run(self, event: object) -> None:
            assert gc.get_freeze_count() > 0  # the bench's objects, frozen during the hook

    timed_hook(cast(CharmDriver, Driver()), object())
    assert gc.get_freeze_count() == 0
