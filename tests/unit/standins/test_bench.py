"""The bench's own parts: the wall GARM spent per kind of write, the fleets, the timed hook.

And the fleet-growth scenario (``tests/bench_growth.py``) on the emulator at a tiny N.
"""

from __future__ import annotations

import collections
import dataclasses
import gc
import itertools
from pathlib import Path
from typing import cast

import ops

from tests.bench import (
    EMULATOR,
    SHARED_ORG,
    Row,
    Setting,
    bench,
    busy_walls,
    relations,
    timed_hook,
)
from tests.bench_growth import (
    CHANGED,
    CONTINUATION,
    CREATED,
    JOINED,
    RELATION_HOOKS,
    Growth,
    Hook,
    grow,
    table,
)
from tests.charm_driver import CharmDriver
from tests.conformance.backends import proxied_emulator
from tests.real_garm.proxy import LOGIN_PATH, RecordedCall


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


def test_fleet_growth_integrates_configurators_one_at_a_time_and_converges(tmp_path: Path):
    with proxied_emulator() as garm:
        growth = grow(EMULATOR, garm, tmp_path, 3, repeats=2)
        # The last converged update-status: GARM heard the login and reads only.
        heard = {(c.method, c.path) for c in garm.requests if c.method != "GET"}
        live = [str(s["name"]) for s in garm.scalesets()]

    # Three relation hooks per configurator, in Juju's order, one configurator after the other.
    assert [(h.kind, h.configurator) for h in growth.hooks(*RELATION_HOOKS)] == [
        (kind, number) for number in (1, 2, 3) for kind in (CREATED, JOINED, CHANGED)
    ]
    assert all(h.tools > 0 for h in growth.grown)
    assert growth.tools == sum(h.tools for h in growth.grown)
    # Every configurator's scale set is in GARM, under its live name.
    for number in range(3):
        assert [n for n in live if n.startswith(f"cfg-{number}-runners-")], live
    assert growth.scalesets == sorted(live)
    # Converged: no write to GARM but the login, none to Juju, in every repeat.
    assert heard <= {("POST", LOGIN_PATH)}
    for row in growth.converged:
        assert row.writes == 0
        assert row.faults == ()
        assert row.juju_tools > 0
    assert isinstance(growth.status, ops.ActiveStatus)
    assert growth.faults == []
    assert growth.largest in growth.grown
    assert f"| {EMULATOR} | 3 | 9 | " in table([growth])[2]


def test_fleet_growth_counts_the_continuations_a_cut_pass_asks_for(tmp_path: Path):
    with proxied_emulator() as garm:
        # Each pass may write once: a configurator's organisation and scale set take more, so
        # the pass that integrates it continues through the charm's Pebble notice.
        growth = grow(EMULATOR, garm, tmp_path, 2, repeats=1, budget_ticks=1)

    continued = growth.hooks(CONTINUATION)
    assert {h.configurator for h in continued} == {1, 2}
    # A continuation follows the hook that asked for it, of the same configurator, before that
    # configurator's next relation hook; the relation hooks stay three per configurator.
    for before, hook in itertools.pairwise(growth.grown):
        if hook.kind == CONTINUATION:
            assert before.configurator == hook.configurator
    relation_hooks = [(h.kind, h.configurator) for h in growth.hooks(*RELATION_HOOKS)]
    assert relation_hooks == [(k, n) for n in (1, 2) for k in (CREATED, JOINED, CHANGED)]
    assert all(h.tools > 0 for h in continued)
    assert growth.faults == []
    assert f"| {EMULATOR} | 2 | 6 | {len(continued)} | " in table([growth])[2]


def test_fleet_growth_names_what_fails_the_run():
    converged = Row(
        EMULATOR,
        2,
        "converged",
        0.0,
        0.0,
        1,
        0,
        1,
        collections.Counter[str](),
        collections.Counter[str](),
        ("relation_set x1 to Juju",),
    )
    hook = Hook(CREATED, 1, collections.Counter({"relation_list": 1}))
    growth = Growth(
        EMULATOR,
        2,
        [],
        [hook],
        [dataclasses.replace(converged, faults=()), converged],
        1.0,
        ["cfg-0-runners-1234abcd"],
        ops.BlockedStatus("GARM refused"),
    )
    assert growth.faults == [
        "converged update-status 2 of 2: relation_set x1 to Juju",
        "no scale set in GARM for cfg-1-runners",
        "unit status at the end: BlockedStatus('GARM refused')",
    ]


def test_a_label_change_after_a_restart_is_measured_to_the_end():
    # The scenario restarts GARM, delivers each changed configurator's relation-changed and
    # counts as a fault any changed scale set GARM does not carry the new label of at the end.
    rows = bench(EMULATOR, 10, 1, Setting(shared_org=True, restart_before_labels=True))

    labels = next(r for r in rows if r.scenario == "10% labels, restarted")
    assert labels.faults == ()
    assert labels.writes > 0  # the replacement created, the predecessor disabled and deleted
