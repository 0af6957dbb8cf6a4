"""The runner machines a replaced GARM database leaves in the cloud, named for a week."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reconcile.leftovers import SHOWN_FOR, leftover_notices, replaced_controllers
from vocabulary.notices import Notice, Severity

NOW = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)


def test_another_controller_id_is_remembered_and_logged(caplog: pytest.LogCaptureFixture):
    replaced = replaced_controllers("old-id", "new-id", {}, NOW)

    assert replaced == {"old-id": NOW}
    assert any("garm-controller-id=old-id" in r.getMessage() for r in caplog.records)
    assert leftover_notices(replaced) == [
        Notice(
            Severity.PROGRESS,
            "GARM",
            "runner machines of its replaced database may remain: garm-controller-id=old-id",
        )
    ]


@pytest.mark.parametrize(("before", "now_id"), [("", "new-id"), ("same", "same"), ("old", "")])
def test_a_first_reading_the_same_id_or_none_replaces_nothing(before: str, now_id: str):
    assert replaced_controllers(before, now_id, {}, NOW) == {}


def test_a_replaced_id_is_named_for_a_week_then_forgotten():
    remembered = {"old-id": NOW - SHOWN_FOR}

    assert replaced_controllers("new-id", "new-id", remembered, NOW) == remembered
    later = NOW + timedelta(seconds=1)
    assert replaced_controllers("new-id", "new-id", remembered, later) == {}


def test_a_database_restored_to_the_replaced_controller_names_it_no_more():
    # The copy of the old database is back: its controller sees its machines again.
    remembered = {"old-id": NOW - timedelta(hours=1)}

    replaced = replaced_controllers("new-id", "old-id", remembered, NOW)

    assert replaced == {"new-id": NOW}
