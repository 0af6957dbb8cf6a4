"""A pod made again, the application's removal, the unit databags' address keys (stand-in).

A probe charm (a ``dispatch`` that notes each hook, its remote and departing units, what
``relation-list`` and ``goal-state`` say) runs as the packed charm does
(:class:`tests.juju_agent.agent.UnitAgent`). ``remove_application`` runs the hooks Juju 3.6's
uniter runs on a dying unit (``worker/uniter/resolver.go``, ``worker/uniter/relation/
resolver.go``): per relation a departed hook for each remote unit, then broken (never for the
peer relation); then ``stop`` and ``remove``; ``goal-state`` shows the unit ``dying`` all along.
``restart_pod`` runs ``stop``, makes the workload new, gives the charm a fresh copy of its
directory (ops' ``.unit-state.db`` gone), keeps the model, then runs ``upgrade-charm``,
``config-changed``, ``start`` and each container's ``pebble-ready``. Every unit databag the
driver writes into the model holds the address settings Juju writes (``ingress-address``,
``private-address``, ``egress-subnets``). A revision of an owned secret that a ``secret-set``
left behind, which no consumer tracks, is sent to the owner (the leader, for its
application's) once, as ``secret-remove`` with its revision.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ops import testing

from tests.juju_agent import agent
from tests.juju_agent.driver import model_databags
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


def test_every_unit_databag_holds_the_address_settings_juju_writes():
    relation = testing.Relation(
        "garm-configurator",
        remote_app_name="cfg-a",
        local_unit_data={},
        remote_units_data={0: {"labels": "x"}, 1: {}},
    )

    _, units, _ = model_databags(relation)

    assert units[agent.UNIT] == {
        "egress-subnets": "127.0.0.1/32",
        "ingress-address": "127.0.0.1",
        "private-address": "127.0.0.1",
    }
    remote = [units["cfg-a/0"], units["cfg-a/1"]]
    assert remote[0]["labels"] == "x"
    for bag in remote:
        address = bag["ingress-address"]
        assert address.startswith("10.1.")
        assert bag["private-address"] == address
        assert bag["egress-subnets"] == f"{address}/32"
    assert remote[0]["ingress-address"] != remote[1]["ingress-address"]


def test_a_value_the_state_gives_is_kept():
    relation = testing.Relation(
        "garm-configurator", remote_app_name="cfg-a", local_unit_data={"ingress-address": "x"}
    )

    _, units, _ = model_databags(relation)

    assert units[agent.UNIT]["ingress-address"] == "x"


def test_a_pod_made_again_stops_then_starts_a_fresh_charm_dir_and_keeps_the_model(tmp_path: Path):
    unit = probe(
        tmp_path,
        'echo "${JUJU_DISPATCH_PATH#hooks/} ${JUJU_WORKLOAD_NAME:--} '
        '$([ -e .unit-state.db ] && echo old || echo fresh)" >> "$OUT/hooks"\n'
        "touch .unit-state.db\nstate-set k=v\n",
    )
    (unit.prime_dir / "metadata.yaml").write_text(
        "name: garm\ncontainers:\n  garm: {}\n", encoding="utf-8"
    )
    unit.hook("update-status").check()
    workload: list[str] = []

    def new_workload() -> None:
        workload.append(note(unit, "hooks").splitlines()[-1])

    runs = unit.restart_pod(new_workload)

    assert all(r.ok for r in runs)
    assert [line.rstrip() for line in note(unit, "hooks").splitlines()] == [
        "update-status - fresh",
        "stop - old",
        "upgrade-charm - fresh",
        "config-changed - old",
        "start - old",
        "garm-pebble-ready garm old",
    ]
    # The workload was made again after the old pod's stop, before the new pod's first hook.
    assert workload == ["stop - old"]
    # What the controller keeps stays: Juju's charm state, the peer relation; the unit lives.
    model = unit.read()
    assert model["state"] == {"k": "v"} and "0" in model["relations"]
    goal = json.loads(_goal(unit))
    assert goal["units"][agent.UNIT]["status"] != "dying"


def _goal(unit: agent.UnitAgent) -> str:
    with unit.tool_environment() as env:
        return subprocess.run(
            [str(unit.bin_dir / "goal-state"), "--format=json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout


SECRET_OWNER = """
case "$JUJU_DISPATCH_PATH" in
  hooks/install) secret-add --label own "v=1" > "$OUT/uri" ;;
  hooks/config-changed) secret-set "$(cat "$OUT/uri")" "v=$(date +%s%N)" ;;
  hooks/secret-remove)
    echo "$JUJU_SECRET_ID $JUJU_SECRET_LABEL $JUJU_SECRET_REVISION" >> "$OUT/removals"
    secret-remove "$JUJU_SECRET_ID" --revision "$JUJU_SECRET_REVISION" ;;
esac
"""


def test_a_revision_a_secret_set_left_unused_is_sent_to_its_owner_to_remove(tmp_path: Path):
    unit = probe(tmp_path, SECRET_OWNER)
    unit.hook("install").check()
    uri = note(unit, "uri")
    assert unit.obsolete_revisions() == []
    unit.hook("config-changed").check()

    runs = unit.deliver_secret_removals()

    assert [(r.hook, r.ok) for r in runs] == [("hooks/secret-remove", True)]
    assert note(unit, "removals") == f"{uri} own 1"
    secret = unit.read()["secrets"][uri]
    assert (sorted(secret["revisions"]), secret["latest"]) == (["2"], 2)
    # Told once.
    assert unit.deliver_secret_removals() == []


def test_a_revision_a_consumer_tracks_is_not_obsolete(tmp_path: Path):
    unit = probe(tmp_path, SECRET_OWNER)
    unit.hook("install").check()
    uri = note(unit, "uri")
    with unit.model(write=True) as model:
        model["secrets"][uri]["consumers"]["cfg-a/0"] = {"revision": 1}
    unit.hook("config-changed").check()
    assert unit.obsolete_revisions() == []

    with unit.model(write=True) as model:
        model["secrets"][uri]["consumers"]["cfg-a/0"] = {"revision": 2}

    assert [r for _, _, r in unit.obsolete_revisions()] == [1]


def test_a_follower_is_not_sent_its_applications_obsolete_revisions(tmp_path: Path):
    unit = probe(tmp_path, SECRET_OWNER)
    unit.hook("install").check()
    unit.hook("config-changed").check()
    with unit.model(write=True) as model:
        model["leader"] = False

    assert unit.obsolete_revisions() == []
