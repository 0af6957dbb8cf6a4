"""The memory kept between hooks: its fields read back as written, bad fields as empty."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconcile.memory import (
    INCUMBENTS_KEY,
    RUNNER_FAULTS_KEY,
    SENT_CREDENTIALS_KEY,
    STALLS_KEY,
    Memory,
    RememberedFault,
    decode,
    encode,
)
from reconcile.scalesets.reclaim import Registration
from reconcile.scalesets.stall import Recovery, Step
from vocabulary.desired_state import Incumbents, entity_key

AT = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
FULL = Memory(
    sent={"app-1-2": "f" * 64},
    faults={"small-18515357": RememberedFault("image gone", AT.isoformat())},
    incumbents=Incumbents(
        {"small": "cfg-a"},
        {entity_key("organization", "Org-A"): "cfg-a"},
        {"app-1-2": ("cfg-a", "d" * 64)},
    ),
    stalls={"small-18515357": Recovery(Step.UPDATED, AT, AT)},
    registered={"small-18515357": Registration("github.com", "Default", (3, 9))},
    failing={"small: GARM failed on it (500); will retry": AT},
    controller="new-id",
    replaced={"old-id": AT},
)


def test_what_is_written_reads_back():
    assert decode(encode(FULL, present=())) == FULL


def test_nothing_to_remember_writes_no_empty_record():
    assert encode(Memory(sent={}), present=()) == {}


def test_an_emptied_field_is_written_over_the_old_one():
    present = {RUNNER_FAULTS_KEY, INCUMBENTS_KEY, STALLS_KEY}
    assert encode(Memory(), present) == {
        RUNNER_FAULTS_KEY: "{}",
        INCUMBENTS_KEY: "{}",
        STALLS_KEY: "{}",
    }


@pytest.mark.parametrize("raw", ["not json", "[1, 2]", '{"x": 3}'])
def test_an_unreadable_field_reads_as_empty(raw: str):
    fields = dict.fromkeys(
        (SENT_CREDENTIALS_KEY, RUNNER_FAULTS_KEY, INCUMBENTS_KEY, STALLS_KEY), raw
    )
    assert decode(fields) == Memory(sent={})
