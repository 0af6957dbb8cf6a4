"""The real charm through ops.testing, with GARM played by the emulator."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import ops
import pytest
from ops import testing

from records.leadership import PEER_RELATION
from tests.charm_driver import (
    PASSWORD_SECRET_VALUE,
    PRIVATE_KEY_VALUE,
    CharmDriver,
    base_state,
    configurator,
    first_phase,
    planned_env,
    planned_providers,
    without_peer_relation,
)
from tests.garm_emulator import CONSOLIDATION_INTERVAL, GarmEmulator
from tests.log_secrets import register_secret
from workload import agent_image, pebble_layer


@pytest.fixture
def driver(garm: GarmEmulator, tmp_path: Path) -> CharmDriver:
    return CharmDriver(garm, base_state(tmp_path))


def owned_secret_values(state: testing.State) -> list[str]:
    values: list[str] = []
    for secret in state.secrets:
        content = secret.latest_content or secret.tracked_content or {}
        values += [v for k, v in content.items() if k not in ("username", "email", "full-name")]
    return values


def assert_no_secret_logged(caplog: pytest.LogCaptureFixture, state: testing.State) -> None:
    text = caplog.text
    for value in [PASSWORD_SECRET_VALUE, PRIVATE_KEY_VALUE, *owned_secret_values(state)]:
        if value and value != "[]":
            assert value not in text


def live_names(garm: GarmEmulator) -> list[str]:
    return sorted(s["name"] for s in garm.scalesets())


def deploy(driver: CharmDriver) -> testing.State:
    driver.run(driver.ctx.on.install())
    driver.run(driver.ctx.on.leader_elected())
    container = driver.state.get_container(pebble_layer.CONTAINER_NAME)
    return driver.run(driver.ctx.on.pebble_ready(container))


# --- gates and statuses ----------------------------------------------------------------------


def test_waits_for_pebble(garm: GarmEmulator, tmp_path: Path):
    state = base_state(tmp_path)
    container = dataclasses.replace(state.get_container("garm"), can_connect=False)
    driver = CharmDriver(garm, dataclasses.replace(state, containers={container}))
    out = driver.run(driver.ctx.on.install())
    assert out.unit_status == ops.WaitingStatus("Waiting for pebble ready")
    # The leader creates its secrets even before the container is reachable.
    labels = {s.label for s in out.secrets}
    assert {"garm-secrets", "garm-admin-credentials"} <= labels


def test_install_before_the_peer_relation_exists(garm: GarmEmulator, tmp_path: Path):
    # Juju may run install before the unit's garm-peers relation is created: GARM comes up
    # all the same, and the leader records itself once the relation arrives.
    driver = CharmDriver(garm, without_peer_relation(base_state(tmp_path)))
    assert not driver.state.get_relations(PEER_RELATION)
    out = deploy(driver)
    assert out.get_container("garm").service_statuses["garm"] == ops.pebble.ServiceStatus.ACTIVE
    assert out.unit_status == ops.WaitingStatus("Waiting for garm-configurator relation")
    peers = testing.PeerRelation(PEER_RELATION)
    driver.state = dataclasses.replace(out, relations={*out.relations, peers})
    joined = driver.run(driver.ctx.on.relation_created(peers))
    [recorded] = joined.get_relations(PEER_RELATION)
    assert recorded.local_app_data["leader"] == "garm/0"


def test_a_garm_that_cannot_start_is_a_status_and_every_hook_returns(
    driver: CharmDriver, garm: GarmEmulator
):
    deploy(driver)
    driver.start_failure = "exited quickly with code 2, will restart"
    cfg = configurator("cfg-a", relation_id=1)
    driver.state = dataclasses.replace(
        driver.state,
        relations={*driver.state.relations, cfg.relation},
        secrets={*driver.state.secrets, *cfg.secrets},
    )
    garm.clear_requests()
    # The configurator's provider changes the layer: the replan starts a GARM that exits.
    out = driver.run(driver.ctx.on.relation_changed(cfg.relation, remote_unit=0))
    not_running = "GARM is not running (Pebble: {}); read its log: {}"
    log = "juju ssh --container garm garm/0 pebble logs garm"
    assert out.unit_status == ops.BlockedStatus(
        not_running.format("exited quickly with code 2, will restart", log)
    )
    assert garm.writes() == []
    # Pebble keeps restarting it; the next hooks find it down and say so, without waiting.
    driver.start_failure = None
    out = driver.run(driver.ctx.on.update_status())
    assert out.unit_status == ops.BlockedStatus(not_running.format("inactive", log))
    assert garm.writes() == []
    # Once it runs, the pass goes on.
    container = out.get_container(pebble_layer.CONTAINER_NAME)
    up = dataclasses.replace(
        container, service_statuses={pebble_layer.SERVICE_NAME: ops.pebble.ServiceStatus.ACTIVE}
    )
    driver.state = dataclasses.replace(out, containers={up})
    assert driver.run(driver.ctx.on.update_status()).unit_status == ops.ActiveStatus()
    assert [s["name"] for s in garm.scalesets()]


def test_non_leader_waits_for_secrets(garm: GarmEmulator, tmp_path: Path):
    driver = CharmDriver(garm, base_state(tmp_path, leader=False))
    out = driver.run(driver.ctx.on.update_status())
    assert out.unit_status == ops.WaitingStatus("Waiting for GARM secrets")
    assert not out.secrets


def test_non_leader_stands_by_and_stops_garm(driver: CharmDriver):
    leader_state = deploy(driver)
    container = leader_state.get_container("garm")
    assert container.service_statuses["garm"] == ops.pebble.ServiceStatus.ACTIVE
    driver.state = dataclasses.replace(leader_state, leader=False)
    out = driver.run(driver.ctx.on.update_status())
    assert out.unit_status == ops.ActiveStatus("standby; GARM runs on the leader unit")
    assert out.get_container("garm").service_statuses["garm"] == ops.pebble.ServiceStatus.INACTIVE
    # Leadership back: the layer differs from the stand-by plan, so GARM starts again.
    driver.state = dataclasses.replace(out, leader=True)
    back = driver.run(driver.ctx.on.leader_elected())
    assert back.get_container("garm").service_statuses["garm"] == ops.pebble.ServiceStatus.ACTIVE


def test_waits_for_storage(garm: GarmEmulator, tmp_path: Path):
    state = base_state(tmp_path)
    container = dataclasses.replace(state.get_container("garm"), mounts={})
    driver = CharmDriver(garm, dataclasses.replace(state, containers={container}))
    out = driver.run(driver.ctx.on.install())
    assert out.unit_status == ops.WaitingStatus("Waiting for garm-data storage")


def test_waits_for_garm_when_unreachable(garm: GarmEmulator, tmp_path: Path):
    driver = CharmDriver(garm, base_state(tmp_path), ready_timeout=0.0)
    garm.stop()
    out = driver.run(driver.ctx.on.install())
    assert out.unit_status == ops.WaitingStatus("Waiting for GARM to become ready")
    # The workload was still configured: only the GARM part waits.
    assert planned_env(out)["GARM_DB_BACKEND"] == "sqlite3"


# --- deploy alone ----------------------------------------------------------------------------


def test_deploy_alone_bootstraps_garm_on_sqlite(
    driver: CharmDriver, garm: GarmEmulator, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG)
    out = deploy(driver)
    assert out.unit_status == ops.WaitingStatus("Waiting for garm-configurator relation")
    assert out.app_status == out.unit_status
    env = planned_env(out)
    assert env["GARM_DB_BACKEND"] == "sqlite3"
    assert env["GARM_SQLITE_DB_FILE"] == "/var/lib/garm/garm.db"
    assert env["GARM_PROVIDERS_JSON"] == "[]"
    assert env["APP_BASE_URL"] == "http://garm.test-model.svc.cluster.local:8080".replace(
        "test-model", out.model.name
    )
    assert len(env["GARM_JWT_SECRET"]) == 64
    assert len(env["GARM_PASSPHRASE"]) == 32
    assert env["GARM_CONFIG_VERSION"] == pebble_layer.config_version(
        pebble_layer.entrypoint_source()
    )
    first_runs = [r for r in garm.requests if r.path.endswith("/first-run")]
    assert len(first_runs) == 1
    base = env["APP_BASE_URL"]
    assert garm.controller()["metadata_url"] == f"{base}/api/v1/metadata"
    assert garm.controller()["callback_url"] == f"{base}/api/v1/callbacks"
    assert garm.controller()["webhook_url"] == f"{base}/webhooks"
    assert garm.controller()["agent_url"] == f"{base}/agent"
    container = out.get_container("garm")
    pushed = container.get_filesystem(driver.ctx) / "opt/garm-charm/garm_entrypoint.py"
    assert pushed.read_text() == pebble_layer.entrypoint_source()
    assert_no_secret_logged(caplog, out)


def test_secrets_created_once(driver: CharmDriver):
    first = deploy(driver)
    before = {s.label: s.tracked_content for s in first.secrets}
    again = driver.run(driver.ctx.on.update_status())
    after = {s.label: s.tracked_content for s in again.secrets}
    assert before == after
    assert len([s for s in again.secrets if s.label == "garm-secrets"]) == 1


def test_first_run_only_once_and_urls_written_once(driver: CharmDriver, garm: GarmEmulator):
    deploy(driver)
    garm.clear_requests()
    driver.run(driver.ctx.on.update_status())
    assert not [r for r in garm.requests if r.path.endswith("/first-run")]
    assert not [r for r in garm.requests if r.method == "PUT" and r.path.endswith("/controller")]


def test_unchanged_input_never_restarts(driver: CharmDriver):
    out = deploy(driver)
    container = out.get_container("garm")
    stopped = dataclasses.replace(
        container, service_statuses={"garm": ops.pebble.ServiceStatus.INACTIVE}
    )
    driver.state = dataclasses.replace(out, containers={stopped})
    after = driver.run(driver.ctx.on.update_status())
    assert (
        after.get_container("garm").service_statuses["garm"] == ops.pebble.ServiceStatus.INACTIVE
    )


def test_changed_proxy_restarts(driver: CharmDriver, monkeypatch: pytest.MonkeyPatch):
    out = deploy(driver)
    container = out.get_container("garm")
    stopped = dataclasses.replace(
        container, service_statuses={"garm": ops.pebble.ServiceStatus.INACTIVE}
    )
    driver.state = dataclasses.replace(out, containers={stopped})
    monkeypatch.setenv("JUJU_CHARM_HTTP_PROXY", "http://squid.internal:3128")
    after = driver.run(driver.ctx.on.config_changed())
    assert after.get_container("garm").service_statuses["garm"] == ops.pebble.ServiceStatus.ACTIVE
    env = planned_env(after)
    assert env["HTTP_PROXY"] == env["http_proxy"] == "http://squid.internal:3128"
    monkeypatch.delenv("JUJU_CHARM_HTTP_PROXY")
    cleared = driver.run(driver.ctx.on.config_changed())
    assert "HTTP_PROXY" not in planned_env(cleared)


def _stop_garm(driver: CharmDriver) -> None:
    container = driver.state.get_container("garm")
    stopped = dataclasses.replace(
        container, service_statuses={"garm": ops.pebble.ServiceStatus.INACTIVE}
    )
    driver.state = dataclasses.replace(driver.state, containers={stopped})


def _garm_running(state: testing.State) -> bool:
    status = state.get_container("garm").service_statuses["garm"]
    return status == ops.pebble.ServiceStatus.ACTIVE


def test_changed_provider_restarts_garm(driver: CharmDriver):
    deploy(driver)
    cfg = configurator("cfg-a", relation_id=1)
    driver.add_configurator(cfg)
    _stop_garm(driver)
    unchanged = driver.run(driver.ctx.on.update_status())
    assert not _garm_running(unchanged)
    out = driver.change_relation(cfg.relation, openstack_region_name="RegionTwo")
    assert _garm_running(out)
    assert '"region_name":"RegionTwo"' in planned_env(out)["GARM_PROVIDERS_JSON"]


def test_changed_database_restarts_garm(driver: CharmDriver):
    deploy(driver)
    _stop_garm(driver)
    relation = testing.Relation(
        "postgresql",
        id=30,
        remote_app_data={"endpoints": "pg:5432", "username": "u", "password": "p"},
    )
    driver.state = dataclasses.replace(driver.state, relations={relation})
    out = driver.run(driver.ctx.on.relation_changed(relation))
    assert _garm_running(out)
    assert planned_env(out)["GARM_DB_BACKEND"] == "postgresql"


def test_ingress_url_becomes_controller_base(driver: CharmDriver, garm: GarmEmulator):
    deploy(driver)
    for url in ("https://garm.example.com/", "https://garm.example.com"):
        ingress = testing.Relation(
            "ingress", id=40, remote_app_data={"ingress": json.dumps({"url": url})}
        )
        others = {r for r in driver.state.relations if r.id != 40}
        driver.state = dataclasses.replace(driver.state, relations={*others, ingress})
        out = driver.run(driver.ctx.on.relation_changed(ingress))
        assert planned_env(out)["APP_BASE_URL"] == "https://garm.example.com"
        assert garm.controller()["agent_url"] == "https://garm.example.com/agent"
        assert garm.controller()["webhook_url"] == "https://garm.example.com/webhooks"


# --- database --------------------------------------------------------------------------------


def test_postgresql_incomplete_without_plan_waits(garm: GarmEmulator, tmp_path: Path):
    relation = testing.Relation("postgresql", id=30)
    driver = CharmDriver(garm, base_state(tmp_path, relations={relation}))
    out = driver.run(driver.ctx.on.install())
    assert out.unit_status == ops.WaitingStatus("Waiting for postgresql relation data")
    assert json.loads(out.get_relation(30).local_app_data["requested-secrets"]) == [
        "username",
        "password",
    ]


def test_postgresql_switch_keeps_plan_until_complete_then_warns(
    driver: CharmDriver, caplog: pytest.LogCaptureFixture
):
    deploy(driver)
    relation = testing.Relation("postgresql", id=30)
    driver.state = dataclasses.replace(driver.state, relations={relation})
    incomplete = driver.run(driver.ctx.on.relation_joined(relation))
    assert planned_env(incomplete)["GARM_DB_BACKEND"] == "sqlite3"
    complete = dataclasses.replace(
        relation,
        remote_app_data={
            "endpoints": "pg.internal:5433,pg2.internal:5432",
            "username": "garm_user",
            "password": "pg-secret-pass",
            "database": "garm",
        },
    )
    driver.state = dataclasses.replace(driver.state, relations={complete})
    caplog.clear()
    out = driver.run(driver.ctx.on.relation_changed(complete))
    env = planned_env(out)
    assert env["GARM_DB_BACKEND"] == "postgresql"
    assert env["POSTGRESQL_DB_HOSTNAME"] == "pg.internal"
    assert env["POSTGRESQL_DB_PORT"] == "5433"
    assert env["POSTGRESQL_DB_SSLMODE"] == "prefer"
    assert "not migrated" in caplog.text
    assert "pg-secret-pass" not in caplog.text


# --- configurators ---------------------------------------------------------------------------


def test_two_configurators_create_credentials_entities_and_scalesets(
    driver: CharmDriver, garm: GarmEmulator, caplog: pytest.LogCaptureFixture
):
    deploy(driver)
    a = configurator("cfg-a", relation_id=1, org="org-a", labels="linux,x64")
    b = configurator("cfg-b", relation_id=2, org="org-b", labels="jammy", app_id="102")
    driver.add_configurator(a)
    out = driver.add_configurator(b)
    assert out.unit_status == ops.ActiveStatus()
    assert planned_providers(out) == ["cfg-a-0", "cfg-b-0"]
    assert sorted(garm.providers) == ["cfg-a-0", "cfg-b-0"]
    assert live_names(garm) == ["cfg-a-runners-18515357", "cfg-b-runners-" + _hash(["jammy"])]
    assert sorted(c["name"] for c in garm.credentials()) == ["app-101-202", "app-102-202"]
    assert sorted(o["name"] for o in garm.organizations()) == ["org-a", "org-b"]
    record = next(s for s in out.secrets if s.label == "garm-providers")
    assert record.tracked_content["providers"] == planned_env(out)["GARM_PROVIDERS_JSON"]
    assert_no_secret_logged(caplog, out)


# What a v0 database provider answers: endpoints and plaintext credentials.
POSTGRESQL_ANSWER = {"endpoints": "pg:5432", "username": "u", "password": "pg-converged-pass"}
register_secret(POSTGRESQL_ANSWER["password"])


@pytest.mark.parametrize("database", ["answered", "pending"])
def test_converged_hook_makes_no_write(driver: CharmDriver, garm: GarmEmulator, database: str):
    deploy(driver)
    driver.add_configurator(configurator("cfg-a", relation_id=1))
    # Behind an ingress, with PostgreSQL related (answered, or not yet: GARM stays on SQLite).
    answer = POSTGRESQL_ANSWER if database == "answered" else {}
    for relation in (
        testing.Relation(
            "ingress", id=40, remote_app_data={"ingress": json.dumps({"url": "http://garm.test"})}
        ),
        testing.Relation("postgresql", id=30, remote_app_data=answer),
    ):
        driver.state = dataclasses.replace(
            driver.state, relations={*driver.state.relations, relation}
        )
        driver.run(driver.ctx.on.relation_changed(relation))
    out = driver.run(driver.ctx.on.update_status())
    assert out.unit_status == ops.ActiveStatus()
    garm.clear_requests()
    replans = driver.replans
    for _ in range(3):
        driver.run(driver.ctx.on.update_status())
        assert garm.writes() == []
        assert driver.replans == replans
        # Nothing Juju keeps is rewritten either: the same value still fires relation-changed.
        assert driver.juju_writes() == {}
        # The workload is read once and handed on: the plan (log targets, database, providers,
        # the layer), the pushed entrypoint and the garm-agent manifest.
        assert driver.plan_reads == 1
        assert sorted(driver.pulls) == sorted(
            [pebble_layer.ENTRYPOINT_PATH, agent_image.MANIFEST_PATH]
        )


def test_relation_without_data_does_not_reconcile_to_zero(driver: CharmDriver, garm: GarmEmulator):
    deploy(driver)
    driver.add_configurator(configurator("cfg-a", relation_id=1))
    before = live_names(garm)
    empty = testing.Relation("garm-configurator", remote_app_name="cfg-new", id=9)
    driver.state = dataclasses.replace(driver.state, relations={*driver.state.relations, empty})
    garm.clear_requests()
    out = driver.run(driver.ctx.on.relation_joined(empty, remote_unit=0))
    # The silent configurator is named; the others' objects stay as they are.
    assert out.unit_status == ops.ActiveStatus("cfg-new: waiting for relation data")
    assert live_names(garm) == before
    assert garm.writes() == []


@pytest.mark.parametrize(
    "bad",
    [
        {"max_runner": "four"},
        {"github_app_id": "12x"},
        {"image_id": ""},
        {"labels": "linux\nx64"},
        {"pre_install_scripts": "{not json"},
    ],
    ids=["non-numeric-count", "non-numeric-id", "missing-key", "newline", "malformed-json"],
)
def test_bad_input_is_reported_and_deletes_nothing(
    driver: CharmDriver, garm: GarmEmulator, caplog: pytest.LogCaptureFixture, bad: dict[str, str]
):
    deploy(driver)
    good = configurator("cfg-a", relation_id=1, org="org-a")
    other = configurator("cfg-b", relation_id=2, org="org-b", labels="jammy", app_id="102")
    driver.add_configurator(good)
    driver.add_configurator(other)
    before = {
        "scalesets": live_names(garm),
        "credentials": sorted(c["name"] for c in garm.credentials()),
        "orgs": sorted(o["name"] for o in garm.organizations()),
    }
    caplog.clear()
    out = driver.change_relation(other.relation, **bad)
    for _ in range(2):
        garm.advance(timedelta(seconds=30))
        out = driver.run(driver.ctx.on.update_status())
    assert isinstance(out.unit_status, ops.ActiveStatus)
    assert out.unit_status.message.startswith("invalid data from cfg-b/0 (")
    after = {
        "scalesets": live_names(garm),
        "credentials": sorted(c["name"] for c in garm.credentials()),
        "orgs": sorted(o["name"] for o in garm.organizations()),
    }
    assert after == before
    assert all(s.get("enabled") for s in garm.scalesets())
    assert "cfg-b-0" in planned_providers(out)
    assert "cfg-b/0" in caplog.text
    # Fixing the data returns to plain Active without having touched anything.
    original = other.relation.remote_units_data[0]
    out = driver.change_relation(other.relation, **{k: original.get(k, "") for k in bad})
    assert out.unit_status == ops.ActiveStatus()


def test_scaleset_of_a_removed_configurator_is_still_swept(
    driver: CharmDriver, garm: GarmEmulator
):
    deploy(driver)
    driver.add_configurator(configurator("cfg-a", relation_id=1, org="org-a"))
    b = configurator("cfg-b", relation_id=2, org="org-b", labels="jammy", app_id="102")
    driver.add_configurator(b)
    driver.remove_relation(b.relation)
    for _ in range(3):
        garm.advance(timedelta(seconds=30))
        driver.run(driver.ctx.on.update_status())
    assert live_names(garm) == ["cfg-a-runners-18515357"]


# --- changeover and provider retention -------------------------------------------------------


def test_label_change_by_replacement(driver: CharmDriver, garm: GarmEmulator):
    deploy(driver)
    cfg = configurator("cfg-a", relation_id=1)
    driver.add_configurator(cfg)
    garm.advance(timedelta(seconds=30))
    garm.advance(timedelta(seconds=30))
    out = driver.change_relation(cfg.relation, labels="linux,x64,noble")
    assert out.unit_status == ops.ActiveStatus("cfg-a-runners: creating replacement")
    out = driver.run(driver.ctx.on.update_status())
    assert out.unit_status.message.startswith("cfg-a-runners: draining")
    for _ in range(4):
        garm.advance(timedelta(seconds=30))
    out = driver.run(driver.ctx.on.update_status())
    assert out.unit_status == ops.ActiveStatus()
    assert live_names(garm) == ["cfg-a-runners-" + _hash(["linux", "x64", "noble"])]


def test_departed_configurator_provider_kept_until_scaleset_gone(
    driver: CharmDriver, garm: GarmEmulator, tmp_path: Path
):
    deploy(driver)
    a = configurator("cfg-a", relation_id=1, org="org-a")
    b = configurator("cfg-b", relation_id=2, org="org-b", labels="jammy", app_id="102")
    driver.add_configurator(a)
    driver.add_configurator(b)
    garm.advance(timedelta(seconds=30))
    garm.advance(timedelta(seconds=30))
    b_live = "cfg-b-runners-" + _hash(["jammy"])
    runner = garm.instances(b_live)[0]["name"]
    garm.mark_busy(runner)
    out = driver.remove_relation(b.relation)
    draining = ops.ActiveStatus("cfg-b-runners: draining 1 runner (no longer configured)")
    assert out.unit_status == draining
    assert "cfg-b-0" in planned_providers(out)
    assert "cfg-b-0" in garm.providers
    for _ in range(3):
        out = driver.run(driver.ctx.on.update_status())
        assert "cfg-b-0" in planned_providers(out)
        assert out.unit_status == draining
    # A pod restart mid-drain: a fresh container with no plan, the same record.
    fresh = base_state(tmp_path)
    driver.state = dataclasses.replace(out, containers=fresh.containers)
    out = driver.run(driver.ctx.on.pebble_ready(driver.state.get_container("garm")))
    assert "cfg-b-0" in planned_providers(out)
    assert "cfg-b-0" in garm.providers
    garm.finish_job(runner)
    # The scale set is disabled: GARM notices the job end in its consolidation loop only.
    garm.advance(CONSOLIDATION_INTERVAL)
    for _ in range(3):
        out = driver.run(driver.ctx.on.update_status())
        garm.advance(timedelta(seconds=30))
    assert b_live not in live_names(garm)
    # The trim is written in the hook that saw the scale set gone; the next replan applies it.
    out = driver.run(driver.ctx.on.update_status())
    assert out.unit_status == ops.ActiveStatus()
    assert planned_providers(out) == ["cfg-a-0"]
    assert garm.providers == ["cfg-a-0"]


def test_removing_last_configurator_drains_and_trims(driver: CharmDriver, garm: GarmEmulator):
    deploy(driver)
    a = configurator("cfg-a", relation_id=1)
    driver.add_configurator(a)
    garm.advance(timedelta(seconds=30))
    out = driver.remove_relation(a.relation)
    assert planned_providers(out) == ["cfg-a-0"]
    for _ in range(4):
        garm.advance(timedelta(seconds=30))
        out = driver.run(driver.ctx.on.update_status())
    assert live_names(garm) == []
    out = driver.run(driver.ctx.on.update_status())
    assert planned_providers(out) == []
    assert out.unit_status == ops.WaitingStatus("Waiting for garm-configurator relation")


# --- the configurator's phases ----------------------------------------------------------------


def test_a_configurator_without_its_image_yet_is_a_wait(driver: CharmDriver, garm: GarmEmulator):
    deploy(driver)
    cfg = configurator("cfg-a", relation_id=1, units=2)
    out = driver.add_configurator(first_phase(cfg))
    # Said once for the configurator, as a wait: not "invalid data".
    assert out.unit_status == ops.ActiveStatus("cfg-a-runners: waiting for an image from cfg-a")
    assert live_names(garm) == []
    assert garm.credentials() == []
    # Its second phase: image, provider and App; the scale set is created, the wait is gone.
    out = driver.change_relation(out.get_relation(1), **cfg.relation.remote_units_data[0])
    out = driver.run(driver.ctx.on.update_status())
    assert out.unit_status == ops.ActiveStatus()
    assert live_names(garm) == ["cfg-a-runners-18515357"]


def test_a_configurator_back_in_its_first_phase_holds_what_it_runs(
    driver: CharmDriver, garm: GarmEmulator
):
    deploy(driver)
    cfg = configurator("cfg-a", relation_id=1)
    driver.add_configurator(cfg)
    assert live_names(garm) == ["cfg-a-runners-18515357"]
    phase1 = first_phase(cfg).relation.remote_units_data[0]
    relation = dataclasses.replace(driver.state.get_relation(1), remote_units_data={0: phase1})
    driver.state = dataclasses.replace(
        driver.state, relations={*(r for r in driver.state.relations if r.id != 1), relation}
    )
    garm.clear_requests()
    out = driver.run(driver.ctx.on.relation_changed(relation, remote_unit=0))
    assert out.unit_status == ops.ActiveStatus("cfg-a-runners: waiting for an image from cfg-a")
    assert garm.writes() == []
    assert live_names(garm) == ["cfg-a-runners-18515357"]
    assert planned_providers(out) == ["cfg-a-0"]


def test_malformed_scale_set_data_still_says_so(driver: CharmDriver):
    deploy(driver)
    # An image missing beside a published App is not the first phase: it is bad data.
    cfg = configurator("cfg-a", relation_id=1, extra={"image_id": ""})
    out = driver.add_configurator(cfg)
    assert out.unit_status == ops.ActiveStatus(
        "invalid data from cfg-a/0 (scale set fields missing: image)"
    )


# --- actions ---------------------------------------------------------------------------------


def test_get_credentials(driver: CharmDriver):
    deploy(driver)
    driver.ctx.run(driver.ctx.on.action("get-credentials"), driver.state)
    results = driver.ctx.action_results or {}
    assert results["username"] == "admin"
    assert results["email"] == "admin@garm.local"
    assert results["full-name"] == "GARM Admin"
    assert len(results["password"]) == 20


def test_get_credentials_before_they_exist(garm: GarmEmulator, tmp_path: Path):
    driver = CharmDriver(garm, base_state(tmp_path, leader=False))
    with pytest.raises(testing.ActionFailed, match="not available"):
        driver.ctx.run(driver.ctx.on.action("get-credentials"), driver.state)


def test_scaleset_status_action(driver: CharmDriver, garm: GarmEmulator):
    deploy(driver)
    driver.add_configurator(configurator("cfg-a", relation_id=1))
    garm.clear_requests()
    with driver._wired():  # pyright: ignore[reportPrivateUsage]
        driver.ctx.run(driver.ctx.on.action("scaleset-status"), driver.state)
    results = driver.ctx.action_results or {}
    assert results["count"] == 1
    lines = results["scalesets"].splitlines()
    assert lines[0].split() == [
        *("LOGICAL", "SCALESET", "ENABLED", "PHASE", "RUNNERS", "PROVIDER", "SCALING")
    ]
    assert lines[1].split()[:4] == ["cfg-a-runners", "cfg-a-runners-18515357", "true", "active"]
    assert lines[1].split()[-1] == "ok"
    assert garm.writes() == []


def test_scaleset_status_reads_no_configurator_secret(driver: CharmDriver):
    deploy(driver)
    driver.add_configurator(configurator("cfg-a", relation_id=1))
    driver.add_configurator(configurator("cfg-b", relation_id=2, org="org-b"))
    driver.run(driver.ctx.on.update_status())
    assert driver.tool_calls["secret_get"] > 1  # a pass reads the charm's own secrets
    results = driver.run_action("scaleset-status")
    assert results["count"] == 2
    # The admin credentials, to log in; none of the configurators' secrets.
    assert driver.tool_calls["secret_get"] == 1


def _advance_until(garm: GarmEmulator, reached: Callable[[], object]) -> None:
    """Let the emulator's GARM work, 30 s a step, until ``reached`` (at most ten minutes)."""
    for _ in range(20):
        if reached():
            return
        garm.advance(timedelta(seconds=30))
    raise AssertionError("the emulator never reached the awaited state")


IMAGE_GONE = (
    "failed to run command: failed to create instance in provider: failed to resolve image "
    "info: failed to find image with name or id ubuntu-24.04 and visibility 'public'"
)
IMAGE_GONE_SHOWN = "..." + IMAGE_GONE[-117:]


def test_a_runner_the_cloud_refuses_blocks_naming_the_scale_set(
    driver: CharmDriver, garm: GarmEmulator
):
    # The charm remembers a fault in the garm-peers databag, which Juju always provides.
    deploy(driver)
    driver.add_configurator(configurator("cfg-a", relation_id=1))
    garm.refuse_provider("CreateInstance", IMAGE_GONE)
    faulted = ops.BlockedStatus(f"cfg-a-runners: runners fail to start: {IMAGE_GONE_SHOWN}")
    _advance_until(garm, lambda: [i for i in garm.instances() if i["status"] == "error"])
    assert driver.run(driver.ctx.on.update_status()).unit_status == faulted
    # GARM deletes the failed runner and tries again: the fault is no longer listed, but the
    # charm remembers it until a runner comes up.
    _advance_until(garm, lambda: all(i["status"] != "error" for i in garm.instances()))
    assert driver.run(driver.ctx.on.update_status()).unit_status == faulted
    garm.clear_requests()
    with driver._wired():  # pyright: ignore[reportPrivateUsage]
        driver.ctx.run(driver.ctx.on.action("scaleset-status"), driver.state)
    results = driver.ctx.action_results or {}
    faults = results["runner-faults"].splitlines()
    assert faults[0].split() == ["RUNNER", "SCALESET", "FAULT"]
    assert faults[1].split()[:2] in (["-", "cfg-a-runners-18515357"],)
    assert faults[1].endswith(IMAGE_GONE_SHOWN)
    assert garm.writes() == []
    # The cloud is fixed: the next runner comes up and the status clears.
    garm.refuse_provider("CreateInstance", None)
    _advance_until(garm, lambda: [i for i in garm.instances() if i["status"] == "running"])
    assert driver.run(driver.ctx.on.update_status()).unit_status == ops.ActiveStatus()


def test_scaleset_status_lists_no_faults_when_every_runner_starts(
    driver: CharmDriver, garm: GarmEmulator
):
    deploy(driver)
    driver.add_configurator(configurator("cfg-a", relation_id=1))
    garm.add_instance("cfg-a-runners-18515357", status="running", runner_status="idle")
    with driver._wired():  # pyright: ignore[reportPrivateUsage]
        driver.ctx.run(driver.ctx.on.action("scaleset-status"), driver.state)
    results = driver.ctx.action_results or {}
    assert "runner-faults" not in results
    assert results["scalesets"].splitlines()[1].split()[4] == "1"


def test_scaleset_status_refused_on_non_leader(driver: CharmDriver):
    deploy(driver)
    state = dataclasses.replace(driver.state, leader=False)
    with pytest.raises(testing.ActionFailed, match="leader"):
        driver.ctx.run(driver.ctx.on.action("scaleset-status"), state)


def _hash(labels: list[str]) -> str:
    return hashlib.sha256(",".join(sorted(labels)).encode()).hexdigest()[:8]


# --- GARM failures ---------------------------------------------------------------------------


def test_garm_error_during_chain_reads_sync_failed(driver: CharmDriver, garm: GarmEmulator):
    deploy(driver)
    driver.add_configurator(configurator("cfg-a", relation_id=1))
    garm.fail_next("GET", r"/github/credentials", 500, count=1)
    out = driver.run(driver.ctx.on.update_status())
    assert out.unit_status == ops.WaitingStatus("GARM sync failed")
    # A pass that failed observed nothing: the provider stays published.
    assert planned_providers(out) == ["cfg-a-0"]
    assert driver.run(driver.ctx.on.update_status()).unit_status == ops.ActiveStatus()


def test_garm_error_on_readiness_or_first_run_reads_sync_failed(
    driver: CharmDriver, garm: GarmEmulator
):
    garm.fail_next("POST", r"/first-run", 500, count=1)
    out = driver.run(driver.ctx.on.install())
    assert out.unit_status == ops.WaitingStatus("GARM sync failed")
    assert not garm.controller().get("metadata_url")
    garm.fail_next("GET", r"/controller-info", 500, count=1)
    out = driver.run(driver.ctx.on.update_status())
    assert out.unit_status == ops.WaitingStatus("GARM sync failed")
    out = driver.run(driver.ctx.on.update_status())
    assert out.unit_status == ops.WaitingStatus("Waiting for garm-configurator relation")


def test_rejected_admin_credentials_block(driver: CharmDriver, garm: GarmEmulator):
    deploy(driver)
    garm.fail_next("POST", r"/auth/login", 401, count=1, error="Not Authorized", details="")
    out = driver.run(driver.ctx.on.update_status())
    assert out.unit_status == ops.BlockedStatus("GARM rejected the admin credentials")


def test_charmed_template_error_is_the_status(driver: CharmDriver, garm: GarmEmulator):
    deploy(driver)
    driver.add_configurator(configurator("cfg-a", relation_id=1))
    garm.fail_next("GET", r"/templates/\d+", 500, count=1)
    out = driver.run(driver.ctx.on.update_status())
    assert out.unit_status == ops.WaitingStatus("Failed to fetch base template data")


def test_scaleset_status_fails_naming_the_error_class(driver: CharmDriver, garm: GarmEmulator):
    deploy(driver)
    garm.fail_next("GET", r"/scalesets", 500, count=1)
    with driver._wired(), pytest.raises(testing.ActionFailed, match=r"\(GarmApiError\)"):  # pyright: ignore[reportPrivateUsage]
        driver.ctx.run(driver.ctx.on.action("scaleset-status"), driver.state)


def test_secret_remove_drops_the_named_revision(driver: CharmDriver):
    out = deploy(driver)
    secret = next(s for s in out.secrets if s.label == "garm-secrets")
    driver.run(driver.ctx.on.secret_remove(secret, revision=7))
    assert 7 in driver.ctx.removed_secret_revisions


def test_debug_ssh_joined_changed_departed_updates_charmed_template(
    driver: CharmDriver, garm: GarmEmulator
):
    deploy(driver)
    driver.add_configurator(configurator("cfg-a", relation_id=1))
    base = garm.template_body("github_linux")
    charmed_id = garm.template_by_name("github_linux_charmed")["id"]
    tmate = {"host": "tmate.internal", "port": "10022", "rsa_fingerprint": "SHA256:r"}
    tmate["ed25519_fingerprint"] = "SHA256:e"
    relation = testing.Relation("debug-ssh", id=50, remote_units_data={0: tmate})
    driver.state = dataclasses.replace(driver.state, relations={*driver.state.relations, relation})
    driver.run(driver.ctx.on.relation_joined(relation, remote_unit=0))
    body = garm.template_body("github_linux_charmed").decode()
    assert body.splitlines()[0] == base.decode().splitlines()[0]
    assert "TMATE_SERVER_HOST=tmate.internal\nTMATE_SERVER_PORT=10022\n" in body
    # A host with a newline is refused: that server is skipped, nothing of it reaches runners.
    out = driver.change_relation(relation, host="evil\nrm -rf /")
    assert garm.template_body("github_linux_charmed") == base
    assert "debug-ssh" in out.unit_status.message
    driver.change_relation(relation, host="tmate2.internal")
    assert (
        "TMATE_SERVER_HOST=tmate2.internal" in garm.template_body("github_linux_charmed").decode()
    )
    driver.remove_relation(relation)
    assert garm.template_body("github_linux_charmed") == base
    assert garm.template_by_name("github_linux_charmed")["id"] == charmed_id


def test_pebble_defaults_in_the_plan_do_not_read_as_a_change(driver: CharmDriver):
    out = deploy(driver)
    container = out.get_container("garm")
    # Real Pebble fills in defaults when it combines layers; the charm must not replan for them.
    layer = pebble_layer.build_layer(planned_env(out))
    layer["checks"]["garm-alive"]["threshold"] = 3
    layer["services"]["garm"]["backoff-limit"] = "30s"
    defaulted = dataclasses.replace(
        container,
        layers={"garm": ops.pebble.Layer(layer)},
        service_statuses={"garm": ops.pebble.ServiceStatus.INACTIVE},
    )
    driver.state = dataclasses.replace(out, containers={defaulted})
    replans = driver.replans
    after = driver.run(driver.ctx.on.update_status())
    assert driver.replans == replans
    assert (
        after.get_container("garm").service_statuses["garm"] == ops.pebble.ServiceStatus.INACTIVE
    )


def test_a_plan_without_the_restart_on_check_failure_is_replanned_once(driver: CharmDriver):
    out = deploy(driver)
    container = out.get_container("garm")
    # The layer an earlier charm revision planned: GARM hanging waited for the container restart.
    layer = pebble_layer.build_layer(planned_env(out))
    del layer["services"]["garm"]["on-check-failure"]
    earlier = dataclasses.replace(container, layers={"garm": ops.pebble.Layer(layer)})
    driver.state = dataclasses.replace(out, containers={earlier})
    replans = driver.replans
    after = driver.run(driver.ctx.on.update_status())
    assert driver.replans == replans + 1
    service = after.get_container("garm").plan.services["garm"]
    assert service.on_check_failure == {"garm-alive": "restart"}
    driver.run(driver.ctx.on.update_status())
    assert driver.replans == replans + 1


def test_standby_disables_service_and_liveness_check(driver: CharmDriver):
    out = deploy(driver)
    driver.state = dataclasses.replace(out, leader=False)
    standby = driver.run(driver.ctx.on.update_status())
    plan = standby.get_container("garm").plan
    assert plan.services["garm"].startup == "disabled"
    assert plan.checks["garm-alive"].startup == ops.pebble.CheckStartup.DISABLED


def test_actions_leave_the_status_alone(driver: CharmDriver):
    out = deploy(driver)
    assert out.unit_status == ops.WaitingStatus("Waiting for garm-configurator relation")
    after = driver.ctx.run(driver.ctx.on.action("get-credentials"), out)
    assert after.unit_status == out.unit_status
    assert after.app_status == out.app_status


def test_a_hook_logs_no_http_library_lines(
    driver: CharmDriver, garm: GarmEmulator, caplog: pytest.LogCaptureFixture
):
    # Each log line is a juju-log process under Juju: httpx and httpcore stay at warnings.
    deploy(driver)
    driver.add_configurator(configurator("cfg-a", relation_id=1))
    caplog.clear()
    driver.run(driver.ctx.on.update_status())
    assert garm.requests
    assert [r.name for r in caplog.records if r.name.split(".")[0] in ("httpx", "httpcore")] == []
