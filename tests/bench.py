"""Cost of one whole update-status hook, on the emulator and on real GARM (``tox -e bench``).

For N scale sets (N configurator relations, one unit, one organisation and one scale set each,
all on one GitHub App, no idle runner; an ingress relation too) the real charm runs through
``ops.testing`` with every relation in place from the start; after the deployment converges,
the script times whole ``update-status`` hooks (readiness, login, controller, credentials,
entities, templates, scale sets, providers, record):

- **converged**: nothing changed since the last hook (the median of ``--repeats`` hooks);
- **10% labels**: one configurator in ten publishes an extra label (a label change starts);
  with ``--restart-before-labels`` GARM is restarted first (as Pebble restarts it) and the
  label change is measured to the end of its hook chain (its continuations), then once more
  from the next ``update-status`` while it left predecessors (each such chain is a wait for
  ``update-status`` under Juju), GARM's exits counted; issue 56's case of a fleet's label
  change right after a pod is rescheduled.

Per hook it reports wall time, the charm's CPU time (``time.thread_time()`` of the thread that
runs the hook: the charm and its GARM client run there, while the emulator and the recording
proxy serve from other threads of the same process, which ``time.process_time()`` would add),
the calls GARM received split into reads and writes (from the recording proxy in front of
either backend: what GARM saw, login counted apart), and the hook-tool calls the charm made
(``relation-get``, ``secret-get``, ``juju-log``, ...: each one is a process start under real
Juju), counted on ``ops.testing``'s model backend by the charm driver.

``--garm emulator|real|both`` picks the backends; ``--sizes`` the values of N; ``--grow`` runs
the fleet-growth scenario instead (:mod:`tests.bench_growth`: no configurator at first, then one
integrated at a time as Juju does, counting the hooks and their hook tools). The command exits
non-zero when any converged hook (every repeat, not only the first) wrote to GARM anything but
the login, or wrote to Juju (``relation-set``, ``secret-set``, ``secret-add``), on any backend,
or when real GARM exited on its own (a crash; the harness starts it again as Pebble would), or
when the removal stopped with anything left in GARM (or, real GARM, on the GitHub stand-in).
For the removal (and the label change) it prints GARM's floor, the busy wall of its scale-set
disables and deletes together, and the issue's target: hooks at most 1.1 x floor + 10 s + the
restarts' own time.
After the table it lists, per backend, the GARM calls and hook tools whose count per converged
hook grows with N.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import gc
import json
import re
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import ops
from ops import testing

from charm_pass.continuation import CONTINUE_KEY
from reconcile import Writes
from reconcile import writes as writes_module
from reconcile.writes import Background
from tests.charm_driver import CONFIGURATOR, CharmDriver, Configurator, base_state, configurator
from tests.conformance.backends import proxied_emulator
from tests.github_standin import GitHubStandin
from tests.real_garm.github_apps import register_configured_apps
from tests.real_garm.harness import SKIP_REASON, UNEXPECTED_EXITS, RealGarm, garm_binary
from tests.real_garm.postgres import PostgresServer, postgres_bin
from tests.real_garm.proxy import LOGIN_PATH, RecordedCall
from tests.simulate_backends import postgresql_relation

EMULATOR, REAL = "emulator", "real"
SQLITE, POSTGRESQL = "sqlite", "postgresql"
# Every configurator here publishes its own provider, and the charm hands GARM all providers in
# one environment variable (GARM_PROVIDERS_JSON). Linux refuses to exec a process with a single
# environment string above 128 KiB (MAX_ARG_STRLEN), which these providers pass at about 490:
# at N=500 real GARM cannot be started at all (measured: E2BIG). Real GARM runs up to this N.
REAL_MAX = 100
# The label one configurator in ten adds in the label-change scenarios.
NEW_LABEL = "noble"
# Chains of hooks (update-status and its continuations) a label change gets to end.
LABEL_CHAINS = 4
# The one organisation of --shared-org.
SHARED_ORG = "org-shared"
# The GitHub stand-in of each real GARM :func:`started` runs, by the GARM's id: what GitHub still
# holds after the removal (GARM re-registers a scale set deleted before its worker started).
STANDINS: dict[int, GitHubStandin] = {}
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
    hooks: int = 1
    longest: float = 0.0
    juju_tools: int = 0


# The deployment sits behind an ingress, so a rewritten ingress request would show. Its id
# comes after every configurator's (1..N); the peer relation has the first (base_state).
INGRESS = testing.Relation(
    "ingress",
    id=100_000,
    remote_app_name="traefik",
    remote_app_data={"ingress": json.dumps({"url": "http://garm.bench.test/"})},
    # An ingress provider runs units, as Traefik does; the charm reads none of their databags.
    remote_units_data={0: {}},
)


def relations(count: int, *, shared_org: bool = False) -> list[Configurator]:
    """``count`` configurators, each with its own scale set and organisation (or one for all)."""
    made: list[Configurator] = []
    for number in range(count):
        cfg = configurator(
            f"cfg-{number}",
            relation_id=number + 1,
            org=SHARED_ORG if shared_org else f"org-{number}",
            labels="linux,x64",
            extra={"min_idle_runner": "0"},
        )
        made.append(cfg)
    return made


def changed_relations(state: testing.State, changed: int) -> list[testing.Relation]:
    """The configurator relations of ids 1..``changed`` (those a label change changes), by id."""
    return sorted(
        (
            r
            for r in state.relations
            if isinstance(r, testing.Relation) and r.endpoint == CONFIGURATOR and r.id <= changed
        ),
        key=lambda r: r.id,
    )


def with_extra_label(state: testing.State, changed: int) -> testing.State:
    """``state`` where the configurators of relation ids 1..``changed`` add :data:`NEW_LABEL`."""
    relabelled = {
        dataclasses.replace(
            relation,
            remote_units_data={
                n: {**d, "labels": f"{d['labels']},{NEW_LABEL}"}
                for n, d in relation.remote_units_data.items()
            },
        )
        for relation in changed_relations(state, changed)
    }
    ids = {r.id for r in relabelled}
    return dataclasses.replace(
        state, relations={*relabelled, *(r for r in state.relations if r.id not in ids)}
    )


def call_key(call: RecordedCall) -> str:
    """``METHOD /path`` with ids replaced, and the query's keys."""
    path = _ID.sub("/{id}", call.path)
    query = "?" + "&".join(f"{k}=" for k in sorted(call.query)) if call.query else ""
    return f"{call.method} {path}{query}"


def as_juju(tools: collections.Counter[str], state: testing.State) -> int:
    """The hook tools Juju itself would run for what ``ops.testing`` counted.

    Real ops keeps ``is-leader`` for 30 seconds (``_ModelBackend.is_leader``), so a hook asks it
    once; and it asks ``relation-list --app`` (``relation_remote_app_name``) only for a
    relation whose remote units it cannot name the application from: one without units.
    ``ops.testing``'s backend answers and counts each call afresh.
    """
    return sum(as_juju_calls(tools, state).values())


def as_juju_calls(
    tools: collections.Counter[str], state: testing.State
) -> collections.Counter[str]:
    """What :func:`as_juju` counts, by hook tool."""
    unitless = sum(
        1 for r in state.relations if isinstance(r, testing.Relation) and not r.remote_units_data
    )
    adjusted = collections.Counter(tools)
    adjusted["is_leader"] = min(1, tools["is_leader"])
    adjusted["relation_remote_app_name"] = min(unitless, tools["relation_remote_app_name"])
    return +adjusted


class PoolCpu:
    """The CPU time the pass's write pool spends in its own threads (``reconcile.writes``).

    ``time.thread_time()`` of the hook's thread misses the objects the pool runs elsewhere;
    each of those is timed in the thread that runs it. A step run beside the hook's thread
    (``Writes.beside``) is timed whole in its own thread. Objects run in the hook's thread or
    a step's (a step of one object, one at a time) are already in its time and not counted
    twice.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self._lock = threading.Lock()

    @contextmanager
    def counting(self) -> Iterator[None]:
        original = Writes.each
        original_step = Background.__init__
        pool = self
        steps: set[int] = set()

        def step_init(background: Background[Any], run: Any, keys: Any) -> None:
            def timed_step() -> Any:
                steps.add(threading.get_ident())
                started = time.thread_time()
                try:
                    return run()
                finally:
                    with pool._lock:
                        pool.seconds += time.thread_time() - started

            original_step(background, timed_step, keys)

        def each(
            writes: Writes, step: str, items: Any, task: Any, notices: Any = None, **kw: Any
        ) -> Any:
            caller = threading.current_thread()

            def timed(item: Any, found: Any) -> Any:
                if threading.current_thread() is caller or threading.get_ident() in steps:
                    return task(item, found)
                started = time.thread_time()
                try:
                    return task(item, found)
                finally:
                    with pool._lock:
                        pool.seconds += time.thread_time() - started

            return original(writes, step, items, timed, notices, **kw)

        Writes.each = each  # type: ignore[method-assign]
        Background.__init__ = step_init  # type: ignore[method-assign]
        try:
            yield
        finally:
            Writes.each = original  # type: ignore[method-assign]
            Background.__init__ = original_step  # type: ignore[method-assign]


def timed_hook(driver: CharmDriver, event: Any) -> tuple[float, float]:
    """Run one hook; its wall time and the charm's CPU time (hook thread and write pool).

    The bench's own objects (the emulator's data, the recording proxy's calls, every earlier
    hook's state) are frozen out of Python's cyclic garbage collector for the hook: its full
    collections would scan them in the hook's thread (0.15-0.3 s a hook at N = 500, varying
    with when a collection falls), which no hook under Juju, a process of its own, pays. The
    collections of what the hook itself allocates are still counted.
    """
    pool = PoolCpu()
    gc.collect()
    gc.freeze()
    try:
        with pool.counting():
            wall, cpu = time.perf_counter(), time.thread_time()
            driver.run(event)
            cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    finally:
        gc.unfreeze()
    return wall, cpu + pool.seconds


def measure(backend: str, garm: Any, driver: CharmDriver, scenario: str) -> Row:
    """Run one update-status hook and count what it cost; name what a converged one wrote."""
    garm.clear_requests()
    wall, cpu = timed_hook(driver, driver.ctx.on.update_status())
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
        juju_tools=as_juju(tools, driver.state),
    )


def overlap(calls: Sequence[RecordedCall]) -> tuple[int, dict[str, float]]:
    """The most calls GARM had in hand at once, and the mean seconds of each kind of write."""
    events = sorted(
        [(c.started, 1) for c in calls if c.finished]
        + [(c.finished, -1) for c in calls if c.finished]
    )
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    spans: dict[str, list[float]] = collections.defaultdict(list)
    for call in calls:
        if call.method != "GET" and call.finished:
            spans[call_key(call)].append(call.finished - call.started)
    return most, {key: statistics.mean(v) for key, v in sorted(spans.items())}


def busy_walls(calls: Sequence[RecordedCall]) -> dict[str, float]:
    """Per kind of write, the wall time GARM had at least one in hand (union of the intervals).

    GARM's own floor for that kind in the run: the hooks cannot take less than its largest
    (organisation creates are serialised in GARM, disables are sent one at a time).
    """
    intervals: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    for call in calls:
        if call.method != "GET" and call.finished:
            intervals[call_key(call)].append((call.started, call.finished))
    walls: dict[str, float] = {}
    for key, spans in sorted(intervals.items()):
        total = 0.0
        end = float("-inf")
        for start, finish in sorted(spans):
            total += max(0.0, finish - max(start, end))
            end = max(end, finish)
        walls[key] = total
    return walls


def scaleset_floor(calls: Sequence[RecordedCall]) -> float:
    """GARM's busy wall of its scale-set disables and deletes together (their union).

    Disables go one at a time and each delete runs beside the next disable: the hooks of a
    removal cannot take less than the time GARM had one of them in hand.
    """
    spans = sorted(
        (c.started, c.finished)
        for c in calls
        if c.finished and call_key(c) in ("PUT /scalesets/{id}", "DELETE /scalesets/{id}")
    )
    total, end = 0.0, float("-inf")
    for start, finish in spans:
        total += max(0.0, finish - max(start, end))
        end = max(end, finish)
    return total


def first_write_after(calls: Sequence[RecordedCall], key: str) -> float | None:
    """Seconds from the first call to the first ``key`` call (the gate's wait), if any."""
    if not calls:
        return None
    begun = min(c.started for c in calls)
    found = [c.started for c in calls if call_key(c) == key]
    return min(found) - begun if found else None


def until_active(
    backend: str,
    garm: Any,
    driver: CharmDriver,
    scenario: str,
    first: Any,
    restarts: float = 0.0,
) -> Row:
    """Run ``first`` and the continuations it asks for; the hooks' total, longest and count.

    ``restarts``: seconds this scenario's own GARM restarts took (the bench's), for the target.
    """
    garm.clear_requests()
    exits = len(getattr(garm, "exits", []))
    walls: list[float] = []
    cpus: list[float] = []
    event = first
    while True:
        wall, cpu = timed_hook(driver, event)
        walls.append(wall)
        cpus.append(cpu)
        refused = collections.Counter(
            f"{call_key(c)} {c.status}" for c in garm.requests if c.status >= 400
        )
        print(
            f"  {backend}: {scenario} hook {len(walls)}: {wall:.1f} s, "
            f"{driver.state.unit_status}; GARM refused: {dict(refused) or 'nothing'}",
            file=sys.stderr,
        )
        for line in driver.ctx.juju_log:
            if line.level in ("WARNING", "ERROR") and "non-empty filesystem" not in line.message:
                print(f"    {line.level}: {line.message[:300]}", file=sys.stderr)
                if "GarmConnectionError" in line.message and hasattr(garm, "log_tail"):
                    print(garm.log_tail(400), file=sys.stderr)
        if not driver.continuation_asked:
            break
        container = driver.state.get_container("garm")
        notice = testing.Notice(CONTINUE_KEY)
        container = dataclasses.replace(container, notices=[notice])
        others = {c for c in driver.state.containers if c.name != container.name}
        driver.state = dataclasses.replace(driver.state, containers={*others, container})
        event = driver.ctx.on.pebble_custom_notice(container, notice)
    calls = garm.requests
    most, means = overlap(calls)
    print(
        f"  {backend}: {scenario}: at most {most} calls in GARM's hands at once", file=sys.stderr
    )
    for key, seconds in means.items():
        print(f"  {backend}: {scenario}: {key} took {seconds:.3f} s on average", file=sys.stderr)
    hooks = sum(walls)
    for key, busy in busy_walls(calls).items():
        print(
            f"  {backend}: {scenario}: GARM busy with {key} {busy:.1f} s of the hooks' "
            f"{hooks:.1f} s (hooks / busy = {hooks / busy if busy else float('inf'):.2f})",
            file=sys.stderr,
        )
    floor = scaleset_floor(calls)
    exited = getattr(garm, "exits", [])[exits:]
    waited = first_write_after(calls, "PUT /scalesets/{id}")
    target = 1.1 * floor + 10.0 + restarts
    # GARM takes no disable safely before its round of worker starts after its own start
    # (``worker_starts``): with that wait counted as the restart's own time, the second target.
    starts = target + (waited or 0.0)
    verdict = (
        f"GARM's floor (its scale-set disables and deletes) {floor:.1f} s; target 1.1 x floor "
        f"+ 10 s + restarts {restarts:.1f} s = {target:.1f} s: "
        f"{'met' if hooks <= target else 'NOT met'}; with the wait for GARM's worker starts "
        f"counted as the restart's: {starts:.1f} s: {'met' if hooks <= starts else 'NOT met'}"
        if floor
        else "no scale set disabled or deleted"
    )
    print(
        f"  {backend}: {scenario}: {len(walls)} hooks, {hooks:.1f} s "
        f"(longest {max(walls):.1f} s); {verdict}; first disable "
        f"{'none' if waited is None else f'{waited:.1f} s'} after the first call; "
        f"GARM exited {len(exited)} times{': ' if exited else ''}{'; '.join(exited)}",
        file=sys.stderr,
    )
    status = driver.state.unit_status
    faults = () if isinstance(status, ops.ActiveStatus | ops.WaitingStatus) else (str(status),)
    return Row(
        backend,
        0,
        scenario,
        sum(walls),
        sum(cpus),
        sum(1 for c in calls if c.method == "GET"),
        sum(1 for c in calls if c.method != "GET" and c.path != LOGIN_PATH),
        0,
        collections.Counter(call_key(c) for c in calls),
        collections.Counter[str](),
        faults,
        hooks=len(walls),
        longest=max(walls),
    )


@dataclasses.dataclass(frozen=True)
class Setting:
    """How one run is set up: GitHub's latency, the write pool, GARM's database, the orgs."""

    latency: float = 0.0
    pool: int | None = None
    database: str = SQLITE
    shared_org: bool = False
    restart_before_labels: bool = False


@contextmanager
def started(backend: str, workdir: Path, latency: float = 0.0) -> Iterator[Any]:
    """A GARM of ``backend`` behind a recording proxy, with nothing in it.

    ``latency``: each answer of the GitHub stand-in real GARM asks waits this long (seconds).
    """
    if backend == EMULATOR:
        with proxied_emulator() as proxied:
            yield proxied
        return
    binary = garm_binary()
    if binary is None:
        raise SystemExit(SKIP_REASON)
    with ExitStack() as stack:
        github = stack.enter_context(GitHubStandin(latency=latency))
        real = RealGarm.prepare(workdir, binary=binary, github_endpoint=github.endpoint_params())
        register_configured_apps(real.proxy, github)
        stack.callback(real.stop)
        STANDINS[id(real)] = github
        stack.callback(STANDINS.pop, id(real), None)
        yield real


def prepared(stack: ExitStack, backend: str, setting: Setting) -> set[testing.Relation]:
    """The write pool of ``setting`` (for the ``stack``'s life); its database relation, if any."""
    database: set[testing.Relation] = set()
    if setting.database == POSTGRESQL:
        bin_dir = postgres_bin()
        if backend != REAL or bin_dir is None:
            raise SystemExit("PostgreSQL: real GARM and PostgreSQL's binaries only")
        database.add(postgresql_relation(stack.enter_context(PostgresServer(bin_dir))))
    if setting.pool is not None:
        stack.enter_context(mock.patch.object(writes_module, "POOL_SIZE", setting.pool))
    return database


def bench(backend: str, count: int, repeats: int, setting: Setting | None = None) -> list[Row]:
    """Deploy with ``count`` configurators, converge, measure the hooks, then remove them all."""
    setting = setting or Setting()
    with (
        tempfile.TemporaryDirectory() as scratch,
        started(backend, Path(scratch), setting.latency) as garm,
        ExitStack() as stack,
    ):
        data = Path(scratch) / "data"
        data.mkdir()
        cfgs = relations(count, shared_org=setting.shared_org)
        database = prepared(stack, backend, setting)
        state = base_state(
            data,
            relations={INGRESS, *database, *(c.relation for c in cfgs)},
            secrets={s for c in cfgs for s in c.secrets},
        )
        driver = CharmDriver(garm, state, ready_timeout=30.0)
        setup = time.perf_counter()
        # The deployment's first hooks: GARM is started and bootstrapped; every configurator
        # is already related, so install's pass creates the fleet (and continues while asked).
        deploy = until_active(backend, garm, driver, "deploy", driver.ctx.on.install())
        driver.run(driver.ctx.on.leader_elected())
        driver.run(driver.ctx.on.pebble_ready(driver.state.get_container("garm")))
        driver.run(driver.ctx.on.update_status())
        print(
            f"  {backend}: {count} scale sets created and converged in "
            f"{time.perf_counter() - setup:.1f} s",
            file=sys.stderr,
        )
        converged = [measure(backend, garm, driver, "converged") for _ in range(repeats)]
        if setting.restart_before_labels:
            labels = restarted_labels(backend, garm, driver, count)
        else:
            driver.state = with_extra_label(driver.state, max(1, count // 10))
            labels = measure(backend, garm, driver, "10% labels")
            driver.continue_passes()
        driver.state = dataclasses.replace(
            driver.state,
            relations={r for r in driver.state.relations if r.endpoint != CONFIGURATOR},
        )
        leave = until_active(backend, garm, driver, "leave", driver.ctx.on.update_status())
        left = left_behind(backend, garm, driver)
        leave = dataclasses.replace(leave, faults=leave.faults + left)
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
    return [dataclasses.replace(r, scalesets=count) for r in (deploy, median, labels, leave)]


def restarted_labels(backend: str, garm: Any, driver: CharmDriver, count: int) -> Row:
    """GARM restarted as Pebble restarts it, then 10% of the labels changed, to the end.

    As Juju delivers it: one ``relation-changed`` per configurator whose labels changed, each
    hook with the continuations it asks for; a chain that ends with predecessors left waits for
    the next ``update-status`` under Juju, which is delivered here at once (each such chain
    counted), until none is left. The change must be seen: every changed configurator's scale
    set carries the new label at the end.
    """
    began = time.perf_counter()
    garm.restart()
    restarts = time.perf_counter() - began
    print(f"  {backend}: GARM restarted in {restarts:.1f} s", file=sys.stderr)
    changed = max(1, count // 10)
    driver.state = with_extra_label(driver.state, changed)
    relations = changed_relations(driver.state, changed)
    rows = [
        until_active(
            backend,
            garm,
            driver,
            f"10% labels, relation-changed {n + 1} of {len(relations)}",
            driver.ctx.on.relation_changed(relation, remote_unit=0),
            restarts * (n == 0),
        )
        for n, relation in enumerate(relations)
    ]
    chains = 0
    while (left := len(garm.scalesets()) - count) and chains < LABEL_CHAINS:
        print(f"  {backend}: {left} predecessors left: a wait for update-status", file=sys.stderr)
        chains += 1
        name = f"10% labels, update-status {chains}"
        rows.append(until_active(backend, garm, driver, name, driver.ctx.on.update_status()))
    listed = garm.scalesets()
    relabelled = sum(
        1 for s in listed if NEW_LABEL in {tag.get("name") for tag in s.get("tags") or []}
    )
    print(
        f"  {backend}: 10% labels: {relabelled} of {changed} scale sets carry the new label, "
        f"{len(listed) - count} predecessors left, {chains} waits for update-status",
        file=sys.stderr,
    )
    faults = tuple(f for r in rows for f in r.faults)
    if relabelled != changed:
        faults += (f"{changed - relabelled} label changes not in GARM",)
    return dataclasses.replace(
        rows[0],
        scenario="10% labels, restarted",
        seconds=sum(r.seconds for r in rows),
        cpu=sum(r.cpu for r in rows),
        reads=sum(r.reads for r in rows),
        writes=sum(r.writes for r in rows),
        hooks=sum(r.hooks for r in rows),
        longest=max(r.longest for r in rows),
        faults=faults,
    )


def left_behind(backend: str, garm: Any, driver: CharmDriver) -> tuple[str, ...]:
    """What the removal left in GARM once its hooks stopped asking for the next pass.

    A pass GARM went away from asks for the next at once only so many times in a row
    (``continuation.NextPass``); after that the next comes with ``pebble-check-recovered`` or
    ``update-status``, which the bench does not deliver: a removal left there is a stall.
    """
    scalesets, organisations = len(garm.scalesets()), len(garm.organizations())
    github = STANDINS.get(id(garm))
    on_github = len(github.scalesets()) if github is not None else 0
    print(
        f"  {backend}: leave: GARM still holds {scalesets} scale sets and {organisations} "
        f"organisations, GitHub {on_github} scale sets; the last hook asks for no next pass "
        f"({driver.state.unit_status})",
        file=sys.stderr,
    )
    faults: list[str] = []
    if scalesets or organisations:
        faults.append(
            f"removal stopped with {scalesets} scale sets and {organisations} organisations "
            f"left, waiting for update-status or pebble-check-recovered "
            f"({driver.state.unit_status})"
        )
    if on_github > scalesets:
        faults.append(f"GitHub holds {on_github - scalesets} scale sets GARM no longer has")
    return tuple(faults)


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
    parser.add_argument("--pool", type=int, help="the write pool's size (default: POOL_SIZE)")
    parser.add_argument("--database", choices=(SQLITE, POSTGRESQL), default=SQLITE)
    parser.add_argument(
        "--shared-org",
        action="store_true",
        help=f"every configurator's scale set in one organisation ({SHARED_ORG})",
    )
    parser.add_argument(
        "--github-latency",
        type=float,
        default=0.0,
        metavar="MS",
        help="each answer of the GitHub stand-in real GARM asks waits this long (GitHub: 100-300)",
    )
    parser.add_argument(
        "--real-max",
        type=int,
        default=REAL_MAX,
        help="largest N run on real GARM (see REAL_MAX: one provider per configurator)",
    )
    parser.add_argument(
        "--restart-before-labels",
        action="store_true",
        help="restart GARM (as Pebble does) just before the label change, measured to its end",
    )
    parser.add_argument(
        "--grow",
        action="store_true",
        help="fleet growth: configurators integrated one at a time (tests/bench_growth.py)",
    )
    args = parser.parse_args(argv)
    backends = [EMULATOR, REAL] if args.garm == "both" else [args.garm]
    setting = Setting(
        args.github_latency / 1000,
        args.pool,
        args.database,
        args.shared_org,
        args.restart_before_labels,
    )
    if args.grow:
        from tests import bench_growth

        return bench_growth.main(backends, args.sizes, args.repeats, setting, args.real_max)
    rows: list[Row] = []
    for size in args.sizes:
        for backend in backends:
            if backend == REAL and size > args.real_max:
                print(
                    f"  real: N={size} skipped (above --real-max {args.real_max})", file=sys.stderr
                )
                continue
            rows.extend(bench(backend, size, args.repeats, setting))
    print(
        f"GitHub stand-in latency: {args.github_latency:g} ms (real GARM only); write pool: "
        f"{args.pool or writes_module.POOL_SIZE}; database: {args.database}; organisations: "
        f"{'one shared' if args.shared_org else 'one each'}"
    )
    print(
        f"{'BACKEND':<8}  {'SCALESETS':>9}  {'HOOK':<10}  {'HOOKS':>5}  {'WALL S':>7}  "
        f"{'LONGEST S':>9}  {'CPU S':>6}  {'READS':>5}  {'WRITES':>6}  {'HOOK TOOLS':>10}  "
        f"{'AS JUJU':>7}"
    )
    for row in rows:
        print(
            f"{row.backend:<8}  {row.scalesets:>9}  {row.scenario:<10}  {row.hooks:>5}  "
            f"{row.seconds:>7.3f}  {row.longest or row.seconds:>9.3f}  {row.cpu:>6.3f}  "
            f"{row.reads:>5}  {row.writes:>6}  {row.tools or '-':>10}  {row.juju_tools or '-':>7}"
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
    return failures(rows, real=REAL in backends)


def failures(rows: Sequence[Row], *, real: bool) -> int:
    """Print what failed the run: a converged hook that wrote, a GARM that exited on its own."""
    bad = [r for r in rows if r.faults]
    for row in bad:
        for fault in row.faults:
            print(f"FAILED: {row.backend}, N={row.scalesets}, {fault}", file=sys.stderr)
    # A GARM that exited on its own (a crash, restarted as Pebble would) fails the run.
    for exit_line in UNEXPECTED_EXITS:
        print(f"FAILED: {exit_line}", file=sys.stderr)
    if real and not UNEXPECTED_EXITS:
        print("Real GARM exited on its own: never")
    return 1 if bad or UNEXPECTED_EXITS else 0


if __name__ == "__main__":
    sys.exit(main())
