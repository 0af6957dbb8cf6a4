"""The application's removal and the unit databags' network keys under the unit-agent stand-in.

A probe charm (a ``dispatch`` that notes each hook, its remote and departing units, what
``relation-list`` and ``goal-state`` say) runs as the packed charm does
(:class:`tests.juju_agent.agent.UnitAgent`). ``remove_application`` runs the hooks Juju 3.6's
uniter runs on a dying unit (``worker/uniter/resolver.go``, ``worker/uniter/relation/
resolver.go``): per relation a departed hook for each remote unit, then broken (never for the
peer relation); then ``stop`` and ``remove``; ``goal-state`` shows the unit ``dying`` all along.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.juju_agent import agent
from tests.unit.standins.test_juju_agent_hooks import note, probe

NOTE_HOOK = """
members=""
if [ -n "${JUJU_RELATION_ID:-}" ]; then members=$(relation-list | tr -d '\\n '); fi
goal=$(goal-state --format=json)
echo "${JUJU_DISPATCH_PATH#hooks/} ${JUJU_REMOTE_UNIT:--} ${JUJU_DEPARTING_UNIT:--} $members" \
  >> "$OUT/hooks"
echo "$goal" > "$OUT/goal"
"""


def _with_configurators(unit: agent.UnitAgent) -> None:
    with unit.model(write=True) as model:
        model["relations"]["3"] = {
            "endpoint": "garm-configurator",
            "remote_app": "cfg-b",
            "units": {agent.UNIT: {}, "cfg-b/0": {"x": "1"}},
            "apps": {agent.APP: {}, "cfg-b": {}},
        }
        model["relations"]["2"] = {
            "endpoint": "garm-configurator",
            "remote_app": "cfg-a",
            "units": {agent.UNIT: {}, "cfg-a/1": {}, "cfg-a/0": {}},
            "apps": {agent.APP: {}, "cfg-a": {}},
        }


def test_goal_state_shows_the_units_workload_status_while_it_lives(tmp_path: Path):
    unit = probe(tmp_path, 'status-set blocked "held"\n' + NOTE_HOOK)

    unit.hook("update-status").check()

    goal = json.loads(note(unit, "goal"))
    assert goal["units"][agent.UNIT]["status"] == "blocked"


def test_removing_the_application_departs_and_breaks_each_relation_then_stops(tmp_path: Path):
    unit = probe(tmp_path, NOTE_HOOK)
    _with_configurators(unit)

    runs = unit.remove_application()

    assert all(r.ok for r in runs)
    # The peer relation (id 0, this unit alone) gets nothing; each other relation, in id
    # order: departed for each remote unit (this unit departing), the unit gone from
    # relation-list, then broken with no member left.
    assert [line.rstrip() for line in note(unit, "hooks").splitlines()] == [
        'garm-configurator-relation-departed cfg-a/0 garm/0 ["cfg-a/1"]',
        "garm-configurator-relation-departed cfg-a/1 garm/0 []",
        "garm-configurator-relation-broken - - []",
        "garm-configurator-relation-departed cfg-b/0 garm/0 []",
        "garm-configurator-relation-broken - - []",
        "stop - -",
        "remove - -",
    ]
    goal = json.loads(note(unit, "goal"))
    assert {name: g["status"] for name, g in goal["units"].items()} == {agent.UNIT: "dying"}
    # The broken relations are gone from the model; the peer relation stays until the unit goes.
    assert sorted(unit.read()["relations"]) == ["0"]


def test_a_departed_units_databag_is_still_read_in_its_departed_hook(tmp_path: Path):
    unit = probe(
        tmp_path,
        '[ "${JUJU_DISPATCH_PATH}" = hooks/garm-configurator-relation-departed ] && '
        'relation-get x "$JUJU_REMOTE_UNIT" > "$OUT/x"\n'
        "true\n",
    )
    _with_configurators(unit)
    with unit.model(write=True) as model:
        del model["relations"]["2"]

    runs = unit.remove_application()

    assert [r.hook for r in runs] == [
        "hooks/garm-configurator-relation-departed",
        "hooks/garm-configurator-relation-broken",
        "hooks/stop",
        "hooks/remove",
    ]
    assert note(unit, "x") == "1"


def test_a_stop_hook_that_keeps_failing_ends_the_removal_there(tmp_path: Path):
    unit = probe(tmp_path, '[ "$JUJU_DISPATCH_PATH" != hooks/stop ]\n')

    runs = unit.remove_application()

    assert [r.hook for r in runs] == ["hooks/stop"]
    assert not runs[-1].ok and len(runs[-1].retried) == agent.RETRY_ATTEMPTS - 1
