"""The changeover part of the unit status: one notice per logical scale set in changeover.

A pure function of the reconciler's progress; the charm shows these notices with the others
of the pass (the service keeps working during a changeover, so they never block).
"""

from __future__ import annotations

from collections.abc import Sequence

from reconcile.scalesets.retirement import Phase, ScalesetProgress
from vocabulary.notices import Notice, Severity


def progress_notices(progress: Sequence[ScalesetProgress]) -> list[Notice]:
    """Turn changeovers in flight into notices, one per logical scale set.

    Entries of the same logical name collapse into one: their runner counts add up and the
    least advanced phase wins.

    Args:
        progress: the reconciler's progress entries.

    Returns:
        For example ``a: creating replacement``, as :class:`~notices.Notice` objects.
    """
    phases: dict[str, Phase] = {}
    runners: dict[str, int] = {}
    for entry in progress:
        name = entry.logical_name
        phases[name] = min(phases.get(name, entry.phase), entry.phase)
        runners[name] = runners.get(name, 0) + max(entry.remaining_runners, 0)
    return [
        Notice(Severity.PROGRESS, name, phase.words(runners[name]))
        for name, phase in phases.items()
    ]
