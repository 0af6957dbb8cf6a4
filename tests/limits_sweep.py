"""Deployments of N configurators under the limits of one Juju (``python -m tests.limits_sweep``).

For each Juju version and each N, the real charm runs through ``ops.testing`` against the GARM
emulator with N configurators whose names are production length
(:func:`tests.charm_driver.production_configurator`, about 390 bytes of provider JSON each),
every relation in place from the start: install, leader-elected, pebble-ready and
update-status, then the ``scaleset-status`` action. The charm driver applies Juju's secret
limits of that version and Linux's argument limit to every hook
(``tests/juju_model_limits.py``), so a hook that a real controller would refuse raises here.

It prints one row per deployment: whether every hook returned, the unit status, the record's
secrets and values, the bytes of the largest secret (as the Juju version measures it), the hook
tools the last update-status called (each a process under Juju), and what ``scaleset-status``
answered (rows, result parts). The limits page
(``docs/reference/limits.md``) gives the measured table. Not part of CI: the large sizes take
minutes.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

from ops import testing

from tests.charm_driver import (
    CharmDriver,
    base_state,
    production_configurator,
    record_secrets,
    record_values,
)
from tests.garm_emulator import GarmEmulator
from tests.juju_model_limits import minimum_juju, secret_limits

DEFAULT_SIZES = (10, 20, 130, 500, 1000, 2000)


@dataclasses.dataclass(frozen=True)
class Deployment:
    """What one deployment reached."""

    juju: str
    count: int
    hooks_returned: bool
    status: str
    record_secrets: int
    record_values: int
    largest_secret: int
    hook_tools: int
    action: str
    seconds: float


def deploy(garm: GarmEmulator, data_dir: Path, count: int, juju_version: str) -> CharmDriver:
    """Relate ``count`` production-length configurators and run the deployment's first hooks."""
    cfgs = [production_configurator(number) for number in range(count)]
    state = base_state(
        data_dir,
        relations={c.relation for c in cfgs},
        secrets={s for c in cfgs for s in c.secrets},
    )
    driver = CharmDriver(garm, state, ready_timeout=30.0, juju_version=juju_version)
    driver.run(driver.ctx.on.install())
    driver.run(driver.ctx.on.leader_elected())
    driver.run(driver.ctx.on.pebble_ready(driver.state.get_container("garm")))
    driver.run(driver.ctx.on.update_status())
    # The unit's record of the configurators fills a rotation a hook, each asking for the next.
    driver.continue_passes()
    return driver


def secret_size(content: dict[str, str], juju_version: str) -> int:
    """The bytes of ``content`` as ``juju_version`` measures them."""
    raw = [len(v.encode("utf-8")) for v in content.values()]
    if secret_limits(juju_version).on_base64:
        return sum((size + 2) // 3 * 4 for size in raw)
    return sum(raw)


def measure(count: int, juju_version: str) -> Deployment:
    """Deploy ``count`` configurators on ``juju_version``'s limits and report what it reached."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch, GarmEmulator(providers=[]) as garm:
        data = Path(scratch) / "data"
        data.mkdir()
        try:
            driver = deploy(garm, data, count, juju_version)
        except testing.errors.UncaughtCharmError as exc:
            cause = exc.__cause__ or exc
            return Deployment(
                juju_version, count, False, f"hook raised {cause!r}"[:160], 0, 0, 0, 0, "-", 0.0
            )
        status = driver.state.unit_status
        secrets = record_secrets(driver.state)
        tools = sum(driver.tool_calls.values())
        try:
            results = driver.run_action("scaleset-status")
            parts = results.get("scalesets-parts", 1)
            action = f"{results['count']} rows in {parts} part(s)"
        except testing.errors.UncaughtCharmError as exc:
            action = f"raised {(exc.__cause__ or exc)!r}"[:120]
        return Deployment(
            juju_version,
            count,
            True,
            f"{status.name}: {status.message}",
            len(secrets),
            sum(len(record_values(s)) for s in secrets),
            max((secret_size(s, juju_version) for s in secrets), default=0),
            tools,
            action,
            time.perf_counter() - start,
        )


def main(argv: list[str] | None = None) -> int:
    """Run the sweep and print the table; non-zero when a hook raised or the action failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--juju", nargs="+", default=[minimum_juju(), "3.6.9"])
    parser.add_argument("--sizes", nargs="+", type=int, default=list(DEFAULT_SIZES))
    args = parser.parse_args(argv)
    print("| Juju | N | Hooks return | Unit status | Record secrets / values |", end="")
    print(" Largest secret (bytes) | Hook tools | scaleset-status | s |")
    print("|---|---|---|---|---|---|---|---|---|")
    failed = False
    for juju_version in args.juju:
        for count in args.sizes:
            row = measure(count, juju_version)
            failed |= not row.hooks_returned or row.action.startswith("raised")
            print(
                f"| {row.juju} | {row.count:,} | {'yes' if row.hooks_returned else 'no'} |"
                f" {row.status} | {row.record_secrets} / {row.record_values} |"
                f" {row.largest_secret:,} | {row.hook_tools:,} | {row.action} |"
                f" {row.seconds:.0f} |",
                flush=True,
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
