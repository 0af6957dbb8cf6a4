"""Cost of a converged ``update-status`` of the packed charm, hook tools as processes.

``tox -e bench`` measures the charm through ``ops.testing``, whose hook tools are function calls.
This runs the same deployment as the packed charm does under Juju: ``build/pack/prime``'s
``dispatch`` per hook under the unit-agent stand-in (:mod:`tests.juju_agent`), every hook tool a
process, in a pod of its own with the real Pebble and real GARM (started by the charm's own
plan), the GitHub stand-in and the stand-in provider. For each N it relates N configurators
(:func:`tests.bench.relations`: one unit, organisation, scale set and provider each, no idle
runner), runs Juju's deploy hooks and the continuations the charm asks for until it is Active,
then times ``--repeats`` converged ``update-status`` hooks and reports their median: wall time,
CPU of the hook's processes (the charm and its tools; ``RUSAGE_CHILDREN``, GARM excluded), GARM's
reads and writes (the recording proxy), and the hook tools run. It also times one hook-tool
process (``is-leader --format=json``, ``--tool-runs`` times, on the N=... model file).

It exits non-zero when a converged hook wrote to GARM (login aside) or to Juju (any tool of
:data:`JUJU_WRITES`), as ``tests/bench.py`` does, and when it could not run at all (no real
GARM or Pebble, not root: ``BENCH NOT RUN on the packed charm: ...``). Timings are measured,
never asserted.

    python -m tests.bench_packed [--sizes 10 100 500] [--repeats 3] [--tool-runs 100]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import ops

from tests.bench import call_key, relations
from tests.juju_agent import pod
from tests.juju_agent.agent import UnitAgent
from tests.juju_agent.driver import PackedDriver, open_packed_backend
from tests.real_garm.proxy import LOGIN_PATH

# Every tool that writes to Juju: what Juju commits with the hook (relation settings, secrets,
# ports, charm state) and the unit's workload version. Not status-set: the leader sets the
# application's status in every pass by design (src/records/unit_shown.py: another unit may
# have set it since), and the calls log cannot tell it from the unit's.
JUJU_WRITES = (
    "relation-set",
    "secret-add",
    "secret-set",
    "secret-remove",
    "secret-grant",
    "secret-revoke",
    "state-set",
    "state-delete",
    "open-port",
    "close-port",
    "application-version-set",
)
ACTIVE_HOOKS = 20


@dataclasses.dataclass(frozen=True)
class Measured:
    """One N: the deployment's hooks and the median converged hook."""

    scalesets: int
    deploy_hooks: int
    deploy_seconds: float
    seconds: float
    cpu: float
    reads: int
    writes: int
    tools: collections.Counter[str]
    tool_ms: float
    faults: tuple[str, ...]


def children_cpu() -> float:
    """CPU seconds of this process's finished children (the hooks and their tools)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def converged_hook(driver: PackedDriver, garm: Any) -> tuple[float, float, int, int, Any, list]:
    """One update-status: wall, CPU, GARM reads and writes, tools, what it wrote."""
    garm.clear_requests()
    cpu = children_cpu()
    driver.run(driver.ctx.on.update_status())
    cpu = children_cpu() - cpu
    hook = driver.hooks[-1]
    calls = garm.requests
    writes = [c for c in calls if c.method != "GET" and c.path != LOGIN_PATH]
    faults = [f"{call_key(c)} to GARM" for c in writes]
    faults += [f"{t} x{hook.tools[t]} to Juju" for t in JUJU_WRITES if hook.tools[t]]
    reads = sum(1 for c in calls if c.method == "GET")
    return hook.seconds, cpu, reads, len(writes), hook.tools, faults


def tool_process_ms(agent: UnitAgent, runs: int) -> float:
    """Mean wall milliseconds of one ``is-leader --format=json`` process on ``agent``'s model.

    The tool runs in a hook's context as the charm's do (outside one it is refused).
    """
    tool = str(agent.bin_dir / "is-leader")
    with agent.tool_environment() as env:
        started = time.perf_counter()
        for _ in range(runs):
            subprocess.run([tool, "--format=json"], env=env, capture_output=True, check=True)
        return (time.perf_counter() - started) / runs * 1000


def bench(count: int, repeats: int, tool_runs: int) -> Measured:
    """Deploy ``count`` configurators on the packed charm, converge, measure."""
    with open_packed_backend(agent_standin=False) as backend:
        driver = backend.driver
        assert isinstance(driver, PackedDriver)
        cfgs = relations(count)
        driver.state = dataclasses.replace(
            driver.state,
            relations={*driver.state.relations, *(c.relation for c in cfgs)},
            secrets={*driver.state.secrets, *(s for c in cfgs for s in c.secrets)},
        )
        started = time.perf_counter()
        for event in driver.deploy_events():
            driver.run(event)
        driver.continue_passes()
        for _ in range(ACTIVE_HOOKS):
            if isinstance(driver.state.unit_status, ops.ActiveStatus):
                break
            driver.run(driver.ctx.on.update_status())
            driver.continue_passes()
        deploy_seconds = time.perf_counter() - started
        deploy_hooks = len(driver.hooks)
        print(
            f"  N={count}: {deploy_hooks} hooks to {driver.state.unit_status} in "
            f"{deploy_seconds:.1f} s",
            file=sys.stderr,
        )
        if not isinstance(driver.state.unit_status, ops.ActiveStatus):
            raise SystemExit(f"N={count}: not Active after {deploy_hooks} hooks")
        rows = [converged_hook(driver, backend.garm.real) for _ in range(repeats)]  # type: ignore[attr-defined]
        tool_ms = tool_process_ms(driver.agent, tool_runs)
    return Measured(
        scalesets=count,
        deploy_hooks=deploy_hooks,
        deploy_seconds=deploy_seconds,
        seconds=statistics.median(r[0] for r in rows),
        cpu=statistics.median(r[1] for r in rows),
        reads=rows[-1][2],
        writes=rows[-1][3],
        tools=rows[-1][4],
        tool_ms=tool_ms,
        faults=tuple(
            f"converged hook {n}: {fault}" for n, r in enumerate(rows, start=1) for fault in r[5]
        ),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table; return 1 if a converged hook wrote or the bench could not run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--repeats", type=int, default=3, help="converged hooks per size")
    parser.add_argument("--tool-runs", type=int, default=100, help="is-leader runs timed")
    args = parser.parse_args(argv)
    outside = pod.into_pod("tests.bench_packed", list(argv or sys.argv[1:]), "BENCH")
    if outside is not None:
        return outside
    measured = []
    for size in args.sizes:
        measured.append(bench(size, args.repeats, args.tool_runs))
        # Each N as soon as it is measured: a large N takes many minutes.
        print(f"  {measured[-1]}", file=sys.stderr, flush=True)
    print(
        f"{'SCALESETS':>9}  {'DEPLOY HOOKS':>12}  {'DEPLOY S':>8}  {'WALL S':>7}  {'CPU S':>6}  "
        f"{'READS':>5}  {'WRITES':>6}  {'HOOK TOOLS':>10}  {'IS-LEADER MS':>12}"
    )
    for m in measured:
        print(
            f"{m.scalesets:>9}  {m.deploy_hooks:>12}  {m.deploy_seconds:>8.1f}  "
            f"{m.seconds:>7.3f}  {m.cpu:>6.3f}  {m.reads:>5}  {m.writes:>6}  "
            f"{sum(m.tools.values()):>10}  "
            f"{m.tool_ms:>12.1f}"
        )
    for m in measured:
        print(f"\nHook tools per converged hook, N={m.scalesets}: ", end="")
        print(", ".join(f"{k} {v}" for k, v in m.tools.most_common()))
    bad = [fault for m in measured for fault in m.faults]
    for fault in bad:
        print(f"FAILED: {fault}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
