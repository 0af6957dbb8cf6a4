"""The charm's side of the Canonical Observability Stack: one entry point per reconcile step.

:func:`publish` writes the relation data of the three COS relations (scrape job and alert
rules, dashboard, Loki requirer metadata); :func:`forward_logs` points Pebble's log targets at
the Loki endpoints; :func:`push_security_events` sends the charm's security events there too.
Each interface lives in its own module (``cos_metrics``, ``cos_dashboard``,
``cos_logging``); charm tracing is ``ops.tracing``, wired in ``charm.py``.
"""

from __future__ import annotations

import ops
from cosl import JujuTopology

from relations import cos_dashboard, cos_logging, cos_metrics
from vocabulary.telemetry import traced

RELATIONS = (
    cos_metrics.METRICS_RELATION,
    cos_dashboard.DASHBOARD_RELATION,
    cos_logging.LOGGING_RELATION,
)
TRACING_RELATION = "charm-tracing"


@traced("cos.publish")
def publish(charm: ops.CharmBase) -> None:
    """Write this unit's part of the metrics, dashboard and logging relations."""
    topology = JujuTopology.from_charm(charm)
    cos_metrics.publish(charm, topology)
    cos_dashboard.publish(charm, topology)
    cos_logging.publish(charm, topology)


@traced("cos.forward_logs")
def forward_logs(charm: ops.CharmBase, container: ops.Container, plan: ops.pebble.Plan) -> bool:
    """Bring the container's Loki log targets (``plan``'s, as read) in line with the relations."""
    return cos_logging.forward_logs(charm, container, plan, JujuTopology.from_charm(charm))


def push_security_events(charm: ops.CharmBase) -> None:
    """Have this hook's security events pushed to the Loki endpoints of the logging relations."""
    cos_logging.push_security_events(charm, JujuTopology.from_charm(charm))
