"""The runner machines of a replaced GARM database are named in the status for a week.

Through the real charm on the emulator: GARM answering with another controller id is what
another database looks like to the charm (the emulator keeps its objects; real GARM's lost
database is ``tests/conformance/test_database_recovery.py``). The replacement is kept in
``garm-peers`` (``replaced-controllers``); the test moves it back instead of waiting a week.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import ops
import pytest

from leadership import PEER_RELATION
from reconcile.leftovers import SHOWN_FOR
from tests.charm_driver import CharmDriver, base_state, configurator, deployed
from tests.garm_emulator import GarmEmulator


@pytest.fixture
def driver(garm: GarmEmulator, tmp_path: Path) -> CharmDriver:
    deployment = deployed(garm, base_state(tmp_path))
    deployment.add_configurator(configurator("cfg-a", relation_id=1, org="org-a"))
    return deployment


def peer_field(driver: CharmDriver, key: str) -> dict[str, str]:
    peers = driver.state.get_relations(PEER_RELATION)[0]
    return json.loads(peers.local_app_data.get(key, "{}"))


def rewrite_peer_field(driver: CharmDriver, key: str, value: dict[str, str]) -> None:
    peers = driver.state.get_relations(PEER_RELATION)[0]
    moved = dataclasses.replace(
        peers, local_app_data={**peers.local_app_data, key: json.dumps(value)}
    )
    others = {r for r in driver.state.relations if r.id != peers.id}
    driver.state = dataclasses.replace(driver.state, relations={*others, moved})


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
    replaced = peer_field(driver, "replaced-controllers")
    assert list(replaced) == [old]
    assert datetime.now(UTC) - datetime.fromisoformat(replaced[old]) < timedelta(minutes=1)

    week_ago = datetime.now(UTC) - SHOWN_FOR - timedelta(minutes=1)
    rewrite_peer_field(driver, "replaced-controllers", {old: week_ago.isoformat()})
    state = driver.run(driver.ctx.on.update_status())

    assert state.unit_status == ops.ActiveStatus()
    assert peer_field(driver, "replaced-controllers") == {}
