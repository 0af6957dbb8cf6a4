"""Runners that cannot start: which instances count, the line shown, the notice per scale set."""

from __future__ import annotations

import base64

from garm import Instance, ScaleSet
from notices import Notice, Severity
from reconcile.scalesets.faults import (
    FAULT_LINE_LIMIT,
    RunnerFault,
    fault_line,
    fault_notices,
    runner_faults,
)

NOVA_TAG = (
    "creating instance: Bad request with: [POST servers], error message: "
    '{"badRequest": {"code": 400, "message": "Invalid input for field/attribute tags."}}'
)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _instance(name: str, scaleset_id: int, status: str = "error", fault: str = "") -> Instance:
    return Instance(name=name, scale_set_id=scaleset_id, status=status, provider_fault=fault)


SCALESETS = [
    ScaleSet(id=1, name="ubuntu-large-18515357"),
    ScaleSet(id=2, name="arm-runners-e73f260d"),
]


def test_fault_line_is_the_first_non_empty_decoded_line():
    assert fault_line(_b64("\n\n  first line  \nsecond line\n")) == "first line"


def test_fault_line_of_nothing_is_empty():
    assert fault_line(None) == ""
    assert fault_line("") == ""
    assert fault_line(_b64("\n  \n")) == ""


def test_fault_line_reads_text_that_is_not_base64_as_it_is():
    assert fault_line("not base64!") == "not base64!"


def test_a_long_fault_line_is_shortened():
    line = fault_line(_b64("x" * 500))
    assert len(line) == FAULT_LINE_LIMIT
    assert line.endswith("...")


def test_only_errored_runners_with_a_fault_count():
    instances = [
        _instance("r-ok", 1, status="running", fault=_b64("old fault")),
        _instance("r-error-no-fault", 1),
        _instance("r-bad", 1, fault=_b64(NOVA_TAG)),
        _instance("r-unknown-scaleset", 9, fault=_b64("elsewhere")),
    ]
    assert runner_faults(SCALESETS, instances) == [
        RunnerFault("ubuntu-large-18515357", "r-bad", NOVA_TAG[:117] + "...")
    ]


def test_one_blocked_notice_per_logical_scale_set():
    faults = [
        RunnerFault("arm-runners-e73f260d", "r1", "Image noble could not be found."),
        RunnerFault("ubuntu-large-18515357", "r2", "first"),
        RunnerFault("ubuntu-large-18515357", "r3", "second"),
    ]
    assert fault_notices(faults) == [
        Notice(
            Severity.BLOCKED,
            "arm-runners",
            "runners fail to start: Image noble could not be found.",
        ),
        Notice(Severity.BLOCKED, "ubuntu-large", "runners fail to start: first"),
    ]
