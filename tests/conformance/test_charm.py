"""The charm's hooks against each GARM backend: what GARM itself received and answered.

The charm runs through ``ops.testing``; every call it makes passes the recording proxy, so the
assertions read what GARM saw (and its status codes), never the charm's own counters. On real
GARM, every replan of the charm restarts the GARM process through the charm's entrypoint with
the planned environment.
"""

from __future__ import annotations

import dataclasses
import json

import ops
from ops import testing

from garm import GarmClient, UpdateScaleSetParams
from tests.charm_driver import (
    CharmDriver,
    Configurator,
    configurator,
    first_phase,
    planned_providers,
)
from tests.conformance.conftest import Garm
from tests.real_garm.proxy import LOGIN_PATH, RecordedCall

SCALESETS = 10


def quiet_configurator(number: int, relation_id: int) -> Configurator:
    """A configurator with its own App, organisation and scale set, and no idle runner."""
    return configurator(
        f"cfg-{number}",
        relation_id=relation_id,
        org=f"org-{number}",
        app_id=str(1000 + number),
        installation_id=str(2000 + number),
        extra={"min_idle_runner": "0"},
    )


# The charm's unauthenticated readiness probe: GARM's 401 there means "initialised".
READINESS_PROBE = ("GET", "/controller-info", 401)


def refused(calls: list[RecordedCall]) -> list[tuple[str, str, int]]:
    """The calls GARM refused, as (method, path, status), the readiness probe aside."""
    found = [(c.method, c.path, c.status) for c in calls if c.refused]
    return [call for call in found if call != READINESS_PROBE]


def with_relation(state: testing.State, relation: testing.Relation) -> testing.State:
    """``state`` with ``relation`` in place of the one of the same id."""
    others = {r for r in state.relations if r.id != relation.id}
    return dataclasses.replace(state, relations={*others, relation})


def test_bootstrap_runs_first_run_once_and_reaches_waiting(driver: CharmDriver, charm_garm: Garm):
    assert driver.state.unit_status == ops.WaitingStatus("Waiting for garm-configurator relation")
    first_runs = [c for c in charm_garm.requests if c.path == "/first-run"]
    assert [(c.method, c.status) for c in first_runs] == [("POST", 200)]
    controller = charm_garm.controller()
    assert controller["metadata_url"].endswith("/api/v1/metadata")
    assert controller["callback_url"].endswith("/api/v1/callbacks")


INGRESS = testing.Relation(
    "ingress", id=40, remote_app_data={"ingress": json.dumps({"url": "http://garm.test"})}
)


def test_converged_hook_with_ten_scalesets_makes_no_write(driver: CharmDriver, charm_garm: Garm):
    driver.state = with_relation(driver.state, INGRESS)
    driver.run(driver.ctx.on.relation_changed(INGRESS))
    for number in range(SCALESETS):
        driver.add_configurator(quiet_configurator(number, relation_id=number + 1))
    driver.run(driver.ctx.on.update_status())
    assert len(charm_garm.scalesets()) == SCALESETS
    assert driver.state.unit_status == ops.ActiveStatus()
    assert charm_garm.controller()["metadata_url"] == "http://garm.test/api/v1/metadata"

    replans = driver.replans
    for _ in range(2):
        charm_garm.clear_requests()
        driver.run(driver.ctx.on.update_status())
        calls = charm_garm.requests
        assert [(c.method, c.path) for c in calls if c.method != "GET"] == [("POST", LOGIN_PATH)]
        assert refused(calls) == []
        assert driver.replans == replans
        # Nor a write Juju would see: relation data and secrets are left as they are.
        assert driver.juju_writes() == {}


def test_removing_a_configurator_converges_in_one_hook_without_a_refused_call(
    driver: CharmDriver, charm_garm: Garm
):
    kept = quiet_configurator(1, relation_id=1)
    gone = quiet_configurator(2, relation_id=2)
    driver.add_configurator(kept)
    driver.add_configurator(gone)
    driver.run(driver.ctx.on.update_status())
    gone_credential = next(c for c in charm_garm.credentials() if c["name"] == "app-1002-2002")
    gone_org = next(o for o in charm_garm.organizations() if o["name"] == "org-2")
    (gone_scaleset,) = [s for s in charm_garm.scalesets() if s["name"].startswith("cfg-2-")]

    charm_garm.clear_requests()
    driver.remove_relation(gone.relation)

    calls = charm_garm.requests
    assert refused(calls) == []
    assert [c.path for c in calls if c.method == "DELETE"] == [
        f"/scalesets/{gone_scaleset['id']}",
        f"/organizations/{gone_org['id']}",
        f"/github/credentials/{gone_credential['id']}",
    ]
    assert [o["name"] for o in charm_garm.organizations()] == ["org-1"]
    assert [c["name"] for c in charm_garm.credentials()] == ["app-1001-2001"]
    assert [s["name"].split("-")[1] for s in charm_garm.scalesets()] == ["1"]

    charm_garm.clear_requests()
    driver.run(driver.ctx.on.update_status())
    assert [c.method for c in charm_garm.requests if c.method != "GET"] == ["POST"]


def test_replan_restarts_garm_with_the_published_providers(driver: CharmDriver, charm_garm: Garm):
    driver.add_configurator(quiet_configurator(1, relation_id=1))
    assert charm_garm.providers() == ["cfg-1-0"]
    cfg = quiet_configurator(2, relation_id=2)
    driver.add_configurator(cfg)
    assert sorted(charm_garm.providers()) == ["cfg-1-0", "cfg-2-0"]
    assert driver.state.unit_status == ops.ActiveStatus()


def test_a_lost_provider_record_is_rebuilt_from_what_garm_runs_with(
    driver: CharmDriver, charm_garm: Garm
):
    cfg = quiet_configurator(1, relation_id=1)
    driver.add_configurator(cfg)
    (live,) = charm_garm.scalesets()
    assert charm_garm.providers() == ["cfg-1-0"]
    # The record is gone, and the configurator publishes no provider while it waits for an
    # image: only GARM's plan still says which provider the live scale set needs.
    phase1 = dataclasses.replace(
        driver.state.get_relation(1),
        remote_units_data=first_phase(cfg).relation.remote_units_data,
    )
    state = with_relation(driver.state, phase1)
    driver.state = dataclasses.replace(
        state, secrets={s for s in state.secrets if s.label != "garm-providers"}
    )
    replans = driver.replans

    out = driver.run(driver.ctx.on.relation_changed(phase1, remote_unit=0))
    out = driver.run(driver.ctx.on.update_status())

    assert out.unit_status == ops.ActiveStatus("cfg-1-runners: waiting for an image from cfg-1")
    assert driver.replans == replans
    assert planned_providers(out) == ["cfg-1-0"]
    assert charm_garm.providers() == ["cfg-1-0"]
    assert [s["name"] for s in charm_garm.scalesets()] == [live["name"]]
    record = next(s for s in out.secrets if s.label == "garm-providers")
    content = record.latest_content or record.tracked_content
    assert [p["unit_name"] for p in json.loads(content["providers"])] == ["cfg-1-0"]


def test_a_held_configurator_keeps_its_organisation_and_credential_without_a_scale_set(
    driver: CharmDriver, charm_garm: Garm
):
    driver.add_configurator(quiet_configurator(1, relation_id=1))
    held = quiet_configurator(2, relation_id=2)
    driver.add_configurator(held)
    (scaleset,) = [s for s in charm_garm.scalesets() if s["name"].startswith("cfg-2-")]
    (org,) = [o for o in charm_garm.organizations() if o["name"] == "org-2"]
    assert charm_garm.admin is not None
    with GarmClient(charm_garm.url) as client:
        client.login(*charm_garm.admin)
        # Its scale set is deleted in GARM by hand, so no live scale set protects its
        # organisation; then its configurator publishes bad data and is held.
        client.update_scaleset(scaleset["id"], UpdateScaleSetParams(enabled=False))
        client.delete_scaleset(scaleset["id"])
        charm_garm.clear_requests()
        out = driver.change_relation(held.relation, max_runner="four")
        assert out.unit_status.message.startswith("invalid data from cfg-2/0 (")
        assert [c for c in charm_garm.requests if c.method == "DELETE"] == []
        assert sorted(o["name"] for o in charm_garm.organizations()) == ["org-1", "org-2"]

        # Its organisation goes too, by hand: only the hold keeps its credential now.
        client.delete_organization(org["id"])
        charm_garm.clear_requests()
        driver.run(driver.ctx.on.update_status())
    assert [c for c in charm_garm.requests if c.method == "DELETE"] == []
    assert sorted(c["name"] for c in charm_garm.credentials()) == [
        "app-1001-2001",
        "app-1002-2002",
    ]
