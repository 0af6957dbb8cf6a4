"""A scale set GARM stopped scaling, through the real charm on the emulator: the restart step.

That the charm names a stall and updates the scale set is tested on both backends
(``tests/conformance/test_charm_stall.py``). Here the update was made five minutes ago (the
charm remembers it in ``garm-peers``) and GARM still does not scale: the charm restarts GARM
through Pebble, once, and logs it as a security event.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import ops
import pytest

from reconcile.memory import STALLS_KEY
from reconcile.scalesets import stall
from tests.charm_driver import CharmDriver, base_state, configurator, peer_data, with_peer_data
from tests.garm_emulator import GarmEmulator
from tests.security_log import security_events
from tests.unit.test_charm import deploy

LOGICAL = "cfg-a-runners"
LIVE = "cfg-a-runners-18515357"


def _remember(driver: CharmDriver, record: dict[str, list[str]]) -> None:
    driver.state = with_peer_data(driver.state, **{STALLS_KEY: json.dumps(record)})


def test_a_stall_an_update_did_not_end_gets_one_garm_restart(
    garm: GarmEmulator,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
):
    # The second look the charm takes before naming a stall: the emulator's GARM does nothing.
    monkeypatch.setattr(stall, "_pause", lambda _: None)
    driver = CharmDriver(garm, base_state(tmp_path))
    deploy(driver)
    driver.add_configurator(configurator("cfg-a", relation_id=1, extra={"min_idle_runner": "0"}))
    now = datetime.now(UTC)
    first = (now - timedelta(minutes=20)).replace(second=0, microsecond=0)
    garm.stall_demand(LIVE, 1, now - timedelta(minutes=5))
    _remember(
        driver, {LIVE: ["updated", (now - timedelta(minutes=5)).isoformat(), first.isoformat()]}
    )
    garm.clear_requests()
    caplog.clear()

    state = driver.run(driver.ctx.on.update_status())

    since = first.strftime("%Y-%m-%d %H:%M UTC")
    words = f"{LOGICAL}: GARM is not scaling (wants 1, has 0, since {since})"
    assert state.unit_status == ops.ActiveStatus(words)
    assert driver.restarts == 1
    assert garm.writes() == []
    (event,) = security_events(caplog, "sys_restart")
    assert event["event"] == "sys_restart:garm/0,stalled-scaleset"
    recorded = json.loads(peer_data(state)[STALLS_KEY])
    assert [step for step, _at, _since in recorded.values()] == ["restarted"]

    # The restarted GARM's worker reads its row and scales: the memory goes, nothing restarts.
    garm.advance()
    state = driver.run(driver.ctx.on.update_status())
    assert state.unit_status == ops.ActiveStatus()
    assert json.loads(peer_data(state)[STALLS_KEY]) == {}
    assert driver.restarts == 1
