"""The GitHub workflow agrees with what the integration suite and tox read.

The workflow cannot run here, so these checks catch the drift that would only show on CI: a
variable the integration conftest reads that the job does not set, or that tox does not pass
through, and an action that is not pinned to a commit.
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yaml"
INTEGRATION_CONFTEST = ROOT / "tests" / "integration" / "conftest.py"
TOX_INI = ROOT / "tox.ini"
ENV_READ = re.compile(r"""os\.environ(?:\.get\(|\[)\s*["']([A-Z0-9_]+)["']""")
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def _steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def _integration_step(workflow: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            if "tox -e integration" in step.get("run", ""):
                return job, step
    raise AssertionError("no step runs `tox -e integration`")


def _conftest_variables() -> set[str]:
    return set(ENV_READ.findall(INTEGRATION_CONFTEST.read_text(encoding="utf-8")))


def test_conftest_reads_the_expected_variables():
    # Guards the regular expression: if the conftest changes how it reads, this fails first.
    assert {"GARM_CHARM_FILE", "GARM_IMAGE"} <= _conftest_variables()


def test_integration_job_sets_every_variable_the_conftest_reads(workflow: dict[str, Any]):
    job, step = _integration_step(workflow)
    provided = set(job.get("env", {})) | set(step.get("env", {}))
    assert _conftest_variables() <= provided


def test_tox_passes_every_variable_the_conftest_reads():
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(TOX_INI, encoding="utf-8")
    passed = set(parser["testenv:integration"]["pass_env"].split())
    assert _conftest_variables() <= passed


def test_integration_runs_on_a_juju_controller_on_kubernetes(workflow: dict[str, Any]):
    job, _ = _integration_step(workflow)
    (operator,) = [s for s in job["steps"] if "actions-operator@" in s.get("uses", "")]
    assert operator["with"]["provider"] == "microk8s"
    uploads = [s for s in job["steps"] if "upload-artifact@" in s.get("uses", "")]
    assert [s.get("if") for s in uploads] == ["failure()"]
    assert any("juju debug-log" in s.get("run", "") for s in job["steps"])


def test_every_action_is_pinned_to_a_commit(workflow: dict[str, Any]):
    uses = [step["uses"] for step in _steps(workflow) if "uses" in step]
    assert uses
    assert [u for u in uses if not PINNED.match(u)] == []
