"""A scale set named like the operators' (``ubuntu-noble-x64-large``) through the real charm.

GARM hands the provider ``<scale set name>-<entity UUID>`` as the pool ID and the provider tags
the server with it; Nova refuses a tag over 60 characters. The image's provider shim maps a long
pool ID to one Nova accepts (ADR 0008). Without the shim the charm must say which scale set
cannot start and why; with it the scale set gets its runner. Real GARM only: the emulator has
no provider to run with or without a shim.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import ops
import pytest

from container_scripts.provider_shim import POOL_TAG_PREFIX
from tests.charm_driver import CharmDriver, configurator
from tests.conformance.backends import REAL
from tests.conformance.charm_faults import blocked, fault_rows, faulted_prefix
from tests.conformance.conftest import Garm, hook_until, prepared_real_garm
from tests.github_standin import GitHubStandin
from tests.real_garm.harness import SKIP_REASON, RealGarm, garm_binary

LOGICAL = "ubuntu-noble-x64-large"
# Nova's refusal of the first tag, which the status shows with the tag it refused.
TAG_REFUSAL_END = "' is too long\"}}"


@pytest.fixture(params=[REAL])
def backend(request: pytest.FixtureRequest) -> str:
    """Real GARM only."""
    if garm_binary() is None:
        pytest.skip(SKIP_REASON)
    return request.param


@pytest.fixture
def shim() -> bool:
    """Whether GARM runs the provider through the image's shim."""
    return True


@pytest.fixture
def charm_garm(
    backend: str, tmp_path: Path, github: GitHubStandin, shim: bool
) -> Iterator[RealGarm]:
    """Real GARM, started by the charm's first replan, with or without the provider shim.

    Asks for ``backend`` first, so that it skips where no GARM binary is found.
    """
    assert backend == REAL
    real = prepared_real_garm(tmp_path, github, shim)
    try:
        yield real
    finally:
        real.stop()


def _long_scaleset(driver: CharmDriver, garm: Garm) -> str:
    driver.add_configurator(configurator("cfg-a", relation_id=1, name=LOGICAL))
    (scaleset,) = garm.scalesets()
    (org,) = garm.organizations()
    # The tag the provider puts on the server, without the shim.
    assert len(_tag(scaleset["name"], org["id"])) > 60
    return scaleset["name"]


def _tag(live: str, org_id: str) -> str:
    return f"{POOL_TAG_PREFIX}{live}-{org_id}"


@pytest.mark.parametrize("shim", [False], ids=["no-shim"])
def test_without_the_shim_the_status_names_the_scaleset_and_the_tag_refusal(
    runner_driver: CharmDriver, charm_garm: Garm
):
    driver, garm = runner_driver, charm_garm
    live = _long_scaleset(driver, garm)
    (org,) = garm.organizations()
    refused = f"'{_tag(live, org['id'])}{TAG_REFUSAL_END}"
    state = hook_until(driver, garm, "the unit Blocked on the runner fault", blocked)
    message = state.unit_status.message
    assert message.startswith(faulted_prefix(LOGICAL))
    assert message.endswith(refused)
    assert [(name, fault[-len(refused) :]) for _, name, fault in fault_rows(driver)] == [
        (live, refused)
    ]


def test_with_the_shim_it_gets_an_idle_runner_and_the_unit_stays_active(
    runner_driver: CharmDriver, charm_garm: Garm
):
    driver, garm = runner_driver, charm_garm
    live = _long_scaleset(driver, garm)

    def idle(_state: object) -> bool:
        return any(r.get("runner_status") == "idle" for r in garm.instances(live))

    state = hook_until(driver, garm, "an idle runner", idle)
    assert state.unit_status == ops.ActiveStatus()
    assert not any(r.get("provider_fault") for r in garm.instances(live))
    assert "runner-faults" not in driver.run_action("scaleset-status")
