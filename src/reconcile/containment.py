"""The one containment policy: which GARM failures end a pass and which stay with one object.

A failure that says nothing about the object in hand ends the pass: GARM is unreachable or
timed out (``GarmConnectionError``), GARM rejected the token (``GarmUnauthorizedError``),
GARM answered with one of its gates (``GarmNotReadyError``: a 409 ``init_required``, which GARM
also answers when it cannot read its database, or ``urls_required``), or GARM answered in a
shape the charm cannot read (``GarmProtocolError``). Going on would only
repeat the failure on every other object and report it once per object. Any other answer is
about one object: a 4xx is GARM refusing it (a BLOCKED notice: only the operator can change
what was asked), a 5xx or an unknown status is a failure on it that the next pass retries (a
WAITING notice). ADR 0009 records the decision.

This is the only module of ``src/`` that catches ``GarmApiError`` to contain it:
``tests/unit/house/test_containment_policy.py`` fails on any other handler of the base error (the
charm's pass boundary and its actions aside). Knows GARM's errors and the notices; must not
import ops.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from garm import (
    GarmApiError,
    GarmConnectionError,
    GarmNotReadyError,
    GarmProtocolError,
    GarmUnauthorizedError,
)
from vocabulary.notices import Notice, refusal

# The failures that end a pass: they are about GARM or the charm's session, not one object.
PASS_ENDING: tuple[type[GarmApiError], ...] = (
    GarmConnectionError,
    GarmUnauthorizedError,
    GarmNotReadyError,
    GarmProtocolError,
)


def ends_pass(exc: GarmApiError) -> bool:
    """Tell whether a GARM failure ends the pass rather than staying with one object."""
    return isinstance(exc, PASS_ENDING)


@dataclass
class Contained:
    """What :func:`contain` held back: the failure of the object's calls, if any."""

    error: GarmApiError | None = None


@contextmanager
def contain(
    notices: list[Notice] | None = None, subject: str = "", what: str = "it"
) -> Iterator[Contained]:
    """Run one object's GARM calls: end the pass on a pass-ending failure, contain the rest.

    The block stops at the first failing call. A contained failure is left in the yielded
    :class:`Contained` for the caller to log in its own words and, when ``notices`` is given,
    becomes one notice naming the object (:func:`notices.refusal`).

    Args:
        notices: where the object's notice goes; None when the object has no notice of its
            own (a deletion retried next pass, a read whose caller falls back).
        subject: what the status names (a scale set, a configurator, an organisation).
        what: the object as the operator knows it.

    Raises:
        GarmConnectionError, GarmUnauthorizedError, GarmNotReadyError, GarmProtocolError:
            unchanged.
    """
    box = Contained()
    try:
        yield box
    except GarmApiError as exc:
        if ends_pass(exc):
            raise
        box.error = exc
        if notices is not None:
            notices.append(refusal(subject, exc.status, what, exc.error))
