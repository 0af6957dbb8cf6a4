"""Cost of one whole update-status hook, on the emulator and on real GARM (``tox -e bench``).

For N scale sets (N configurator relations, one unit, one organisation and one scale set each,
all on one GitHub App, no idle runner; an ingress relation too) the real charm runs through
``ops.testing`` with every relation in place from the start; after the deployment converges,
the script times whole ``update-status`` hooks (readiness, login, controller, credentials,
entities, templates, scale sets, providers, record):

- **converged**: nothing changed since the last hook (the median of ``--repeats`` hooks);
- **10% labels**: one configurator in ten publishes an extra label (a label change starts).

Per hook it reports wall time, the charm's CPU time (``time.thread_time()`` of the thread that
runs the hook: the charm and its GARM client run there, while the emulator and the recording
proxy serve from other threads of the same process, which ``time.process_time()`` would add),
the calls GARM received split into reads and writes (from the recording proxy in front of
either backend: what GARM saw, login counted apart), and the hook-tool calls the charm made
(``relation-get``, ``secret-get``, ``juju-log``, ...: each one is a process start under real
Juju), counted on ``ops.testing``'s model backend by the charm driver.

``--garm emulator|real|both`` picks the backends; ``--sizes`` the values of N. The command exits
non-zero when any converged hook (every repeat, not only the first) wrote to GARM anything but
the login, or wrote to Juju (``relation-set``, ``secret-set``, ``secret-add``), on any backend.
After the table it lists, per backend, the GARM calls and hook tools whose count per converged
hook grows with N.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from ops import testing

from tests.charm_driver import CONFIGURATOR, CharmDriver, Configurator, base_state, configurator
from tests.conformance.backends import proxied_emulator
from tests.github_standin import GitHubStandin
from tests.real_garm.github_apps import register_configured_apps
from tests.real_garm.harness import SKIP_REASON, RealGarm, garm_binary
from tests.real_garm.proxy import LOGIN_PATH, RecordedCall

EMULATOR, REAL = "emulator", "real"
# Every configurator here publishes its own provider, and the charm hands GARM all providers in
# one environment variable (GARM_PROVIDERS_JSON). Linux refuses to exec a process with a single
# environment string above 128 KiB (MAX_ARG_STRLEN), which these providers pass at about 490:
# at N=500 real GARM cannot be started at all (measured: E2BIG). Real GARM runs up to this N.
REAL_MAX = 100
_ID = re.compile(r"/(\d+|[0-9a-f]{8}-[0-9a-f-]{27,})(?=/|$)")


@dataclasses.dataclass(frozen=True)
class Row:
    """One measured hook (or the median of several)."""

    backend: str
    scalesets: int
    scenario: str
    seconds: float
    cpu: float
    reads: int
    writes: int
    tools: int
    garm_calls: collections.Counter[str]
    tool_calls: collections.Counter[str]
    faults: tuple[str, ...] = ()


# The deployment sits behind an ingress, so a rewritten ingress request would show. Its id
# comes after every configurator's (1..N); the peer relation has the first (base_state).
INGRESS = testing.Relation(
    "ingress",
    id=100_000,
    remote_app_data={"ingress": json.dumps({"url": "http://garm.bench.test/"})},
)


def relations(count: int) -> list[Configurator]:
    """``count`` configurators, each with its own organisation and scale set."""
    made: list[Configurator] = []
    for number in range(count):
        cfg = configurator(
            f"cfg-{number}",
            relation_id=number + 1,
            org=f"org-{number}",
            labels="linux,x64",
            extra={"min_idle_runner": "0"},
        )
        made.append(cfg)
    return made


def with_extra_label(state: testing.State, changed: int) -> testing.State:
    """``state`` where the configurators of relation ids 1..``changed`` add the label noble."""
    updated = set()
    for relation in state.relations:
        if (
            isinstance(relation, testing.Relation)
            and relation.endpoint == CONFIGURATOR
            and relation.id <= changed
        ):
            units = {
                n: {**d, "labels": f"{d['labels']},noble"}
                for n, d in relation.remote_units_data.items()
            }
            updated.add(dataclasses.replace(relation, remote_units_data=units))
        else:
            updated.add(relation)
    return dataclasses.replace(state, relations=updated)


def call_key(call: RecordedCall) -> str:
    """``METHOD /path`` with ids replaced, and the query's keys."""
    path = _ID.sub("/{id}", call.path)
    query = "?" + "&".join(f"{k}=" for k in sorted(call.query)) if call.query else ""
    return f"{call.method} {path}{query}"


def measure(backend: str, garm: Any, driver: CharmDriver, scenario: str) -> Row:
    """Run one update-status hook and count what it cost; name what a converged one wrote."""
    garm.clear_requests()
    wall, cpu = time.perf_counter(), time.thread_time()
    driver.run(driver.ctx.on.update_status())
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    calls = garm.requests
    writes = [c for c in calls if c.method != "GET" and c.path != LOGIN_PATH]
    tools = driver.tool_calls
    faults: list[str] = []
    if scenario == "converged":
        faults += [f"{call_key(c)} to GARM" for c in writes]
        faults += [f"{name} x{count} to Juju" for name, count in driver.juju_writes().items()]
    return Row(
        backend,
        0,
        scenario,
        wall,
        cpu,
        sum(1 for c in calls if c.method == "GET"),
        len(writes),
        sum(tools.values()),
        collections.Counter(call_key(c) for c in calls),
        tools,
        tuple(faults),
    )


@contextmanager
def started(backend: str, workdir: Path) -> Iterator[Any]:
    """A GARM of ``backend`` behind a recording proxy, with nothing in it."""
    if backend == EMULATOR:
        with proxied_emulator() as proxied:
            yield proxied
        return
    binary = garm_binary()
    if binary is None:
        raise SystemExit(SKIP_REASON)
    with ExitStack() as stack:
        github = stack.enter_context(GitHubStandin())
        real = RealGarm.prepare(workdir, binary=binary, github_endpoint=github.endpoint_params())
        register_configured_apps(real.proxy, github)
        stack.callback(real.stop)
        yield real


def bench(backend: str, count: int, repeats: int) -> list[Row]:
    """Deploy with ``count`` configurators, converge, then measure the hooks."""
    with tempfile.TemporaryDirectory() as scratch, started(backend, Path(scratch)) as garm:
        data = Path(scratch) / "data"
        data.mkdir()
        cfgs = relations(count)
        state = base_state(
            data,
            relations={INGRESS, *(c.relation for c in cfgs)},
            secrets={s for c in cfgs for s in c.secrets},
        )
        driver = CharmDriver(garm, state, ready_timeout=30.0)
        setup = time.perf_counter()
        driver.run(driver.ctx.on.install())
        driver.run(driver.ctx.on.leader_elected())
        driver.run(driver.ctx.on.pebble_ready(driver.state.get_container("garm")))
        driver.run(driver.ctx.on.update_status())
        print(
            f"  {backend}: {count} scale sets created and converged in "
            f"{time.perf_counter() - setup:.1f} s",
            file=sys.stderr,
        )
        converged = [measure(backend, garm, driver, "converged") for _ in range(repeats)]
        driver.state = with_extra_label(driver.state, max(1, count // 10))
        labels = measure(backend, garm, driver, "10% labels")
    median = dataclasses.replace(
        converged[0],
        seconds=statistics.median(r.seconds for r in converged),
        cpu=statistics.median(r.cpu for r in converged),
        # Every repeat is checked: a write that only a later hook makes is a write too.
        faults=tuple(
            f"converged hook {number} of {repeats}: {fault}"
            for number, row in enumerate(converged, start=1)
            for fault in row.faults
        ),
    )
    return [dataclasses.replace(r, scalesets=count) for r in (median, labels)]


def growing(rows: Sequence[Row], backend: str) -> list[str]:
    """Lines naming each call whose count per converged hook grows with N."""
    mine = sorted(
        (r for r in rows if r.backend == backend and r.scenario == "converged"),
        key=lambda r: r.scalesets,
    )
    if len(mine) < 2:
        return []
    lines = []
    for label, attr in (("GARM", "garm_calls"), ("hook tool", "tool_calls")):
        keys = sorted({k for r in mine for k in getattr(r, attr)})
        for key in keys:
            counts = [getattr(r, attr)[key] for r in mine]
            if counts[-1] > counts[0]:
                per_n = ", ".join(f"{r.scalesets}: {n}" for r, n in zip(mine, counts, strict=True))
                lines.append(f"  {backend:<8} {label:<9} {key:<52} {per_n}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table and the growing calls; return 1 if a converged hook wrote."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--garm", choices=(EMULATOR, REAL, "both"), default=EMULATOR)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--repeats", type=int, default=3, help="converged hooks per size")
    parser.add_argument(
        "--real-max",
        type=int,
        default=REAL_MAX,
        help="largest N run on real GARM (see REAL_MAX: one provider per configurator)",
    )
    args = parser.parse_args(argv)
    backends = [EMULATOR, REAL] if args.garm == "both" else [args.garm]
    rows: list[Row] = []
    for size in args.sizes:
        for backend in backends:
            if backend == REAL and size > args.real_max:
                print(
                    f"  real: N={size} skipped (above --real-max {args.real_max})", file=sys.stderr
                )
                continue
            rows.extend(bench(backend, size, args.repeats))
    print(
        f"{'BACKEND':<8}  {'SCALESETS':>9}  {'HOOK':<10}  {'WALL S':>7}  {'CPU S':>6}  "
        f"{'READS':>5}  {'WRITES':>6}  {'HOOK TOOLS':>10}"
    )
    for row in rows:
        print(
            f"{row.backend:<8}  {row.scalesets:>9}  {row.scenario:<10}  {row.seconds:>7.3f}  "
            f"{row.cpu:>6.3f}  {row.reads:>5}  {row.writes:>6}  {row.tools:>10}"
        )
    print("\nCalls per converged hook that grow with the number of scale sets:")
    for backend in backends:
        print("\n".join(growing(rows, backend)) or f"  {backend}: none")
    tools = collections.Counter[str]()
    for row in rows:
        if row.scenario == "converged" and row.scalesets == max(args.sizes):
            tools = row.tool_calls
            print(f"\nHook tools per converged hook, {row.backend}, N={row.scalesets}: ", end="")
            print(", ".join(f"{k} {v}" for k, v in tools.most_common()))
    bad = [r for r in rows if r.faults]
    for row in bad:
        for fault in row.faults:
            print(f"FAILED: {row.backend}, N={row.scalesets}, {fault}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
