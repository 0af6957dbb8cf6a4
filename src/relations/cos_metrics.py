"""Provider side of the ``prometheus_scrape`` interface (relation ``metrics-endpoint``).

What the Prometheus charm reads:

- application data (leader only): ``scrape_jobs`` (one job for GARM's ``/metrics`` on port
  8080, its target a wildcard host that Prometheus expands to every unit that publishes an
  address), ``scrape_metadata`` (the Juju topology) and ``alert_rules`` (the rule files of
  ``src/relations/prometheus_alert_rules``, labelled with the topology by ``cosl``);
- unit data: ``prometheus_scrape_unit_address`` and ``prometheus_scrape_unit_name``.

Only the leader runs GARM, so only the leader publishes a unit address: a non-leader withdraws
its keys, and Prometheus scrapes exactly one target. The address and the running GARM move
together: the unit that stops GARM (a former leader, on its next hook) also withdraws the
address in that hook.

GARM serves ``/metrics`` without authentication (``disable_auth``); the pod port is reachable
inside the cluster only and the metrics carry no secret.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import ops
from cosl import JujuTopology
from cosl.rules import AlertRules
from pydantic import BaseModel, ConfigDict

from workload.pebble_layer import GARM_PORT

logger = logging.getLogger(__name__)

METRICS_RELATION = "metrics-endpoint"
METRICS_PATH = "/metrics"
JOB_NAME = "garm"
RULES_DIR = Path(__file__).with_name("prometheus_alert_rules")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StaticConfig(_Strict):
    """One ``static_configs`` entry: ``*`` stands for each unit's published address."""

    targets: list[str]


class ScrapeJob(_Strict):
    """One Prometheus scrape job, in the subset of keys the Prometheus charm accepts."""

    job_name: str
    metrics_path: str
    static_configs: list[StaticConfig]


class ScrapeMetadata(_Strict):
    """The Juju topology of the publishing application (``JujuTopology.as_dict``)."""

    model: str
    model_uuid: str
    application: str
    unit: str
    charm_name: str


class MetricsAppData(_Strict):
    """Application databag; every value travels as a JSON string."""

    scrape_jobs: list[ScrapeJob]
    scrape_metadata: ScrapeMetadata
    alert_rules: dict[str, Any]

    def dump(self) -> dict[str, str]:
        """Return the databag: each field JSON-encoded."""
        return {
            "scrape_jobs": json.dumps([job.model_dump() for job in self.scrape_jobs]),
            "scrape_metadata": json.dumps(self.scrape_metadata.model_dump()),
            "alert_rules": json.dumps(self.alert_rules, sort_keys=True),
        }


class MetricsUnitData(_Strict):
    """Unit databag of the unit Prometheus scrapes (the leader)."""

    prometheus_scrape_unit_address: str
    prometheus_scrape_unit_name: str

    def dump(self) -> dict[str, str]:
        """Return the databag."""
        return self.model_dump()


def scrape_job() -> ScrapeJob:
    """The one scrape job: GARM's ``/metrics`` on its API port of each published unit."""
    return ScrapeJob(
        job_name=JOB_NAME,
        metrics_path=METRICS_PATH,
        static_configs=[StaticConfig(targets=[f"*:{GARM_PORT}"])],
    )


def alert_rules(topology: JujuTopology, rules_dir: Path = RULES_DIR) -> dict[str, Any]:
    """Load the charm's alert rules with the topology labels ``cosl`` adds to each rule."""
    rules = AlertRules(query_type="promql", topology=topology)
    rules.add_path(rules_dir, recursive=False)
    return rules.as_dict()


def app_data(topology: JujuTopology, rules_dir: Path = RULES_DIR) -> MetricsAppData:
    """Build the application databag for ``topology``."""
    return MetricsAppData(
        scrape_jobs=[scrape_job()],
        scrape_metadata=ScrapeMetadata.model_validate(dict(topology.as_dict())),
        alert_rules=alert_rules(topology, rules_dir),
    )


def publish(charm: ops.CharmBase, topology: JujuTopology) -> None:
    """Write this unit's part of every ``metrics-endpoint`` relation.

    The leader writes the application data and its unit address; a non-leader removes any
    address it published while it was the leader.
    """
    relations = charm.model.relations[METRICS_RELATION]
    if not relations:
        return
    leader = charm.unit.is_leader()
    app_bag = app_data(topology).dump() if leader else {}
    for relation in relations:
        unit_bag = relation.data[charm.unit]
        if not leader:
            for key in MetricsUnitData.model_fields:
                unit_bag.pop(key, None)
            continue
        _update(relation.data[charm.app], app_bag)
        address = _address(charm, relation)
        if address is None:
            logger.warning("No bind address on relation %s yet: no scrape target", relation.id)
            continue
        unit = MetricsUnitData(
            prometheus_scrape_unit_address=address, prometheus_scrape_unit_name=charm.unit.name
        )
        _update(unit_bag, unit.dump())


def _address(charm: ops.CharmBase, relation: ops.Relation) -> str | None:
    address = charm.model.get_binding(relation).network.bind_address
    return str(address) if address is not None else None


def _update(bag: ops.RelationDataContent, values: dict[str, str]) -> None:
    """Set only the keys whose value differs, so an unchanged pass writes nothing."""
    for key, value in values.items():
        if bag.get(key) != value:
            bag[key] = value
