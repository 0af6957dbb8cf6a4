"""A failure that lasts is never Active: retried failures escalate after a while.

A failure the next pass retries on its own (a notice with ``retry``: GARM failing on an
object with a 5xx, GitHub failing a reclaim, GARM not scaling a scale set) is WAITING while it
may still pass. One still there :data:`ESCALATE_AFTER` after it was first seen is BLOCKED: the
unit names the object, what GARM or GitHub said and since when. The first sighting of each
failure is kept between hooks (``memory``); a failure that stops is forgotten at once.

Owns the rule and its delay; knows only notices; must not import ops.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from vocabulary.notices import Notice, Severity

# GitHub's and a cloud's incidents are often over within minutes, and GARM retries on its own;
# three of Juju's default update-status intervals (5 min) is long enough that a failure still
# there is not passing, short enough that nobody waits an hour on an Active unit.
ESCALATE_AFTER = timedelta(minutes=15)
RETRY_SUFFIX = "; will retry"
MAX_SAID = 80


def escalate(
    notices: Iterable[Notice], since: Mapping[str, datetime], now: datetime
) -> tuple[list[Notice], dict[str, datetime]]:
    """The notices with lasting failures made BLOCKED, and the first sightings to keep.

    Args:
        notices: the pass's notices.
        since: when each failure (``str(notice)``) was first seen, as the last pass left it.
        now: the time of this pass (timezone-aware).
    """
    out: list[Notice] = []
    seen: dict[str, datetime] = {}
    for notice in notices:
        if not notice.retry or notice.severity is Severity.BLOCKED:
            out.append(notice)
            continue
        key = str(notice)
        first = since.get(key, now)
        seen[key] = first
        out.append(notice if now - first < ESCALATE_AFTER else _lasting(notice, first))
    return out, seen


def _lasting(notice: Notice, first: datetime) -> Notice:
    text = notice.text.removesuffix(RETRY_SUFFIX)
    said = " ".join(notice.said.split())[:MAX_SAID]
    if said:
        text = f"{text}: {said}"
    return Notice(Severity.BLOCKED, notice.subject, f"{text}, since {first:%Y-%m-%d %H:%M} UTC")
