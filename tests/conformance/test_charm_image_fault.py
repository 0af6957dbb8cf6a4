"""A runner image the cloud lacks, seen through the real charm on each GARM backend.

The charm runs through ``ops.testing`` with its ``garm-peers`` relation (where it remembers a
fault) and an ingress URL runners can call back to. On real GARM the provider stand-in's cloud
loses the image from its catalogue and refuses it as the OpenStack provider does; GARM shows the
provider's stderr as the runner's fault for about five seconds of each retry. The emulator is
told to refuse in the same words.
"""

from __future__ import annotations

import ops

from reconcile.scalesets.faults import FAULT_LINE_LIMIT
from tests.charm_driver import CharmDriver, configurator
from tests.conformance.backends import wait_for
from tests.conformance.charm_faults import blocked, fault_rows, faulted, faulted_prefix, running
from tests.conformance.conftest import Garm, hook_until
from tests.conformance.test_provider_fault import STDERR, allow_the_image, refuse_the_image

LOGICAL = "cfg-a-runners"
# The end of the provider's stderr, where the cause is.
SHOWN = "..." + STDERR[-(FAULT_LINE_LIMIT - 3) :]


def test_a_missing_image_blocks_naming_the_scaleset_until_the_cloud_has_it(
    runner_driver: CharmDriver, charm_garm: Garm
):
    driver, garm = runner_driver, charm_garm
    driver.add_configurator(configurator("cfg-a", relation_id=1))
    refuse_the_image(garm)  # before GARM's workers create the first runner
    (live,) = [s["name"] for s in garm.scalesets()]
    faulted_status = ops.BlockedStatus(faulted_prefix(LOGICAL) + SHOWN)

    state = hook_until(driver, garm, "the unit Blocked on the runner fault", blocked)
    assert state.unit_status == faulted_status

    # GARM deletes the failed runner and tries again: most hooks find no runner in error. The
    # charm remembers the fault; a hook between two listings without one still shows it.
    def hook_between_faults() -> ops.StatusBase | None:
        if faulted(garm):
            return None
        status = driver.run(driver.ctx.on.update_status()).unit_status
        return None if faulted(garm) else status

    for _ in range(2):
        found = wait_for(garm, "a hook while GARM lists no fault", hook_between_faults)
        assert found == faulted_status

    rows = fault_rows(driver)
    assert rows
    assert all(scaleset == live and fault == SHOWN for _, scaleset, fault in rows), rows

    allow_the_image(garm)
    state = hook_until(driver, garm, "the status to clear", lambda s: not blocked(s))
    assert state.unit_status == ops.ActiveStatus()
    assert running(garm, live)
    assert "runner-faults" not in driver.run_action("scaleset-status")
