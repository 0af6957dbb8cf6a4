"""The unit-agent stand-in's hook tools answer and refuse as Juju 3.6 does (run as processes).

Each test's tools run inside one hook's context (:func:`tests.juju_agent.hook_tool.
open_context`), as a charm's do; :meth:`Tools.end` ends the hook, committing its pending writes
or dropping them. The refusals cite the juju/juju 3.6 file whose words they are.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.juju_agent import agent, hook_tool
from tests.juju_model_limits import oldest_juju, secret_refusal

CONTEXT_ID = "garm/0-update-status-1"


class Tools:
    """A model file and the tools on it, as one unit of the agent sees them in one hook."""

    def __init__(self, root: Path, *, leader: bool, juju_version: str = "3.6.12") -> None:
        charm_dir = root / "charm"
        charm_dir.mkdir(parents=True)
        (charm_dir / "config.yaml").write_text("options: {}\n", encoding="utf-8")
        self.root = root
        self.bin = agent.install_tools(root / "bin")
        self.model = root / "model.json"
        model = agent.new_model(charm_dir, leader=leader, juju_version=juju_version)
        model["relations"]["0"] = {
            "endpoint": "garm-peers",
            "remote_app": agent.APP,
            "units": {agent.UNIT: {}},
            "apps": {agent.APP: {}},
        }
        model["relations"]["3"] = {
            "endpoint": "garm-configurator",
            "remote_app": "cfg",
            "units": {agent.UNIT: {}, "cfg/0": {}},
            "apps": {agent.APP: {}, "cfg": {}},
        }
        self.model.write_text(json.dumps(model), encoding="utf-8")
        hook_tool.open_context(self.model, CONTEXT_ID)

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            hook_tool.MODEL_ENV: str(self.model),
            hook_tool.REPO_ENV: str(agent.REPO),
            "JUJU_CONTEXT_ID": CONTEXT_ID,
            "JUJU_AGENT_SOCKET_ADDRESS": "@/var/lib/juju/agents/unit-garm-0/agent.socket",
            "JUJU_AGENT_SOCKET_NETWORK": "unix",
            **extra,
        }

    def run(
        self, tool: str, *args: str, stdin: str = "", env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / tool), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env() if env is None else env,
            check=False,
        )

    def file(self, name: str, text: str) -> str:
        """A file holding ``text``, as ops hands a secret value over (``key#file=<path>``)."""
        path = self.root / name
        path.write_text(text, encoding="utf-8")
        return str(path)

    def add_secret(self, text: str, *, label: str = "mine", owner: str = "application") -> str:
        value = self.file("value", text)
        added = self.run("secret-add", "--label", label, "--owner", owner, f"v#file={value}")
        assert added.returncode == 0, added.stderr
        return added.stdout.strip()

    def end(self, *, commit: bool = True) -> str | None:
        """The hook ends (exit 0: ``commit``); what the commit refused, or None."""
        return hook_tool.close_context(self.model, commit=commit)

    def next_hook(self) -> None:
        """The hook ends with exit 0 and the next one starts."""
        assert self.end() is None
        hook_tool.open_context(self.model, CONTEXT_ID)

    def read(self) -> dict[str, Any]:
        """The model as Juju holds it (what committed hooks wrote)."""
        return json.loads(self.model.read_text(encoding="utf-8"))

    def secret(self, uri: str) -> dict[str, Any]:
        return self.read()["secrets"][uri]


@pytest.fixture
def leader(tmp_path: Path) -> Tools:
    return Tools(tmp_path / "leader", leader=True)


@pytest.fixture
def follower(tmp_path: Path) -> Tools:
    return Tools(tmp_path / "follower", leader=False)


def test_is_leader_answers_json(leader: Tools, follower: Tools):
    assert leader.run("is-leader", "--format=json").stdout == "true\n"
    assert follower.run("is-leader", "--format=json").stdout == "false\n"


def test_a_follower_writing_application_data_is_refused(follower: Tools):
    # worker/uniter/runner/jujuc/relation-set.go
    written = follower.run(
        "relation-set", "-r", "garm-peers:0", "--app", "--file", "-", stdin='{"a": "1"}'
    )

    assert (written.returncode, written.stderr) == (1, "ERROR cannot write relation settings\n")
    assert follower.read()["relations"]["0"]["apps"][agent.APP] == {}


def test_the_leader_writes_application_data_and_an_empty_value_deletes(leader: Tools):
    leader.run("relation-set", "-r", "garm-peers:0", "--app", "--file", "-", stdin='{"a": "1"}')
    leader.run("relation-set", "-r", "0", "--app", "--file", "-", stdin='{"a": "", "b": "2"}')

    got = leader.run("relation-get", "--format=json", "-r", "garm-peers:0", "--app", "-", "garm")
    assert json.loads(got.stdout) == {"b": "2"}


def test_a_relation_that_is_gone_is_not_found(leader: Tools):
    got = leader.run("relation-get", "--format=json", "-r", "garm-configurator:7", "-", "cfg/0")

    assert got.returncode == 2
    assert got.stderr.startswith("ERROR ") and "relation not found" in got.stderr


def test_an_unknown_secret_is_not_found(leader: Tools):
    got = leader.run("secret-get", "--format=json", "secret:d0fmumfmp25c7bahmcb0")

    assert (got.returncode, got.stderr) == (1, 'ERROR secret "d0fmumfmp25c7bahmcb0" not found\n')


def test_a_secret_over_the_limit_of_the_juju_version_is_refused(leader: Tools, tmp_path: Path):
    value = "x" * 800_000
    (tmp_path / "value").write_text(value, encoding="utf-8")

    added = leader.run("secret-add", "--owner", "application", f"value#file={tmp_path / 'value'}")

    assert added.returncode == 1
    assert added.stderr == f"{secret_refusal({'value': value}, '3.6.12')}\n"
    leader.end()
    assert leader.read()["secrets"] == {}


def test_a_secret_is_added_read_by_label_and_revised(leader: Tools):
    uri = leader.add_secret("one")
    leader.next_hook()
    value = leader.file("v", "two")
    leader.run("secret-set", "--owner", "application", uri, f"v#file={value}")
    leader.next_hook()

    got = leader.run("secret-get", "--format=json", "--label", "mine")
    info = json.loads(leader.run("secret-info-get", "--format=json", uri).stdout)
    assert uri.startswith("secret:") and len(uri) == len("secret:") + 20
    assert json.loads(got.stdout) == {"v": "two"}
    assert info[uri.removeprefix("secret:")]["revision"] == 2


def test_a_follower_adding_an_application_secret_is_refused(follower: Tools):
    value = follower.file("v", "one")

    added = follower.run("secret-add", "--owner", "application", f"v#file={value}")

    # worker/uniter/runner/context/context.go: CreateSecret, ErrIsNotLeader
    assert (added.returncode, added.stderr) == (1, "ERROR this unit is not the leader\n")


# ---- the hook's context: a tool outside its own hook is refused ------------------------------


def test_a_tool_with_another_hooks_context_id_is_refused(leader: Tools):
    got = leader.run("is-leader", "--format=json", env=leader.env(JUJU_CONTEXT_ID="garm/0-x-9"))

    # worker/uniter/runner/runner.go startJujucServer; jujuc/server.go badReqErrorf
    assert (got.returncode, got.stdout) == (1, "")
    assert got.stderr == (
        f'ERROR bad request: expected context id "{CONTEXT_ID}", got "garm/0-x-9"\n'
    )


def test_a_tool_after_its_hook_ended_is_refused(leader: Tools):
    leader.end()

    got = leader.run("is-leader", "--format=json")

    # The hook's tool server is closed (runner.go: defer srv.Close()); cmd/jujuc/main.go dials.
    assert (got.returncode, got.stdout) == (1, "")
    assert got.stderr == (
        "ERROR dial unix @/var/lib/juju/agents/unit-garm-0/agent.socket: "
        "connect: connection refused\n"
    )


def test_a_tool_without_a_context_id_is_refused(leader: Tools):
    env = leader.env()
    del env["JUJU_CONTEXT_ID"]

    got = leader.run("is-leader", env=env)

    # cmd/jujuc/main.go: getenv
    assert (got.returncode, got.stderr) == (1, "ERROR JUJU_CONTEXT_ID not set\n")


# ---- secrets: who reads, who writes ---------------------------------------------------------


def _remote_secret(tools: Tools, *, granted: bool) -> str:
    """A secret of the ``cfg`` application, granted to this one or not, in the model."""
    uri = "secret:d0remote0000000000000"
    tools.end()
    with hook_tool.locked_model(tools.model) as model:
        model["secrets"][uri] = {
            "owner": "remote",
            "label": None,
            "revisions": {"1": {"value": "one"}, "2": {"value": "two"}},
            "latest": 1,
            "consumers": {},
            "grants": [{"relation": "3", "subject": agent.APP}] if granted else [],
        }
    hook_tool.open_context(tools.model, CONTEXT_ID)
    return uri


def test_a_secret_nobody_granted_is_refused(leader: Tools):
    uri = _remote_secret(leader, granted=False)

    got = leader.run("secret-get", "--format=json", uri)

    # apiserver/facades/agent/secretsmanager/secrets.go getSecretContent: canRead, ErrPerm
    assert (got.returncode, got.stderr) == (1, "ERROR permission denied\n")


def test_a_granted_consumer_tracks_its_revision_and_the_tracking_outlives_a_failed_hook(
    leader: Tools,
):
    uri = _remote_secret(leader, granted=True)

    first = leader.run("secret-get", "--format=json", uri, "--label", "theirs")
    leader.end(commit=False)
    with hook_tool.locked_model(leader.model) as model:
        model["secrets"][uri]["latest"] = 2
    hook_tool.open_context(leader.model, CONTEXT_ID)
    tracked = leader.run("secret-get", "--format=json", "--label", "theirs")
    peeked = leader.run("secret-get", "--format=json", uri, "--peek")
    refreshed = leader.run("secret-get", "--format=json", uri, "--refresh")

    # The controller saves a consumer's tracked revision and label when it reads
    # (secretsmanager/secrets.go getConsumedRevision), not when the hook commits.
    assert [json.loads(r.stdout) for r in (first, tracked, peeked, refreshed)] == [
        {"value": "one"},
        {"value": "one"},
        {"value": "two"},
        {"value": "two"},
    ]
    leader.end(commit=False)
    assert leader.secret(uri)["consumers"][agent.UNIT] == {"revision": 2, "label": "theirs"}


def test_a_follower_reads_its_applications_secret_at_the_latest_revision(
    leader: Tools, follower: Tools
):
    # The same model: the leader adds and revises it, the follower reads it.
    uri = leader.add_secret("one")
    leader.next_hook()
    leader.run("secret-set", uri, f"v#file={leader.file('v', 'two')}")
    leader.end()
    follower.end(commit=False)
    follower.model.write_text(leader.model.read_text(encoding="utf-8"), encoding="utf-8")
    with hook_tool.locked_model(follower.model) as model:
        model["leader"] = False
    hook_tool.open_context(follower.model, CONTEXT_ID)

    by_label = follower.run("secret-get", "--format=json", "--label", "mine")
    relabel = follower.run("secret-get", "--format=json", uri, "--label", "other")
    info = follower.run("secret-info-get", "--format=json", uri)
    grant = follower.run("secret-grant", uri, "-r", "garm-configurator:3")

    # Every unit of the owning application reads it by URI or owner label at the latest
    # revision; only the leader relabels it (secretsmanager/secrets.go
    # getAppOwnedOrUnitOwnedSecretMetadata, updateLabelForAppOwnedOrUnitOwnedSecret).
    assert json.loads(by_label.stdout) == json.loads(relabel.stdout) == {"v": "two"}
    assert follower.secret(uri)["label"] == "mine"
    # Its metadata is the leader's: info and grants do not find it (context.go SecretMetadata).
    short = uri.removeprefix("secret:")
    assert (info.returncode, info.stderr) == (1, f'ERROR secret "{short}" not found\n')
    assert (grant.returncode, grant.stderr) == (1, f'ERROR secret "{short}" not found\n')


def test_a_follower_changing_its_applications_secret_fails_its_hook_at_the_commit(
    leader: Tools, follower: Tools
):
    uri = leader.add_secret("one")
    leader.end()
    follower.end(commit=False)
    follower.model.write_text(leader.model.read_text(encoding="utf-8"), encoding="utf-8")
    with hook_tool.locked_model(follower.model) as model:
        model["leader"] = False
    hook_tool.open_context(follower.model, CONTEXT_ID)

    written = follower.run("relation-set", "-r", "garm-peers:0", "a=1")
    changed = follower.run("secret-set", uri, f"v#file={follower.file('v', 'two')}")
    removed = follower.run("secret-remove", uri)

    # The tools take the change (context.go UpdateSecret, RemoveSecret: the secret is not in
    # this unit's metadata); the controller refuses it when the hook commits, and the hook fails
    # with nothing of it committed (context.go doFlush, CommitHookChanges).
    assert (changed.returncode, removed.returncode, written.returncode) == (0, 0, 0)
    assert follower.end() == "permission denied; permission denied"
    assert follower.secret(uri)["revisions"] == {"1": {"v": "one"}}
    assert follower.read()["relations"]["0"]["units"][agent.UNIT] == {}


def test_only_the_leader_relabels_its_applications_secret(leader: Tools):
    uri = leader.add_secret("one")
    leader.next_hook()

    leader.run("secret-get", uri, "--label", "renamed")
    leader.end(commit=False)

    # The owner's label is saved by the controller as it reads (a failed hook keeps it).
    assert leader.secret(uri)["label"] == "renamed"


# ---- Juju's version: the oldest the charm assumes is the default -----------------------------


def test_the_agent_runs_the_oldest_juju_the_charm_assumes(tmp_path: Path):
    prime = tmp_path / "prime"
    prime.mkdir()
    (prime / "config.yaml").write_text("options: {}\n", encoding="utf-8")

    unit = agent.UnitAgent(tmp_path / "unit", prime_dir=prime, python312=Path("/bin/true"))

    assert oldest_juju() == "3.6.0"
    assert unit.read()["juju_version"] == "3.6.0"
    assert unit.environment("hooks/install", {})["JUJU_VERSION"] == "3.6.0"


@pytest.mark.parametrize(("juju_version", "accepted"), [("3.6.0", False), ("3.6.12", True)])
def test_a_9_kib_secret_value_is_refused_by_3_6_0_and_accepted_by_3_6_12(
    tmp_path: Path, juju_version: str, accepted: bool
):
    tools = Tools(tmp_path / juju_version, leader=True, juju_version=juju_version)
    value = "x" * (9 * 1024)

    added = tools.run("secret-add", f"value#file={tools.file('value', value)}")

    # core/secrets/createsecret.go: 8 KiB a value until 3.6.9 (juju/juju#20287)
    if accepted:
        assert (added.returncode, added.stderr) == (0, "")
    else:
        assert (added.returncode, added.stderr) == (
            1,
            f'ERROR secret content in file "/tmp/secret-data/value" too large: {9 * 1024} bytes\n',
        )


# ---- arguments Juju refuses, in its words ---------------------------------------------------


def test_an_unknown_flag_is_a_usage_error(leader: Tools):
    got = leader.run("relation-get", "--nope", "-r", "0")

    # juju/gnuflag, through juju/cmd: an Init error exits 2
    assert (got.returncode, got.stderr) == (2, "ERROR flag provided but not defined: --nope\n")


def test_an_action_result_may_not_use_a_reserved_key(leader: Tools):
    leader.end()
    with hook_tool.locked_model(leader.model) as model:
        model["action"] = {"params": {}, "results": {}, "failed": None, "log": []}
    hook_tool.open_context(leader.model, CONTEXT_ID)

    got = leader.run("action-set", "ok=1", "stdout=x", env=leader.env(JUJU_ACTION_NAME="a"))

    # worker/uniter/runner/jujuc/action-set.go: reservedKeys, checked in Init before any is set
    assert (got.returncode, got.stderr) == (2, 'ERROR cannot set reserved action key "stdout"\n')
    assert leader.read()["action"]["results"] == {}


def test_a_charm_cannot_set_the_error_status(leader: Tools):
    got = leader.run("status-set", "--application=False", "error", "boom")

    # worker/uniter/runner/jujuc/status-set.go: validStatus
    assert (got.returncode, got.stderr) == (
        2,
        'ERROR invalid status "error", expected one of [maintenance blocked waiting active]\n',
    )


def test_a_follower_cannot_set_the_application_status(follower: Tools):
    got = follower.run("status-set", "--application=True", "active", "")

    # worker/uniter/runner/context/context.go: SetApplicationStatus, ErrIsNotLeader
    assert (got.returncode, got.stderr) == (1, "ERROR this unit is not the leader\n")


def test_peek_and_refresh_together_are_refused(leader: Tools):
    uri = leader.add_secret("one")

    got = leader.run("secret-get", uri, "--peek", "--refresh")

    # worker/uniter/runner/jujuc/secret-get.go: Init
    assert (got.returncode, got.stderr) == (
        2,
        "ERROR specify one of --peek or --refresh but not both\n",
    )


def test_open_port_refuses_what_is_not_a_port(leader: Tools):
    got = leader.run("open-port", "notaport")
    too_high = leader.run("open-port", "70000/tcp")

    # worker/uniter/runner/jujuc/ports.go: parseArguments, port.validate
    assert (got.returncode, got.stderr) == (
        2,
        'ERROR expected <port>[/<protocol>] or <from>-<to>[/<protocol>] or icmp; got "notaport"\n',
    )
    assert (too_high.returncode, too_high.stderr) == (
        2,
        'ERROR port must be in the range [1, 65535]; got "70000"\n',
    )
