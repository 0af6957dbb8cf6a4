"""The GHES CA bundles GARM's process is given, through the real charm on the emulator.

GARM's Actions client trusts only its process's CA store, so the charm puts every GHES
endpoint's bundle in GARM's service environment (``endpoint_trust``). A converged hook restarts
nothing; a rotation restarts GARM once; a departed configurator's bundle stays while GARM holds
its endpoint (its scale set drains through the Actions service), even across a replaced pod,
and leaves with the endpoint. Real GARM running a runner through it:
``tests/conformance/test_charm_ghes.py``.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from ops import testing

from tests.charm_driver import CharmDriver, base_state, configurator, deployed, planned_env
from tests.garm_emulator import GarmEmulator
from tests.real_garm.tls_front import make_certificates
from vocabulary.github_endpoint import ca_certificates
from workload import endpoint_trust, pebble_layer

GHES = "https://ghes.example.com"
NAME = "ghes.example.com"


@pytest.fixture
def driver(garm: GarmEmulator, tmp_path: Path) -> CharmDriver:
    return deployed(garm, base_state(tmp_path))


def new_ca(tmp_path: Path, name: str) -> str:
    directory = tmp_path / name
    directory.mkdir()
    return make_certificates(directory)[0].read_text()


def trusted(state: testing.State) -> dict[str, str]:
    """The bundles GARM's process is given in the state's plan."""
    return endpoint_trust.from_environment(planned_env(state))


def holds_endpoint(garm: GarmEmulator) -> bool:
    return any(e["name"] == NAME for e in garm.endpoints())


def ghes_configurator(ca: str) -> testing.Relation:
    extra = {"github_base_url": GHES, "github_ca_bundle": ca}
    return configurator("cfg-ghes", relation_id=2, extra=extra)


def test_a_ghes_ca_reaches_garms_process_and_a_rotation_restarts_it_once(
    driver: CharmDriver, tmp_path: Path
) -> None:
    ca = new_ca(tmp_path, "first")
    driver.add_configurator(configurator("cfg-com", relation_id=1))
    assert trusted(driver.state) == {}
    assert endpoint_trust.to_environment({}) == {}
    state = driver.add_configurator(ghes_configurator(ca))
    assert trusted(state) == {NAME: ca.strip()}
    replans = driver.replans
    driver.run(driver.ctx.on.update_status())
    assert driver.replans == replans

    rotated = new_ca(tmp_path, "second") + ca
    relation = driver.state.get_relation(2)
    assert isinstance(relation, testing.Relation)
    state = driver.change_relation(relation, github_ca_bundle=rotated)
    assert ca_certificates(trusted(state)[NAME]) == ca_certificates(rotated)
    assert driver.replans == replans + 1
    driver.run(driver.ctx.on.update_status())
    assert driver.replans == replans + 1


def test_a_departed_configurators_ca_stays_while_garm_holds_its_endpoint(
    driver: CharmDriver, garm: GarmEmulator, tmp_path: Path
) -> None:
    ca = new_ca(tmp_path, "ca").strip()
    driver.add_configurator(ghes_configurator(ca))
    (scaleset,) = garm.scalesets()
    runner = garm.add_instance(scaleset["name"])
    garm.mark_busy(runner["name"])
    relation = driver.state.get_relation(2)
    assert isinstance(relation, testing.Relation)
    replans = driver.replans
    state = driver.remove_relation(relation)
    # Its runner holds a job: the scale set drains, through the Actions service, with GARM
    # trusting the CA all along (not restarted).
    assert holds_endpoint(garm)
    assert trusted(state) == {NAME: ca}
    assert driver.replans == replans

    # The pod is replaced while the scale set drains: a fresh plan, and GARM's endpoint.
    old = state.get_container(pebble_layer.CONTAINER_NAME)
    fresh = testing.Container(pebble_layer.CONTAINER_NAME, can_connect=True, mounts=old.mounts)
    driver.state = dataclasses.replace(state, containers={fresh})
    state = driver.run(driver.ctx.on.pebble_ready(fresh))
    assert holds_endpoint(garm)
    # Back from GARM's endpoint (its own encoding of the bundle).
    assert {k: ca_certificates(v) for k, v in trusted(state).items()} == {
        NAME: ca_certificates(ca)
    }

    garm.finish_job(runner["name"])
    for _ in range(20):
        garm.advance(timedelta(seconds=60))
        state = driver.run(driver.ctx.on.update_status())
        if not holds_endpoint(garm):
            break
    assert not holds_endpoint(garm)
    assert trusted(state) == {}
    assert not any(name.startswith("GARM_GITHUB_CA_BUNDLES") for name in planned_env(state))
