"""The next pass, asked for at once when a pass's budget left work: a Pebble custom notice.

A pass that its budget cut (``reconcile.writes``) leaves the rest to the next pass, which must
come promptly rather than at the next ``update-status``. The charm records a custom notice on
the workload container; Pebble keeps it and Juju (3.4 and later) delivers a
``pebble-custom-notice`` event for every new occurrence, which the charm reconciles on. Owns the
notice's key, recording it, and telling the charm's own notice from any other. Knows ops'
Pebble client only: no relation, no GARM.
"""

from __future__ import annotations

import logging

import ops

logger = logging.getLogger(__name__)

# Pebble wants a custom notice's key as "<domain>/<path>".
CONTINUE_KEY = "charmhub.io/garm/continue"


def request(container: ops.Container, left: str) -> None:
    """Ask for the next pass at once: record the charm's notice on ``container``.

    Args:
        container: the workload container (its Pebble delivers the event).
        left: what the pass left, for the log (``creating scale sets: 180 of 500``).
    """
    try:
        container.pebble.notify(ops.pebble.NoticeType.CUSTOM, CONTINUE_KEY)
    except (ops.pebble.ConnectionError, ops.pebble.APIError) as exc:
        # update-status carries on instead, later.
        logger.warning("Cannot ask Pebble for the next pass (%s); %s", exc, left)
        return
    logger.info("Pass budget spent (%s); the next pass follows at once", left)


def is_continuation(event: ops.PebbleCustomNoticeEvent) -> bool:
    """Whether ``event`` is the charm's own notice (any other custom notice is not ours)."""
    return event.notice.key == CONTINUE_KEY
