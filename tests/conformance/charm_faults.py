"""What the runner-fault tests of the charm read: the status and the ``scaleset-status`` table.

Shared by the conformance tests that drive the real charm into runner faults (the cloud
refusing an image, user data or a server tag): one file per test, so the test workers run
them side by side while each waits on GARM's retry loop.
"""

from __future__ import annotations

import ops
from ops import testing

from tests.charm_driver import CharmDriver
from tests.conformance.conftest import Garm


def faulted_prefix(logical: str) -> str:
    """The start of the Blocked status of a scale set whose runners cannot start."""
    return f"{logical}: runners fail to start: "


def blocked(state: testing.State) -> bool:
    """Whether the unit is Blocked."""
    return isinstance(state.unit_status, ops.BlockedStatus)


def faulted(garm: Garm) -> bool:
    """Whether GARM lists a runner with a provider fault right now."""
    return any(r.get("provider_fault") for r in garm.instances())


def running(garm: Garm, scaleset: str) -> bool:
    """Whether a runner of the scale set is up."""
    return any(r.get("status") == "running" for r in garm.instances(scaleset))


def fault_rows(driver: CharmDriver) -> list[list[str]]:
    """The ``runner-faults`` table of ``scaleset-status``: (runner, scale set, fault) rows."""
    table = driver.run_action("scaleset-status")["runner-faults"]
    header, *rows = table.splitlines()
    assert header.split() == ["RUNNER", "SCALESET", "FAULT"]
    return [row.split(maxsplit=2) for row in rows]
