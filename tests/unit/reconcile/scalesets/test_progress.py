"""Tests of the changeover status message (spec section 16)."""

from __future__ import annotations

import pytest

from reconcile.scalesets.progress import progress_notices
from reconcile.scalesets.retirement import Handover, ScalesetProgress
from vocabulary.notices import summarise


def progress_message(progress: list[ScalesetProgress]) -> str:
    """The status text of the changeover notices alone, as the charm summarises notices."""
    return summarise(progress_notices(progress))


def _entry(
    logical: str, runners: int = 0, handover: Handover = Handover.DONE, old: str = ""
) -> ScalesetProgress:
    return ScalesetProgress(
        logical, old or f"{logical}-00000000", f"{logical}-11111111", runners, handover
    )


def test_converged_is_empty() -> None:
    assert progress_message([]) == ""


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (_entry("my-scaleset", 3), "my-scaleset: draining 3 runners"),
        (_entry("my-scaleset", 1), "my-scaleset: draining 1 runner"),
        (_entry("my-scaleset", 0), "my-scaleset: awaiting deletion"),
        (_entry("my-scaleset", 0, Handover.PENDING), "my-scaleset: creating replacement"),
        (_entry("my-scaleset", 0, Handover.FAILED), "my-scaleset: retiring predecessor"),
    ],
)
def test_phase_per_entry(entry: ScalesetProgress, expected: str) -> None:
    assert progress_message([entry]) == expected


def test_two_named_then_counted_sorted_by_logical_name() -> None:
    progress = [
        _entry("d", 2),
        _entry("b", 0),
        _entry("c", 0, Handover.FAILED),
        _entry("a", 0, Handover.PENDING),
    ]
    assert progress_message(progress) == "a: creating replacement; b: awaiting deletion; +2 more"


def test_exactly_two_has_no_more_suffix() -> None:
    assert progress_message([_entry("b", 1), _entry("a", 5)]) == (
        "a: draining 5 runners; b: draining 1 runner"
    )


def test_collapse_sums_runners_of_one_logical_name() -> None:
    progress = [
        _entry("my-scaleset", 2, old="my-scaleset-aaaaaaaa"),
        _entry("my-scaleset", 1, old="my-scaleset-bbbbbbbb"),
        _entry("my-scaleset", 0, old="my-scaleset-cccccccc"),
    ]
    assert progress_message(progress) == "my-scaleset: draining 3 runners"


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ([Handover.DONE, Handover.PENDING], "creating replacement"),
        ([Handover.FAILED, Handover.DONE], "retiring predecessor"),
        ([Handover.FAILED, Handover.PENDING], "creating replacement"),
    ],
)
def test_collapse_keeps_least_advanced_phase(entries: list[Handover], expected: str) -> None:
    progress = [
        _entry("x", 4 if handover is Handover.DONE else 0, handover, old=f"x-{i:08d}")
        for i, handover in enumerate(entries)
    ]
    assert progress_message(progress) == f"x: {expected}"


def test_draining_beats_awaiting_deletion_when_collapsed() -> None:
    progress = [_entry("x", 0, old="x-00000001"), _entry("x", 1, old="x-00000002")]
    assert progress_message(progress) == "x: draining 1 runner"


def test_repeated_label_changes_do_not_crowd_out_other_scalesets() -> None:
    progress = [_entry("a", 1, old=f"a-{i:08d}") for i in range(5)] + [_entry("b", 0)]
    assert progress_message(progress) == "a: draining 5 runners; b: awaiting deletion"


def test_live_names_are_not_in_the_message() -> None:
    message = progress_message([_entry("my-scaleset", 2, old="my-scaleset-deadbeef")])
    assert "deadbeef" not in message
    assert "11111111" not in message
