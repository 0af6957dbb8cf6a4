"""A hook under the unit-agent stand-in is a transaction, and a failed one is retried, as in Juju.

Probe charms (a ``dispatch`` of a few hook-tool calls; one ops charm with stored state) run as
the packed charm does (:class:`tests.juju_agent.agent.UnitAgent`). What Juju commits when a
hook exits 0 (juju/juju 3.6 ``worker/uniter/runner/context/context.go``, ``HookContext.Flush``:
relation settings, secrets, ports, charm state) is gone after a failed run; what it applies at
once (``status-set``, ``application-version-set``) stays.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.juju_agent import agent
from tests.juju_agent.agent import HookFailedError, UnitAgent

# Every write Juju commits with the hook; then what it applies at once. $1: fail or not.
WRITES = """
secret-add --label probe --owner application "v#file=$JUJU_CHARM_DIR/value" > "$OUT/uri"
relation-set -r garm-peers:0 --app a=1
relation-set -r garm-peers:0 b=2
state-set k=v
open-port 8080
status-set --application=False maintenance "written"
application-version-set 1.2.3
"""


def probe(tmp_path: Path, script: str, *, leader: bool = True) -> UnitAgent:
    """A unit of a charm whose ``dispatch`` is ``script`` (sh, ``set -e``; ``$OUT`` its notes)."""
    prime = tmp_path / "prime"
    prime.mkdir()
    (prime / "config.yaml").write_text("options: {}\n", encoding="utf-8")
    (prime / "value").write_text("content", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    dispatch = prime / "dispatch"
    dispatch.write_text(f'#!/bin/sh\nset -e\nOUT="{out}"\n{script}', encoding="utf-8")
    dispatch.chmod(0o755)
    unit = UnitAgent(tmp_path / "unit", prime_dir=prime, python312=Path(sys.executable))
    with unit.model(write=True) as model:
        model["leader"] = leader
        model["relations"]["0"] = {
            "endpoint": "garm-peers",
            "remote_app": agent.APP,
            "units": {agent.UNIT: {}},
            "apps": {agent.APP: {}},
        }
    return unit


def note(unit: UnitAgent, name: str) -> str:
    return (unit.workdir.parent / "out" / name).read_text(encoding="utf-8").strip()


def committed(unit: UnitAgent) -> dict[str, Any]:
    """What Juju holds of the writes it commits with the hook."""
    model = unit.read()
    peers = model["relations"]["0"]
    return {
        "secrets": [s["label"] for s in model["secrets"].values()],
        "app": peers["apps"][agent.APP],
        "unit": peers["units"][agent.UNIT],
        "state": model["state"],
        "ports": model["ports"],
    }


NOTHING = {"secrets": [], "app": {}, "unit": {}, "state": {}, "ports": []}


def test_a_hook_that_keeps_failing_commits_nothing_and_is_run_a_bounded_number_of_times(
    tmp_path: Path,
):
    unit = probe(tmp_path, WRITES + "exit 1\n")

    run = unit.hook("update-status")

    assert (run.returncode, len(run.retried)) == (1, agent.RETRY_ATTEMPTS - 1)
    assert all(r.returncode == 1 for r in run.retried)
    assert committed(unit) == NOTHING
    # status-set and application-version-set are API calls made while the hook runs.
    model = unit.read()
    assert (model["status"]["unit"]["message"], model["version"]) == ("written", "1.2.3")
    with pytest.raises(HookFailedError, match=r"exited 1 \(run 5 time\(s\)\)"):
        run.check()


def test_a_failed_hook_is_retried_clean_and_its_success_commits_once(tmp_path: Path):
    # The first run fails after its writes; the retry adds the same labelled secret again.
    unit = probe(tmp_path, WRITES + '[ -e "$OUT/tried" ] || { touch "$OUT/tried"; exit 1; }\n')

    run = unit.hook("update-status", {"JUJU_REMOTE_APP": "garm"})

    assert run.ok and [r.returncode for r in run.retried] == [1]
    assert "already exists" not in run.stderr
    assert committed(unit) == {
        "secrets": ["probe"],
        "app": {"a": "1"},
        "unit": {"b": "2"},
        "state": {"k": "v"},
        "ports": ["8080/tcp"],
    }
    # The same hook with the same environment, in a new context.
    assert run.hook == run.retried[0].hook == "hooks/update-status"


def test_a_killed_hook_commits_nothing_and_is_not_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(agent, "HOOK_TIMEOUT", 0.5)
    unit = probe(tmp_path, WRITES + "exec sleep 30\n")

    run = unit.hook("update-status")

    assert (run.returncode, run.retried, run.failure()) == (agent.KILLED, (), "killed after 0.5 s")
    assert committed(unit) == NOTHING


def test_a_hook_reads_its_own_pending_writes(tmp_path: Path):
    unit = probe(
        tmp_path,
        WRITES
        + """
relation-get -r garm-peers:0 --app a garm > "$OUT/own-app"
relation-get -r garm-peers:0 b garm/0 > "$OUT/own-unit"
secret-get --format=json --label probe > "$OUT/by-label"
secret-get --format=json "$(cat "$OUT/uri")" > "$OUT/by-uri"
secret-info-get --format=json --label probe > "$OUT/info"
state-get k > "$OUT/state"
opened-ports --format=json > "$OUT/ports"
""",
    )

    unit.hook("install").check()

    assert [note(unit, n) for n in ("own-app", "own-unit", "state")] == ["1", "2", "v"]
    assert json.loads(note(unit, "by-label")) == json.loads(note(unit, "by-uri"))
    assert json.loads(note(unit, "by-label")) == {"v": "content"}
    assert next(iter(json.loads(note(unit, "info")).values()))["revision"] == 1
    assert json.loads(note(unit, "ports")) == ["8080/tcp"]


SECRET_SET = """
URI=$(cat "$OUT/uri")
secret-set "$URI" "v#file=$JUJU_CHARM_DIR/$1"
secret-get --format=json "$URI" > "$OUT/plain"
secret-get --format=json "$URI" --peek > "$OUT/peek"
secret-info-get --format=json "$URI" > "$OUT/info"
"""


def test_a_new_secret_revision_stays_pending_until_the_hook_ends(tmp_path: Path):
    unit = probe(tmp_path, WRITES)
    unit.hook("install").check()
    (unit.charm_dir / "new").write_text("changed", encoding="utf-8")
    (unit.charm_dir / "dispatch").write_text(
        f'#!/bin/sh\nset -e\nOUT="{tmp_path / "out"}"\nset -- new\n{SECRET_SET}',
        encoding="utf-8",
    )

    unit.hook("update-status").check()

    # HookContext.getPendingSecretValue: a plain read by the owner is the committed latest;
    # SecretMetadata keeps the latest revision until the commit.
    assert json.loads(note(unit, "plain")) == {"v": "content"}
    assert json.loads(note(unit, "peek")) == {"v": "changed"}
    assert next(iter(json.loads(note(unit, "info")).values()))["revision"] == 1
    (secret,) = unit.read()["secrets"].values()
    assert (secret["latest"], secret["revisions"]["2"]) == (2, {"v": "changed"})


def test_an_unchanged_secret_set_adds_no_revision(tmp_path: Path):
    unit = probe(tmp_path, WRITES)
    unit.hook("install").check()
    (unit.charm_dir / "dispatch").write_text(
        f'#!/bin/sh\nset -e\nOUT="{tmp_path / "out"}"\nset -- value\n{SECRET_SET}',
        encoding="utf-8",
    )

    unit.hook("update-status").check()

    # HookContext.UpdateSecret: the same checksum as the latest revision is no new content.
    (secret,) = unit.read()["secrets"].values()
    assert (secret["latest"], list(secret["revisions"])) == (1, ["1"])


def test_a_tool_left_running_after_its_hook_is_refused(tmp_path: Path):
    unit = probe(
        tmp_path,
        '( set +e; sleep 0.5; is-leader > "$OUT/late" 2>&1; echo $? > "$OUT/late-code" ) '
        ">/dev/null 2>&1 &\n",
    )

    unit.hook("update-status").check()
    code = tmp_path / "out" / "late-code"
    deadline = time.monotonic() + 10
    while not code.exists() or not code.read_text(encoding="utf-8").strip():
        assert time.monotonic() < deadline, "the late tool never ran"
        time.sleep(0.05)

    # Juju closes the hook's tool server when the hook ends (runner.go: defer srv.Close()).
    assert note(unit, "late-code") == "1"
    assert note(unit, "late") == (
        "ERROR dial unix @/var/lib/juju/agents/unit-garm-0/agent.socket: "
        "connect: connection refused"
    )


# An ops charm counting its hooks in its stored state, shown in its status (set at once); its
# first update-status fails after counting. ops keeps the state in the charm directory's
# SQLite file and commits it only when the hook's handlers return.
OPS_CHARM = """#!{python}
import os
import ops


class Probe(ops.CharmBase):
    _stored = ops.StoredState()

    def __init__(self, framework):
        super().__init__(framework)
        self._stored.set_default(hooks=0)
        framework.observe(self.on.update_status, self._count)
        framework.observe(self.on.install, self._count)

    def _count(self, event):
        self._stored.hooks += 1
        self.unit.status = ops.MaintenanceStatus(f"hook {{self._stored.hooks}}")
        marker = os.path.join(os.environ["JUJU_CHARM_DIR"], "failed-once")
        if isinstance(event, ops.UpdateStatusEvent) and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("the first update-status fails")


if __name__ == "__main__":
    ops.main(Probe)
"""


def test_ops_stored_state_rolls_back_with_a_failed_hook(tmp_path: Path):
    unit = probe(tmp_path, "")
    (unit.charm_dir / "metadata.yaml").write_text("name: garm\n", encoding="utf-8")
    dispatch = unit.charm_dir / "dispatch"
    dispatch.write_text(OPS_CHARM.format(python=sys.executable), encoding="utf-8")

    unit.hook("install").check()
    run = unit.hook("update-status")

    # The failed run counted to 2 and raised; its retry counted to 2 again from the state the
    # install hook left: ops did not commit the failed run's stored state.
    assert run.ok and len(run.retried) == 1
    assert unit.read()["status"]["unit"]["message"] == "hook 2"
    assert (unit.charm_dir / ".unit-state.db").exists()


def test_a_charm_killed_at_its_kth_tool_call_commits_nothing_and_its_retry_runs_whole(
    tmp_path: Path,
):
    unit = probe(tmp_path, WRITES)
    unit.plan_kill("hooks/update-status", 3)

    run = unit.hook("update-status")

    assert run.ok
    (killed,) = run.retried
    assert (killed.returncode, killed.failure()) == (-9, "killed by signal 9")
    assert unit.kill_plan() == {
        "dispatch": "hooks/update-status",
        "at": 3,
        "count": 3,
        "killed": True,
    }
    # The killed run's two writes were dropped; the retry's committed once.
    assert committed(unit)["secrets"] == ["probe"]
    assert killed.tools["secret-add"] == 1 and killed.tools["state-set"] == 0


def test_a_kill_planned_for_another_hook_leaves_this_one_alone(tmp_path: Path):
    unit = probe(tmp_path, WRITES)
    unit.plan_kill("hooks/config-changed", 1)

    run = unit.hook("update-status")

    assert run.ok and run.retried == ()
    assert unit.kill_plan()["count"] == 0
