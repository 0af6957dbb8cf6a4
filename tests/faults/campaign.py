"""One case of the fault campaign: a story's step with one fault, then hooks until converged.

A story is first run without a fault (:func:`reference`): that gives the number of the charm's
calls to GARM in the step (``calls``; each is faulted in turn), the desired state (what the
unfaulted run converges to, :func:`observe`) and how many scale sets GitHub was asked to
register. The calls faulted are those of the step's hooks that write to GARM: a hook of the
step that only reads (the relation-changed after a relation-joined that did the work) makes the
calls of any converged update-status hook. In a step that repeats itself (:attr:`Story.repeats`:
the second configurator arriving makes the first one's calls again), only the writes of the
repeat are faulted. Then :func:`run_case` puts the precondition back, arms the fault, runs the
step and then the story's later hook (update-status; ``stop`` again for the removal) until the
observed state equals the desired one, and one more hook that must write nothing. With GARM on
PostgreSQL, the fault ``db-restart`` restarts the database server around the faulted call, and
the case keeps what GARM answered that call and whether GARM exited (:attr:`Outcome.answer`).

Invariants, checked after every hook (the step's and the later ones) and at the end; a broken
one is a violation of the case, listed with it:

- no busy runner removed: no ``DELETE`` of it sent to GARM, and GARM still lists it busy;
- nothing of an unchanged configurator written (its credential, organisation, scale sets and
  their templates, by id);
- GitHub never keeps a scale set registered twice: no create refused and no more creates
  kept than the unfaulted step made (GARM takes back a registration it could not store, and
  a concurrent pass can have several in flight when the database goes);
- the provider record (and the Pebble plan) keeps every provider a live scale set names;
- in a faulted case, the unit never blocked: blocked asks the operator to act, and a fault of
  GARM or its database is nothing the operator asked for;
- the final state equals the desired state, within :data:`MAX_HOOKS` hooks.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ops import testing

from tests.faults.stories import BUSY, CFG_A, CFG_B, Story, busy_runners
from tests.faults.world import Snapshot, World
from tests.real_garm.proxy import CUT, DB_RESTART, FAULTS, KILL, is_instance_call

LATE = "late"
WRITES = ("POST", "PUT", "PATCH", "DELETE")
LOGIN = "POST /auth/login"
LATENCY = 1.0
MAX_HOOKS = 8
_ID = re.compile(r"/(?:[0-9]+|[0-9a-f]{8}-[0-9a-f-]{27})(?=/|$)")


def call_shape(method: str, path: str) -> str:
    """A call as the table shows it: ids replaced by ``{id}``."""
    return f"{method} {_ID.sub('/{id}', path)}"


@dataclass
class Reference:
    """What the unfaulted step does."""

    calls: list[str]
    # The calls faulted: those of the step's hooks that write to GARM (see the module doc).
    faulted: list[int]
    desired: dict[str, Any]
    hooks: int
    creates: int
    seconds: float
    violations: list[str]


@dataclass
class Outcome:
    """One case: the hooks it took to converge (None: did not) and the broken invariants."""

    story: str
    fault: str
    call: int | None
    hooks: int | None
    violations: list[str] = field(default_factory=list)
    seconds: float = 0.0
    # db-restart: what GARM answered the faulted call, its database down.
    answer: str = ""


def observe(world: World) -> dict[str, Any]:
    """What must equal the desired state: GARM's objects, providers, the charm's status."""
    garm = world.garm
    scalesets = [
        (
            s["name"],
            s.get("provider_name"),
            bool(s.get("enabled")),
            tuple(sorted(t["name"] for t in s.get("tags") or [])),
            s.get("image"),
            s.get("flavor"),
            s.get("min_idle_runners"),
            s.get("max_runners"),
        )
        for s in garm.scalesets()
    ]
    return {
        "credentials": sorted(c["name"] for c in garm.credentials()),
        "organizations": sorted(o["name"] for o in garm.organizations()),
        "scalesets": sorted(scalesets),
        "templates": sorted(t["name"] for t in garm.templates()),
        "runners": sorted(
            (r["name"], r.get("status"), r.get("runner_status")) for r in garm.instances()
        ),
        "garm providers": sorted(garm.providers()),
        "planned providers": world.planned(),
        "provider record": world.provider_record(),
        "unit status": repr(world.driver.state.unit_status),
    }


def _diff(observed: dict[str, Any], desired: dict[str, Any]) -> str:
    return "; ".join(
        f"{key}: {observed.get(key)!r} (desired {value!r})"
        for key, value in desired.items()
        if observed.get(key) != value
    )


class Checks:
    """The invariants of one case, with what they need read before the step."""

    def __init__(self, world: World, story: Story, creates: int | None) -> None:
        """Read the unchanged configurator's objects and the busy runners before the step.

        ``creates``: the scale sets the unfaulted step registers; None while that step runs.
        """
        self.world = world
        self.story = story
        self.creates = creates
        self.violations: list[str] = []
        self.busy = busy_runners(world) if story.start == BUSY else []
        self.protected = {path for app in story.unchanged for path in _objects_of(world, app)}
        # The scale sets GitHub holds before the step: a delete of any other is GARM taking
        # back a registration it made in the step.
        self.registered_before = {s.id for s in world.github.scalesets()}

    def hook_ran(self, what: str) -> None:
        """Check what must hold after every hook."""
        calls = self.world.client_writes()
        for runner in self.busy:
            if any(c.method == "DELETE" and c.path.endswith(f"/{runner}") for c in calls):
                self._violate(f"{what}: DELETE of busy runner {runner}")
        for call in calls:
            if any(call.path == p or call.path.startswith(p + "/") for p in self.protected):
                self._violate(f"{what}: {call.method} {call.path} of an unchanged configurator")
        live = {s.get("provider_name") for s in self.world.garm.scalesets()}
        for kept, name in ((self.world.provider_record(), "provider record"),):
            missing = sorted(str(p) for p in live - set(kept))
            if missing:
                self._violate(f"{what}: {name} dropped {missing}, named by live scale sets")
        status = self.world.driver.state.unit_status
        if self.creates is not None and status.name == "blocked":
            self._violate(f"{what}: the unit blocked: {status.message}")
        planned = self.world.planned()
        if planned or self.world.driver.state.get_container("garm").plan.services:
            missing = sorted(str(p) for p in live - set(planned))
            if missing:
                self._violate(f"{what}: Pebble plan dropped {missing}, named by live scale sets")

    def ended(self) -> None:
        """Check what must hold at the end of the case."""
        busy_now = busy_runners(self.world)
        for runner in self.busy:
            if runner not in busy_now:
                self._violate(f"busy runner {runner} no longer listed busy")
        requests = self.world.github.requests
        creates = [r for r in requests if r.route == "create_scale_set"]
        refused = [r.status for r in creates if r.status >= 300]
        if refused:
            self._violate(f"GitHub refused scale-set registrations: {refused}")
        # A concurrent pass has several creates in GARM's hands when its database goes: GARM
        # registers each with GitHub, fails to store it, deletes it from GitHub and answers 500;
        # the charm creates it again. A registration taken back is not one GitHub keeps.
        taken_back = [
            r
            for r in requests
            if r.route == "delete_scale_set"
            and r.status < 300
            and int(r.path.rsplit("/", 1)[-1]) not in self.registered_before
        ]
        kept = len(creates) - len(taken_back)
        if self.creates is not None and kept > self.creates:
            self._violate(
                f"GitHub was asked to register {len(creates)} scale sets and took back "
                f"{len(taken_back)}; the step registers {self.creates}"
            )

    def _violate(self, text: str) -> None:
        if text not in self.violations:
            self.violations.append(text)


def _objects_of(world: World, app: str) -> set[str]:
    """API paths of a configurator's objects in GARM: credential, organisation, scale sets."""
    garm = world.garm
    ids = {CFG_A: ("101", "org-a"), CFG_B: ("102", "org-b")}
    app_id, org = ids[app]
    paths = {
        f"/github/credentials/{c['id']}"
        for c in garm.credentials()
        if c["name"].startswith(f"app-{app_id}-")
    }
    paths |= {f"/organizations/{o['id']}" for o in garm.organizations() if o["name"] == org}
    names = [s["name"] for s in garm.scalesets() if s["name"].startswith(app)]
    paths |= {f"/scalesets/{s['id']}" for s in garm.scalesets() if s["name"] in names}
    paths |= {
        f"/templates/{t['id']}"
        for t in garm.templates()
        if any(t["name"].endswith(name) for name in names)
    }
    return paths


def _hook(world: World, checks: Checks, what: str, run: Callable[[World], None]) -> bool:
    """Run hooks; a hook that fails is noted (Juju retries it); return whether it failed."""
    try:
        run(world)
        failed = False
    except testing.errors.UncaughtCharmError as exc:
        failed = True
        cause = exc.__cause__
        if checks.story.retry is not checks.story.step:
            checks.violations.append(f"{what} failed: {type(cause).__name__}: {cause}")
    world.wait_answering()
    checks.hook_ran(what)
    return failed


def _is_write(shape: str) -> bool:
    return shape.split()[0] in WRITES and shape != LOGIN


def _calls_to_fault(story: Story, calls: list[str], marks: list[int]) -> list[int]:
    """Numbers (from 1) of the calls to fault: those of the hooks of the step that write.

    With ``story.repeats``, a writing hook after the first makes the first one's calls again
    (another configurator arriving): only its writes are faulted.
    """
    numbers: list[int] = []
    start = 0
    for end in marks:
        span = range(start + 1, end + 1)
        if any(_is_write(calls[n - 1]) for n in span):
            if numbers and story.repeats:
                numbers += [n for n in span if _is_write(calls[n - 1])]
            else:
                numbers += span
        start = end
    return numbers


def reference(world: World, snapshot: Snapshot, story: Story) -> Reference:
    """Run ``story``'s step without a fault; return its calls and what it converges to."""
    started = time.monotonic()
    world.restore(snapshot)
    checks = Checks(world, story, None)
    world.driver.marks.clear()
    _hook(world, checks, "the step", story.step)
    world.forget_expected_exits()
    calls = [
        call_shape(c.method, c.path) for c in world.garm.requests if not is_instance_call(c.path)
    ]
    if len(calls) != world.garm.proxy.arrivals:
        checks.violations.append("an unfaulted call went unanswered")
    faulted = _calls_to_fault(story, calls, world.driver.marks)
    hooks = 0
    while True:
        before = observe(world)
        world.garm.clear_requests()
        _hook(world, checks, f"hook {hooks + 1}", story.retry)
        if not world.client_writes() and observe(world) == before:
            break
        hooks += 1
        if hooks > MAX_HOOKS:
            checks.violations.append(f"does not converge without a fault in {MAX_HOOKS} hooks")
            break
    checks.ended()
    world.forget_expected_exits()
    return Reference(
        calls=calls,
        faulted=faulted,
        desired=observe(world),
        hooks=hooks,
        creates=sum(r.route == "create_scale_set" for r in world.github.requests),
        seconds=time.monotonic() - started,
        violations=checks.violations,
    )


def run_case(
    world: World,
    snapshot: Snapshot,
    story: Story,
    ref: Reference,
    fault: str,
    call: int | None = None,
) -> Outcome:
    """Run one case: the fault at ``call`` (cut, kill) or on every call (late)."""
    started = time.monotonic()
    world.restore(snapshot)
    world.github.clear_requests()
    checks = Checks(world, story, ref.creates)
    proxy = world.garm.proxy
    if fault in FAULTS:
        assert call is not None
        proxy.fault_at(call, fault)
    elif fault == LATE:
        proxy.latency = LATENCY
    _hook(world, checks, "the step", story.step)
    answer = _answer_to(world, call) if fault == DB_RESTART and call is not None else ""
    if fault != LATE:
        proxy.clear_faults()
    hooks: int | None = 0
    while observe(world) != ref.desired:
        if hooks == MAX_HOOKS:
            checks.violations.append(
                f"not converged after {MAX_HOOKS} hooks: {_diff(observe(world), ref.desired)}"
            )
            hooks = None
            break
        assert hooks is not None
        hooks += 1
        _hook(world, checks, f"hook {hooks}", story.retry)
    if hooks is not None:
        world.garm.clear_requests()
        _hook(world, checks, "the converged hook", story.retry)
        if world.client_writes():
            shapes = [call_shape(c.method, c.path) for c in world.client_writes()]
            checks.violations.append(f"the hook after convergence wrote {shapes}")
        if observe(world) != ref.desired:
            checks.violations.append(
                f"left the desired state: {_diff(observe(world), ref.desired)}"
            )
    proxy.clear_faults()
    checks.ended()
    world.forget_expected_exits()
    seconds = time.monotonic() - started
    return Outcome(story.key, fault, call, hooks, checks.violations, seconds, answer)


def _answer_to(world: World, call: int) -> str:
    """What GARM answered the charm's call ``call`` of the step, and whether GARM exited."""
    calls = [c for c in world.garm.requests if not is_instance_call(c.path)]
    if len(calls) < call:
        answer = "no answer"
    else:
        answered = calls[call - 1]
        answer = " ".join(filter(None, (str(answered.status), answered.error)))
    return f"{answer}; GARM exited" if world.garm.exits else answer


__all__ = [
    "CFG_A",
    "CFG_B",
    "CUT",
    "DB_RESTART",
    "KILL",
    "LATE",
    "Outcome",
    "Reference",
    "reference",
    "run_case",
]
