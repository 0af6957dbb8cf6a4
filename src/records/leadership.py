"""Exactly one GARM per application: the peer record, the unit count and what they show.

GARM runs on the leader only (ADR 0003). This module keeps it to one GARM when leadership moves
or the application has more than one unit (ADR 0007):

- The leader writes its unit name under ``leader`` in the ``garm-peers`` application databag in
  every reconcile pass. A change there gives every other unit, a deposed leader included, a
  ``garm-peers`` relation-changed hook, in which it stands by.
- The unit that starts GARM records itself under ``garm-unit``. On SQLite that unit's own
  ``garm-data`` storage holds GARM's database.
- On SQLite, a leader refuses to start GARM while ``garm-unit`` names another unit that is still
  in the application: it would start an empty database and re-create every scale set.

A unit that must not run GARM stands by (:func:`stand_by`): GARM stopped, port closed; stopping
a running GARM is a security event (``sys_shutdown``). Juju and Pebble only: nothing here talks
to GARM.
"""

from __future__ import annotations

import logging

import ops

from records.unit_shown import UnitShown
from relations.database import POSTGRESQL_RELATION
from vocabulary import security_events
from workload import pebble_layer
from workload.pebble_layer import GARM_PORT

logger = logging.getLogger(__name__)

PEER_RELATION = "garm-peers"
LEADER_KEY = "leader"
GARM_UNIT_KEY = "garm-unit"

UNITS_ON_SQLITE = (
    "{units} units on SQLite, which supports one: run 'juju scale-application {app} 1'"
)
DATABASE_ELSEWHERE = (
    "GARM not started: its SQLite database is on {unit}; run 'juju scale-application {app} 1'"
)


def _on_sqlite(model: ops.Model) -> bool:
    # The backend is PostgreSQL exactly when this relation exists; every unit can see it.
    return not model.relations[POSTGRESQL_RELATION]


def _peer_data(model: ops.Model) -> tuple[ops.Relation, ops.RelationDataContent] | None:
    relation = model.get_relation(PEER_RELATION)
    if relation is None:
        return None
    return relation, relation.data[model.app]


def announce(model: ops.Model) -> None:
    """Leader: write this unit's name as ``leader``; other units get relation-changed."""
    peers = _peer_data(model)
    if peers is None:
        return
    _, data = peers
    if data.get(LEADER_KEY) != model.unit.name:
        logger.info("Recording %s as the leader in %s", model.unit.name, PEER_RELATION)
        data[LEADER_KEY] = model.unit.name


def units_blocked(model: ops.Model, units: int) -> ops.BlockedStatus | None:
    """Return the Blocked status for more than one planned unit on SQLite, else None.

    ``units`` is ``planned_units()``, the count the operator asked for: it includes units not
    yet joined to the peer relation and leaves out units on their way out, so the status clears
    as soon as the operator scales to one.
    """
    if units <= 1 or not _on_sqlite(model):
        return None
    return ops.BlockedStatus(UNITS_ON_SQLITE.format(units=units, app=model.app.name))


def claim(model: ops.Model) -> ops.BlockedStatus | None:
    """Leader: take GARM over, or return why not (its SQLite database is on another unit).

    On SQLite, ``garm-unit`` naming another unit that is still in the peer relation means that
    unit's storage holds GARM's database and its GARM may still run: this unit must not start
    an empty one. Once that unit has left the application, its database is gone with it and
    this unit takes over. On PostgreSQL the database is shared and the leader always takes over.
    """
    peers = _peer_data(model)
    if peers is None:
        return None
    relation, data = peers
    me = model.unit.name
    holder = data.get(GARM_UNIT_KEY, "")
    if holder and holder != me and _on_sqlite(model):
        if holder in {unit.name for unit in relation.units}:
            logger.warning(
                "Not starting GARM: its SQLite database is on %s, which is still a unit of %s",
                holder,
                model.app.name,
            )
            return ops.BlockedStatus(DATABASE_ELSEWHERE.format(unit=holder, app=model.app.name))
        logger.warning(
            "%s, whose storage held GARM's SQLite database, has left: starting GARM with this "
            "unit's database",
            holder,
        )
    if holder != me:
        data[GARM_UNIT_KEY] = me
    return None


def serve(shown: UnitShown) -> None:
    """Open GARM's port on the unit that runs GARM."""
    shown.ports(GARM_PORT)


def stand_by(shown: UnitShown, container: ops.Container, why: str) -> None:
    """Stop GARM on a unit that must not run it, then close its port and clear its version."""
    stopped = pebble_layer.stand_by(container)
    if stopped is not None:
        security_events.garm_stopped(
            security_events.STANDBY,
            f"The charm stopped GARM on {shown.unit_name} (Pebble showed it {stopped}): {why}",
        )
    release(shown)


def release(shown: UnitShown) -> None:
    """Close GARM's port and clear the workload version on a unit that does not run GARM."""
    shown.ports()
    shown.workload_version("")
