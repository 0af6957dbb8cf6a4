"""A configurator that moves its organisation from github.com to a GHES, through the real charm.

On the emulator (it calls no GitHub, so the GHES scale set is created whatever its CA): adding
``github_base_url`` to a configurator is a new endpoint, credential and organisation; the scale
set moves by replacement (placement, ADR 0001) and the github.com organisation and credential go
once its scale set is gone. A converged hook then writes nothing.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from ops import testing

from tests.charm_driver import CharmDriver, base_state, configurator, deployed
from tests.garm_emulator import GarmEmulator

GHES = "https://ghes.example.com"


@pytest.fixture
def driver(garm: GarmEmulator, tmp_path: Path) -> CharmDriver:
    return deployed(garm, base_state(tmp_path))


def placed(garm: GarmEmulator) -> list[tuple[str, str, bool]]:
    return sorted(
        (s["name"], s["endpoint"]["name"], bool(s.get("enabled"))) for s in garm.scalesets()
    )


def test_moving_a_configurator_to_a_ghes_replaces_its_scale_set(
    driver: CharmDriver, garm: GarmEmulator
) -> None:
    cfg = configurator("cfg-a", relation_id=1)
    driver.add_configurator(cfg)
    ((old_name, endpoint, _),) = placed(garm)
    assert endpoint == "github.com"
    relation = driver.state.get_relation(1)
    assert isinstance(relation, testing.Relation)
    driver.change_relation(relation, github_base_url=GHES)
    names = {e["name"] for e in garm.endpoints()}
    assert names == {"github.com", "ghes.example.com"}
    orgs = sorted((o["name"], o["endpoint"]["name"]) for o in garm.organizations())
    assert orgs == [("canonical", "ghes.example.com"), ("canonical", "github.com")]
    by_endpoint = {endpoint: name for name, endpoint, _ in placed(garm)}
    assert by_endpoint["github.com"] == old_name
    assert by_endpoint["ghes.example.com"] != old_name

    def moved(_: testing.State) -> bool:
        return [e for _, e, _ in placed(garm)] == ["ghes.example.com"]

    for _ in range(20):
        garm.advance(timedelta(seconds=60))
        if moved(driver.run(driver.ctx.on.update_status())):
            break
    assert moved(driver.state), placed(garm)
    driver.run(driver.ctx.on.update_status())
    assert [o["endpoint"]["name"] for o in garm.organizations()] == ["ghes.example.com"]
    assert [c["name"] for c in garm.credentials()] == ["app-101-202-ghes.example.com"]
    garm.clear_requests()
    driver.run(driver.ctx.on.update_status())
    assert garm.writes() == []
