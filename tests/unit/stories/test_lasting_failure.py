"""A failure that lasts is never Active, through the real charm on the emulator (ADR 0016).

GARM failing on one scale set's create (a 5xx: GitHub unreachable from GARM, say) is retried
every pass and shown under Active for a while; once it has lasted 15 minutes the unit is
Blocked, naming the scale set, what GARM said and since when. The first sighting is kept in
``garm-peers`` (``failing-since``); the test moves it back instead of waiting.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import ops
import pytest
from ops import testing

from reconcile.escalation import ESCALATE_AFTER
from tests.charm_driver import (
    CharmDriver,
    base_state,
    configurator,
    deployed,
    peer_data,
    with_peer_data,
)
from tests.garm_emulator import GarmEmulator

CREATE = r"/organizations/[^/]+/scalesets"
RETRIED = "cfg-a-runners: GARM failed on it (500); will retry"


@pytest.fixture
def driver(garm: GarmEmulator, tmp_path: Path) -> CharmDriver:
    return deployed(garm, base_state(tmp_path))


def failing_since(driver: CharmDriver) -> dict[str, str]:
    return json.loads(peer_data(driver.state).get("failing-since", "{}"))


def move_back(driver: CharmDriver, key: str, when: datetime) -> None:
    """Rewrite the remembered first sighting of ``key`` (as time passing would make it)."""
    moved = json.dumps({key: when.isoformat()})
    driver.state = with_peer_data(driver.state, **{"failing-since": moved})


def test_a_lasting_failure_is_blocked_with_what_garm_said_and_since_when(
    driver: CharmDriver, garm: GarmEmulator
) -> None:
    garm.fail_next("POST", CREATE, 500, count=10, error="Server error", details="")
    state = driver.add_configurator(configurator("cfg-a", relation_id=1, org="org-a"))

    assert state.unit_status == ops.ActiveStatus(RETRIED)
    first = datetime.fromisoformat(failing_since(driver)[RETRIED])
    assert datetime.now(UTC) - first < timedelta(minutes=1)

    long_ago = (datetime.now(UTC) - ESCALATE_AFTER - timedelta(minutes=5)).replace(
        second=0, microsecond=0
    )
    move_back(driver, RETRIED, long_ago)
    state = driver.run(driver.ctx.on.update_status())

    assert state.unit_status == ops.BlockedStatus(
        "cfg-a-runners: GARM failed on it (500): Server error,"
        f" since {long_ago:%Y-%m-%d %H:%M} UTC"
    )
    assert failing_since(driver) == {RETRIED: long_ago.isoformat()}

    garm.clear_faults()
    state = driver.run(driver.ctx.on.update_status())

    assert state.unit_status == ops.ActiveStatus()
    assert failing_since(driver) == {}
    assert [s["name"] for s in garm.scalesets()] == ["cfg-a-runners-18515357"]


def test_a_failure_short_of_the_delay_stays_active(
    driver: CharmDriver, garm: GarmEmulator
) -> None:
    garm.fail_next("POST", CREATE, 500, count=10, error="Server error", details="")
    driver.add_configurator(configurator("cfg-a", relation_id=1, org="org-a"))
    move_back(driver, RETRIED, datetime.now(UTC) - ESCALATE_AFTER + timedelta(minutes=1))

    state: testing.State = driver.run(driver.ctx.on.update_status())

    assert state.unit_status == ops.ActiveStatus(RETRIED)
