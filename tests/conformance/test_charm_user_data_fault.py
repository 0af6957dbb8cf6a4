"""Pre-install scripts too large for the cloud, seen through the real charm on each backend.

The configurator's ``pre_install_scripts`` end up in the runner's user data, which Nova refuses
over 65,535 bytes once base64-encoded, quoting it back (twice) in its refusal. The user data
holds the runner's install script and token: the charm's status and ``scaleset-status`` show
the refusal without it. On real GARM the provider stand-in renders the user data as the
OpenStack provider does and refuses it as Nova does; the emulator is told to refuse with the
stand-in's words for the same scripts.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import ops

from tests.charm_driver import CharmDriver, configurator
from tests.conformance.backends import EMULATOR
from tests.conformance.charm_faults import blocked, fault_rows, faulted_prefix, running
from tests.conformance.conftest import Garm, hook_until
from tests.garm_emulator import GarmEmulator
from tests.real_garm.provider_standin import ProviderError, nova_create, render_user_data

LOGICAL = "cfg-a-runners"
SHOWN_END = "Invalid input for field/attribute user_data. Value: [...]. '[...]' is too long\"}}"
BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{32,}")
# Over Nova's limit once the provider renders it into the user data (about 36 kB fits).
BIG_SCRIPT = "#!/bin/bash\n" + "echo 'warming the runner cache'\n" * 1600
CREATE = "CreateInstance"


def _nova_user_data_refusal(extra_specs: dict[str, Any]) -> str:
    """The provider's stderr when Nova refuses the user data it renders from ``extra_specs``."""
    user_data = base64.b64encode(render_user_data({"extra_specs": extra_specs}).encode())
    server = {"name": "garm-runner", "metadata": {}, "user_data": user_data.decode(), "tags": []}
    try:
        nova_create(server)
    except ProviderError as exc:
        return f"failed to run command: failed to create instance in provider: {exc}"
    raise AssertionError("the scripts fit in Nova's user data")


def _emulated_cloud(garm: Garm) -> GarmEmulator | None:
    return garm.emulator if garm.name == EMULATOR else None  # pyright: ignore[reportAttributeAccessIssue]


def test_oversized_pre_install_scripts_block_without_showing_the_user_data(
    runner_driver: CharmDriver, charm_garm: Garm
):
    driver, garm = runner_driver, charm_garm
    scripts = json.dumps({"big.sh": BIG_SCRIPT})
    cfg = configurator("cfg-a", relation_id=1, extra={"pre_install_scripts": scripts})
    driver.add_configurator(cfg)
    (scaleset,) = garm.scalesets()
    live = scaleset["name"]
    emulator = _emulated_cloud(garm)
    if emulator is not None:
        emulator.refuse_provider(CREATE, _nova_user_data_refusal(scaleset["extra_specs"]))

    state = hook_until(driver, garm, "the unit Blocked on the runner fault", blocked)
    message = state.unit_status.message
    assert message.startswith(faulted_prefix(LOGICAL))
    assert message.endswith(SHOWN_END)
    assert not BASE64_RUN.search(message), message
    rows = fault_rows(driver)
    assert rows
    for _, name, fault in rows:
        assert name == live
        assert fault.endswith(SHOWN_END)
        assert not BASE64_RUN.search(fault), fault

    # The configurator drops the script: the scale set changes and its next runner comes up.
    if emulator is not None:
        emulator.refuse_provider(CREATE, None)
    driver.change_relation(cfg.relation, pre_install_scripts="")
    hook_until(driver, garm, "a runner of the changed scale set up", lambda _: running(garm, live))
    assert driver.run(driver.ctx.on.update_status()).unit_status == ops.ActiveStatus()
