"""A failure that lasts is never Active (``reconcile.escalation``, ADR 0016)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconcile.escalation import ESCALATE_AFTER, escalate
from reconcile.memory import Memory, decode, encode
from reconcile.scalesets.reclaim import Registration
from vocabulary.notices import Notice, Severity, refusal

NOW = datetime(2026, 12, 5, 6, 0, tzinfo=UTC)


def failing() -> Notice:
    return refusal("cfg-a-runners", 500, said="Server error")


def test_a_new_failure_waits_and_is_remembered_from_now():
    notices, since = escalate([failing()], {}, NOW)

    assert notices == [failing()]
    assert notices[0].severity is Severity.WAITING
    assert since == {str(failing()): NOW}


def test_a_failure_that_lasted_is_blocked_with_what_garm_said_and_since_when():
    first = NOW - ESCALATE_AFTER
    notices, since = escalate([failing()], {str(failing()): first}, NOW)

    assert [(n.severity, str(n)) for n in notices] == [
        (
            Severity.BLOCKED,
            "cfg-a-runners: GARM failed on it (500): Server error, since 2026-12-05 05:45 UTC",
        )
    ]
    assert since == {str(failing()): first}


def test_a_failure_short_of_the_delay_still_waits():
    first = NOW - ESCALATE_AFTER + timedelta(seconds=1)
    notices, _ = escalate([failing()], {str(failing()): first}, NOW)

    assert notices[0].severity is Severity.WAITING


def test_a_failure_that_stopped_is_forgotten_and_others_pass_unchanged():
    waiting = Notice(Severity.WAITING, "cfg-a-runners", "waiting for provider cfg-a-0")
    notices, since = escalate([waiting], {str(failing()): NOW - timedelta(hours=1)}, NOW)

    assert notices == [waiting]
    assert since == {}


def test_first_sightings_and_registrations_survive_the_databag():
    registered = {"cfg-a-runners-1": Registration("github.com", "Default", (3, 9))}
    memory = Memory(failing={str(failing()): NOW}, registered=registered)

    fields = encode(memory, present=())

    assert decode(fields).failing == {str(failing()): NOW}
    assert decode(fields).registered == registered
    assert decode({"github-scalesets": '{"x": ["github.com", 1, []]}'}).registered == {}
    assert decode({"failing-since": "not json"}).failing == {}
