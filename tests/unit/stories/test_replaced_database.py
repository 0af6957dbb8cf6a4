"""The runner machines of a replaced GARM database are named in the status for a week.

Through the real charm on the emulator: GARM answering with another controller id is what
another database looks like to the charm (the emulator keeps its objects; real GARM's lost
database is ``tests/conformance/test_database_recovery.py``). The replacement is kept in
``garm-peers`` (``replaced-controllers``); the test moves it back instead of waiting a week.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import ops
import pytest

from reconcile.leftovers import SHOWN_FOR
from tests.charm_driver import (
    CharmDriver,
    base_state,
    configurator,
    deployed,
    peer_data,
    with_peer_data,
)
from tests.garm_emulator import GarmEmulator


@pytest.fixture
def driver(garm: GarmEmulator, tmp_path: Path) -> CharmDriver:
    deployment = deployed(garm, base_state(tmp_path))
    deployment.add_configurator(configurator("cfg-a", relation_id=1, org="org-a"))
    return deployment


def replaced_controllers(driver: CharmDriver) -> dict[str, str]:
    return json.loads(peer_data(driver.state).get("replaced-controllers", "{}"))


def test_another_controller_names_the_old_one_s_machines_for_a_week(
    driver: CharmDriver, garm: GarmEmulator
) -> None:
    old = garm.state.controller.controller_id
    assert driver.run(driver.ctx.on.update_status()).unit_status == ops.ActiveStatus()

    garm.state.controller.controller_id = str(uuid.uuid4())
    state = driver.run(driver.ctx.on.update_status())

    assert state.unit_status == ops.ActiveStatus(
        f"GARM: runner machines of its replaced database may remain: garm-controller-id={old}"
    )
    replaced = replaced_controllers(driver)
    assert list(replaced) == [old]
    assert datetime.now(UTC) - datetime.fromisoformat(replaced[old]) < timedelta(minutes=1)

    week_ago = datetime.now(UTC) - SHOWN_FOR - timedelta(minutes=1)
    moved = json.dumps({old: week_ago.isoformat()})
    driver.state = with_peer_data(driver.state, **{"replaced-controllers": moved})
    state = driver.run(driver.ctx.on.update_status())

    assert state.unit_status == ops.ActiveStatus()
    assert replaced_controllers(driver) == {}
