"""Fleet growth: configurators integrated one at a time, as Juju does (``tox -e bench -- --grow``).

The real charm, through the charm driver, on the emulator or on real GARM (the bench's own
backends, ``--garm``), is deployed with no configurator related (the bench's ingress relation
only): ``install``, ``leader-elected``, ``pebble-ready``, ``update-status``. Then the N
configurators of the bench (:func:`tests.bench.relations`, ``--shared-org`` too) are integrated
one after the other, each as Juju integrates an application: the relation appears and the GARM
unit runs ``relation-created`` (no remote unit yet), ``relation-joined`` (the configurator's unit,
its databag published) and ``relation-changed`` (the same unit), each hook followed by the
continuations the charm asks for (its Pebble custom notice, delivered as Juju does). Once all N
are in, ``--repeats`` converged ``update-status`` hooks run and the last is reported.

Per N it prints the hooks run (relation hooks, continuation hooks), the hook tools "as Juju"
(:func:`tests.bench.as_juju`: what real ops would run) summed over the relation and continuation
hooks, the largest of those hooks (its kind and configurator) and the converged
``update-status``'s, the wall time of the whole run; then the largest hook's hook tools by name.
The run fails when a converged ``update-status`` wrote to GARM (login aside) or to Juju, when a
configurator's scale set is missing from GARM at the end, or when real GARM exited on its own.
"""

from __future__ import annotations

import collections
import dataclasses
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import ops
from ops import testing

from tests.bench import (
    INGRESS,
    REAL,
    Row,
    Setting,
    as_juju_calls,
    failures,
    measure,
    prepared,
    relations,
    started,
)
from tests.charm_driver import CharmDriver, Configurator, base_state

CREATED, JOINED, CHANGED = "relation-created", "relation-joined", "relation-changed"
RELATION_HOOKS = (CREATED, JOINED, CHANGED)
CONTINUATION = "pebble-custom-notice"
# The hooks a leader of a new deployment runs before any integration (the bench's deployment).
DEPLOY = ("install", "leader-elected", "pebble-ready", "update-status")


@dataclasses.dataclass(frozen=True)
class Hook:
    """One hook run: its kind, the configurator it integrated (1..N), its hook tools as Juju."""

    kind: str
    configurator: int
    calls: collections.Counter[str]

    @property
    def tools(self) -> int:
        """The hook tools Juju would run for it."""
        return sum(self.calls.values())


@dataclasses.dataclass(frozen=True)
class Growth:
    """One run: the deployment's hooks, the growth's, the converged update-status hooks."""

    backend: str
    count: int
    deploy: list[Hook]
    grown: list[Hook]
    converged: list[Row]
    seconds: float
    scalesets: list[str]
    status: ops.StatusBase

    def hooks(self, *kinds: str) -> list[Hook]:
        """The growth's hooks of these kinds."""
        return [hook for hook in self.grown if hook.kind in kinds]

    @property
    def tools(self) -> int:
        """The hook tools as Juju of every relation and continuation hook."""
        return sum(hook.tools for hook in self.grown)

    @property
    def largest(self) -> Hook:
        """The growth's hook that ran the most hook tools (the first of equals)."""
        return max(self.grown, key=lambda hook: hook.tools)

    @property
    def faults(self) -> list[str]:
        """What fails the run: a converged hook that wrote, a configurator missing in GARM."""
        found = [
            f"converged update-status {number} of {len(self.converged)}: {fault}"
            for number, row in enumerate(self.converged, start=1)
            for fault in row.faults
        ]
        missing = [
            f"cfg-{number}-runners"
            for number in range(self.count)
            if not any(name.startswith(f"cfg-{number}-runners-") for name in self.scalesets)
        ]
        if missing:
            found.append(f"no scale set in GARM for {', '.join(missing)}")
        if not isinstance(self.status, ops.ActiveStatus | ops.WaitingStatus):
            found.append(f"unit status at the end: {self.status}")
        return found


def counted(driver: CharmDriver, kind: str, number: int) -> Hook:
    """The last hook the driver ran, counted as Juju would run its hook tools."""
    return Hook(kind, number, as_juju_calls(driver.tool_calls, driver.state))


def run_hook(
    driver: CharmDriver, event: Any, kind: str, number: int, limit: int = 100
) -> list[Hook]:
    """Run one hook, then deliver the charm's notice while it asks for the next pass."""
    driver.run(event)
    hooks = [counted(driver, kind, number)]
    while driver.continuation_asked:
        assert len(hooks) <= limit, f"{kind} of configurator {number}: still continuing"
        driver.continue_once()
        hooks.append(counted(driver, CONTINUATION, number))
    return hooks


def replaced(state: testing.State, relation: testing.Relation) -> testing.State:
    """``state`` with ``relation`` in place of the one of its id (or added)."""
    others = {r for r in state.relations if r.id != relation.id}
    return dataclasses.replace(state, relations={*others, relation})


def integrate(driver: CharmDriver, cfg: Configurator, number: int) -> list[Hook]:
    """Integrate one configurator as Juju does: relation-created, -joined, -changed.

    Juju runs ``relation-created`` before any remote unit is in the relation; the unit then
    joins with the databag it published, and ``relation-changed`` follows its join.
    """
    on = driver.ctx.on
    created = dataclasses.replace(cfg.relation, remote_units_data={})
    driver.state = dataclasses.replace(
        replaced(driver.state, created), secrets={*driver.state.secrets, *cfg.secrets}
    )
    hooks = run_hook(driver, on.relation_created(created), CREATED, number)
    current = driver.state.get_relation(cfg.relation.id)
    assert isinstance(current, testing.Relation)
    joined = dataclasses.replace(current, remote_units_data=cfg.relation.remote_units_data)
    driver.state = replaced(driver.state, joined)
    hooks += run_hook(driver, on.relation_joined(joined, remote_unit=0), JOINED, number)
    current = driver.state.get_relation(cfg.relation.id)
    hooks += run_hook(driver, on.relation_changed(current, remote_unit=0), CHANGED, number)
    return hooks


def deploy(driver: CharmDriver) -> list[Hook]:
    """The deployment's first hooks, with no configurator related (and their continuations)."""
    on = driver.ctx.on
    hooks: list[Hook] = []
    for kind in DEPLOY:
        if kind == "pebble-ready":
            event = on.pebble_ready(driver.state.get_container("garm"))
        else:
            event = getattr(on, kind.replace("-", "_"))()
        hooks += run_hook(driver, event, kind, 0)
    return hooks


def grow(
    backend: str,
    garm: Any,
    workdir: Path,
    count: int,
    *,
    repeats: int = 3,
    setting: Setting | None = None,
    budget_ticks: int | None = None,
) -> Growth:
    """Deploy on ``garm``, integrate ``count`` configurators one by one, then converge.

    ``budget_ticks`` (the emulator only): each pass's budget in GARM writes instead of the
    charm's seconds (:class:`tests.charm_driver.CharmDriver`), so that passes continue.
    """
    setting = setting or Setting()
    with ExitStack() as stack:
        data = workdir / "data"
        data.mkdir()
        database = prepared(stack, backend, setting)
        state = base_state(data, relations={INGRESS, *database})
        driver = CharmDriver(garm, state, ready_timeout=30.0, budget_ticks=budget_ticks)
        started_at = time.perf_counter()
        deployed = deploy(driver)
        grown: list[Hook] = []
        for number, cfg in enumerate(relations(count, shared_org=setting.shared_org), start=1):
            grown += integrate(driver, cfg, number)
            if number % 50 == 0 or number == count:
                print(
                    f"  {backend}: N={count}: {number} integrated in "
                    f"{time.perf_counter() - started_at:.1f} s, {driver.state.unit_status}",
                    file=sys.stderr,
                )
        converged = [measure(backend, garm, driver, "converged") for _ in range(repeats)]
        seconds = time.perf_counter() - started_at
    names = sorted(str(s["name"]) for s in garm.scalesets())
    status = driver.state.unit_status
    return Growth(backend, count, deployed, grown, converged, seconds, names, status)


def run(backend: str, count: int, repeats: int, setting: Setting) -> Growth:
    """:func:`grow` on a new GARM of ``backend`` (the bench's, behind its recording proxy)."""
    with (
        tempfile.TemporaryDirectory() as scratch,
        started(backend, Path(scratch), setting.latency) as garm,
    ):
        return grow(backend, garm, Path(scratch), count, repeats=repeats, setting=setting)


def table(runs: Sequence[Growth]) -> list[str]:
    """The markdown table, one row per run."""
    lines = [
        "| backend | N | relation hooks | continuation hooks | hook tools, all hooks "
        "| largest hook | converged update-status | wall s |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for growth in runs:
        largest = growth.largest
        lines.append(
            f"| {growth.backend} | {growth.count} | {len(growth.hooks(*RELATION_HOOKS))} "
            f"| {len(growth.hooks(CONTINUATION))} | {growth.tools:,} "
            f"| {largest.tools} ({largest.kind}, cfg {largest.configurator}) "
            f"| {growth.converged[-1].juju_tools} | {growth.seconds:.1f} |"
        )
    return lines


def details(growth: Growth) -> list[str]:
    """The growth's tools per hook kind, the deployment's, the largest hook's by name."""
    per_kind = ", ".join(
        f"{kind} {sum(h.tools for h in growth.hooks(kind)):,}"
        for kind in (*RELATION_HOOKS, CONTINUATION)
    )
    largest = growth.largest
    converged = growth.converged[-1]
    return [
        f"{growth.backend}, N={growth.count}: hook tools by kind: {per_kind}; "
        f"deployment ({len(growth.deploy)} hooks) {sum(h.tools for h in growth.deploy)}",
        f"  largest hook ({largest.kind} of cfg {largest.configurator}): "
        + ", ".join(f"{k} {v}" for k, v in largest.calls.most_common()),
        f"  converged update-status: GARM reads {converged.reads}, writes {converged.writes}",
    ]


def main(
    backends: Sequence[str], sizes: Sequence[int], repeats: int, setting: Setting, real_max: int
) -> int:
    """Run the growth per backend and size; print the table; return 1 on a fault."""
    runs: list[Growth] = []
    for size in sizes:
        for backend in backends:
            if backend == REAL and size > real_max:
                print(f"  real: N={size} skipped (above --real-max {real_max})", file=sys.stderr)
                continue
            runs.append(run(backend, size, repeats, setting))
    print(
        f"Fleet growth, configurators integrated one at a time; organisations: "
        f"{'one shared' if setting.shared_org else 'one each'}; hook tools as Juju\n"
    )
    print("\n".join(table(runs)))
    print()
    for growth in runs:
        print("\n".join(details(growth)))
    bad = [(growth, fault) for growth in runs for fault in growth.faults]
    for growth, fault in bad:
        print(f"FAILED: {growth.backend}, N={growth.count}, {fault}", file=sys.stderr)
    return max(1 if bad else 0, failures([], real=REAL in backends))
