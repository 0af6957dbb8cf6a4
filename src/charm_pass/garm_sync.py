"""The GARM part of the leader's pass: the admin session and the chain, within the pass's budget.

Owns what the charm does with GARM once the workload runs: reach GARM as its admin
(``reconcile.session``), run the chain (``reconcile.chain``) with the pass's writes, keep the
memory it leaves in ``garm-peers`` (and in the unit's state where GARM's worker starts were found
idle, ``worker_idle``), and turn what it reached into a :class:`Sync` (the status,
the live scale sets, whether GARM needs a restart, the CA bundles of the endpoints GARM holds,
what the budget left); and, after the pass, GARM run again with the CA bundles it then needs.
Knows Juju through the charm it is given; GARM only through ``reconcile``'s face.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence

import ops

from charm_pass.charm_state import CharmState
from charm_pass.outcome import chain_status
from charm_pass.worker_idle import WorkerIdle
from garm import GarmApiError, GarmConnectionError, GarmUnauthorizedError, ScaleSet
from reconcile import (
    AdminRefusedError,
    CharmedTemplateError,
    GarmNotAnsweringError,
    Memory,
    Writes,
    admin_session,
    run_chain,
)
from records import peer_record
from records.secrets_store import AdminCredentials
from relations import database
from vocabulary import security_events
from vocabulary.desired_state import EndpointSpec, ToolReader
from vocabulary.telemetry import traced
from workload import endpoint_trust, pebble_layer

logger = logging.getLogger(__name__)

WAITING_READY = "Waiting for GARM to become ready"
SYNC_FAILED = "GARM sync failed"
ADMIN_REJECTED = "GARM rejected the admin credentials"


@dataclasses.dataclass(frozen=True)
class Sync:
    """How far the GARM part of a pass went: its status, and the live scale sets if it ran.

    Attributes:
        status: the status the pass reached.
        live: the scale sets in GARM after the pass; None when the chain did not run.
        restart_garm: whether a scale set GARM stopped scaling needs GARM restarted.
        endpoint_bundles: the CA bundles of the charm's endpoints GARM holds after the pass.
        unfinished: what the pass's budget left for the next pass (``creating scale sets:
            180 of 500``), empty when the pass went through.
        version: GARM's version as the running GARM reported it; empty when not reached.
        garm_away: whether GARM went away during the pass (its connection refused or cut).
    """

    status: ops.StatusBase
    live: list[ScaleSet] | None = None
    restart_garm: bool = False
    endpoint_bundles: dict[str, str] | None = None
    unfinished: str = ""
    version: str = ""
    garm_away: bool = False


@dataclasses.dataclass(frozen=True)
class GarmAccess:
    """Where and how long the charm reaches GARM; the simulation and tests point it elsewhere."""

    api_url: str
    ready_timeout: float


@traced("reconcile.garm")
def sync_garm(
    charm: ops.CharmBase,
    access: GarmAccess,
    state: CharmState,
    admin: AdminCredentials,
    memory: Memory,
    *,
    read_tool: ToolReader,
    db: pebble_layer.DatabaseConfig,
    writes: Writes,
    idle: WorkerIdle,
) -> Sync:
    """Reach GARM as its admin and run the chain; the live scale sets if the chain ran.

    ``idle`` is where an earlier pass found GARM's worker starts idle: read for the chain, and
    what the chain found kept for the next pass.
    """
    session = admin_session(
        access.api_url, admin, ready_timeout=access.ready_timeout, create_admin=True
    )
    try:
        with session as client:
            # Binaries are read only for a tool GARM lacks: a converged pass pulls none.
            result = run_chain(
                client, state, memory, read_tool=read_tool, writes=writes, idle=idle.read()
            )
    except GarmNotAnsweringError:
        return Sync(database.refused_login_status(db) or ops.WaitingStatus(WAITING_READY))
    except AdminRefusedError:
        logger.error("GARM refused the admin credentials from secret garm-admin-credentials")
        return Sync(ops.BlockedStatus(ADMIN_REJECTED))
    except CharmedTemplateError as exc:
        logger.warning("Charmed template not applied: %s; scale sets skipped", exc)
        return Sync(ops.WaitingStatus(str(exc)))
    except GarmConnectionError as exc:
        # GARM answered, then went away: Pebble starts it again (``continuation``).
        logger.warning("GARM went away during the pass (%s)", exc)
        return Sync(ops.WaitingStatus(SYNC_FAILED), garm_away=True)
    except GarmApiError as exc:
        if isinstance(exc, GarmUnauthorizedError):
            security_events.token_refused(admin.username)
        logger.warning("Reconcile failed (%s): %s; will retry", type(exc).__name__, exc)
        return Sync(ops.WaitingStatus(SYNC_FAILED))
    peer_record.save(charm.model, result.memory)
    idle.keep(result.idle)
    notices = [*result.notices, *state.notices]
    # The first step the budget cut is where the pass stopped; the later ones started nothing.
    unfinished = str(result.unfinished[0]) if result.unfinished else ""
    status = chain_status(state.configurator_relation_count, notices, unfinished)
    return Sync(
        status,
        result.live,
        result.restart_garm,
        result.endpoint_bundles,
        unfinished,
        result.version,
    )


def retrust(
    publish: Callable[[Mapping[str, str], ops.pebble.Plan | None], None],
    applied: Mapping[str, str],
    endpoints: Sequence[EndpointSpec],
    held: Mapping[str, str],
) -> None:
    """Run GARM with the CA bundles it needs after the pass, when they changed (a restart).

    A departed configurator's bundle leaves once GARM no longer holds its endpoint; one GARM
    holds that the plan lacks (a replaced pod) comes back.
    """
    bundles = endpoint_trust.after_pass(applied, endpoints, held)
    if bundles is None:
        return
    names = ", ".join(bundles) or "none"
    logger.info("GARM's trusted CA bundles change (now: %s); restarting it", names)
    try:
        publish(bundles, None)
    except pebble_layer.GarmExitedError as exc:
        logger.warning("GARM did not start again with its new CA bundles: %s", exc)
