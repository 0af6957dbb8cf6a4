"""The unit-agent stand-in's hook tools answer and refuse as Juju 3.6 does (run as processes)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.juju_agent import agent, hook_tool
from tests.juju_model_limits import secret_refusal


class Tools:
    """A model file and the tools on it, as one unit of the agent sees them."""

    def __init__(self, root: Path, *, leader: bool) -> None:
        charm_dir = root / "charm"
        charm_dir.mkdir(parents=True)
        (charm_dir / "config.yaml").write_text("options: {}\n", encoding="utf-8")
        self.bin = agent.install_tools(root / "bin")
        self.model = root / "model.json"
        model = agent.new_model(charm_dir, leader=leader, juju_version="3.6.12")
        model["relations"]["0"] = {
            "endpoint": "garm-peers",
            "remote_app": agent.APP,
            "units": {agent.UNIT: {}},
            "apps": {agent.APP: {}},
        }
        self.model.write_text(json.dumps(model), encoding="utf-8")

    def run(self, tool: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            hook_tool.MODEL_ENV: str(self.model),
            hook_tool.REPO_ENV: str(agent.REPO),
        }
        return subprocess.run(
            [str(self.bin / tool), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )

    def read(self) -> dict[str, Any]:
        return json.loads(self.model.read_text(encoding="utf-8"))


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
    written = follower.run(
        "relation-set", "-r", "garm-peers:0", "--app", "--file", "-", stdin='{"a": "1"}'
    )

    assert (written.returncode, written.stderr) == (1, "ERROR permission denied\n")
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
    assert leader.read()["secrets"] == {}


def test_a_secret_is_added_read_by_label_and_revised(leader: Tools, tmp_path: Path):
    (tmp_path / "v").write_text("one", encoding="utf-8")
    uri = leader.run(
        "secret-add", "--label", "mine", "--owner", "application", f"v#file={tmp_path / 'v'}"
    ).stdout.strip()
    (tmp_path / "v").write_text("two", encoding="utf-8")
    leader.run("secret-set", "--owner", "application", uri, f"v#file={tmp_path / 'v'}")

    got = leader.run("secret-get", "--format=json", "--label", "mine")
    info = json.loads(leader.run("secret-info-get", "--format=json", uri).stdout)
    assert uri.startswith("secret:") and len(uri) == len("secret:") + 20
    assert json.loads(got.stdout) == {"v": "two"}
    assert info[uri.removeprefix("secret:")]["revision"] == 2


def test_a_follower_adding_an_application_secret_is_refused(follower: Tools, tmp_path: Path):
    (tmp_path / "v").write_text("one", encoding="utf-8")

    added = follower.run("secret-add", "--owner", "application", f"v#file={tmp_path / 'v'}")

    assert (added.returncode, added.stderr) == (1, "ERROR permission denied\n")
