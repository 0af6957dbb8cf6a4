"""The unit status message shown while scale set generations change over.

A pure function of the reconciler's progress; the charm wraps it in ``ActiveStatus`` (the
service keeps working during a changeover, so the status stays active).
"""

from __future__ import annotations

from collections.abc import Sequence

from scaleset_reconciler import Handover, ScalesetProgress, draining_phase

MAX_NAMED_SCALESETS = 2

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


def progress_message(progress: Sequence[ScalesetProgress]) -> str:
    """Summarise changeovers in flight, one phase per logical scale set.

    Entries of the same logical name collapse into one: their runner counts add up and the
    least advanced phase wins. At most two logical names are shown, sorted; the rest are
    counted.

    Args:
        progress: the reconciler's progress entries.

    Returns:
        For example ``"a: creating replacement; b: awaiting deletion; +2 more"``, or ``""``
        when nothing is in flight.
    """
    stages: dict[str, int] = {}
    runners: dict[str, int] = {}
    for entry in progress:
        stage = _stage(entry)
        stages[entry.logical_name] = min(stages.get(entry.logical_name, stage), stage)
        runners[entry.logical_name] = runners.get(entry.logical_name, 0) + max(
            entry.remaining_runners, 0
        )
    names = sorted(stages)
    parts = [
        f"{name}: {_phase(stages[name], runners[name])}" for name in names[:MAX_NAMED_SCALESETS]
    ]
    if len(names) > MAX_NAMED_SCALESETS:
        parts.append(f"+{len(names) - MAX_NAMED_SCALESETS} more")
    return "; ".join(parts)
