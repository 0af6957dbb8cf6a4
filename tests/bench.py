"""Cost of one scale-set reconcile pass against the GARM emulator (``tox -e bench``).

For 10, 100 and 500 scale sets it measures a converged pass and a pass in which 10% of the
scale sets change labels: wall time per pass and GARM calls per pass, reads and writes apart.
Converged rows must show zero writes; the script exits non-zero otherwise.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import statistics
import sys
import time
from collections.abc import Sequence

from charm_state import ScalesetSpec
from garm_api import CreateCredentialParams, GarmClient, GithubApp
from scaleset_reconciler import ScalesetReconciler
from tests.garm_emulator import DEFAULT_ADMIN_PASSWORD, GarmEmulator
from tests.rsa_keys import pkcs1_pem

PROVIDER = "bench-provider-0"
ORG = "bench-org"
WRITE_METHODS = frozenset({"POST", "PUT", "DELETE"})


@dataclasses.dataclass(frozen=True)
class Row:
    """One measured scenario."""

    scalesets: int
    scenario: str
    seconds: float
    reads: int
    writes: int


def specs(count: int, changed: int = 0) -> list[ScalesetSpec]:
    """Return ``count`` specs; the first ``changed`` carry an extra label."""
    return [
        ScalesetSpec(
            name=f"bench-{index:04d}",
            provider_name=PROVIDER,
            image="ubuntu-24.04",
            flavor="m1.small",
            os_arch="amd64",
            min_idle_runners=0,
            max_runners=2,
            entity_type="organization",
            entity_name=ORG,
            labels=("linux", "x64", "noble") if index < changed else ("linux", "x64"),
        )
        for index in range(count)
    ]


def measured_pass(garm: GarmEmulator, client: GarmClient, desired: Sequence[ScalesetSpec]) -> Row:
    """Run one pass and count the calls it made."""
    garm.clear_requests()
    started = time.perf_counter()
    ScalesetReconciler(client).reconcile(desired)
    seconds = time.perf_counter() - started
    writes = sum(1 for r in garm.requests if r.method in WRITE_METHODS)
    return Row(len(desired), "", seconds, len(garm.requests) - writes, writes)


def bench(count: int, repeats: int) -> list[Row]:
    """Measure the converged and the 10%-changing pass for ``count`` scale sets."""
    with GarmEmulator(providers=[PROVIDER]) as garm, GarmClient(garm.url) as client:
        garm.bootstrap(password=DEFAULT_ADMIN_PASSWORD)
        client.login("admin", DEFAULT_ADMIN_PASSWORD)
        client.create_credential(
            CreateCredentialParams(
                name="bench-cred",
                description="Managed by garm",
                endpoint="github.com",
                app=GithubApp(
                    app_id=1,
                    installation_id=2,
                    private_key_bytes=base64.b64encode(pkcs1_pem().encode()).decode(),
                ),
            )
        )
        client.create_organization(ORG, "bench-cred", "0" * 64)
        desired = specs(count)
        ScalesetReconciler(client).reconcile(desired)  # creates everything
        converged = [measured_pass(garm, client, desired) for _ in range(repeats)]
        changing = measured_pass(garm, client, specs(count, changed=count // 10))
    median = statistics.median(r.seconds for r in converged)
    return [
        dataclasses.replace(converged[0], scenario="converged", seconds=median),
        dataclasses.replace(changing, scenario="10% change labels"),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table; return 1 if a converged pass wrote anything."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--repeats", type=int, default=3, help="converged passes per size")
    args = parser.parse_args(argv)
    rows = [row for size in args.sizes for row in bench(size, args.repeats)]
    print(f"{'SCALESETS':>9}  {'SCENARIO':<18}  {'SECONDS/PASS':>12}  {'READS':>6}  {'WRITES':>6}")
    for row in rows:
        print(
            f"{row.scalesets:>9}  {row.scenario:<18}  {row.seconds:>12.3f}  "
            f"{row.reads:>6}  {row.writes:>6}"
        )
    bad = [row for row in rows if row.scenario == "converged" and row.writes]
    if bad:
        print("FAILED: a converged pass issued writes", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
