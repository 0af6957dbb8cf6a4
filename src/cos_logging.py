"""Requirer side of the ``loki_push_api`` interface (relation ``logging``), with Pebble forwarding.

Each Loki unit publishes ``endpoint``, a JSON object ``{"url": "<push URL>"}``. The charm
forwards the GARM service's output there through Pebble log targets (type ``loki``, services
``[garm]``), one target per distinct URL, named ``logging-<remote unit>``. When an endpoint goes
(its unit departs, or the relation is removed), its target is overridden with services
``[-all]``: Pebble cannot delete a target from a layer, and a target with no service forwards
nothing.

The leader publishes ``metadata`` (the Juju topology) and ``alert_rules`` (none: ``{}``) in the
application data, as the Loki charm expects of a requirer. Promtail is not involved, so nothing
else is needed.
"""

from __future__ import annotations

import json
import logging

import ops
from cosl import JujuTopology
from pydantic import BaseModel, ConfigDict, ValidationError

import workload

logger = logging.getLogger(__name__)

LOGGING_RELATION = "logging"
LAYER_LABEL = "garm-log-forwarding"
TARGET_PREFIX = "logging-"
DISABLED_SERVICES = ["-all"]


class LokiEndpoint(BaseModel):
    """The ``endpoint`` value a Loki unit publishes (other keys ignored)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    url: str


class LoggingAppData(BaseModel):
    """What this application publishes to Loki."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metadata: dict[str, str]
    alert_rules: dict[str, object]

    def dump(self) -> dict[str, str]:
        """Return the databag: each field JSON-encoded."""
        return {
            "metadata": json.dumps(self.metadata),
            "alert_rules": json.dumps(self.alert_rules, sort_keys=True),
        }


def loki_endpoints(charm: ops.CharmBase) -> dict[str, str]:
    """Return ``{target name: push URL}`` for every Loki unit, one target per distinct URL."""
    endpoints: dict[str, str] = {}
    for relation in charm.model.relations[LOGGING_RELATION]:
        for unit in sorted(relation.units, key=lambda u: u.name):
            raw = relation.data[unit].get("endpoint")
            if not raw:
                continue
            try:
                url = LokiEndpoint.model_validate_json(raw).url
            except ValidationError:
                logger.warning("Ignoring %s: its 'endpoint' is not a JSON url object", unit.name)
                continue
            if url and url not in endpoints.values():
                endpoints[target_name(unit.name)] = url
    return endpoints


def target_name(unit_name: str) -> str:
    """The Pebble log target for a Loki unit: ``loki/0`` -> ``logging-loki-0``."""
    return TARGET_PREFIX + unit_name.replace("/", "-")


def build_log_targets(
    endpoints: dict[str, str], topology: JujuTopology, current: dict[str, ops.pebble.LogTarget]
) -> dict[str, ops.pebble.LogTargetDict]:
    """Build the log targets that bring the plan to ``endpoints``.

    Args:
        endpoints: ``{target name: push URL}`` from :func:`loki_endpoints`.
        topology: labels every log line gets.
        current: the log targets of the current plan.

    Returns:
        A target per endpoint, and a disabled target for each of ours the plan still forwards
        to but no endpoint names any more.
    """
    labels = {
        "product": "Juju",
        "charm": topology.charm_name or "",
        "juju_model": topology.model,
        "juju_model_uuid": topology.model_uuid,
        "juju_application": topology.application,
        "juju_unit": topology.unit or "",
        "job": f"juju_{topology.identifier}",
    }
    targets: dict[str, ops.pebble.LogTargetDict] = {
        name: {
            "override": "replace",
            "type": "loki",
            "location": url,
            "services": [workload.SERVICE_NAME],
            "labels": labels,
        }
        for name, url in endpoints.items()
    }
    for name, target in current.items():
        ours = name.startswith(TARGET_PREFIX)
        if ours and name not in targets and target.services != DISABLED_SERVICES:
            targets[name] = {
                "override": "replace",
                "type": "loki",
                "location": target.location,
                "services": list(DISABLED_SERVICES),
            }
    return targets


def forward_logs(charm: ops.CharmBase, container: ops.Container, topology: JujuTopology) -> bool:
    """Make the plan's log targets match the ``logging`` relations; return whether it changed.

    Pebble must be reachable. Log targets take effect without a replan, so GARM keeps running.
    """
    current = dict(container.get_plan().log_targets)
    wanted = build_log_targets(loki_endpoints(charm), topology, current)
    changed = {
        name: target
        for name, target in wanted.items()
        if name not in current or current[name] != ops.pebble.LogTarget(name, target)
    }
    if not changed:
        return False
    logger.info("Updating %d Pebble log target(s) for Loki", len(changed))
    container.add_layer(LAYER_LABEL, {"log-targets": changed}, combine=True)
    return True


def publish(charm: ops.CharmBase, topology: JujuTopology) -> None:
    """On the leader, write the requirer's application data to every ``logging`` relation."""
    relations = charm.model.relations[LOGGING_RELATION]
    if not relations or not charm.unit.is_leader():
        return
    values = LoggingAppData(metadata=dict(topology.as_dict()), alert_rules={}).dump()
    for relation in relations:
        bag = relation.data[charm.app]
        for key, value in values.items():
            if bag.get(key) != value:
                bag[key] = value
