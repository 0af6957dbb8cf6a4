"""What the leader does in ``stop`` when the whole application is removed (ADR 0006).

It deletes from GARM what the charm created there (:func:`remove_managed`), unless
the operator set ``cleanup-on-remove`` to false, and fails the hook with a message naming what
blocks it. Each run is a security event (``sys_shutdown``) with its outcome. Knows Juju (the
charm's model) and GARM (through the client).
"""

from __future__ import annotations

import logging

import ops

from reconcile import (
    GarmNotAnsweringError,
    GarmNotInitialisedError,
    TeardownError,
    admin_session,
    remove_managed,
)
from records import secrets_store
from vocabulary import security_events
from workload import pebble_layer

logger = logging.getLogger(__name__)

CLEANUP_ON_REMOVE = "cleanup-on-remove"
REMOVAL_UNREACHABLE = (
    "GARM is not reachable, so its scale sets cannot be removed; retry the hook once it runs, "
    "or set cleanup-on-remove=false to leave them"
)


def application_removed(planned_units: int) -> bool:
    """Tell whether every unit is going away: removal, not a pod restart or scale-down."""
    return planned_units == 0


def clean_up(
    charm: ops.CharmBase,
    *,
    api_url: str,
    ready_timeout: float,
    timeout: float,
    poll_interval: float,
) -> None:
    """On application removal, the leader deletes from GARM what the charm created there.

    However it ends, the sweep is a security event (``sys_shutdown``) with its outcome.

    Raises:
        TeardownError: GARM cannot be reached, or busy runners still hold scale sets
            when ``timeout`` runs out (the message names them and the commands that finish).
    """
    if not charm.unit.is_leader() or not application_removed(charm.app.planned_units()):
        return
    if not charm.config.get(CLEANUP_ON_REMOVE, True):
        logger.warning(
            "%s is false: leaving GARM's scale sets, entities and credentials in place",
            CLEANUP_ON_REMOVE,
        )
        security_events.application_removal(
            security_events.Outcome.SKIPPED,
            f"{CLEANUP_ON_REMOVE} is false: GARM's scale sets, entities and credentials left",
        )
        return
    try:
        done = _sweep(charm, api_url, ready_timeout, timeout=timeout, poll_interval=poll_interval)
    except Exception as exc:
        security_events.application_removal(
            security_events.Outcome.FAILURE,
            f"The removal cleanup of GARM stopped ({type(exc).__name__}); the hook fails",
        )
        raise
    security_events.application_removal(security_events.Outcome.SUCCESS, done)


def _sweep(
    charm: ops.CharmBase,
    api_url: str,
    ready_timeout: float,
    *,
    timeout: float,
    poll_interval: float,
) -> str:
    """Delete what the charm put in GARM; return what was done, in words."""
    try:
        admin = secrets_store.read_admin_credentials(charm.model)
    except secrets_store.SecretsUnavailableError:
        logger.info("GARM was never bootstrapped: nothing to remove from it")
        return "GARM was never bootstrapped: nothing to remove"
    if not charm.unit.get_container(pebble_layer.CONTAINER_NAME).can_connect():
        raise TeardownError(f"{REMOVAL_UNREACHABLE} (the garm container is down)")
    try:
        with admin_session(api_url, admin, ready_timeout=ready_timeout) as client:
            logger.info("The application is being removed: deleting what the charm put in GARM")
            result = remove_managed(client, timeout=timeout, poll_interval=poll_interval)
    except GarmNotAnsweringError as exc:
        raise TeardownError(REMOVAL_UNREACHABLE) from exc
    except GarmNotInitialisedError:
        logger.info("GARM was never initialised: nothing to remove from it")
        return "GARM was never initialised: nothing to remove"
    logger.info("GARM cleaned up for removal in %d sweep(s)", result.passes)
    return (
        "Deleted the charm's scale sets, entities and credentials from GARM in "
        f"{result.passes} sweep(s)"
    )
