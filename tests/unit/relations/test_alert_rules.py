"""The charm's Prometheus alert rules, checked and unit-tested with Debian's ``promtool``.

Each alert has its own ``alert_rules/*.test.yaml`` showing when it fires and when it stays
quiet. Without ``promtool`` these tests skip with one line, unless ``GARM_REQUIRE_PROMTOOL`` is
set (``.ci/run`` sets it), where a missing ``promtool`` fails them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

RULES_DIR = Path(__file__).resolve().parents[3] / "src" / "relations" / "prometheus_alert_rules"
TESTS_DIR = Path(__file__).resolve().parent / "alert_rules"
REQUIRE_ENV = "GARM_REQUIRE_PROMTOOL"
RULE_FILES = sorted(RULES_DIR.glob("*.rule*"))
TEST_FILES = sorted(TESTS_DIR.glob("*.test.yaml"))


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is not None:
        return path
    message = "promtool not found: apt-get install -y prometheus"
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"{message} ({REQUIRE_ENV} is set)")
    pytest.skip(message)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


def _alert_names(rule_file: Path) -> set[str]:
    data = yaml.safe_load(rule_file.read_text(encoding="utf-8"))
    return {
        rule["alert"] for group in data["groups"] for rule in group["rules"] if "alert" in rule
    }


def _tested_alerts(test_file: Path) -> set[str]:
    data = yaml.safe_load(test_file.read_text(encoding="utf-8"))
    return {
        check["alertname"] for case in data["tests"] for check in case.get("alert_rule_test", [])
    }


def test_there_are_rule_files():
    assert RULE_FILES, f"no rule files in {RULES_DIR}"


@pytest.mark.parametrize("rule_file", RULE_FILES, ids=lambda p: p.name)
def test_promtool_check_rules(promtool: str, rule_file: Path):
    result = _run(promtool, "check", "rules", str(rule_file))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("test_file", TEST_FILES, ids=lambda p: p.name)
def test_promtool_test_rules(promtool: str, test_file: Path):
    # promtool resolves a test file's rule_files against the test file's directory.
    result = _run(promtool, "test", "rules", str(test_file))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("test_file", TEST_FILES, ids=lambda p: p.name)
def test_each_test_file_shows_its_alert_firing_and_quiet(test_file: Path):
    data = yaml.safe_load(test_file.read_text(encoding="utf-8"))
    checks = [c for case in data["tests"] for c in case.get("alert_rule_test", [])]
    assert len(_tested_alerts(test_file)) == 1, "one alert per test file"
    assert any(c.get("exp_alerts") for c in checks), "no case where the alert fires"
    assert any(not c.get("exp_alerts") for c in checks), "no case where the alert is quiet"


def test_every_alert_has_a_test_file():
    alerts = set().union(*(_alert_names(f) for f in RULE_FILES))
    tested = set().union(*(_tested_alerts(f) for f in TEST_FILES))
    assert alerts == tested
