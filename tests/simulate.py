"""The offline main job: the whole charm story against the GARM emulator (``tox -e simulate``).

The real charm runs through ``ops.testing``; GARM is the project's emulator on 127.0.0.1. After
each step the script prints what ``juju status`` would show, the scale sets GARM holds and the
providers the charm publishes, and checks the state the step must reach. It exits non-zero at
the first expectation that is not met.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import ops
from ops import testing

from tests.charm_driver import CharmDriver, base_state, configurator, planned_providers
from tests.garm_emulator import GarmEmulator

TICK = timedelta(seconds=30)


class StoryFailedError(Exception):
    """An expected state was not reached."""


class Story:
    """Runs the steps, prints the views and checks each expectation."""

    def __init__(self, driver: CharmDriver) -> None:
        """Tell the story with ``driver``'s charm and emulator."""
        self.driver = driver
        self.garm = driver.emulator
        self.step_number = 0

    def step(self, title: str) -> None:
        """Start a numbered step."""
        self.step_number += 1
        print(f"\n=== {self.step_number}. {title}")

    def show(self, state: testing.State) -> None:
        """Print a juju-status-like view of the charm, GARM's scale sets and the providers."""
        print(f"  App   garm    {_status(state.app_status)}")
        print(f"  Unit  garm/0* {_status(state.unit_status)}")
        scalesets = sorted(self.garm.scalesets(), key=lambda s: s["name"])
        if not scalesets:
            print("  Scale sets: none")
        for scaleset in scalesets:
            runners = self.garm.instances(scaleset["name"])
            statuses = ", ".join(sorted(_runner_state(r) for r in runners)) or "-"
            enabled = "true" if scaleset.get("enabled") else "false"
            print(
                f"  Scale set {scaleset['name']:<32} enabled={enabled:<5} "
                f"runners={len(runners)} [{statuses}]"
            )
        print(f"  Published providers: {', '.join(planned_providers(state)) or 'none'}")
        print(f"  GARM loaded providers: {', '.join(self.garm.providers) or 'none'}")

    def expect(self, what: str, condition: bool) -> None:
        """Check one expectation of the current step."""
        print(f"  [{'ok' if condition else 'FAILED'}] {what}")
        if not condition:
            raise StoryFailedError(what)

    def until(
        self, what: str, done: Callable[[testing.State], bool], *, passes: int = 8
    ) -> testing.State:
        """Tick GARM's clock and run update-status until ``done`` holds, showing each hook."""
        for _ in range(passes):
            self.garm.advance(TICK)
            state = self.driver.run(self.driver.ctx.on.update_status())
            self.show(state)
            if done(state):
                self.expect(what, True)
                return state
        self.expect(what, False)
        raise AssertionError("unreachable")


def _status(status: ops.StatusBase) -> str:
    return f"{status.name:<8} {status.message}".rstrip()


def _runner_state(runner: dict[str, object]) -> str:
    status = str(runner.get("status", "?"))
    runner_status = runner.get("runner_status")
    return f"{status}/{runner_status}" if runner_status else status


def message(state: testing.State) -> str:
    """Return the unit's status message."""
    return state.unit_status.message


def tell(story: Story) -> None:
    """The story of section 20 of the spec, step by step."""
    driver, garm = story.driver, story.garm

    story.step("Deploy garm alone (SQLite)")
    driver.run(driver.ctx.on.install())
    driver.run(driver.ctx.on.leader_elected())
    state = driver.run(driver.ctx.on.pebble_ready(driver.state.get_container("garm")))
    story.show(state)
    story.expect(
        "waiting for a configurator",
        state.unit_status == ops.WaitingStatus("Waiting for garm-configurator relation"),
    )
    story.expect(
        "GARM initialised with its admin user", garm.controller().get("metadata_url") is not None
    )

    story.step("Integrate two configurators: cfg-a and cfg-b")
    cfg_a = configurator("cfg-a", relation_id=1, org="org-a", labels="linux,x64")
    cfg_b = configurator("cfg-b", relation_id=2, org="org-b", labels="jammy", app_id="102")
    driver.add_configurator(cfg_a)
    state = driver.add_configurator(cfg_b)
    story.show(state)
    story.expect("status is Active", state.unit_status == ops.ActiveStatus())
    story.expect("both providers loaded by GARM", garm.providers == ["cfg-a-0", "cfg-b-0"])
    story.expect("two scale sets created", len(garm.scalesets()) == 2)
    story.expect(
        "two credentials and two organisations",
        len(garm.credentials()) == 2 and len(garm.organizations()) == 2,
    )

    story.step("GARM's clock advances: runners come up idle")
    garm.advance(TICK)
    garm.advance(TICK)
    state = driver.run(driver.ctx.on.update_status())
    story.show(state)
    story.expect(
        "every scale set has an idle runner",
        all(garm.instances(s["name"]) for s in garm.scalesets()),
    )

    story.step("Change cfg-a's labels to linux,x64,noble")
    old_a = next(s["name"] for s in garm.scalesets() if s["name"].startswith("cfg-a"))
    state = driver.change_relation(cfg_a.relation, labels="linux,x64,noble")
    story.show(state)
    story.expect(
        "cfg-a: creating replacement", message(state) == "cfg-a-runners: creating replacement"
    )
    state = driver.run(driver.ctx.on.update_status())
    story.show(state)
    story.expect("cfg-a: draining 1 runner", message(state) == "cfg-a-runners: draining 1 runner")
    # With no job in flight the drained predecessor is deleted in the same pass that sees it
    # empty; one refused delete shows the phase an operator sees when GARM is slow to agree.
    print("  (fault injected: GARM refuses the next scale set delete once)")
    garm.fail_next("DELETE", r"/scalesets/\d+", 500, count=1)
    story.until(
        "cfg-a: awaiting deletion", lambda s: message(s) == "cfg-a-runners: awaiting deletion"
    )
    state = story.until(
        "changeover done: plain Active", lambda s: s.unit_status == ops.ActiveStatus()
    )
    story.expect("old generation gone", garm.scaleset_by_name(old_a) is None)
    story.expect("its template gone", garm.template_by_name(f"github_linux-{old_a}") is None)

    story.step("Remove cfg-b while its runner is busy with a job")
    b_live = next(s["name"] for s in garm.scalesets() if s["name"].startswith("cfg-b"))
    busy = garm.instances(b_live)[0]["name"]
    garm.mark_busy(busy)
    state = driver.remove_relation(cfg_b.relation)
    story.show(state)
    story.expect(
        "cfg-b's scale set still exists (busy runner)", garm.scaleset_by_name(b_live) is not None
    )
    story.expect("cfg-b-0 still published", "cfg-b-0" in planned_providers(state))
    story.expect("cfg-b-0 still loaded by GARM", "cfg-b-0" in garm.providers)
    state = driver.run(driver.ctx.on.update_status())
    story.show(state)
    story.expect(
        "busy runner left in place", any(r["name"] == busy for r in garm.instances(b_live))
    )
    print(f"  (the job on {busy} finishes)")
    garm.finish_job(busy)
    state = story.until(
        "cfg-b's scale set swept", lambda _s: garm.scaleset_by_name(b_live) is None
    )
    story.expect("cfg-b-0 kept in the record until now", "cfg-b-0" in garm.providers)

    story.step("Next hook: cfg-b-0 trimmed, GARM restarted without it")
    state = driver.run(driver.ctx.on.update_status())
    story.show(state)
    story.expect("published providers are cfg-a-0 only", planned_providers(state) == ["cfg-a-0"])
    story.expect("GARM runs with cfg-a-0 only", garm.providers == ["cfg-a-0"])
    story.expect("status is Active", state.unit_status == ops.ActiveStatus())


def main() -> int:
    """Run the story; return 0 when every expectation held."""
    with tempfile.TemporaryDirectory() as data_dir, GarmEmulator(providers=[]) as garm:
        story = Story(CharmDriver(garm, base_state(Path(data_dir))))
        try:
            tell(story)
        except StoryFailedError as exc:
            print(f"\nSIMULATION FAILED at step {story.step_number}: {exc}")
            return 1
    print("\nSimulation passed: every expected state was reached.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
