"""The Pebble side of a stalled scale set's recovery: GARM's service restarted.

``reconcile.scalesets.stall`` decides when an update in GARM did not bring a stalled scale set
back; the chain then asks for a restart, which only Pebble can give. Owns that restart and its
security event (``sys_restart``); a failed restart is a warning, not a failed hook. Knows
Pebble; must not import the GARM client.
"""

from __future__ import annotations

import logging

import ops

from vocabulary import security_events
from workload import pebble_layer

logger = logging.getLogger(__name__)


def restart_for_stall(container: ops.Container, status: ops.StatusBase) -> None:
    """Restart GARM for a scale set it stopped scaling that an update did not bring back."""
    # A restart has every one of GARM's scale-set workers read its row again.
    try:
        container.restart(pebble_layer.SERVICE_NAME)
    except (ops.pebble.APIError, ops.pebble.ChangeError) as exc:
        logger.warning("Restarting GARM for a stalled scale set failed: %s", exc)
        return
    security_events.garm_restarted(
        security_events.STALLED_SCALESET,
        f"The charm restarted GARM: an update did not make it scale again ({status.message})",
    )
