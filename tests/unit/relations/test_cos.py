"""The COS relations through the real charm in ``ops.testing``.

The exact databags of each relation, the Pebble log targets and the trace spans.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from cosl import DashboardPath40UID, LZMABase64
from ops import testing

from garm import path_template
from relations import cos_logging
from tests.charm_driver import CharmDriver, base_state, configurator
from tests.garm_emulator import GarmEmulator
from tests.log_secrets import SECRET_VALUES
from workload import pebble_layer

ROOT = Path(__file__).resolve().parents[3]
RULES_FILE = ROOT / "src" / "relations" / "prometheus_alert_rules" / "garm.rules"
LOKI_RULES_FILE = ROOT / "src" / "relations" / "loki_alert_rules" / "garm_security.rules"
DASHBOARD_FILE = ROOT / "src" / "relations" / "grafana_dashboards" / "garm.json"
LOKI_URL = "http://loki-0.loki-endpoints.cos.svc.cluster.local:3100/loki/api/v1/push"
OTHER_LOKI_URL = "http://loki-other:3100/loki/api/v1/push"


def offline(tmp_path: Path, *, leader: bool = True, **kwargs: Any) -> testing.State:
    """A unit whose Pebble is not reachable yet: the reconcile stops after the relation data."""
    state = base_state(tmp_path, leader=leader, **kwargs)
    container = dataclasses.replace(
        state.get_container(pebble_layer.CONTAINER_NAME), can_connect=False
    )
    return dataclasses.replace(state, containers={container})


def topology(state: testing.State, *, unit: str = "garm/0") -> dict[str, str]:
    return {
        "model": state.model.name,
        "model_uuid": state.model.uuid,
        "application": "garm",
        "unit": unit,
        "charm_name": "garm",
    }


def expected_alert_rules(state: testing.State, rules_file: Path = RULES_FILE) -> dict[str, Any]:
    """The rule file as Prometheus or Loki receives it: group renamed, topology labels added.

    Without cos-tool (here), cosl turns a LogQL rule's ``%%juju_topology%%`` into a matcher on
    ``job``; the receiving charm adds the topology matchers.
    """
    rules = yaml.safe_load(rules_file.read_text())
    prefix = f"{state.model.name}_{state.model.uuid[:8]}_garm"
    for group in rules["groups"]:
        group["name"] = f"{prefix}_{group['name']}_rules"
        for rule in group["rules"]:
            rule["expr"] = re.sub(r"%%juju_topology%%,?", 'job=~".+"', rule["expr"])
            rule["labels"] = {
                **rule.get("labels", {}),
                "juju_model": state.model.name,
                "juju_model_uuid": state.model.uuid,
                "juju_application": "garm",
                "juju_charm": "garm",
            }
    return rules


# --- metrics-endpoint ------------------------------------------------------------------------


def test_leader_publishes_scrape_job_metadata_alert_rules_and_its_address(tmp_path: Path):
    relation = testing.Relation("metrics-endpoint", remote_app_name="prometheus")
    ctx = testing.Context(_charm())
    state = offline(tmp_path, relations={relation})
    out = ctx.run(ctx.on.relation_joined(relation, remote_unit=0), state)

    published = out.get_relation(relation.id)
    assert set(published.local_app_data) == {"scrape_jobs", "scrape_metadata", "alert_rules"}
    assert json.loads(published.local_app_data["scrape_jobs"]) == [
        {
            "job_name": "garm",
            "metrics_path": "/metrics",
            "static_configs": [{"targets": ["*:8080"]}],
        }
    ]
    assert json.loads(published.local_app_data["scrape_metadata"]) == topology(state)
    assert json.loads(published.local_app_data["alert_rules"]) == expected_alert_rules(state)
    assert published.local_unit_data == {
        **testing.Relation("x").local_unit_data,  # Juju's own keys (ingress/egress addresses)
        "prometheus_scrape_unit_address": "192.0.2.0",
        "prometheus_scrape_unit_name": "garm/0",
    }


def test_non_leader_publishes_no_app_data_and_withdraws_its_scrape_target(tmp_path: Path):
    # This unit led before: its address is still in its databag, next to Juju's own keys.
    relation = testing.Relation(
        "metrics-endpoint",
        remote_app_name="prometheus",
        local_unit_data={
            "prometheus_scrape_unit_address": "192.0.2.0",
            "prometheus_scrape_unit_name": "garm/0",
            "other": "kept",
        },
    )
    ctx = testing.Context(_charm())
    out = ctx.run(ctx.on.update_status(), offline(tmp_path, leader=False, relations={relation}))

    published = out.get_relation(relation.id)
    assert published.local_app_data == {}
    assert "prometheus_scrape_unit_address" not in published.local_unit_data
    assert "prometheus_scrape_unit_name" not in published.local_unit_data
    assert published.local_unit_data["other"] == "kept"


def test_new_leader_takes_over_the_scrape_target(tmp_path: Path):
    relation = testing.Relation("metrics-endpoint", remote_app_name="prometheus")
    ctx = testing.Context(_charm())
    follower = ctx.run(
        ctx.on.relation_joined(relation, remote_unit=0),
        offline(tmp_path, leader=False, relations={relation}),
    )
    assert (
        "prometheus_scrape_unit_address" not in follower.get_relation(relation.id).local_unit_data
    )

    out = ctx.run(ctx.on.leader_elected(), dataclasses.replace(follower, leader=True))
    published = out.get_relation(relation.id)
    assert published.local_unit_data["prometheus_scrape_unit_address"] == "192.0.2.0"
    assert json.loads(published.local_app_data["scrape_metadata"]) == topology(out)


def test_an_unchanged_pass_writes_the_same_databag(tmp_path: Path):
    relation = testing.Relation("metrics-endpoint", remote_app_name="prometheus")
    ctx = testing.Context(_charm())
    first = ctx.run(
        ctx.on.relation_joined(relation, remote_unit=0), offline(tmp_path, relations={relation})
    )
    second = ctx.run(ctx.on.update_status(), first)
    assert (
        second.get_relation(relation.id).local_app_data
        == first.get_relation(relation.id).local_app_data
    )


# --- grafana-dashboard -----------------------------------------------------------------------


def test_leader_publishes_the_dashboard_as_grafana_reads_it(tmp_path: Path):
    relation = testing.Relation("grafana-dashboard", remote_app_name="grafana")
    ctx = testing.Context(_charm())
    state = offline(tmp_path, relations={relation})
    out = ctx.run(ctx.on.relation_joined(relation, remote_unit=0), state)

    bag = out.get_relation(relation.id).local_app_data
    assert set(bag) == {"dashboards"}
    data = json.loads(bag["dashboards"])
    assert set(data) == {"templates", "uuid"}
    (key,) = data["templates"]
    assert key == "file:garm"
    template = data["templates"][key]
    assert {k: v for k, v in template.items() if k != "content"} == {
        "charm": "garm",
        "juju_topology": {
            "model": state.model.name,
            "model_uuid": state.model.uuid,
            "application": "garm",
        },
        "inject_dropdowns": True,
        "dashboard_alt_uid": template["dashboard_alt_uid"],
    }
    assert len(template["dashboard_alt_uid"]) == 16
    dashboard = json.loads(LZMABase64.decompress(template["content"]))
    source = json.loads(DASHBOARD_FILE.read_text())
    assert dashboard["uid"] == DashboardPath40UID.generate(
        "garm", "src/grafana_dashboards/garm.json"
    )
    assert dashboard["tags"] == [*source["tags"], "charm: garm"]
    assert dashboard["panels"] == source["panels"]

    # The same dashboard gives the same value: an unchanged pass changes nothing.
    again = ctx.run(ctx.on.update_status(), out)
    assert again.get_relation(relation.id).local_app_data == bag


def test_non_leader_publishes_no_dashboard(tmp_path: Path):
    relation = testing.Relation("grafana-dashboard", remote_app_name="grafana")
    ctx = testing.Context(_charm())
    out = ctx.run(
        ctx.on.relation_joined(relation, remote_unit=0),
        offline(tmp_path, leader=False, relations={relation}),
    )
    assert out.get_relation(relation.id).local_app_data == {}


def test_every_dashboard_query_reads_prometheus_with_the_topology_dropdowns():
    dashboard = json.loads(DASHBOARD_FILE.read_text())
    assert "templating" not in dashboard  # Grafana adds the topology and datasource dropdowns
    for panel in dashboard["panels"]:
        assert panel["datasource"] == "${prometheusds}"
        for target in panel["targets"]:
            assert 'juju_application=~"$juju_application"' in target["expr"]


# --- logging ---------------------------------------------------------------------------------


def loki_relation(**units: str) -> testing.Relation:
    return testing.Relation(
        "logging",
        remote_app_name="loki",
        remote_units_data={
            int(n): {"endpoint": json.dumps({"url": url})} for n, url in units.items()
        },
    )


def log_targets(state: testing.State) -> dict[str, dict[str, Any]]:
    plan = state.get_container(pebble_layer.CONTAINER_NAME).plan
    return {name: dict(target.to_dict()) for name, target in plan.log_targets.items()}


def expected_labels(state: testing.State, unit: str) -> dict[str, str]:
    return {
        "product": "Juju",
        "charm": "garm",
        "juju_model": state.model.name,
        "juju_model_uuid": state.model.uuid,
        "juju_application": "garm",
        "juju_unit": unit,
        "job": f"juju_{state.model.name}_{state.model.uuid[:8]}_garm",
    }


def test_logging_forwards_the_garm_service_to_each_distinct_loki_url(tmp_path: Path):
    # Units 0 and 1 share a URL (a coordinator): one target, named after the first.
    relation = loki_relation(**{"0": LOKI_URL, "1": LOKI_URL, "2": OTHER_LOKI_URL})
    ctx = testing.Context(_charm())
    state = base_state(tmp_path, leader=False, relations={relation})
    out = ctx.run(ctx.on.relation_changed(relation, remote_unit=0), state)

    labels = expected_labels(state, "garm/0")
    assert log_targets(out) == {
        "logging-loki-0": {
            "override": "replace",
            "type": "loki",
            "location": LOKI_URL,
            "services": ["garm"],
            "labels": labels,
        },
        "logging-loki-2": {
            "override": "replace",
            "type": "loki",
            "location": OTHER_LOKI_URL,
            "services": ["garm"],
            "labels": labels,
        },
    }
    # The requirer's application data is the leader's: a follower writes none.
    assert out.get_relation(relation.id).local_app_data == {}


def test_logging_disables_the_target_of_a_departed_unit_and_all_on_broken(tmp_path: Path):
    relation = loki_relation(**{"0": LOKI_URL, "2": OTHER_LOKI_URL})
    ctx = testing.Context(_charm())
    state = ctx.run(
        ctx.on.relation_changed(relation, remote_unit=0),
        base_state(tmp_path, leader=False, relations={relation}),
    )

    departed = dataclasses.replace(relation, remote_units_data={0: relation.remote_units_data[0]})
    state = dataclasses.replace(state, relations={departed})
    state = ctx.run(ctx.on.relation_departed(departed, remote_unit=2, departing_unit=2), state)
    targets = log_targets(state)
    assert targets["logging-loki-0"]["services"] == ["garm"]
    assert targets["logging-loki-2"] == {
        "override": "replace",
        "type": "loki",
        "location": OTHER_LOKI_URL,
        "services": ["-all"],
    }

    state = ctx.run(ctx.on.relation_broken(departed), state)
    targets = log_targets(state)
    assert {name: t["services"] for name, t in targets.items()} == {
        "logging-loki-0": ["-all"],
        "logging-loki-2": ["-all"],
    }
    # Once disabled, a later pass leaves the layer alone.
    layers = state.get_container(pebble_layer.CONTAINER_NAME).layers
    again = ctx.run(ctx.on.update_status(), dataclasses.replace(state, relations=set()))
    assert again.get_container(pebble_layer.CONTAINER_NAME).layers == layers


def test_logging_ignores_a_unit_whose_endpoint_is_not_json(tmp_path: Path, caplog):
    relation = testing.Relation(
        "logging",
        remote_app_name="loki",
        remote_units_data={
            0: {"endpoint": "not json"},
            1: {"endpoint": json.dumps({"url": LOKI_URL})},
        },
    )
    ctx = testing.Context(_charm())
    out = ctx.run(
        ctx.on.relation_changed(relation, remote_unit=0),
        base_state(tmp_path, leader=False, relations={relation}),
    )
    assert set(log_targets(out)) == {"logging-loki-1"}
    assert "Ignoring loki/0" in caplog.text


def test_leader_forwards_logs_and_publishes_requirer_metadata(garm: GarmEmulator, tmp_path: Path):
    relation = loki_relation(**{"0": LOKI_URL})
    state = base_state(tmp_path, relations={relation})
    driver = CharmDriver(garm, state)
    out = driver.run(driver.ctx.on.relation_changed(relation, remote_unit=0))

    assert log_targets(out)["logging-loki-0"]["services"] == ["garm"]
    bag = out.get_relation(relation.id).local_app_data
    assert json.loads(bag["metadata"]) == topology(state)
    assert json.loads(bag["alert_rules"]) == expected_alert_rules(state, LOKI_RULES_FILE)
    assert set(bag) == {"metadata", "alert_rules"}
    # The GARM service itself runs as before: the log layer is separate from GARM's.
    plan = out.get_container(pebble_layer.CONTAINER_NAME).plan
    assert plan.services[pebble_layer.SERVICE_NAME].startup == "enabled"
    assert cos_logging.LAYER_LABEL in out.get_container(pebble_layer.CONTAINER_NAME).layers


# --- charm tracing ---------------------------------------------------------------------------


def test_reconcile_steps_and_garm_calls_are_spans_without_values(
    garm: GarmEmulator, tmp_path: Path
):
    driver = CharmDriver(garm, base_state(tmp_path))
    driver.run(driver.ctx.on.install())
    spans = driver.ctx.trace_data
    names = [span.name for span in spans]
    for step in (
        "reconcile",
        "cos.publish",
        "cos.forward_logs",
        "reconcile.workload",
        "reconcile.garm",
    ):
        assert step in names
    assert "GARM GET /controller-info" in names
    assert "GARM POST /first-run" in names
    assert "GARM POST /auth/login" in names
    calls = [span for span in spans if span.name.startswith("GARM ")]
    for span in calls:
        attributes = dict(span.attributes or {})
        assert set(attributes) == {
            "http.request.method",
            "url.template",
            "http.response.status_code",
        }
    texts = [
        str(value)
        for span in spans
        for value in [span.name, *dict(span.attributes or {}).values()]
    ]
    leaked = [secret for secret in SECRET_VALUES if any(secret in text for text in texts)]
    assert not leaked


def test_each_step_of_the_chain_is_a_span(garm: GarmEmulator, tmp_path: Path):
    driver = CharmDriver(garm, base_state(tmp_path))
    driver.run(driver.ctx.on.install())
    driver.add_configurator(configurator("cfg-a", relation_id=1))
    names = [span.name for span in driver.ctx.trace_data]
    for step in (
        "reconcile.chain",
        "reconcile.controller_urls",
        "reconcile.credentials",
        "reconcile.entities",
        "reconcile.template",
        "reconcile.scalesets",
        "reconcile.deletions",
    ):
        assert step in names


@pytest.mark.parametrize(
    ("path", "route"),
    [
        ("/controller-info", "/controller-info"),
        ("/scalesets/12/instances", "/scalesets/{id}/instances"),
        ("/organizations/5b2f0e5c-1111-4a4a-9c9c-000000000000", "/organizations/{id}"),
        ("/instances/garm-abc123", "/instances/{id}"),
        ("/github/endpoints/github.com", "/github/endpoints/{id}"),
        ("/github/credentials", "/github/credentials"),
    ],
)
def test_span_names_carry_the_route_not_the_ids(path: str, route: str):
    assert path_template(path) == route


def _charm():
    from charm import GarmCharm

    return GarmCharm
