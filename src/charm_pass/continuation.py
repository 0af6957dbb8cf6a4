"""The next pass, asked for at once: when a pass's budget left work, or GARM went away in it.

A pass that its budget cut (``reconcile.writes``) leaves the rest to the next pass, which must
come promptly rather than at the next ``update-status``. The charm records a custom notice on
the workload container; Pebble keeps it and Juju (3.4 and later) delivers a
``pebble-custom-notice`` event for every new occurrence, which the charm reconciles on.

A pass can also end because GARM went away in the middle of it (it exited and Pebble is
starting it again: GARM v0.2.1-afda4e76 panics when it deletes a scale set it disabled before
the scale set's worker had started, ``docs/reference/garm-stall.md``). Such a pass asks for the
next at once too, whose readiness wait gives GARM its restart, ``AWAY_RETRIES`` times in a row
(:class:`NextPass`, the count kept in the unit's ``StoredState``); past that, the next pass
comes when Pebble's check of GARM recovers (``pebble-check-recovered``, which only follows a
failed check, so a GARM that stays down never makes a hook loop) or at ``update-status``. Owns
the notice's key, recording it, telling the charm's own notice from any other, and that count.
A failed check of GARM is reported here too. Knows ops and Pebble only: no relation, no GARM.
"""

from __future__ import annotations

import logging
from typing import cast

import ops

from workload import pebble_layer

logger = logging.getLogger(__name__)

# Pebble wants a custom notice's key as "<domain>/<path>".
CONTINUE_KEY = "charmhub.io/garm/continue"
# Passes in a row that GARM's going away may continue at once; then Pebble's check decides.
AWAY_RETRIES = 3
GARM_WENT_AWAY = "GARM went away during the pass (restarting); the next pass follows"
GARM_KEEPS_GOING = (
    "GARM went away during {count} passes in a row; the next pass follows its recovery; "
    "read its log: juju ssh --container garm {unit} pebble logs garm"
)


def request(container: ops.Container, why: str) -> None:
    """Ask for the next pass at once: record the charm's notice on ``container``.

    Args:
        container: the workload container (its Pebble delivers the event).
        why: why, for the log (``Pass budget spent (creating scale sets: 180 of 500)``).
    """
    try:
        container.pebble.notify(ops.pebble.NoticeType.CUSTOM, CONTINUE_KEY)
    except (ops.pebble.ConnectionError, ops.pebble.APIError) as exc:
        # update-status carries on instead, later.
        logger.warning("Cannot ask Pebble for the next pass (%s); %s", exc, why)
        return
    logger.info("%s; the next pass follows at once", why)


def is_continuation(event: ops.PebbleCustomNoticeEvent) -> bool:
    """Whether ``event`` is the charm's own notice (any other custom notice is not ours)."""
    return event.notice.key == CONTINUE_KEY


class NextPass(ops.Object):
    """Passes in a row that GARM's going away ended, and Pebble's check of GARM.

    A failed check is reported (``pebble_layer.report_check_failed``); a recovered one asks
    for the next pass when the last one ended with GARM gone.
    """

    _stored = ops.StoredState()

    def __init__(self, charm: ops.CharmBase, container_name: str) -> None:
        """Count from the unit's stored state; observe Pebble's check events."""
        super().__init__(charm, "next-pass")
        self._unit = charm.unit.name
        self._stored.set_default(away=0)
        container = charm.on[container_name]
        charm.framework.observe(container.pebble_check_failed, self._on_check_failed)
        charm.framework.observe(container.pebble_check_recovered, self._on_check_recovered)

    def _on_check_failed(self, event: ops.PebbleCheckFailedEvent) -> None:
        pebble_layer.report_check_failed(event)

    def _on_check_recovered(self, event: ops.PebbleCheckRecoveredEvent) -> None:
        if self._stored.away:
            request(event.workload, "GARM answers again after a pass it left")

    def went_away(self, container: ops.Container) -> ops.StatusBase:
        """Record a pass GARM's going away ended; ask for the next while within the bound.

        Returns:
            The pass's status: maintenance while the next pass follows at once, waiting once
            GARM went away ``AWAY_RETRIES`` passes in a row.
        """
        away = cast(int, self._stored.away) + 1
        self._stored.away = away
        if away <= AWAY_RETRIES:
            request(container, f"GARM went away during the pass ({away} in a row)")
            return ops.MaintenanceStatus(GARM_WENT_AWAY)
        logger.warning("GARM went away during %d passes in a row; not continuing at once", away)
        return ops.WaitingStatus(GARM_KEEPS_GOING.format(count=away, unit=self._unit))

    def reached(self) -> None:
        """Record a pass that reached GARM to its end (or to its budget)."""
        if self._stored.away:
            self._stored.away = 0
