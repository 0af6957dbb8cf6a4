"""The fault campaign on real GARM: every case must keep every invariant and converge.

See ``tests/faults/campaign.py`` for the invariants and ``docs/reference/faults.md`` for the
table of hooks each case took (written by ``tox -e faults``).
"""

from __future__ import annotations

import pytest

from tests.faults.campaign import CUT, DB_RESTART, KILL, LATE, Outcome, run_case
from tests.faults.conftest import Campaign, record
from tests.faults.stories import story


def _fault_every_call(campaign: Campaign, key: str, fault: str) -> None:
    """Run story ``key`` once per faulted call with ``fault`` there; record; assert."""
    told = story(key)
    snapshot, ref = campaign.reference(told)
    assert ref.violations == []
    outcomes = [run_case(campaign.world, snapshot, told, ref, fault, call) for call in ref.faulted]
    record(ref, outcomes)
    assert _violations(outcomes) == []


def _violations(outcomes: list[Outcome]) -> list[str]:
    return [f"{o.story} {o.fault} at call {o.call}: {v}" for o in outcomes for v in o.violations]


@pytest.mark.parametrize("fault", [CUT, KILL])
@pytest.mark.parametrize("key", ["a", "b", "c", "d"])
def test_a_fault_at_every_call_of_the_step(campaign: Campaign, key: str, fault: str):
    _fault_every_call(campaign, key, fault)


@pytest.mark.parametrize("key", ["a"])
def test_postgresql_restarted_at_every_call_of_the_step(postgres_campaign: Campaign, key: str):
    _fault_every_call(postgres_campaign, key, DB_RESTART)


@pytest.mark.parametrize("key", ["b"])
def test_garm_answering_late_on_every_call(campaign: Campaign, key: str):
    told = story(key)
    snapshot, ref = campaign.reference(told)
    outcome = run_case(campaign.world, snapshot, told, ref, LATE)
    record(ref, [outcome])
    assert _violations([outcome]) == []


def test_the_pod_replaced_with_the_same_garm_data(campaign: Campaign):
    told = story("pod")
    _, ref = campaign.reference(told)
    _, deployed = campaign.reference(story("a"))
    outcome = Outcome("pod", "pod", None, ref.hooks, ref.violations, ref.seconds)
    record(ref, [outcome])
    assert _violations([outcome]) == []
    assert ref.desired == deployed.desired
