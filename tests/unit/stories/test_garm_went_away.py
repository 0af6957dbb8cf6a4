"""GARM going away in the middle of a pass, through the real charm on the emulator (issue 56).

GARM v0.2.1-afda4e76 can exit in the middle of a pass (a panic in a scale set's delete), and
Pebble starts it again. The pass that met the cut connection asks for the next one at once, a
bounded number of times in a row; past that, the next pass follows the recovery of Pebble's
check of GARM. The emulator plays the cut: it closes the connection without an answer.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import ops
import pytest
from ops import testing

from charm_pass.continuation import AWAY_RETRIES, GARM_KEEPS_GOING, GARM_WENT_AWAY
from tests.charm_driver import CharmDriver, base_state, configurator, deployed
from tests.garm_emulator import GarmEmulator
from workload import pebble_layer


@pytest.fixture
def deployed_driver(garm: GarmEmulator, tmp_path: Path) -> CharmDriver:
    return deployed(garm, base_state(tmp_path))


def converged(driver: CharmDriver) -> None:
    driver.add_configurator(configurator("cfg-a", relation_id=1))
    assert driver.state.unit_status == ops.ActiveStatus()


def test_a_pass_garm_left_asks_for_the_next_which_converges(
    deployed_driver: CharmDriver, garm: GarmEmulator
):
    driver = deployed_driver
    converged(driver)
    cfg = configurator("cfg-b", relation_id=2, org="other-org")
    driver.state = dataclasses.replace(
        driver.state,
        relations={*driver.state.relations, cfg.relation},
        secrets={*driver.state.secrets, *cfg.secrets},
    )
    garm.drop_next("POST", r"/organizations$")
    driver.run(driver.ctx.on.relation_changed(cfg.relation, remote_unit=0))
    assert driver.state.unit_status == ops.MaintenanceStatus(GARM_WENT_AWAY)
    assert driver.continuation_asked
    assert driver.continue_passes() == 1
    assert driver.state.unit_status == ops.ActiveStatus()
    assert sorted(o["name"] for o in garm.organizations()) == ["canonical", "other-org"]


def test_garm_that_keeps_going_away_stops_the_hooks_until_its_check_recovers(
    deployed_driver: CharmDriver, garm: GarmEmulator
):
    driver = deployed_driver
    converged(driver)
    garm.drop_next("GET", r"/scalesets", count=AWAY_RETRIES + 1)
    driver.run(driver.ctx.on.update_status())
    hooks = driver.continue_passes()
    assert hooks == AWAY_RETRIES
    away = AWAY_RETRIES + 1
    assert driver.state.unit_status == ops.WaitingStatus(
        GARM_KEEPS_GOING.format(count=away, unit="garm/0")
    )
    assert not driver.continuation_asked
    # Pebble's check of GARM failed, then recovered: the next pass follows at once.
    container = driver.state.get_container(pebble_layer.CONTAINER_NAME)
    check = testing.CheckInfo(pebble_layer.CHECK_NAME, level=ops.pebble.CheckLevel.ALIVE)
    driver.run(driver.ctx.on.pebble_check_recovered(container, check))
    assert driver.continuation_asked
    driver.continue_passes()
    assert driver.state.unit_status == ops.ActiveStatus()
