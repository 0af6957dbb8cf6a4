"""Every metric the dashboard and the alert rules read exists in real GARM's ``/metrics``.

Real GARM only: the emulator serves no metrics. GARM reports scale sets, runners, entities and
GitHub calls only once they exist, and refreshes its scale-set gauges on a timer, so the test
seeds credentials, an organisation and a scale set with one idle runner through GARM's API,
then stops the GitHub stand-in so that GARM's GitHub calls fail and ``garm_github_errors_total``
appears, and scrapes until every name is there.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from garm import GarmClient
from tests.conformance.backends import wait_for
from tests.conformance.conftest import (
    ADMIN_PASSWORD,
    ADMIN_USERNAME,
    real_garm_with_provider,
)
from tests.conformance.test_drain import _idle_runner, _seed_scaleset
from tests.github_standin import GitHubStandin
from tests.real_garm.harness import SKIP_REASON, RealGarm, garm_binary

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "src" / "relations" / "grafana_dashboards").glob("*.json"))
RULE_FILES = sorted((ROOT / "src" / "relations" / "prometheus_alert_rules").glob("*.rule*"))
# Series Prometheus makes itself for every target; GARM does not (and cannot) export them.
PROMETHEUS_SERIES = frozenset({"up"})
SCRAPE_TIMEOUT = 150.0
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", re.MULTILINE)
_GARM_NAME = re.compile(r"\bgarm_[a-z0-9_]+\b")
_IDENT = re.compile(r"\b[a-z_][a-z0-9_]*\b")


@pytest.fixture
def real_garm(tmp_path: Path) -> Iterator[tuple[RealGarm, GitHubStandin]]:
    """A real GARM, as the conformance ``garm`` fixture starts it, and its GitHub stand-in."""
    if garm_binary() is None:
        pytest.skip(SKIP_REASON)
    github = GitHubStandin()
    github.start()
    try:
        for garm in real_garm_with_provider(tmp_path, github):
            yield garm, github
    finally:
        github.stop()


def exported_names(text: str) -> set[str]:
    """The metric names of the samples in a Prometheus text exposition."""
    return set(_SAMPLE.findall(text))


def dashboard_names() -> set[str]:
    names: set[str] = set()
    for path in DASHBOARDS:
        for panel in json.loads(path.read_text(encoding="utf-8"))["panels"]:
            for target in panel.get("targets", []):
                names |= set(_GARM_NAME.findall(target["expr"]))
    return names


def rule_names() -> set[str]:
    """GARM metric names in the alert expressions, and any other series they read."""
    names: set[str] = set()
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]:
            for rule in group["rules"]:
                names |= set(_GARM_NAME.findall(rule["expr"]))
                names |= PROMETHEUS_SERIES & set(_IDENT.findall(rule["expr"]))
    return names


def test_the_dashboard_and_rules_read_garm_metrics():
    assert dashboard_names() >= {"garm_health", "garm_scaleset_status"}
    assert rule_names() >= {"garm_health", "garm_github_errors_total"}


def test_every_metric_in_the_dashboard_and_the_alert_rules_is_exported_by_real_garm(
    real_garm: tuple[RealGarm, GitHubStandin],
):
    garm, github = real_garm
    garm.bootstrap(ADMIN_USERNAME, ADMIN_PASSWORD, urls=True)
    with GarmClient(garm.url) as client:
        client.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        _seed_scaleset(client, min_idle=1)
    wait_for(garm, "an idle runner of the seeded scale set", lambda: _idle_runner(garm))
    # GitHub goes away: GARM's next GitHub calls (its message-queue polls) fail.
    github.stop()

    wanted = (dashboard_names() | rule_names()) - PROMETHEUS_SERIES
    missing = wanted
    deadline = time.monotonic() + SCRAPE_TIMEOUT
    while missing and time.monotonic() < deadline:
        # /metrics is at the root, not under /api/v1, and needs no token (disable_auth).
        response = httpx.get(f"{garm.base_url}/metrics", timeout=10)
        assert response.status_code == 200
        missing = wanted - exported_names(response.text)
        if missing:
            time.sleep(2)
    assert not missing, f"names GARM did not export within {SCRAPE_TIMEOUT:.0f} s: {missing}"
