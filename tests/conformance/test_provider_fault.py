"""How GARM records a provider's failure on a runner, on both backends.

When its external provider fails ``CreateInstance``, GARM puts the runner in ``error`` with
``provider_fault``: bytes (base64 in the JSON, as Go encodes ``[]byte``) holding its own error
around the provider's stdout, stderr and exit status. The next pass of its instance manager
moves the runner to ``pending_delete``, which clears the fault, deletes it and starts another.
Real GARM's provider (the stand-in behind the shim) refuses an image its cloud lacks; the
emulator is told to refuse with the same words.
"""

from __future__ import annotations

import base64
from typing import Any

from container_scripts.garm_entrypoint import GARM_PROVIDERS_JSON
from garm import GarmClient
from tests.conformance.backends import EMULATOR, wait_for
from tests.conformance.conftest import Garm
from tests.conformance.test_drain import _seed_scaleset
from tests.garm_emulator import GarmEmulator
from tests.real_garm.harness import DEFAULT_CATALOGUE, RealGarm
from tests.real_garm.provider_standin import Catalogue

SCALESET = "faulty-1a2b3c4d"
# Long enough for real GARM's instance manager (a 5 s loop) to act twice if it were going to.
SETTLES = 24
IMAGE = "ubuntu-24.04"  # the image _seed_scaleset names
STDERR = (
    "failed to run command: failed to create instance in provider: failed to resolve image "
    f"info: failed to find image with name or id {IMAGE} and visibility 'public'"
)


def refuse_the_image(garm: Garm) -> None:
    """The cloud loses :data:`IMAGE`; the emulator's loaded providers refuse it in its words."""
    if garm.name == EMULATOR:
        emulator: GarmEmulator = garm.emulator  # pyright: ignore[reportAttributeAccessIssue]
        emulator.refuse_provider("CreateInstance", STDERR)
        return
    real: RealGarm = garm  # pyright: ignore[reportAssignmentType]
    images = tuple(image for image in DEFAULT_CATALOGUE.images if image != IMAGE)
    real.set_catalogue(Catalogue(images=images, flavors=DEFAULT_CATALOGUE.flavors))


def allow_the_image(garm: Garm) -> None:
    """The cloud has :data:`IMAGE` (again): creates succeed."""
    if garm.name == EMULATOR:
        emulator: GarmEmulator = garm.emulator  # pyright: ignore[reportAttributeAccessIssue]
        emulator.refuse_provider("CreateInstance", None)
        return
    real: RealGarm = garm  # pyright: ignore[reportAssignmentType]
    real.set_catalogue(DEFAULT_CATALOGUE)


def _faulted(garm: Garm, seen: list[tuple[str, str, bool]]) -> dict[str, Any] | None:
    runners = garm.instances(SCALESET)
    seen += [(r["name"], r["status"], "provider_fault" in r) for r in runners]
    return next((r for r in runners if r.get("provider_fault")), None)


def test_a_refused_create_is_the_runner_s_provider_fault_until_garm_replaces_it(
    ready_garm: Garm, client: GarmClient
):
    refuse_the_image(ready_garm)
    scaleset_id = _seed_scaleset(client, min_idle=1, name=SCALESET)
    seen: list[tuple[str, str, bool]] = []
    failed = wait_for(
        ready_garm, "a runner with a provider fault", lambda: _faulted(ready_garm, seen)
    )

    assert (failed["status"], failed["runner_status"]) == ("error", "pending")
    assert isinstance(failed["provider_fault"], str)
    fault = base64.b64decode(failed["provider_fault"], validate=True).decode()
    assert fault == (
        "creating instance in provider: provider binary "
        f"{ready_garm.provider_executable} returned error: provider binary failed with "
        f"stdout: ; stderr: {STDERR}: exit status 1"
    )
    # The charm's client reads it as GARM sends it.
    (listed,) = [
        i for i in client.list_scaleset_instances(scaleset_id) if i.name == failed["name"]
    ]
    assert listed.provider_fault == failed["provider_fault"]

    wait_for(
        ready_garm,
        "GARM to replace the failed runner",
        lambda: [r for r in ready_garm.instances(SCALESET) if r["name"] != failed["name"]] or None,
    )
    _faulted(ready_garm, seen)
    # Only a runner in error carries the fault: moving on to pending_delete clears it.
    assert all(status == "error" for _, status, faulted in seen if faulted), seen


def test_a_runner_of_a_provider_garm_has_not_loaded_stays_pending_delete_without_a_fault(
    ready_garm: Garm, client: GarmClient
):
    _seed_scaleset(client, min_idle=1, name=SCALESET)
    idle = wait_for(
        ready_garm,
        "an idle runner",
        lambda: next(
            (r for r in ready_garm.instances(SCALESET) if r["status"] == "running"), None
        ),
    )
    # GARM restarted without the scale set's provider (a configurator gone).
    environment = {**getattr(ready_garm, "environment", {}), GARM_PROVIDERS_JSON: "[]"}
    ready_garm.replan(environment)
    client.delete_instance(idle["name"])
    for _ in range(SETTLES):
        ready_garm.settle()
    (stuck,) = ready_garm.instances(SCALESET)
    # GARM skips the runners of a provider it has not loaded: nothing deletes it, and no
    # provider fault says why.
    assert (stuck["name"], stuck["status"]) == (idle["name"], "pending_delete")
    assert "provider_fault" not in stuck
