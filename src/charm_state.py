"""The Juju adapter of the desired state: relation data and secrets read once per pass.

Owns ``CharmState.from_charm``, which builds what one pass wants (a ``DesiredState``) from the
garm-configurator and debug-ssh relations and the configurator secrets, and the short status
text of its input problems. The parsing itself lives in ``configurator_parser`` and
``debug_ssh``, the objects in ``desired_state``. Knows Juju; must not import the GARM client
or a reconciler.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import ops

from configurator_contract import CONFIGURATOR_RELATION_NAME, unpublished_relation_ids
from configurator_parser import parse_configurator_units
from debug_ssh import DEBUG_SSH_RELATION_NAME, parse_debug_ssh
from desired_state import DesiredState, Incumbents, InputProblem, SecretReader, UnitData

logger = logging.getLogger(__name__)


class CharmState(DesiredState):
    """The desired state as read from Juju: ``DesiredState`` with its Juju reader."""

    @classmethod
    def from_charm(cls, charm: ops.CharmBase, incumbents: Incumbents | None = None) -> CharmState:
        """Read the configurator and debug-ssh relations and their secrets.

        Args:
            charm: the charm whose model is read.
            incumbents: who holds which name in GARM (as the last pass saw it).

        Returns:
            The parsed state (a ``DesiredState``).
        """
        relations = sorted(charm.model.relations[CONFIGURATOR_RELATION_NAME], key=lambda r: r.id)
        units = _relation_units(relations)
        parsed = parse_configurator_units(units, _juju_secret_reader(charm.model), incumbents)
        debug_relations = sorted(
            charm.model.relations[DEBUG_SSH_RELATION_NAME], key=lambda r: r.id
        )
        debug = parse_debug_ssh(_relation_units(debug_relations))
        unpublished = unpublished_relation_ids([r.id for r in relations], units)
        return cls(
            providers=parsed.providers,
            credentials=parsed.credentials,
            entities=parsed.entities,
            scalesets=parsed.scalesets,
            debug_ssh=debug.connections,
            configurator_relation_count=len(relations),
            unpublished_relation_ids=unpublished,
            unpublished_apps=tuple(r.app.name for r in relations if r.id in unpublished),
            problems=parsed.problems + debug.problems,
            held=parsed.held,
            prune=not parsed.identity_unknown and not unpublished,
        )


def describe_problems(problems: Sequence[InputProblem]) -> str:
    """Summarise input problems in a short status fragment.

    Args:
        problems: the problems of this pass.

    Returns:
        ``invalid data from <source> (<reason>)``, followed by ``; +N more`` when there are
        others; an empty string when there are none.
    """
    if not problems:
        return ""
    # A configurator refused for a conflict comes first: only its operator can settle it; a
    # configurator that is only waiting for its image comes last: nothing is wrong there.
    first = min(problems, key=lambda p: (not p.blocked, p.waiting))
    if first.blocked:
        text = f"{first.source}: {first.reason}"
    elif first.waiting:
        text = first.reason
    else:
        text = f"invalid data from {first.source} ({first.reason})"
    if len(problems) > 1:
        text += f"; +{len(problems) - 1} more"
    return text


def _relation_units(relations: Sequence[ops.Relation]) -> list[UnitData]:
    """Detach the remote unit databags, in relation id then unit name order."""
    units: list[UnitData] = []
    for relation in relations:
        for unit in sorted(relation.units, key=lambda u: u.name):
            units.append(UnitData(relation.id, unit.name, dict(relation.data[unit])))
    return units


def _juju_secret_reader(model: ops.Model) -> SecretReader:
    def read(uri: str) -> str | None:
        try:
            # The revision Juju tracks for the charm, in one secret-get: the charm moves to a new
            # revision in the secret-changed hook Juju sends for it, not in every hook.
            content = model.get_secret(id=uri).get_content()
        except ops.SecretNotFoundError:
            logger.warning("configurator secret %s not found or not granted to garm", uri)
            return None
        except ops.ModelError as exc:
            logger.warning("cannot read configurator secret %s (%s)", uri, type(exc).__name__)
            return None
        value = content.get("value")
        if value is None:
            logger.warning("configurator secret %s has no 'value' key", uri)
        return value

    return read
