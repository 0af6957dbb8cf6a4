"""Security events: the real charm through ops.testing, GARM played by the emulator.

Each event an auditor filters on is asserted from the charm's own log (logger
``garm-charm.security``, one JSON object per line). The suite-wide check
(``tests/conftest.py``) fails any test whose log holds a known secret, so every line these
hooks write, events included, is checked against the admin password, the GitHub App key and
the OpenStack password.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import ops
import pytest
import yaml
from ops import testing

from charm import GarmCharm
from reconcile import teardown
from records.secrets_store import ADMIN_CREDENTIALS_LABEL
from relations.cos_logging import RULES_DIR
from tests.charm_driver import CharmDriver, base_state, configurator
from tests.garm_emulator import GarmEmulator
from tests.log_secrets import register_secret
from tests.security_log import LokiStandin
from tests.security_log import security_events as logged
from vocabulary import security_events
from workload import pebble_layer

OWASP_LEVELS = {"INFO", "WARN", "CRITICAL"}
EVENT_SHAPE = re.compile(r"^[a-z_]+:\S")


@pytest.fixture
def driver(garm: GarmEmulator, tmp_path: Path) -> CharmDriver:
    return CharmDriver(garm, base_state(tmp_path))


@pytest.fixture
def loki() -> Iterator[LokiStandin]:
    standin = LokiStandin()
    standin.start()
    yield standin
    standin.stop()


def deploy(driver: CharmDriver) -> testing.State:
    driver.run(driver.ctx.on.install())
    driver.run(driver.ctx.on.leader_elected())
    container = driver.state.get_container(pebble_layer.CONTAINER_NAME)
    return driver.run(driver.ctx.on.pebble_ready(container))


def quiet(app: str, relation_id: int, **kwargs: Any) -> Any:
    """A configurator whose scale set keeps no idle runner: it is deleted without a drain."""
    return configurator(app, relation_id=relation_id, extra={"min_idle_runner": "0"}, **kwargs)


def only(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert len(events) == 1, events
    return events[0]


def admin_password(state: testing.State) -> str:
    secret = next(s for s in state.secrets if s.label == ADMIN_CREDENTIALS_LABEL)
    return (secret.latest_content or secret.tracked_content)["password"]


def with_admin_password(state: testing.State, password: str) -> testing.State:
    """The state with the admin secret's password replaced (GARM keeps the old one)."""
    register_secret(password)
    secret = next(s for s in state.secrets if s.label == ADMIN_CREDENTIALS_LABEL)
    content = {**(secret.latest_content or secret.tracked_content), "password": password}
    changed = dataclasses.replace(secret, tracked_content=content, latest_content=content)
    others = {s for s in state.secrets if s.label != ADMIN_CREDENTIALS_LABEL}
    return dataclasses.replace(state, secrets={*others, changed})


# --- the line format --------------------------------------------------------------------------


def test_each_line_is_one_owasp_json_object_with_who_and_outcome(
    driver: CharmDriver, caplog: pytest.LogCaptureFixture
):
    state = deploy(driver)
    driver.ctx.run(driver.ctx.on.action("get-credentials", id="42"), state)

    (record,) = [r for r in caplog.records if r.name == security_events.LOGGER_NAME]
    assert "\n" not in record.getMessage()
    event = json.loads(record.getMessage())
    assert event["type"] == "security"
    assert EVENT_SHAPE.match(event["event"])
    assert event["level"] in OWASP_LEVELS
    assert datetime.fromisoformat(event["datetime"]).utcoffset() is not None
    assert event["appid"] == f"{state.model.uuid}-garm/0"
    assert event["unit"] == "garm/0"
    assert event["outcome"] == "success"
    assert event["description"]
    # A routine disclosure is an INFO line in the Juju log; only failures are warnings.
    assert record.levelname == "INFO"


# --- get-credentials --------------------------------------------------------------------------


def test_get_credentials_is_a_disclosure_naming_the_action_id(
    driver: CharmDriver, caplog: pytest.LogCaptureFixture
):
    state = deploy(driver)
    caplog.clear()
    driver.ctx.run(driver.ctx.on.action("get-credentials", id="7"), state)

    event = only(logged(caplog, security_events.SENSITIVE_READ))
    assert event["event"] == f"sensitive_read:garm/0,{ADMIN_CREDENTIALS_LABEL}"
    assert event["level"] == "WARN"
    assert event["action"] == "get-credentials"
    assert event["action_id"] == "7"
    assert "hook" not in event
    assert event["object"] == f"secret/{ADMIN_CREDENTIALS_LABEL}"
    assert event["outcome"] == "success"
    assert "user admin" in event["description"]
    # The password went to the caller, never to the log.
    assert admin_password(state) not in caplog.text


def test_get_credentials_before_they_exist_is_a_failed_disclosure(
    garm: GarmEmulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    driver = CharmDriver(garm, base_state(tmp_path, leader=False))
    with pytest.raises(testing.ActionFailed):
        driver.ctx.run(driver.ctx.on.action("get-credentials", id="8"), driver.state)

    event = only(logged(caplog, security_events.SENSITIVE_READ))
    assert event["outcome"] == "failure"
    assert event["action_id"] == "8"
    assert "nothing disclosed" in event["description"]


# --- GARM refusing the admin -----------------------------------------------------------------


def test_refused_admin_login_is_authn_login_fail_in_the_hook(
    driver: CharmDriver, caplog: pytest.LogCaptureFixture
):
    state = deploy(driver)
    driver.state = with_admin_password(state, "Not-the-admin-password-1")
    caplog.clear()
    out = driver.run(driver.ctx.on.update_status())

    assert out.unit_status == ops.BlockedStatus("GARM rejected the admin credentials")
    event = only(logged(caplog, security_events.AUTHN_LOGIN_FAIL))
    assert event["event"] == "authn_login_fail:admin"
    assert event["hook"] == "update-status"
    assert event["outcome"] == "failure"
    assert ADMIN_CREDENTIALS_LABEL in event["description"]
    record = next(r for r in caplog.records if r.name == security_events.LOGGER_NAME)
    assert record.levelname == "WARNING"


def test_refused_admin_login_in_scaleset_status_is_logged(
    driver: CharmDriver, garm: GarmEmulator, caplog: pytest.LogCaptureFixture
):
    deploy(driver)
    garm.fail_next("POST", r"/auth/login", 401, count=1, error="Not Authorized", details="")
    caplog.clear()
    with driver._wired(), pytest.raises(testing.ActionFailed):  # pyright: ignore[reportPrivateUsage]
        driver.ctx.run(driver.ctx.on.action("scaleset-status", id="9"), driver.state)

    event = only(logged(caplog, security_events.AUTHN_LOGIN_FAIL))
    assert (event["action"], event["action_id"]) == ("scaleset-status", "9")


def test_token_refused_after_login_is_authz_fail(
    driver: CharmDriver, garm: GarmEmulator, caplog: pytest.LogCaptureFixture
):
    deploy(driver)
    garm.fail_next("GET", r"/github/credentials", 401, count=1, error="Authentication failed")
    caplog.clear()
    out = driver.run(driver.ctx.on.update_status())

    assert out.unit_status == ops.WaitingStatus("GARM sync failed")
    event = only(logged(caplog, security_events.AUTHZ_FAIL))
    assert event["event"] == "authz_fail:admin,garm-api"
    assert event["level"] == "CRITICAL"
    assert logged(caplog, security_events.AUTHN_LOGIN_FAIL) == []


# --- deletions -------------------------------------------------------------------------------


def test_each_deletion_names_the_object_and_never_a_value(
    driver: CharmDriver, garm: GarmEmulator, caplog: pytest.LogCaptureFixture
):
    deploy(driver)
    cfg = quiet("cfg-a", 1, org="org-a", app_id="301", installation_id="401")
    driver.add_configurator(cfg)
    (scaleset,) = garm.scalesets()
    caplog.clear()
    driver.remove_relation(cfg.relation)

    deletions = [e for e in logged(caplog) if e["event"].split(":")[0].endswith("_delete")]
    assert [e["event"] for e in deletions] == [
        f"sensitive_delete:garm/0,scaleset/{scaleset['name']}",
        "sensitive_delete:garm/0,organization/org-a",
        "authn_token_delete:app-301-401",
    ]
    assert [e["object"] for e in deletions] == [
        f"scaleset/{scaleset['name']}",
        "organization/org-a",
        "github-credentials/app-301-401",
    ]
    assert {e["hook"] for e in deletions} == {"garm-configurator-relation-broken"}
    assert {e["outcome"] for e in deletions} == {"success"}


def test_a_refused_delete_is_no_deletion_event(
    driver: CharmDriver, garm: GarmEmulator, caplog: pytest.LogCaptureFixture
):
    deploy(driver)
    cfg = quiet("cfg-a", 1)
    driver.add_configurator(cfg)
    garm.fail_next("DELETE", r"/scalesets/\d+", 500, count=1)
    caplog.clear()
    driver.remove_relation(cfg.relation)

    assert logged(caplog, security_events.SENSITIVE_DELETE) == []
    assert logged(caplog, security_events.AUTHN_TOKEN_DELETE) == []


def test_a_retired_scale_set_is_a_deletion(
    driver: CharmDriver, garm: GarmEmulator, caplog: pytest.LogCaptureFixture
):
    deploy(driver)
    cfg = configurator("cfg-a", relation_id=1)
    driver.add_configurator(cfg)
    garm.advance(timedelta(seconds=30))
    garm.advance(timedelta(seconds=30))
    (old,) = garm.scalesets()
    driver.change_relation(cfg.relation, labels="linux,x64,noble")
    driver.run(driver.ctx.on.update_status())
    caplog.clear()
    for _ in range(4):
        garm.advance(timedelta(seconds=30))
    driver.run(driver.ctx.on.update_status())

    event = only(logged(caplog, security_events.SENSITIVE_DELETE))
    assert event["event"] == f"sensitive_delete:garm/0,scaleset/{old['name']}"


# --- GARM stopping ---------------------------------------------------------------------------


def test_deposed_leader_stopping_garm_is_sys_shutdown_once(
    driver: CharmDriver, caplog: pytest.LogCaptureFixture
):
    state = deploy(driver)
    driver.state = dataclasses.replace(state, leader=False)
    caplog.clear()
    driver.run(driver.ctx.on.update_status())

    event = only(logged(caplog, security_events.SYS_SHUTDOWN))
    assert event["event"] == "sys_shutdown:garm/0,standby"
    assert event["hook"] == "update-status"
    assert "no longer the leader" in event["description"]
    caplog.clear()
    driver.run(driver.ctx.on.update_status())
    assert logged(caplog) == []


def _remove_application(driver: CharmDriver, **config: bool) -> None:
    driver.state = dataclasses.replace(driver.state, planned_units=0, config=config)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(GarmCharm, "teardown_poll_interval", 0.0)
        patch.setattr(teardown, "_wait", lambda _seconds: None)
        driver.run(driver.ctx.on.stop())


def test_removal_sweep_is_sys_shutdown_with_its_deletions(
    driver: CharmDriver, garm: GarmEmulator, caplog: pytest.LogCaptureFixture
):
    deploy(driver)
    driver.add_configurator(quiet("cfg-a", 1, org="org-a"))
    caplog.clear()
    _remove_application(driver)

    assert garm.scalesets() == []
    removal = only(logged(caplog, security_events.SYS_SHUTDOWN))
    assert removal["event"] == "sys_shutdown:garm/0,application-removal"
    assert (removal["hook"], removal["outcome"]) == ("stop", "success")
    assert "1 sweep(s)" in removal["description"]
    objects = [e["object"] for e in logged(caplog) if "object" in e]
    assert "organization/org-a" in objects


def test_removal_left_by_the_operator_is_a_skipped_sys_shutdown(
    driver: CharmDriver, caplog: pytest.LogCaptureFixture
):
    deploy(driver)
    caplog.clear()
    _remove_application(driver, **{"cleanup-on-remove": False})

    event = only(logged(caplog, security_events.SYS_SHUTDOWN))
    assert event["outcome"] == "skipped"


def test_failed_removal_is_a_failed_sys_shutdown(
    driver: CharmDriver, garm: GarmEmulator, caplog: pytest.LogCaptureFixture
):
    deploy(driver)
    garm.stop()
    caplog.clear()
    driver.ready_timeout = 0.0
    with pytest.raises(testing.errors.UncaughtCharmError):
        _remove_application(driver)

    event = only(logged(caplog, security_events.SYS_SHUTDOWN))
    assert event["outcome"] == "failure"
    assert "TeardownError" in event["description"]


def test_garm_down_as_pebble_reports_it_is_sys_crash(
    driver: CharmDriver, caplog: pytest.LogCaptureFixture
):
    state = deploy(driver)
    container = state.get_container(pebble_layer.CONTAINER_NAME)
    info = testing.CheckInfo(
        pebble_layer.CHECK_NAME,
        level=ops.pebble.CheckLevel.ALIVE,
        status=ops.pebble.CheckStatus.DOWN,
        failures=3,
        threshold=3,
    )
    container = dataclasses.replace(container, check_infos={info})
    state = dataclasses.replace(state, containers={container})
    caplog.clear()
    driver.ctx.run(driver.ctx.on.pebble_check_failed(container, info), state)

    event = only(logged(caplog, security_events.SYS_CRASH))
    assert event["event"] == f"sys_crash:garm,{pebble_layer.CHECK_NAME}"
    assert event["hook"] == "garm-pebble-check-failed"
    assert event["outcome"] == "failure"
    assert "failed 3 time(s) in a row (threshold 3)" in event["description"]
    assert "garm service active" in event["description"]


# --- Loki ------------------------------------------------------------------------------------


def loki_relation(url: str) -> testing.Relation:
    return testing.Relation(
        "logging", id=50, remote_units_data={0: {"endpoint": json.dumps({"url": url})}}
    )


def test_events_are_pushed_to_loki_with_the_topology_and_the_logger_label(
    garm: GarmEmulator, tmp_path: Path, loki: LokiStandin
):
    driver = CharmDriver(garm, base_state(tmp_path, relations={loki_relation(loki.url)}))
    state = deploy(driver)
    assert loki.lines == []
    driver.ctx.run(driver.ctx.on.action("get-credentials", id="11"), state)

    (pushed,) = loki.lines
    assert pushed.labels["logger"] == security_events.LOGGER_NAME
    assert pushed.labels["juju_application"] == "garm"
    assert pushed.labels["juju_unit"] == "garm/0"
    assert pushed.labels["juju_model_uuid"] == state.model.uuid
    assert json.loads(pushed.line)["action_id"] == "11"


def test_an_unreachable_loki_costs_a_warning_not_the_action(
    garm: GarmEmulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    refusing = LokiStandin(status=500)
    refusing.start()
    try:
        relation = loki_relation(refusing.url)
        driver = CharmDriver(garm, base_state(tmp_path, relations={relation}))
        state = deploy(driver)
        driver.ctx.run(driver.ctx.on.action("get-credentials"), state)
    finally:
        refusing.stop()
    assert (driver.ctx.action_results or {})["username"] == "admin"
    assert any("Cannot push a security event to Loki" in r.getMessage() for r in caplog.records)


# --- the alert rule on repeated login refusals ------------------------------------------------

LOKI_RULES = sorted(RULES_DIR.glob("*.rules"))
SELECTOR = re.compile(r"\{([^}]*)\}")
MATCHER = re.compile(r'^\s*([a-z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"\s*$')
RANGE = re.compile(r"\[(\d+)m\]")


def _rule(alert: str) -> dict[str, Any]:
    for path in LOKI_RULES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if rule["alert"] == alert:
                    return rule
    raise AssertionError(f"no Loki rule {alert}")


def test_loki_rule_files_have_the_shape_loki_takes():
    # promtool reads PromQL only, and Loki's own rule checker is not packaged for this machine:
    # this checks the rule file the way the Loki charm reads it, and the next test checks that
    # the expression selects the lines the charm pushes.
    assert LOKI_RULES
    for path in LOKI_RULES:
        groups = yaml.safe_load(path.read_text())["groups"]
        for group in groups:
            assert re.fullmatch(r"[a-z_]+", group["name"]), "cosl renames other characters"
            for rule in group["rules"]:
                assert set(rule) == {"alert", "expr", "labels", "annotations"}
                assert rule["labels"]["severity"] in {"warning", "critical"}
                assert {"summary", "description"} <= set(rule["annotations"])
                expr = rule["expr"]
                assert expr.count("(") == expr.count(")")
                (selector,) = SELECTOR.findall(expr)
                matchers = [m for m in selector.split(",") if "%%juju_topology%%" not in m]
                # cosl swallows the comma after the placeholder: it must come last.
                assert selector.rstrip().endswith("%%juju_topology%%")
                assert all(MATCHER.match(m) for m in matchers), matchers


def test_admin_login_rule_selects_what_the_charm_pushes_and_counts_to_its_threshold(
    garm: GarmEmulator, tmp_path: Path, loki: LokiStandin
):
    rule = _rule("GarmAdminLoginRepeatedlyRefused")
    expr = rule["expr"]
    (selector,) = SELECTOR.findall(expr)
    matches = [MATCHER.match(part) for part in selector.split(",")]
    wanted = {m.group(1): m.group(3) for m in matches if m is not None}
    line_filter = re.search(r'\|= "([^"]+)"', expr)
    event_regex = re.search(r'event =~ "([^"]+)"', expr)
    threshold = int(expr.rsplit(">=", 1)[1])
    window = int(RANGE.search(expr).group(1))  # type: ignore[union-attr]
    assert line_filter is not None and event_regex is not None
    assert (threshold, window) == (3, 30)

    driver = CharmDriver(garm, base_state(tmp_path, relations={loki_relation(loki.url)}))
    state = deploy(driver)
    driver.state = with_admin_password(state, "Not-the-admin-password-2")
    for _ in range(threshold):
        driver.run(driver.ctx.on.update_status())

    selected = [
        p
        for p in loki.lines
        if all(p.labels.get(k) == v for k, v in wanted.items())
        and line_filter.group(1) in p.line
        and re.fullmatch(event_regex.group(1), json.loads(p.line)["event"])
    ]
    assert len(selected) == threshold
    # Other security events do not count towards it.
    driver.ctx.run(driver.ctx.on.action("get-credentials"), driver.state)
    assert not re.fullmatch(event_regex.group(1), json.loads(loki.lines[-1].line)["event"])
