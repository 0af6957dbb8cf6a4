"""A pass cut by its budget, continued by the charm's Pebble notice, through the real charm.

Twelve configurators related at once on the emulator. One deployment runs every pass to the
end; the other gives each pass a budget of a few objects (``CharmDriver(budget_ticks=...)``),
so the first pass stops short, says how far it got and records the charm's custom notice, and
the ``pebble-custom-notice`` hooks that follow go on until a pass goes through. Both end with
the same GARM, and the cut one never asks for more once converged. The removal of all twelve
is cut and continued the same way.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any
from unittest import mock

import ops
import pytest
from ops import testing

from charm import GarmCharm
from tests.charm_driver import (
    CharmDriver,
    base_state,
    configurator,
    deployed,
    planned_providers,
)
from tests.garm_emulator import GarmEmulator

COUNT = 12
PROGRESS = re.compile(r"^([A-Za-z ]+): (\d+) of (\d+)$")


def related(driver: CharmDriver) -> None:
    """All configurators arrive before the first pass that sees them (a model deployed whole)."""
    cfgs = [
        configurator(f"cfg-{i:02d}", relation_id=10 + i, org=f"org-{i:02d}", app_id=str(100 + i))
        for i in range(COUNT)
    ]
    driver.state = dataclasses.replace(
        driver.state,
        relations={*driver.state.relations, *(c.relation for c in cfgs)},
        secrets={*driver.state.secrets, *(s for c in cfgs for s in c.secrets)},
    )


def garm_state(garm: GarmEmulator) -> dict[str, Any]:
    """What the pass left in GARM, without ids or times (two GARMs number rows alike anyway)."""
    drop = {"id", "created_at", "updated_at", "org_id", "repo_id", "template_id", "credentials_id"}
    drop |= {"entity_id", "scale_set_id", "endpoint_id", "last_message_id"}

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k not in drop}  # pyright: ignore
        if isinstance(value, list):
            return [clean(v) for v in value]  # pyright: ignore
        return value

    def rows(items: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
        return sorted((clean(item) for item in items), key=lambda row: str(row.get(key)))

    return {
        "credentials": rows(garm.credentials(), "name"),
        "organizations": rows(garm.organizations(), "name"),
        "scalesets": rows(garm.scalesets(), "name"),
        "templates": sorted(t["name"] for t in garm.templates()),
    }


@pytest.fixture
def uncut(tmp_path: Path) -> GarmEmulator:
    garm = GarmEmulator()
    garm.start()
    try:
        (tmp_path / "uncut").mkdir()
        driver = deployed(garm, base_state(tmp_path / "uncut"))
        related(driver)
        driver.run(driver.ctx.on.update_status())
        assert not driver.continuation_asked
        assert driver.state.unit_status == ops.ActiveStatus()
        yield garm
    finally:
        garm.stop()


def test_a_cut_pass_continued_by_the_notice_converges_to_the_uncut_garm(
    uncut: GarmEmulator, garm: GarmEmulator, tmp_path: Path
) -> None:
    (tmp_path / "cut").mkdir()
    driver = CharmDriver(garm, base_state(tmp_path / "cut"), budget_ticks=6)
    driver.run(driver.ctx.on.install())
    driver.run(driver.ctx.on.leader_elected())
    related(driver)
    state = driver.run(driver.ctx.on.update_status())

    assert driver.continuation_asked
    assert isinstance(state.unit_status, ops.MaintenanceStatus)
    progress = PROGRESS.match(state.unit_status.message)
    assert progress is not None, state.unit_status.message
    assert int(progress[2]) < int(progress[3])
    hooks = driver.continue_passes()

    assert hooks >= 2
    assert driver.state.unit_status == ops.ActiveStatus()
    assert garm_state(garm) == garm_state(uncut)
    assert len(garm.scalesets()) == COUNT
    driver.run(driver.ctx.on.update_status())
    assert not driver.continuation_asked


def test_the_removal_of_every_configurator_is_cut_and_continued_too(
    garm: GarmEmulator, tmp_path: Path
) -> None:
    driver = deployed(garm, base_state(tmp_path))
    related(driver)
    driver.run(driver.ctx.on.update_status())
    assert len(garm.scalesets()) == COUNT

    cut = CharmDriver(garm, driver.state, budget_ticks=6)
    others = {r for r in cut.state.relations if r.endpoint != "garm-configurator"}
    cut.state = dataclasses.replace(cut.state, relations=others)
    state = cut.run(cut.ctx.on.update_status())

    assert cut.continuation_asked
    assert isinstance(state.unit_status, ops.MaintenanceStatus)
    assert "deleting scale sets" in state.unit_status.message
    # No provider is trimmed (a GARM restart) until a pass goes through.
    replans = cut.replans
    planned = planned_providers(cut.state)
    hooks = 0
    while cut.continuation_asked:
        assert planned_providers(cut.state) == planned
        assert hooks < 20
        cut.continue_once()
        hooks += 1
    assert hooks >= 2
    assert cut.replans == replans
    # The pass that went through trimmed the record; the next one restarts GARM with it, once.
    cut.run(cut.ctx.on.update_status())
    assert planned_providers(cut.state) == []
    assert cut.replans == replans + 1
    assert garm.scalesets() == []
    assert garm.organizations() == []
    assert garm.credentials() == []
    assert cut.state.unit_status == ops.WaitingStatus("Waiting for garm-configurator relation")


def test_a_custom_notice_that_is_not_the_charms_runs_no_pass(
    driver_garm: tuple[CharmDriver, GarmEmulator],
) -> None:
    driver, garm = driver_garm
    garm.clear_requests()
    container = driver.state.get_container("garm")
    notice = testing.Notice("example.com/other")
    container = dataclasses.replace(container, notices=[notice])
    others = {c for c in driver.state.containers if c.name != container.name}
    driver.state = dataclasses.replace(driver.state, containers={*others, container})
    driver.run(driver.ctx.on.pebble_custom_notice(container, notice))
    assert garm.requests == []


@pytest.fixture
def driver_garm(garm: GarmEmulator, tmp_path: Path) -> tuple[CharmDriver, GarmEmulator]:
    return deployed(garm, base_state(tmp_path)), garm


def test_a_pass_whose_reading_outlasts_the_budget_still_writes(
    garm: GarmEmulator, tmp_path: Path
) -> None:
    """The budget bounds the pass's writes, not its reading of the relations.

    Under Juju every relation read is a hook-tool process, so reading hundreds of
    configurators takes as long as a budget: measured with the packed charm at 500, a budget
    started before the reading was spent before the first write, in every pass. Here the pass's
    clock is the hook tools it ran, and the budget fewer than the reading takes: each pass still
    writes, and the passes converge.
    """
    driver = deployed(garm, base_state(tmp_path))
    related(driver)
    tools = driver._tools  # the hook's tool calls, counted as they run
    budget = 20

    def clock() -> float:
        return float(sum(tools.calls.values()))

    with (
        mock.patch.object(GarmCharm, "pass_budget", float(budget)),
        mock.patch.object(GarmCharm, "pass_clock", staticmethod(clock)),
    ):
        driver.run(driver.ctx.on.update_status())
        assert sum(driver.tool_calls.values()) > budget
        assert len(garm.credentials()) > 0
        assert driver.continuation_asked
        hooks = driver.continue_passes()

    assert hooks >= 1
    assert driver.state.unit_status == ops.ActiveStatus()
    assert len(garm.scalesets()) == COUNT
