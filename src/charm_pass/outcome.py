"""What one reconcile pass reached, as the unit and application statuses show it.

Owns :class:`Outcome` (the status of the exit a pass took, with its input problems and the
application's unit-count status) and the status of a pass whose chain ran. Knows ops' status
types only: no relation, no GARM call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import ops

from vocabulary.notices import Notice, Severity, blocked, summarise

WAITING_CONFIGURATOR = "Waiting for garm-configurator relation"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one reconcile pass reached, for the unit and application status.

    Attributes:
        status: the status of the exit the pass took.
        problems: the summary of this pass's input problems, added to the status.
        blocked_input: whether some configurator is refused in a way only its operator settles.
        units_blocked: leader only: the application's unit-count status (ADR 0007).
    """

    status: ops.StatusBase
    problems: str = ""
    blocked_input: bool = False
    units_blocked: ops.StatusBase | None = None

    def shown(self) -> ops.StatusBase:
        """The status to show: the pass's, with the input-problem summary added."""
        if not self.problems:
            return self.status
        message = "; ".join(part for part in (self.status.message, self.problems) if part)
        if self.blocked_input and isinstance(self.status, ops.ActiveStatus):
            # Only the configurator's operator can settle a conflict: say so in the status.
            return ops.BlockedStatus(message)
        return type(self.status)(message)

    def app_shown(self) -> ops.StatusBase:
        """The application's status: the unit's, unless the unit count blocks and it does not."""
        shown = self.shown()
        if self.units_blocked is None or isinstance(shown, (ops.BlockedStatus, ops.ErrorStatus)):
            return shown
        return self.units_blocked


def chain_status(
    configurator_relations: int, notices: Sequence[Notice], unfinished: str = ""
) -> ops.StatusBase:
    """The status of a pass whose chain ran: what is held back or under way, else active.

    ``unfinished`` is the step where the pass's budget stopped it (``creating or updating
    scale sets: 180 of 500``): the next pass follows at once, so the unit is in maintenance
    until one goes through, and only what needs the operator is named beside it (an object
    waiting on one the budget left is not stuck).
    """
    if not configurator_relations and not unfinished:
        # The chain ran to zero: there is nothing to run GARM for yet.
        return ops.WaitingStatus(WAITING_CONFIGURATOR)
    if unfinished:
        notices = [n for n in notices if n.severity is Severity.BLOCKED]
    message = "; ".join(part for part in (unfinished, summarise(notices)) if part)
    if blocked(notices):
        return ops.BlockedStatus(message)
    if unfinished:
        return ops.MaintenanceStatus(message)
    return ops.ActiveStatus(message)
