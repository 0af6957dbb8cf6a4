"""Requirer side of the ``loki_push_api`` interface (relation ``logging``), with Pebble forwarding.

Each Loki unit publishes ``endpoint``, a JSON object ``{"url": "<push URL>"}``. The charm
forwards the GARM service's output there through Pebble log targets (type ``loki``, services
``[garm]``), one target per distinct URL, named ``logging-<remote unit>``. When an endpoint goes
(its unit departs, or the relation is removed), its target is overridden with services
``[-all]``: Pebble cannot delete a target from a layer, and a target with no service forwards
nothing.

The charm's own log stays in ``juju debug-log``, except its security events
(``security_events``): :func:`push_security_events` sends each of those lines to every Loki
endpoint as it is logged, through Loki's push API, labelled with the topology and
``logger="garm-charm.security"``.

The leader publishes ``metadata`` (the Juju topology) and ``alert_rules`` (the LogQL rules of
``src/relations/loki_alert_rules``, labelled with the topology by ``cosl``) in the application
data, as the Loki charm expects of a requirer. Promtail is not involved, so nothing else is needed.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import httpx
import ops
from cosl import JujuTopology
from cosl.rules import AlertRules
from pydantic import BaseModel, ConfigDict, ValidationError

from vocabulary import security_events
from workload import pebble_layer

logger = logging.getLogger(__name__)

LOGGING_RELATION = "logging"
LAYER_LABEL = "garm-log-forwarding"
TARGET_PREFIX = "logging-"
DISABLED_SERVICES = ["-all"]
RULES_DIR = Path(__file__).with_name("loki_alert_rules")
LOGGER_LABEL = "logger"
# A hook waits at most this long per Loki endpoint for a security event to be taken.
PUSH_TIMEOUT = 5.0


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


def topology_labels(topology: JujuTopology) -> dict[str, str]:
    """The labels every line this unit sends to Loki gets, GARM's and the charm's alike."""
    return {
        "product": "Juju",
        "charm": topology.charm_name or "",
        "juju_model": topology.model,
        "juju_model_uuid": topology.model_uuid,
        "juju_application": topology.application,
        "juju_unit": topology.unit or "",
        "job": f"juju_{topology.identifier}",
    }


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
    labels = topology_labels(topology)
    targets: dict[str, ops.pebble.LogTargetDict] = {
        name: {
            "override": "replace",
            "type": "loki",
            "location": url,
            "services": [pebble_layer.SERVICE_NAME],
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


def forward_logs(
    charm: ops.CharmBase, container: ops.Container, plan: ops.pebble.Plan, topology: JujuTopology
) -> bool:
    """Make the plan's log targets match the ``logging`` relations; return whether it changed.

    ``plan`` is the container's plan as this hook read it. Pebble must be reachable. Log
    targets take effect without a replan, so GARM keeps running.
    """
    current = dict(plan.log_targets)
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
    values = LoggingAppData(
        metadata=dict(topology.as_dict()), alert_rules=alert_rules(topology)
    ).dump()
    for relation in relations:
        bag = relation.data[charm.app]
        for key, value in values.items():
            if bag.get(key) != value:
                bag[key] = value


def alert_rules(topology: JujuTopology, rules_dir: Path = RULES_DIR) -> dict[str, Any]:
    """Load the charm's LogQL alert rules with the topology labels ``cosl`` adds to each rule."""
    rules = AlertRules(query_type="logql", topology=topology)
    rules.add_path(rules_dir, recursive=False)
    return rules.as_dict()


class SecurityEventPusher(logging.Handler):
    """Sends each security event line to Loki's push API at every endpoint, as it is logged.

    A Loki that cannot be reached costs a warning, never the hook: the line is in the Juju log
    all the same.
    """

    def __init__(self, urls: list[str], labels: dict[str, str]) -> None:
        """Push to ``urls`` with ``labels`` on every line."""
        super().__init__(logging.INFO)
        self.urls = urls
        self.labels = {**labels, LOGGER_LABEL: security_events.LOGGER_NAME}

    def emit(self, record: logging.LogRecord) -> None:
        """Push the record's line (the JSON event) to every endpoint."""
        stream = {"stream": self.labels, "values": [[str(time.time_ns()), record.getMessage()]]}
        for url in self.urls:
            try:
                response = httpx.post(url, json={"streams": [stream]}, timeout=PUSH_TIMEOUT)
                response.raise_for_status()
            except httpx.HTTPError as exc:
                logger.warning("Cannot push a security event to Loki at %s: %s", url, exc)


def push_security_events(charm: ops.CharmBase, topology: JujuTopology) -> None:
    """Send this hook's security events to the Loki endpoints of the ``logging`` relations.

    The handler replaces any earlier one, so a process that runs the charm more than once (the
    tests) pushes only with the current charm's endpoints.
    """
    events = logging.getLogger(security_events.LOGGER_NAME)
    for handler in [h for h in events.handlers if isinstance(h, SecurityEventPusher)]:
        events.removeHandler(handler)
    if not charm.model.relations[LOGGING_RELATION]:
        return
    urls = list(loki_endpoints(charm).values())
    if urls:
        events.addHandler(SecurityEventPusher(urls, topology_labels(topology)))
