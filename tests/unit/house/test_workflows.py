"""The GitHub workflow agrees with what the integration suite and tox read.

The workflow cannot run here, so these checks catch the drift that would only show on CI: a
variable the integration suite reads that the job does not set, or that tox does not pass
through, a job where the suite could skip green, and an action that is not pinned to a commit.
The suite's skip-or-fail rule itself is checked here too: it needs no Juju to run.
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.prerequisites import REQUIRE_ENV, give_up, input_problems

ROOT = Path(__file__).resolve().parents[3]
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yaml"
# Where the integration suite reads its environment.
INTEGRATION_SOURCES = [
    ROOT / "tests" / "integration" / name for name in ("conftest.py", "prerequisites.py")
]
TOX_INI = ROOT / "tox.ini"
ENV_READ = re.compile(r"""environ(?:\.get\(|\[)\s*["']([A-Z0-9_]+)["']""")
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
    texts = [path.read_text(encoding="utf-8") for path in INTEGRATION_SOURCES]
    read = {name for text in texts for name in ENV_READ.findall(text)}
    return read | {REQUIRE_ENV}


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


def test_the_integration_job_may_not_skip(workflow: dict[str, Any]):
    _, step = _integration_step(workflow)
    assert step["env"].get(REQUIRE_ENV) == "1"
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(TOX_INI, encoding="utf-8")
    assert REQUIRE_ENV in parser["testenv:integration"]["pass_env"].split()


def _outcome(reason: str, environ: dict[str, str]) -> BaseException:
    """What ``give_up`` raises; a skip must not end the test that checks it."""
    try:
        give_up(reason, environ)
    except BaseException as exc:  # pytest's skip and fail are what is under test
        return exc
    raise AssertionError("give_up returned")


@pytest.mark.parametrize("empty", ["GARM_CHARM_FILE", "GARM_IMAGE"])
def test_an_empty_input_fails_the_suite_where_it_is_required(empty: str, tmp_path: Path):
    charm = tmp_path / "garm_amd64.charm"
    charm.write_bytes(b"")
    environ = {"GARM_CHARM_FILE": str(charm), "GARM_IMAGE": "localhost:32000/garm:1", empty: ""}
    (problem,) = input_problems(environ)
    assert problem.startswith(f"{empty} is not set")
    required = _outcome(problem, {**environ, REQUIRE_ENV: "1"})
    assert isinstance(required, pytest.fail.Exception)
    assert str(required).startswith(f"{empty} is not set")
    assert f"{REQUIRE_ENV} is set" in str(required)
    # Anywhere else (a laptop without Juju), the suite skips with the same reason.
    elsewhere = _outcome(problem, environ)
    assert isinstance(elsewhere, pytest.skip.Exception)
    assert str(elsewhere) == problem


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "tests" / "integration").glob("*.py")),
    ids=lambda p: p.name,
)
def test_the_integration_suite_skips_only_through_give_up(path: Path):
    # A skip written straight into the suite would skip green in CI too.
    if path.name == "prerequisites.py":
        return
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"pytest\.(skip|importorskip)\(|mark\.skip", text)


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
