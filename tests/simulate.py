"""The whole operator story, told against the GARM emulator or real GARM (``tox -e simulate``).

The real charm runs through ``ops.testing``. GARM is the project's emulator on 127.0.0.1
(``--garm emulator``, the default) or the real GARM server with the GitHub stand-in and the
stand-in provider (``--garm real``, ``tox -e simulate-real``); the steps and expectations are
the same, only the backend adapter of :mod:`tests.simulate_backends` differs. After each step
the script prints what ``juju status`` would show, the scale sets GARM holds and the providers
the charm publishes, and checks the state the step must reach. Where GARM must work on its own
(runners booting, runners reaped), the story waits for it with a bounded poll that says what it
awaits. It exits non-zero at the first expectation that is not met.

After the label change a configurator on a GitHub Enterprise Server joins (its organisation
named like one on github.com: two organisations) and leaves again (its endpoint goes).

The story ends with agent mode and the shell: the image's garm-agent binaries in GARM, the
entity in agent mode, a configurator asking for a shell while GARM's external URL is plain
``http`` (Blocked), then an ``https`` ingress. On real GARM the image's amd64 garm-agent is the
real one where the local part is found (``GARM_AGENT_BIN``), else its stand-in, and the ingress
a TLS front, so a runner's agent connects and GARM reports its shell; the emulator serves no
runner side, and the story says so instead of checking it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import ops
from ops import testing

from charm_pass.charm_state import SHELL_NEEDS_TLS
from garm import GarmClient
from tests.charm_driver import (
    CharmDriver,
    Configurator,
    admin_credentials,
    configurator,
    planned_env,
    planned_providers,
)
from tests.juju_agent import pod
from tests.juju_agent.driver import open_packed_backend
from tests.local_parts import GARM
from tests.real_garm.tls_front import make_certificates
from tests.simulate_backends import (
    EMULATOR,
    REAL,
    BackendUnavailableError,
    StoryGarm,
    is_busy,
    is_idle,
    open_backend,
    serve_ingress,
)
from workload import agent_image, endpoint_trust


class StoryFailedError(Exception):
    """An expected state was not reached."""


class Story:
    """Runs the steps, prints the views and checks each expectation."""

    def __init__(self, driver: CharmDriver, garm: StoryGarm) -> None:
        """Tell the story with ``driver``'s charm and the GARM backend ``garm``."""
        self.driver = driver
        self.garm = garm
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
        print(f"  GARM loaded providers: {', '.join(self.garm.providers()) or 'none'}")

    def expect(self, what: str, condition: bool) -> None:
        """Check one expectation of the current step."""
        print(f"  [{'ok' if condition else 'FAILED'}] {what}")
        if not condition:
            raise StoryFailedError(what)

    def await_garm(self, what: str, probe: Callable[[], object]) -> None:
        """Let GARM work until ``probe`` holds (bounded); the step fails otherwise."""
        self.expect(f"GARM reached: {what}", self.garm.await_state(what, probe))

    def hook(self) -> testing.State:
        """Run update-status and show the result."""
        state = self.driver.run(self.driver.ctx.on.update_status())
        self.show(state)
        return state

    def until(
        self,
        what: str,
        done: Callable[[testing.State], bool],
        *,
        awaiting: str | None = None,
        passes: int = 8,
        hook_first: bool = False,
    ) -> testing.State:
        """Let GARM work and run update-status until ``done`` holds, showing each hook.

        With ``hook_first`` the first hook runs at once (it is what GARM waits for).
        """
        for number in range(passes):
            if number or not hook_first:
                self.garm.let_work(awaiting)
            state = self.hook()
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


def live_name(garm: StoryGarm, prefix: str) -> str:
    """The live name of the scale set whose name starts with ``prefix``."""
    return next(s["name"] for s in garm.scalesets() if s["name"].startswith(prefix))


def deploy(story: Story) -> testing.State:
    """Step: deploy garm alone; it bootstraps GARM and waits for a configurator."""
    driver, garm = story.driver, story.garm
    story.step("Deploy garm alone")
    deploy_events = getattr(driver, "deploy_events", None)
    if deploy_events is not None:
        # The packed charm gets every hook Juju runs for a new unit.
        events = deploy_events()
        print(f"  (hooks: {', '.join(e.path.replace('_', '-') for e in events)})")
        for event in events:
            state = driver.run(event)
    else:
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
    return state


def integrate(story: Story) -> tuple[Configurator, Configurator]:
    """Step: integrate cfg-a and cfg-b; everything is created in GARM."""
    driver, garm = story.driver, story.garm
    story.step("Integrate two configurators: cfg-a and cfg-b")
    cfg_a = configurator("cfg-a", relation_id=1, org="org-a", labels="linux,x64")
    cfg_b = configurator("cfg-b", relation_id=2, org="org-b", labels="jammy", app_id="102")
    driver.add_configurator(cfg_a)
    state = driver.add_configurator(cfg_b)
    story.show(state)
    story.expect("status is Active", state.unit_status == ops.ActiveStatus())
    story.expect("both providers loaded by GARM", garm.providers() == ["cfg-a-0", "cfg-b-0"])
    story.expect("two scale sets created", len(garm.scalesets()) == 2)
    story.expect(
        "two credentials and two organisations",
        len(garm.credentials()) == 2 and len(garm.organizations()) == 2,
    )
    return cfg_a, cfg_b


def runners_come_up(story: Story) -> testing.State:
    """Step: GARM brings up one idle runner per scale set (min idle 1)."""
    garm = story.garm
    story.step("GARM brings runners up: one idle runner per scale set")

    def every_scaleset_idle() -> bool:
        scalesets = garm.scalesets()
        return bool(scalesets) and all(
            any(is_idle(r) for r in garm.instances(s["name"])) for s in scalesets
        )

    story.await_garm("an idle runner in every scale set", every_scaleset_idle)
    state = story.hook()
    story.expect("every scale set has an idle runner", every_scaleset_idle())
    story.expect("status is Active", state.unit_status == ops.ActiveStatus())
    return state


def change_labels(story: Story, cfg_a: Configurator) -> None:
    """Step: a label change replaces cfg-a's scale set blue/green, drained through GARM."""
    driver, garm = story.driver, story.garm
    story.step("Change cfg-a's labels to linux,x64,noble")
    old_a = live_name(garm, "cfg-a")
    state = driver.change_relation(cfg_a.relation, labels="linux,x64,noble")
    story.show(state)
    story.expect(
        "cfg-a: creating replacement", message(state) == "cfg-a-runners: creating replacement"
    )
    state = story.hook()
    story.expect("cfg-a: draining 1 runner", message(state) == "cfg-a-runners: draining 1 runner")
    story.expect(
        "old generation disabled", not (garm.scaleset_by_name(old_a) or {}).get("enabled")
    )
    # With no job in flight the drained predecessor is deleted in the same pass that sees it
    # empty; one refused delete shows the phase an operator sees when GARM is slow to agree.
    print(f"  ({garm.refuse_next_scaleset_delete()})")
    story.until(
        "cfg-a: awaiting deletion",
        lambda s: message(s) == "cfg-a-runners: awaiting deletion",
        awaiting=f"GARM to remove the idle runner of the disabled {old_a}",
    )
    story.until("changeover done: plain Active", lambda s: s.unit_status == ops.ActiveStatus())
    story.expect("old generation gone", garm.scaleset_by_name(old_a) is None)
    story.expect("its template gone", garm.template_by_name(f"github_linux-{old_a}") is None)


def remove_busy_configurator(story: Story, cfg_b: Configurator) -> None:
    """Step: removing cfg-b keeps its provider until GARM deleted its busy runner."""
    driver, garm = story.driver, story.garm
    story.step("Remove cfg-b while its runner is busy with a job")
    b_live = live_name(garm, "cfg-b")
    busy = garm.start_job(b_live)
    print(f"  ({busy} is busy with a job)")
    state = driver.remove_relation(cfg_b.relation)
    story.show(state)
    story.expect(
        "cfg-b's scale set still exists (busy runner)", garm.scaleset_by_name(b_live) is not None
    )
    story.expect("cfg-b-0 still published", "cfg-b-0" in planned_providers(state))
    story.expect("cfg-b-0 still loaded by GARM", "cfg-b-0" in garm.providers())
    state = story.hook()
    story.expect(
        "busy runner left in place",
        any(r["name"] == busy and is_busy(r) for r in garm.instances(b_live)),
    )
    story.expect("cfg-b-0 still published", "cfg-b-0" in planned_providers(state))
    print(f"  (the job on {busy} finishes)")
    garm.finish_job(b_live, busy)
    story.until(
        "cfg-b's scale set swept",
        lambda _s: garm.scaleset_by_name(b_live) is None,
        awaiting=f"GARM to delete {busy} and its scale set",
        hook_first=True,
    )
    story.expect("cfg-b-0 kept in the record until now", "cfg-b-0" in garm.providers())


def trim_provider(story: Story) -> None:
    """Step: the next hook drops cfg-b-0 from the record and GARM restarts without it."""
    garm = story.garm
    story.step("Next hook: cfg-b-0 trimmed, GARM restarted without it")
    state = story.hook()
    story.expect("published providers are cfg-a-0 only", planned_providers(state) == ["cfg-a-0"])
    story.expect("GARM runs with cfg-a-0 only", garm.providers() == ["cfg-a-0"])
    story.expect("status is Active", state.unit_status == ops.ActiveStatus())


def shell_needs_tls(story: Story, cfg_a: Configurator) -> None:
    """Step: cfg-a asks for a shell while GARM's external URL is plain http: Blocked."""
    driver, garm = story.driver, story.garm
    story.step('cfg-a asks for a shell (enable_shell: "true"); GARM\'s external URL is http')
    state = driver.change_relation(cfg_a.relation, enable_shell="true")
    story.show(state)
    agent_url = str(garm.controller().get("agent_url"))
    print(f"  GARM's agent URL: {agent_url}")
    story.expect("the agent URL is plain http", agent_url.startswith("http://"))
    story.expect(
        f"Blocked: cfg-a-runners: {SHELL_NEEDS_TLS}",
        state.unit_status == ops.BlockedStatus(f"cfg-a-runners: {SHELL_NEEDS_TLS}"),
    )
    scaleset = garm.scaleset_by_name(live_name(garm, "cfg-a")) or {}
    story.expect("GARM's scale set keeps the shell off", not scaleset.get("enable_shell"))


def shell_over_tls(story: Story) -> None:
    """Step: the ingress serves https; the shell goes on in GARM."""
    driver, garm = story.driver, story.garm
    story.step(f"The ingress serves https ({garm.https_url}): the shell is turned on")
    if not garm.serves_agents:
        print("  (the emulator serves no TLS: the https URL is only what GARM is told)")
    state = serve_ingress(driver, garm.https_url)
    story.show(state)
    agent_url = garm.controller().get("agent_url")
    print(f"  GARM's agent URL: {agent_url}")
    story.expect("the agent URL is the https one", agent_url == f"{garm.https_url}/agent")
    story.expect("status is Active", state.unit_status == ops.ActiveStatus())
    scaleset = garm.scaleset_by_name(live_name(garm, "cfg-a")) or {}
    story.expect("GARM's scale set has the shell on", scaleset.get("enable_shell") is True)


def shipped_manifest(driver: CharmDriver) -> dict[str, object]:
    """The garm-agent manifest the charm's container ships (the image's)."""
    mount = driver.state.get_container("garm").mounts["garm-agent"]
    relative = agent_image.MANIFEST_PATH.removeprefix(f"{agent_image.AGENT_DIR}/")
    return json.loads((mount.source / relative).read_text(encoding="utf-8"))


def agent_tools_in_garm(story: Story) -> None:
    """Part of the agent step: GARM stores the image's binaries, uploaded once; agent mode."""
    driver, garm = story.driver, story.garm
    manifest = shipped_manifest(driver)
    shipped: list[dict[str, str]] = manifest["tools"]  # type: ignore[assignment]
    stored = garm.tools()
    for tool in sorted(stored, key=lambda t: t["os_arch"]):
        print(
            f"  GARM tool {tool['os_type']}/{tool['os_arch']:<6} {tool['version']} "
            f"sha256 {tool['sha256sum'][:16]}... size {tool['size']}"
        )
    uploads = garm.tool_uploads()
    print(f"  Uploads GARM received in the whole story: {uploads}")
    story.expect(
        "GARM stores the image's binaries (digest and version of the manifest)",
        sorted((t["os_arch"], t["sha256sum"], t["version"]) for t in stored)
        == sorted((t["os_arch"], t["sha256"], manifest["version"]) for t in shipped),
    )
    story.expect("one upload per architecture", uploads == len(shipped))
    state = story.hook()
    binaries = {t["path"] for t in shipped}
    story.expect(
        "the next (converged) hook uploads nothing and reads no binary",
        garm.tool_uploads() == uploads and not binaries & set(driver.pulls),
    )
    story.expect("status is Active", state.unit_status == ops.ActiveStatus())
    org = next((o for o in garm.organizations() if o.get("name") == "org-a"), {})
    print(f"  Organisation org-a: agent_mode={org.get('agent_mode')}")
    story.expect("org-a is in agent mode", org.get("agent_mode") is True)


def rotate_idle(story: Story, live: str) -> list[str]:
    """Remove the scale set's idle runners so that GARM starts fresh ones, as the operator would.

    What ``garm-cli scaleset runner rotate <id>`` does: list the scale set's runners and remove
    the idle ones through GARM's API as its admin. (Its ``--outdated`` picks runners whose
    generation is older than the scale set's; the pinned GARM records no generation on a scale
    set's runners, so after a change every runner of it counts as outdated.)
    """
    driver, garm = story.driver, story.garm
    idle = [str(r["name"]) for r in garm.instances(live) if is_idle(r)]
    admin = admin_credentials(driver.state)
    assert admin is not None
    with GarmClient(driver.api_url) as client:
        client.login(*admin)
        for name in idle:
            client.delete_instance(name)
    return idle


def agent_with_shell(story: Story) -> None:
    """Step: tools and agent mode in GARM; a new runner's agent reports a shell (real GARM)."""
    garm = story.garm
    story.step("garm-agent: the tools GARM stores, agent mode, a runner with a shell")
    agent_tools_in_garm(story)
    live = live_name(garm, "cfg-a")
    rotated = rotate_idle(story, live)
    print(
        f"  (idle runners started before the shell was on keep running without it: the "
        f"operator rotates {live}'s idle runners, as `garm-cli scaleset runner rotate <id>` "
        f"does: {', '.join(rotated) or 'none'})"
    )
    story.expect("an idle runner was rotated", bool(rotated))

    def fresh_runner() -> dict[str, Any] | None:
        return next(
            (r for r in garm.instances(live) if r["name"] not in rotated and is_idle(r)), None
        )

    story.await_garm(f"a fresh idle runner of {live}", fresh_runner)
    if not garm.serves_agents:
        print(
            "  [not checked on the emulator] a runner whose agent reports has_shell: the "
            "emulator serves no runner metadata, tool download or /agent websocket, so no agent "
            "connects to it (tox -e simulate-real checks this on real GARM)"
        )
        return

    def with_shell() -> dict[str, Any] | None:
        return next(
            (
                r
                for r in garm.instances(live)
                if r["name"] not in rotated and (r.get("capabilities") or {}).get("has_shell")
            ),
            None,
        )

    story.await_garm("a fresh runner whose garm-agent reports has_shell", with_shell)
    runner = with_shell() or {}
    print(
        f"  Runner {runner.get('name')}: heartbeat {runner.get('heartbeat')}, capabilities "
        f"{runner.get('capabilities')}"
    )
    server_url = garm.agent_server_url(str(runner.get("name")))
    print(f"  Its garm-agent was given server_url {server_url}")
    story.expect(
        "the runner's agent was given the https agent URL",
        server_url == f"{garm.https_url}/agent",
    )


GHES_URL = "https://ghes.example.com"
GHES_ENDPOINT = "ghes.example.com"


def ghes_beside_github_com(story: Story) -> None:
    """Step: a configurator on a GitHub Enterprise Server joins, then leaves (ADR 0014).

    Its organisation is ``org-a``, as cfg-a's on github.com: two organisations. GARM's process
    is given its CA (GARM's Actions client reads no endpoint's bundle), and loses it with the
    endpoint. It describes no scale set: the server here is not reachable (a runner through a
    GHES stand-in is ``tests/conformance/test_charm_ghes.py``'s, on real GARM).
    """
    driver, garm = story.driver, story.garm
    story.step(f"cfg-ghes joins on a GitHub Enterprise Server ({GHES_URL}), org-a there too")
    with tempfile.TemporaryDirectory() as directory:
        ca = make_certificates(Path(directory))[0].read_text()
    extra = {"name": "", "github_base_url": GHES_URL, "github_ca_bundle": ca}
    cfg = configurator("cfg-ghes", relation_id=3, org="org-a", extra=extra, provider=False)
    state = driver.add_configurator(cfg)
    story.show(state)
    names = [e["name"] for e in garm.endpoints()]
    print(f"  GitHub endpoints: {', '.join(names)}")
    story.expect("the GHES endpoint exists", GHES_ENDPOINT in names)
    story.expect(
        "GARM's process is given the GHES CA",
        list(endpoint_trust.from_environment(planned_env(state))) == [GHES_ENDPOINT],
    )
    orgs = sorted((o["name"], o["endpoint"]["name"]) for o in garm.organizations())
    story.expect(
        "org-a on github.com and org-a on the GHES are two organisations",
        ("org-a", "github.com") in orgs and ("org-a", GHES_ENDPOINT) in orgs,
    )
    story.step("cfg-ghes leaves: its organisation, credential and endpoint go")
    driver.remove_relation(cfg.relation)
    state = story.hook()
    story.expect(
        "no GHES endpoint left", GHES_ENDPOINT not in [e["name"] for e in garm.endpoints()]
    )
    story.expect(
        "GARM's process no longer trusts the GHES CA",
        endpoint_trust.from_environment(planned_env(state)) == {},
    )
    story.expect(
        "org-a on github.com untouched",
        [o["endpoint"]["name"] for o in garm.organizations() if o["name"] == "org-a"]
        == ["github.com"],
    )


def run_actions(story: Story) -> None:
    """Step: both actions, as ``juju run garm/0 <action>`` runs them."""
    driver, garm = story.driver, story.garm
    story.step("juju run garm/0 get-credentials; juju run garm/0 scaleset-status")
    credentials = driver.run_action("get-credentials")
    admin = admin_credentials(driver.state)
    story.expect(
        "get-credentials answers the admin the charm created (password not shown)",
        admin is not None and (credentials.get("username"), credentials.get("password")) == admin,
    )
    results = driver.run_action("scaleset-status")
    table = "\n".join(str(v) for k, v in sorted(results.items()) if k.startswith("scalesets"))
    print("\n".join(f"  | {line}" for line in table.splitlines()))
    live = [s["name"] for s in garm.scalesets()]
    story.expect(
        f"scaleset-status counts GARM's {len(live)} scale set(s)",
        str(results.get("count")) == str(len(live)),
    )
    story.expect("its table names every live scale set", all(name in table for name in live))


def tell(story: Story) -> None:
    """The story of section 20 of the spec, step by step, then agent mode and the shell."""
    deploy(story)
    cfg_a, cfg_b = integrate(story)
    runners_come_up(story)
    run_actions(story)
    change_labels(story, cfg_a)
    ghes_beside_github_com(story)
    remove_busy_configurator(story, cfg_b)
    trim_provider(story)
    shell_needs_tls(story, cfg_a)
    shell_over_tls(story)
    agent_with_shell(story)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the story; return 0 when every expectation held."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--garm", choices=(EMULATOR, REAL), default=EMULATOR)
    parser.add_argument(
        "--packed",
        action="store_true",
        help="the packed charm (build/pack/prime) under the Juju unit-agent stand-in, in a pod "
        "of its own with real Pebble and real GARM (implies --garm real)",
    )
    args = parser.parse_args(argv)
    if args.packed:
        outside = pod.into_pod("tests.simulate", list(argv or sys.argv[1:]), "SIMULATION")
        if outside is not None:
            return outside
        args.garm = REAL
    elif args.garm == REAL and GARM.find() is None:
        # Real GARM is a local part a developer builds; a machine without it tells the story
        # on the emulator only, and says so.
        print(f"SIMULATION NOT RUN on real GARM: {GARM.skip_reason()}")
        return 0
    started = time.monotonic()
    opened = open_packed_backend() if args.packed else open_backend(args.garm, agent_standin=True)
    try:
        with opened as backend:
            print(f"GARM: {backend.description}")
            story = Story(backend.driver, backend.garm)
            try:
                tell(story)
            except StoryFailedError as exc:
                print(f"\nSIMULATION FAILED at step {story.step_number}: {exc}")
                return 1
            summary = getattr(backend.driver, "summary", None)
            if summary is not None:
                print(f"\n{summary()}")
    except BackendUnavailableError as exc:
        print(f"SIMULATION NOT RUN: {exc}")
        return 1
    elapsed = time.monotonic() - started
    print(
        f"\nSimulation passed on {args.garm}{' (packed)' if args.packed else ''}: every expected "
        f"state was reached ({elapsed:.0f} s)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
