"""Runners that cannot start: which runners count, what is shown, and how long it is remembered."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest

from garm import Instance, ScaleSet
from reconcile.scalesets.faults import (
    FAULT_LINE_LIMIT,
    RememberedFault,
    RunnerFault,
    carry_faults,
    fault_line,
    fault_notices,
    runner_faults,
)
from vocabulary.notices import Notice, Severity

# GARM's own words around what the provider printed (measured on real GARM).
GARM_WRAPPER = (
    "creating instance in provider: provider binary /usr/local/bin/garm-provider-openstack-shim"
    " returned error: provider binary failed with stdout: ; stderr: {stderr}: exit status 1"
)
IMAGE_GONE = (
    "failed to run command: failed to create instance in provider: failed to resolve image "
    "info: failed to find image with name or id noble and visibility 'public'"
)
SINCE = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _instance(name: str, scaleset_id: int, status: str = "error", fault: str = "") -> Instance:
    return Instance(name=name, scale_set_id=scaleset_id, status=status, provider_fault=fault)


def _scalesets(updated_at: datetime = SINCE) -> list[ScaleSet]:
    return [
        ScaleSet(id=1, name="ubuntu-large-18515357", updated_at=updated_at),
        ScaleSet(id=2, name="arm-runners-e73f260d", updated_at=updated_at),
    ]


def test_the_provider_s_stderr_is_what_is_shown():
    assert fault_line(_b64(GARM_WRAPPER.format(stderr="quota exceeded"))) == "quota exceeded"


def test_a_long_fault_keeps_its_end_where_the_cause_is():
    line = fault_line(_b64(GARM_WRAPPER.format(stderr=IMAGE_GONE)))
    assert len(line) == FAULT_LINE_LIMIT
    assert line.startswith("...")
    assert line.endswith("failed to find image with name or id noble and visibility 'public'")


def test_token_like_runs_are_cut_out():
    # A refusal of user data quotes it back, and user data carries the runner's token.
    quoted = "Invalid input for field user_data. Value: " + "QUJD" * 40 + ". is too long"
    assert (
        fault_line(_b64(quoted)) == "Invalid input for field user_data. Value: [...]. is too long"
    )


# Nova's refusal of a server tag over 60 characters, in gophercloud's words.
TAG = "garm-pool-id=ubuntu-noble-x64-large-1a2b3c4d-6f1d2c3a-8b7e-5d4c-9a0b-1c2d3e4f5a6b"
TAG_REFUSAL_END = f"Invalid input for field/attribute 0. Value: {TAG}. '{TAG}' is too long"


def test_a_refused_server_tag_keeps_its_value():
    stderr = f"failed to create server: Bad request with: {TAG_REFUSAL_END}"
    assert fault_line(_b64(GARM_WRAPPER.format(stderr=stderr))).endswith(TAG_REFUSAL_END[-100:])


@pytest.mark.parametrize(
    "quoted",
    [
        "token=" + "QUJD" * 10,  # a value no tag has: one long word
        "Token=" + "-".join(["abcdefgh12"] * 4),  # a key no tag has
        "QUJD" * 10 + "==",  # base64 with its padding
    ],
)
def test_a_token_shaped_like_a_key_and_value_is_still_cut(quoted: str):
    assert fault_line(_b64(f"refused {quoted} here")) == "refused [...] here"


def test_fault_line_without_garm_s_wrapper_is_the_text_itself():
    assert fault_line(_b64("\n\n  first line  \nsecond line\n")) == "first line second line"
    assert fault_line("not base64!") == "not base64!"


def test_fault_line_of_nothing_is_empty():
    assert fault_line(None) == ""
    assert fault_line("") == ""
    assert fault_line(_b64("\n  \n")) == ""


def test_only_errored_runners_with_a_fault_count():
    instances = [
        _instance("r-ok", 1, status="running", fault=_b64("old fault")),
        _instance("r-error-no-fault", 1),
        _instance("r-bad", 1, fault=_b64("image gone")),
        _instance("r-unknown-scaleset", 9, fault=_b64("elsewhere")),
    ]
    assert runner_faults(_scalesets(), instances) == [
        RunnerFault("ubuntu-large-18515357", "r-bad", "image gone")
    ]


def test_a_fault_is_remembered_after_garm_replaced_the_runner():
    seen = carry_faults({}, _scalesets(), [_instance("r1", 1, fault=_b64("image gone"))])
    assert seen == {"ubuntu-large-18515357": RememberedFault("image gone", SINCE.isoformat())}
    # Five seconds later GARM deletes the runner and tries again: the fault is not listed.
    retried = [_instance("r2", 1, status="pending_create")]
    assert carry_faults(seen, _scalesets(), retried) == seen


def test_a_fault_is_forgotten_once_a_runner_runs():
    seen = carry_faults({}, _scalesets(), [_instance("r1", 1, fault=_b64("quota"))])
    assert carry_faults(seen, _scalesets(), [_instance("r2", 1, status="running")]) == {}


def test_a_fault_is_forgotten_when_the_scale_set_changes_or_goes():
    seen = carry_faults({}, _scalesets(), [_instance("r1", 1, fault=_b64("image gone"))])
    later = datetime(2026, 12, 3, 13, 0, tzinfo=UTC)
    assert carry_faults(seen, _scalesets(updated_at=later), []) == {}
    assert carry_faults(seen, [], []) == {}


def test_one_blocked_notice_per_logical_scale_set():
    faults = {
        "arm-runners-e73f260d": RememberedFault("Image noble could not be found.", ""),
        "ubuntu-large-18515357": RememberedFault("first", ""),
        "ubuntu-large-e3b0c442": RememberedFault("second", ""),
    }
    assert fault_notices(faults) == [
        Notice(
            Severity.BLOCKED,
            "arm-runners",
            "runners fail to start: Image noble could not be found.",
        ),
        Notice(Severity.BLOCKED, "ubuntu-large", "runners fail to start: first"),
    ]
