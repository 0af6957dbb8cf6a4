"""The changeover part of the unit status: one notice per logical scale set in changeover.

A pure function of the reconciler's progress; the charm shows these notices with the others
of the pass (the service keeps working during a changeover, so they never block).
"""

from __future__ import annotations

from collections.abc import Sequence

from notices import Notice, Severity, summarise
from reconcile.scalesets.retirement import Handover, ScalesetProgress, draining_phase

# Least advanced first: a collapsed logical scale set shows its slowest generation.
_CREATING = 0
_RETIRING = 1
_DRAINING = 2
_AWAITING = 3


def _stage(entry: ScalesetProgress) -> int:
    if entry.handover is Handover.PENDING:
        return _CREATING
    if entry.handover is Handover.FAILED:
        return _RETIRING
    return _DRAINING if entry.remaining_runners > 0 else _AWAITING


def _phase(stage: int, runners: int) -> str:
    if stage == _CREATING:
        return "creating replacement"
    if stage == _RETIRING:
        return "retiring predecessor"
    return draining_phase(runners) if stage == _DRAINING else "awaiting deletion"


def progress_notices(progress: Sequence[ScalesetProgress]) -> list[Notice]:
    """Turn changeovers in flight into notices, one per logical scale set.

    Entries of the same logical name collapse into one: their runner counts add up and the
    least advanced phase wins.

    Args:
        progress: the reconciler's progress entries.

    Returns:
        For example ``a: creating replacement``, as :class:`~notices.Notice` objects.
    """
    stages: dict[str, int] = {}
    runners: dict[str, int] = {}
    for entry in progress:
        stage = _stage(entry)
        stages[entry.logical_name] = min(stages.get(entry.logical_name, stage), stage)
        runners[entry.logical_name] = runners.get(entry.logical_name, 0) + max(
            entry.remaining_runners, 0
        )
    return [
        Notice(Severity.PROGRESS, name, _phase(stage, runners[name]))
        for name, stage in stages.items()
    ]


def progress_message(progress: Sequence[ScalesetProgress]) -> str:
    """Summarise changeovers in flight: at most two logical names, sorted, then ``+N more``.

    Args:
        progress: the reconciler's progress entries.

    Returns:
        For example ``"a: creating replacement; b: awaiting deletion; +2 more"``, or ``""``
        when nothing is in flight.
    """
    return summarise(progress_notices(progress))
