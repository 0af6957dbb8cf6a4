"""The packed charm's life under Juju beyond the story: pod made again, removal, kills.

Each scenario runs in a pod of its own (:mod:`tests.juju_agent.pod`): the packed charm under the
unit-agent stand-in, real GARM run by the real Pebble from the charm's plan, the GitHub stand-in
and the stand-in provider (:func:`tests.juju_agent.driver.open_packed_backend`). Each first
converges a deployment of :data:`CONFIGURATORS` configurators (:func:`tests.bench.relations`:
one unit, organisation, credential and scale set each, no idle runner): Juju's deploy hooks and
the continuations the charm asks for, until the unit is Active.

``restart``: the unit's pod deleted and made again
(:meth:`tests.juju_agent.agent.UnitAgent.restart_pod`: ``stop`` in the old pod; in the new one
the charm directory fresh from the prime directory, so ops' stored state is gone, and a new
Pebble with no state; the storage kept; then ``upgrade-charm``, ``config-changed``, ``start``,
``garm-pebble-ready``), then the continuations the charm asks for while it reads its
configurator record again (ADR 0019) and ``update-status`` until Active: GARM runs again from
the charm's plan and receives no write but the login. It converges
:data:`RESTART_CONFIGURATORS` configurators, more than a pass reads of the record, so that the
new pod's charm asks for at least one continuation and the stand-in delivers it.

``removal``: ``juju remove-application garm`` as Juju 3.6 runs it on the unit
(:meth:`tests.juju_agent.agent.UnitAgent.remove_application`: the configurators' and the
ingress's relations departed and broken, then ``stop`` and ``remove``, ``goal-state`` showing
the unit dying); the leader's ``stop`` runs the removal cleanup (ADR 0006), and after it GARM
holds no scale set, organisation, repository or credential.

``kills``: a small failure campaign. From a converged deployment, configurators are added one
at a time; the ``relation-changed`` of each (after one that measures its tool calls) has the
charm's process SIGKILLed at a sampled k-th hook-tool call (the first, a third, two thirds, the
last: :meth:`tests.juju_agent.agent.UnitAgent.plan_kill`), and Juju's retry runs it whole.
After each: the unit Active again, every configurator with exactly one scale set and its
organisation in GARM, no name twice, one credential.

    python -m tests.packed_lifecycle [restart] [removal] [kills]

It prints ``PASSED <scenario>`` or ``FAILED <scenario>: ...`` per scenario and exits 1 when one
failed; where no pod can be made, one ``LIFECYCLE NOT RUN on the packed charm: ...`` line and
exit code 1 (:func:`tests.juju_agent.pod.into_pod`).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
import traceback
from collections.abc import Callable, Sequence

import ops

from tests.bench import relations
from tests.charm_driver import configurator
from tests.juju_agent import pod
from tests.juju_agent.driver import PackedDriver, open_packed_backend
from tests.juju_agent.pod import PackedGarm
from tests.real_garm.proxy import LOGIN_PATH

CONFIGURATORS = 3
CONFIGURATOR_ENDPOINT = "garm-configurator"
# More configurators than a pass reads of its record (ROTATION, 20): a new pod's charm, which
# lacks the record, asks for a continuation before it has read them all.
RESTART_CONFIGURATORS = 25
ACTIVE_HOOKS = 20


def converge(driver: PackedDriver, count: int = CONFIGURATORS) -> None:
    """Relate ``count`` configurators, run the deploy hooks and continuations until Active."""
    cfgs = relations(count)
    driver.state = dataclasses.replace(
        driver.state,
        relations={*driver.state.relations, *(c.relation for c in cfgs)},
        secrets={*driver.state.secrets, *(s for c in cfgs for s in c.secrets)},
    )
    for event in driver.deploy_events():
        driver.run(event)
    settle(driver)


def removal(driver: PackedDriver, garm: PackedGarm) -> str:
    """The application removed from a converged deployment: GARM left without the charm's."""
    converge(driver)
    made = _charms_objects(garm)
    lacking = [kind for kind in ("scalesets", "organizations", "credentials") if not made[kind]]
    assert not lacking, f"the converged deployment lacks {lacking} in GARM: {made}"
    runs = driver.remove_application()
    hooks = [r.hook.removeprefix("hooks/") for r in runs]
    assert hooks[-2:] == ["stop", "remove"], hooks
    assert "garm-peers-relation-broken" not in hooks, hooks
    left = _charms_objects(garm)
    assert not any(left.values()), f"GARM still holds after the removal: {left}"
    stop = runs[-2]
    assert "GARM cleaned up for removal" in stop.log, stop.log[-2000:]
    counts = {kind: len(objects) for kind, objects in made.items()}
    return f"{len(hooks)} removal hooks ({', '.join(hooks)}) deleted {counts}"


def restart(driver: PackedDriver, garm: PackedGarm) -> str:
    """A converged deployment's pod made again converges with no write to GARM but the login."""
    converge(driver, RESTART_CONFIGURATORS)
    garm.clear_requests()
    runs = driver.restart_pod()
    hooks = [r.hook.removeprefix("hooks/") for r in runs]
    continued = driver.continue_passes()
    more = 0
    while not isinstance(driver.state.unit_status, ops.ActiveStatus):
        assert more < ACTIVE_HOOKS, f"not Active again: {driver.state.unit_status}"
        driver.run(driver.ctx.on.update_status())
        continued += driver.continue_passes()
        more += 1
    assert continued >= 1, "the new pod's charm read its whole record in one hook"
    writes = [f"{c.method} {c.path}" for c in garm.requests if c.method != "GET"]
    logins = writes.count(f"POST {LOGIN_PATH}")
    others = [w for w in writes if w != f"POST {LOGIN_PATH}"]
    assert not others, f"the restarted pod wrote to GARM: {others}"
    # The new pod's charm runs GARM again from its plan (Pebble's state was gone).
    assert any(s.name == "garm" and s.is_running() for s in driver.pod.client().get_services())
    return (
        f"{' '.join(hooks)}, then {continued} continuation(s) and {more} update-status to "
        f"Active; GARM writes: {logins} login(s), nothing else"
    )


def kills(driver: PackedDriver, garm: PackedGarm) -> str:
    """The charm SIGKILLed at sampled tool calls of a hook that writes to GARM, then retried.

    From a converged deployment, each round adds one configurator (relation-created, -joined,
    -changed); the first round measures how many tool calls its ``relation-changed`` makes
    (n); each later round kills the charm's process at its k-th call, for k in
    :func:`sampled_calls` (n), and Juju's retry runs the hook whole. After each round, once the
    continuations and ``update-status`` have run the unit to Active: every configurator has
    exactly one scale set and its organisation, no name twice in GARM, one credential.
    """
    converge(driver)
    added = CONFIGURATORS
    changed = f"hooks/{CONFIGURATOR_ENDPOINT}-relation-changed"
    _add(driver, added)
    added += 1
    measured = [h for h in driver.hooks if h.hook == changed][-1]
    calls = sum(measured.tools.values())
    settle(driver)
    _check_fleet(garm, added)
    rounds = []
    for k in sampled_calls(calls):
        driver.agent.plan_kill(changed, k)
        try:
            _add(driver, added)
        finally:
            plan = driver.agent.kill_plan()
            driver.agent.clear_kill()
        added += 1
        hook = [h for h in driver.hooks if h.hook == changed][-1]
        assert plan is not None and plan["killed"], f"k={k}: no kill ({plan})"
        assert [r.failure() for r in hook.retried] == ["killed by signal 9"], hook.retried
        settle(driver)
        _check_fleet(garm, added)
        rounds.append(f"k={k}")
    return (
        f"relation-changed of a new configurator makes {calls} tool calls; killed at "
        f"{', '.join(rounds)}, each retried whole; {added} configurators, each with one scale "
        "set and organisation in GARM, nothing twice, Active"
    )


def sampled_calls(calls: int) -> list[int]:
    """The tool calls a hook of ``calls`` calls is killed at: the first, a third, two, the last."""
    return sorted({1, max(1, calls // 3), max(1, 2 * calls // 3), calls})


def settle(driver: PackedDriver) -> None:
    """The continuations the charm asks for, then ``update-status`` until Active."""
    driver.continue_passes()
    for _ in range(ACTIVE_HOOKS):
        if isinstance(driver.state.unit_status, ops.ActiveStatus):
            return
        driver.run(driver.ctx.on.update_status())
        driver.continue_passes()
    raise AssertionError(f"not Active after {len(driver.hooks)} hooks: {driver.state.unit_status}")


def _add(driver: PackedDriver, number: int) -> None:
    driver.add_configurator(
        configurator(
            f"cfg-{number}",
            relation_id=number + 1,
            org=f"org-{number}",
            labels="linux,x64",
            extra={"min_idle_runner": "0"},
        )
    )


def _check_fleet(garm: PackedGarm, count: int) -> None:
    """Each of ``count`` configurators' one scale set and organisation; no name twice."""
    objects = _charms_objects(garm)
    twice = {
        kind: [n for n, c in collections.Counter(names).items() if c > 1]
        for kind, names in objects.items()
    }
    assert not any(twice.values()), f"GARM holds twice: {twice}"
    per_cfg = collections.Counter(n.split("-runners-")[0] for n in objects["scalesets"])
    wanted = {f"cfg-{n}": 1 for n in range(count)}
    assert dict(per_cfg) == wanted, f"scale sets per configurator: {dict(per_cfg)}"
    assert sorted(objects["organizations"]) == sorted(f"org-{n}" for n in range(count))
    assert len(objects["credentials"]) == 1, objects["credentials"]


def _charms_objects(garm: PackedGarm) -> dict[str, list[str]]:
    return {
        "scalesets": [s["name"] for s in garm.scalesets()],
        "organizations": [o["name"] for o in garm.organizations()],
        "credentials": [c["name"] for c in garm.credentials()],
        "repositories": [r["name"] for r in garm.repositories()],
    }


SCENARIOS: dict[str, Callable[[PackedDriver, PackedGarm], str]] = {
    "removal": removal,
    "restart": restart,
    "kills": kills,
}


def run_scenario(name: str) -> bool:
    """Run scenario ``name`` on a fresh packed backend; print its line; whether it passed."""
    with open_packed_backend(agent_standin=False) as backend:
        driver = backend.driver
        assert isinstance(driver, PackedDriver)
        garm = backend.garm.real  # type: ignore[attr-defined]
        try:
            detail = SCENARIOS[name](driver, garm)
        except Exception:  # every failure is reported; the next scenario runs
            print(f"FAILED {name}: {traceback.format_exc()}", flush=True)
            print(driver.summary(), flush=True)
            return False
        print(f"PASSED {name}: {detail}\n{driver.summary()}", flush=True)
        return True


def main(argv: Sequence[str] | None = None) -> int:
    """Run the scenarios named (all by default) in a pod; 0 when every one passed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", help=f"of {', '.join(SCENARIOS)} (all)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.scenarios) - set(SCENARIOS))
    if unknown:
        parser.error(f"no scenario {', '.join(unknown)}")
    outside = pod.into_pod("tests.packed_lifecycle", list(argv or sys.argv[1:]), "LIFECYCLE")
    if outside is not None:
        return outside
    results = [run_scenario(name) for name in args.scenarios or SCENARIOS]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
