"""Notices: what a reconcile pass held back or is still waiting on, in words for the status.

A reconciler that cannot bring one object to its desired state this pass (a scale set waiting
for its provider, a credential GARM refused, a scale set draining after its configurator left)
records a :class:`Notice` and goes on with the others. The charm orders every notice of the pass
into one status line with :func:`summarise`. This module knows neither Juju nor GARM.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

MAX_NAMED_NOTICES = 2


class Severity(enum.IntEnum):
    """How much a notice needs the operator; lower sorts first in the status."""

    BLOCKED = 0  # only the operator can fix it (refused input, ownership conflict)
    WAITING = 1  # resolves on its own once something else exists (a provider, an entity)
    PROGRESS = 2  # work under way (a changeover, a drain)


@dataclass(frozen=True, order=True)
class Notice:
    """One object that is not where it should be yet, and why.

    Attributes:
        severity: how much it needs the operator.
        subject: what it is about, as the operator knows it (a logical scale set name, a
            configurator application, an organisation).
        text: what holds it, never a secret value (``waiting for provider cfg-a-0``).
        retry: a failure the next pass retries on its own; one that lasts escalates
            (``reconcile.escalation``).
        said: what GARM or GitHub answered, for the escalated notice (never a secret).
    """

    severity: Severity
    subject: str
    text: str
    retry: bool = field(default=False, compare=False)
    said: str = field(default="", compare=False)

    def __str__(self) -> str:
        """Return ``subject: text``."""
        return f"{self.subject}: {self.text}"


def refusal(subject: str, status: int | None, what: str = "it", said: str = "") -> Notice:
    """Word a GARM refusal of one object: a 4xx needs the operator, anything else is retried.

    Args:
        subject: what the status names (a scale set, a configurator).
        status: GARM's HTTP status, None when unknown.
        what: the refused object as the operator knows it.
        said: GARM's own words (its ``error`` field), kept for a failure that lasts.
    """
    if status is not None and 400 <= status < 500:
        return Notice(Severity.BLOCKED, subject, f"GARM refused {what} ({status})")
    text = f"GARM failed on {what} ({status}); will retry"
    return Notice(Severity.WAITING, subject, text, retry=True, said=said)


def blocked(notices: Iterable[Notice]) -> bool:
    """Tell whether any notice needs the operator."""
    return any(n.severity is Severity.BLOCKED for n in notices)


def summarise(notices: Iterable[Notice]) -> str:
    """Write the notices as one status line: most important first, then ``+N more``.

    Duplicates collapse; notices sort by severity, then subject, then text.

    Args:
        notices: every notice of the pass.

    Returns:
        For example ``"cfg-a: GARM refused the GitHub App key; b: waiting for provider b-0;
        +1 more"``, or ``""`` when there is none.
    """
    ordered = sorted(set(notices))
    parts = [str(n) for n in ordered[:MAX_NAMED_NOTICES]]
    if len(ordered) > MAX_NAMED_NOTICES:
        parts.append(f"+{len(ordered) - MAX_NAMED_NOTICES} more")
    return "; ".join(parts)
