"""The two GARMs the operator story can be told against (``tests/simulate.py``).

The story is one: the same steps and expectations whichever GARM answers. What differs is how
GARM's own work is let happen and how a job reaches a runner, so each backend offers the same
small surface:

- read views (``scalesets()``, ``instances(name)``, ``providers()``, ...) as GARM lists them;
- ``let_work(awaiting)``: give GARM's background workers a chance before the next hook. The
  emulator moves its simulated clock 30 s; real GARM runs on its own clock, so the story polls
  GARM's listing (bounded) until something in it changes, and says what it awaits;
- ``await_state(what, probe)``: a bounded wait for a state of GARM's, printed;
- ``start_job(scaleset)`` / ``finish_job(runner)``: a job runs on a runner. The emulator marks
  the runner busy directly; with real GARM the job is queued in the GitHub stand-in, GARM
  acquires it, the stand-in starts it on one of GARM's idle runners and GARM marks that runner
  busy from the Actions message queue; completing it makes GARM delete the ephemeral runner;
- after ``finish_job`` of a runner whose scale set the charm already disabled: GARM stops a
  scale set's message listener when the scale set is disabled (measured: it deletes its Actions
  session and polls no more), so the JobCompleted message never reaches it and the runner stays
  ``running``/``active`` until GARM's runner consolidation (every five minutes) notices. The
  emulator models that: its clock moves five minutes, said in the output. Real GARM is not
  waited for that long here: what frees the runner is the charm's own rule that a job showing
  no change for ``MAX_JOB_RUNTIME`` (5 days) no longer protects its runner; the real backend
  waits a bounded time for GARM, says what it saw, and moves the *charm's* clock (the clock of
  :mod:`reconcile.scalesets.reconciler`) past that limit for the rest of the story, the real
  equivalent of the emulator's simulated clock;
- ``refuse_next_scaleset_delete()``: the next scale set delete is refused. The emulator refuses
  it itself; real GARM cannot be made to refuse on demand, so the recording proxy in front of it
  answers 500 in its place (said in the output).

:func:`open_backend` builds either one with a charm driver whose base state carries any extra
relations (PostgreSQL for the PostgreSQL tests). With real GARM the base state also carries an
``ingress`` relation whose URL is the recording proxy on 127.0.0.1, so the charm itself sets
GARM's controller URLs to loopback and the stand-in provider's simulated runner VMs reach GARM
(with the in-cluster URL the charm uses without ingress, runners would stay ``pending``).

Agent mode and the shell: with real GARM the charm's container ships the real garm-agent where
the local part is found, else its stand-in (:mod:`tests.real_garm.garm_agent`, which prints which
in one line) as its amd64 binary, with its real SHA-256 in the
manifest, so the charm uploads it and the stand-in provider's runners download and run it. A
TLS front (:mod:`tests.real_garm.tls_front`, its CA trusted by the runners) is the ``https``
ingress the story switches to (:attr:`StoryGarm.https_url`, :func:`serve_ingress`): then the
agent URL GARM hands the runners is ``https://127.0.0.1:<front>/agent`` and an agent asked for a
shell reports one. The emulator stores the tools and the entity's agent mode as GARM does but
serves none of the runner's side (runner metadata, the tool download, the ``/agent``
websocket): ``serves_agents`` is false and the story says what it cannot show there.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any, Protocol
from unittest import mock

from ops import testing

from reconcile.scalesets import reconciler, runners
from tests.charm_driver import CharmDriver, base_state, write_agent_tools
from tests.garm_emulator import CONSOLIDATION_INTERVAL, GarmEmulator
from tests.github_standin import GitHubStandin
from tests.real_garm.github_apps import register_configured_apps
from tests.real_garm.harness import SKIP_REASON, GarmStartError, RealGarm, garm_binary
from tests.real_garm.job_demand import (
    LISTENING,
    RECORDED,
    demand_recorded,
    listening,
    open_jobs,
)
from tests.real_garm.postgres import DATABASE, ROLE, PostgresServer
from tests.real_garm.provider_standin import GARM_AGENT_CONFIG
from tests.real_garm.tls_front import TlsFront

EMULATOR = "emulator"
REAL = "real"
TICK = timedelta(seconds=30)
# Emulator rounds of 30 simulated seconds a wait may take.
EMULATOR_ROUNDS = 8
# Real GARM: how long one wait for a change, and one wait for a state, may take (seconds).
CHANGE_TIMEOUT = 30.0
STATE_TIMEOUT = 120.0
# How long real GARM gets to delete a finished job's runner by itself before the story says it
# did not (it never does for a disabled scale set, see the module docstring).
JOB_END_TIMEOUT = 20.0
# How far the charm's clock moves so that a finished job no longer protects its runner.
CHARM_CLOCK_SHIFT = runners.MAX_JOB_RUNTIME + timedelta(hours=1)
POLL_INTERVAL = 0.5
INGRESS_RELATION = "ingress"
# Relation ids the story's configurators (1, 2, ...) never take.
INGRESS_RELATION_ID = 90
POSTGRESQL_RELATION_ID = 91
_SCALESET_DELETE = r"/scalesets/\d+"
TOOLS_PATH = "/tools/garm-agent"
# The emulator serves no TLS and no runner reaches it: its https ingress is only a URL.
EMULATOR_HTTPS_URL = "https://garm.example.com"


class BackendUnavailableError(RuntimeError):
    """The backend cannot run here (no GARM binary)."""


class StoryGarm(Protocol):
    """What the story needs of a GARM backend."""

    name: str
    # An https ingress URL that reaches this GARM (what the story switches the ingress to).
    https_url: str
    # Whether runners run a garm-agent that connects to GARM (real GARM only).
    serves_agents: bool

    def controller(self) -> dict[str, Any]:
        """GARM's controller information."""
        ...

    def tools(self) -> list[dict[str, Any]]:
        """The garm-agent tools GARM stores, as its admin listing shows them."""
        ...

    def tool_uploads(self) -> int:
        """How many garm-agent uploads GARM received so far."""
        ...

    def agent_server_url(self, runner_name: str) -> str | None:
        """The GARM URL the runner's garm-agent was configured with (None: no agent)."""
        ...

    def endpoints(self) -> list[dict[str, Any]]:
        """GitHub endpoints as GARM lists them."""
        ...

    def credentials(self) -> list[dict[str, Any]]:
        """Credentials as GARM lists them."""
        ...

    def organizations(self) -> list[dict[str, Any]]:
        """Organisations as GARM lists them."""
        ...

    def scalesets(self) -> list[dict[str, Any]]:
        """Scale sets as GARM lists them."""
        ...

    def scaleset_by_name(self, name: str) -> dict[str, Any] | None:
        """One scale set by name, or None."""
        ...

    def instances(self, scaleset_name: str) -> list[dict[str, Any]]:
        """Runners of one scale set."""
        ...

    def template_by_name(self, name: str) -> dict[str, Any] | None:
        """One template by name, or None."""
        ...

    def providers(self) -> list[str]:
        """Names of the providers GARM runs with, sorted."""
        ...

    def let_work(self, awaiting: str | None) -> None:
        """Let GARM's background workers run before the next hook (``awaiting`` what)."""
        ...

    def await_state(self, what: str, probe: Callable[[], object]) -> bool:
        """Let GARM work until ``probe`` is truthy, within a bound; return whether it was."""
        ...

    def refuse_next_scaleset_delete(self) -> str:
        """Have the next scale set delete refused; return the note to print."""
        ...

    def start_job(self, scaleset_name: str) -> str:
        """Run a job on a runner of the scale set; return the busy runner's name."""
        ...

    def finish_job(self, scaleset_name: str, runner_name: str) -> None:
        """The job on ``runner_name`` (of ``scaleset_name``) completes."""
        ...


def is_idle(runner: dict[str, Any]) -> bool:
    """Whether GARM lists the runner as up and waiting for a job."""
    return runner.get("status") == "running" and runner.get("runner_status") == "idle"


def is_busy(runner: dict[str, Any]) -> bool:
    """Whether GARM lists the runner as running a job."""
    return runner.get("runner_status") == "active"


class EmulatorGarm:
    """The emulator, its simulated clock and its test controls."""

    name = EMULATOR
    https_url = EMULATOR_HTTPS_URL
    serves_agents = False

    def __init__(self, emulator: GarmEmulator) -> None:
        """Tell the story against ``emulator``."""
        self.emulator = emulator

    def controller(self) -> dict[str, Any]:
        """GARM's controller information."""
        return self.emulator.controller()

    def tools(self) -> list[dict[str, Any]]:
        """The garm-agent tools the emulator stores."""
        return self.emulator.tools()

    def tool_uploads(self) -> int:
        """How many garm-agent uploads the emulator received so far."""
        return _uploads(self.emulator.writes())

    def agent_server_url(self, runner_name: str) -> str | None:
        """No runner of the emulator runs an agent."""
        del runner_name
        return None

    def endpoints(self) -> list[dict[str, Any]]:
        """GitHub endpoints as GARM lists them."""
        return self.emulator.endpoints()

    def credentials(self) -> list[dict[str, Any]]:
        """Credentials as GARM lists them."""
        return self.emulator.credentials()

    def organizations(self) -> list[dict[str, Any]]:
        """Organisations as GARM lists them."""
        return self.emulator.organizations()

    def scalesets(self) -> list[dict[str, Any]]:
        """Scale sets as GARM lists them."""
        return self.emulator.scalesets()

    def scaleset_by_name(self, name: str) -> dict[str, Any] | None:
        """One scale set by name, or None."""
        return self.emulator.scaleset_by_name(name)

    def instances(self, scaleset_name: str) -> list[dict[str, Any]]:
        """Runners of one scale set."""
        return self.emulator.instances(scaleset_name)

    def template_by_name(self, name: str) -> dict[str, Any] | None:
        """One template by name, or None."""
        return self.emulator.template_by_name(name)

    def providers(self) -> list[str]:
        """Names of the providers GARM runs with, sorted."""
        return sorted(self.emulator.providers)

    def let_work(self, awaiting: str | None) -> None:
        """Move the simulated clock 30 s (one round of GARM's workers)."""
        del awaiting
        self.emulator.advance(TICK)

    def await_state(self, what: str, probe: Callable[[], object]) -> bool:
        """Advance the simulated clock round by round until ``probe`` holds."""
        for rounds in range(EMULATOR_ROUNDS + 1):
            if probe():
                print(f"  (reached after {rounds} x 30 s of GARM's simulated clock: {what})")
                return True
            self.emulator.advance(TICK)
        return False

    def refuse_next_scaleset_delete(self) -> str:
        """The emulator refuses the next scale set delete once."""
        self.emulator.fail_next("DELETE", _SCALESET_DELETE, 500, count=1)
        return "fault injected: GARM refuses the next scale set delete once"

    def start_job(self, scaleset_name: str) -> str:
        """Mark the scale set's first runner busy with a job."""
        busy = self.emulator.instances(scaleset_name)[0]["name"]
        self.emulator.mark_busy(busy)
        return busy

    def finish_job(self, scaleset_name: str, runner_name: str) -> None:
        """The job ends; on a disabled scale set GARM hears of it in its consolidation loop."""
        scaleset = self.emulator.scaleset_by_name(scaleset_name)
        self.emulator.finish_job(runner_name)
        if scaleset is not None and not scaleset.get("enabled"):
            print(
                "  (GARM no longer listens to this disabled scale set: its consolidation loop"
                f" notices the job end; the simulated clock moves {CONSOLIDATION_INTERVAL})"
            )
            self.emulator.advance(CONSOLIDATION_INTERVAL)


class RealStoryGarm:
    """Real GARM behind its recording proxy, the GitHub stand-in and the stand-in provider."""

    name = REAL
    serves_agents = True

    def __init__(
        self, real: PodGarm, github: GitHubStandin, front: TlsFront | None = None
    ) -> None:
        """Tell the story against ``real``, whose GitHub is ``github``, TLS ``front`` if any."""
        self.real = real
        self.github = github
        self.front = front
        self._jobs: dict[str, int] = {}
        self._clock_shift: Any = None

    @property
    def https_url(self) -> str:
        """The TLS front's ``https://127.0.0.1:<port>``."""
        if self.front is None:
            raise RuntimeError("this backend was opened without a TLS front (agent_standin)")
        return self.front.base_url

    def close(self) -> None:
        """Put the charm's clock back."""
        if self._clock_shift is not None:
            self._clock_shift.stop()
            self._clock_shift = None

    def controller(self) -> dict[str, Any]:
        """GARM's controller information."""
        return self.real.controller()

    def tools(self) -> list[dict[str, Any]]:
        """The garm-agent tools GARM stores (its admin listing, first page)."""
        return (self.real.get(TOOLS_PATH) or {}).get("results") or []

    def tool_uploads(self) -> int:
        """How many garm-agent uploads reached GARM (through the recording proxy) so far."""
        return _uploads(self.real.writes())

    def agent_server_url(self, runner_name: str) -> str | None:
        """``server_url`` of the garm-agent config the simulated runner VM wrote."""
        try:
            path = self.real.vm_dir(runner_name) / GARM_AGENT_CONFIG
            config = path.read_text(encoding="utf-8")
        except (LookupError, OSError):
            return None
        return tomllib.loads(config).get("server_url")

    def endpoints(self) -> list[dict[str, Any]]:
        """GitHub endpoints as GARM lists them."""
        return self.real.endpoints()

    def credentials(self) -> list[dict[str, Any]]:
        """Credentials as GARM lists them."""
        return self.real.credentials()

    def organizations(self) -> list[dict[str, Any]]:
        """Organisations as GARM lists them."""
        return self.real.organizations()

    def scalesets(self) -> list[dict[str, Any]]:
        """Scale sets as GARM lists them."""
        return self.real.scalesets()

    def scaleset_by_name(self, name: str) -> dict[str, Any] | None:
        """One scale set by name, or None."""
        return self.real.scaleset_by_name(name)

    def instances(self, scaleset_name: str) -> list[dict[str, Any]]:
        """Runners of one scale set."""
        return self.real.instances(scaleset_name)

    def template_by_name(self, name: str) -> dict[str, Any] | None:
        """One template by name, or None."""
        return next((t for t in self.real.templates() if t.get("name") == name), None)

    def providers(self) -> list[str]:
        """Names of the providers GARM loaded, sorted."""
        return sorted(self.real.providers())

    def let_work(self, awaiting: str | None) -> None:
        """Poll GARM's listing until its scale sets or runners change, within a bound.

        With nothing awaited of GARM (the next hook's own calls are what matters), no wait.
        """
        if awaiting is None:
            return
        before = self._fingerprint()
        started = time.monotonic()
        print(
            f"  (awaiting {awaiting}: polling GARM until its listing changes, <= "
            f"{CHANGE_TIMEOUT:.0f} s)"
        )
        while time.monotonic() - started < CHANGE_TIMEOUT:
            time.sleep(POLL_INTERVAL)
            if self._fingerprint() != before:
                print(f"  (GARM's listing changed after {time.monotonic() - started:.1f} s)")
                return
        print(f"  (no change in GARM's listing within {CHANGE_TIMEOUT:.0f} s)")

    def await_state(self, what: str, probe: Callable[[], object]) -> bool:
        """Poll real GARM (twice a second, at most :data:`STATE_TIMEOUT`) until ``probe``."""
        started = time.monotonic()
        print(f"  (awaiting {what}: polling real GARM, <= {STATE_TIMEOUT:.0f} s)")
        while True:
            if probe():
                print(f"  (reached after {time.monotonic() - started:.1f} s: {what})")
                return True
            if time.monotonic() - started > STATE_TIMEOUT:
                return False
            time.sleep(POLL_INTERVAL)

    def refuse_next_scaleset_delete(self) -> str:
        """The recording proxy refuses the next scale set delete in GARM's place."""
        self.real.proxy.refuse_next("DELETE", _SCALESET_DELETE, 500)
        return (
            "fault injected at the recording proxy: the next scale set delete is answered 500 "
            "without reaching GARM (real GARM cannot be made to refuse on demand)"
        )

    def start_job(self, scaleset_name: str) -> str:
        """Queue a job in the stand-in, start it on an idle runner, await GARM's busy mark."""
        job_id = self.github.queue_job(scaleset_name)
        print(f"  (job {job_id} queued in the GitHub stand-in for {scaleset_name})")
        if not self.await_state(f"GARM to acquire job {job_id}", lambda: self._assigned(job_id)):
            raise AssertionError(f"GARM did not acquire job {job_id}")
        self._settle_demand(scaleset_name)
        # GitHub starts a job only on a runner registered with it: a restored database can list
        # a runner whose registration is gone since the copy, until GARM's consolidation.
        known = f"an idle runner of {scaleset_name} that GitHub knows"
        found: list[str] = []

        def idle_known() -> bool:
            registered = {r.name for r in self.github.runners()}
            idle = (str(r["name"]) for r in self.real.instances(scaleset_name) if is_idle(r))
            found[:] = [name for name in idle if name in registered]
            return bool(found)

        if not self.await_state(known, idle_known):
            raise AssertionError(f"no idle runner of {scaleset_name} to start job {job_id} on")
        # The runner the probe saw: a second listing could already differ.
        runner = found[0]
        self.github.start_job(job_id, runner)
        print(f"  (the stand-in starts job {job_id} on {runner})")
        if not self.await_state(
            f"GARM to mark {runner} busy", lambda: self._runner_busy(scaleset_name, runner)
        ):
            raise AssertionError(f"GARM did not mark {runner} busy")
        self._jobs[runner] = job_id
        return runner

    def finish_job(
        self, scaleset_name: str, runner_name: str, wait: float = JOB_END_TIMEOUT
    ) -> None:
        """Complete the runner's job in the stand-in; see what GARM does; move the charm's clock.

        GitHub unregisters the ephemeral runner. If GARM does not delete the runner within
        ``wait`` seconds, the charm's clock moves :data:`CHARM_CLOCK_SHIFT` ahead.
        """
        self.github.complete_job(self._jobs.pop(runner_name))
        scaleset = self.real.scaleset_by_name(scaleset_name) or {}

        def runner_gone_or_deleting() -> bool:
            runners = self.real.instances(scaleset_name)
            mine = [r for r in runners if r.get("name") == runner_name]
            return not mine or mine[0].get("status") != "running"

        print(
            f"  (awaiting GARM to delete {runner_name} after its job: polling real GARM, <= "
            f"{wait:.0f} s)"
        )
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if runner_gone_or_deleting():
                print(f"  (GARM acted on the job's end: {runner_name} is being deleted)")
                return
            time.sleep(POLL_INTERVAL)
        listening = any(v.name == scaleset_name and v.has_session for v in self.github.scalesets())
        print(
            f"  (real GARM: {runner_name} is still listed as running/active "
            f"{wait:.0f} s after its job ended. The scale set is "
            f"{'enabled' if scaleset.get('enabled') else 'disabled'} and GARM has "
            f"{'a' if listening else 'no'} message session for it, so the JobCompleted message "
            "never reaches GARM. The emulator's GARM would mark the runner pending_delete.)"
        )
        print(
            f"  (the charm's clock moves {CHARM_CLOCK_SHIFT} ahead: past MAX_JOB_RUNTIME its "
            "rule no longer lets the job protect the runner; the charm removes it through GARM)"
        )
        self.shift_charm_clock()

    def shift_charm_clock(self) -> None:
        """The charm's clock (in this process) reads :data:`CHARM_CLOCK_SHIFT` ahead from now."""
        self._clock_shift = mock.patch.object(reconciler, "datetime", _ShiftedDatetime)
        self._clock_shift.start()

    def _settle_demand(self, scaleset_name: str) -> None:
        """Await GARM's record of the job's demand, then restart GARM so its worker reads it.

        GARM can keep a stale desired count (``tests/real_garm/job_demand.py``).
        """
        count = open_jobs(self.github, scaleset_name)
        recorded = RECORDED.format(count=count, name=scaleset_name)
        if not self.await_state(
            recorded, demand_recorded(self.real, self.github, scaleset_name, count)
        ):
            raise AssertionError(f"timed out awaiting {recorded}")
        print("  (GARM restarted, so that its scale-set worker reads the recorded count)")
        self.real.restart()
        again = LISTENING.format(name=scaleset_name)
        if not self.await_state(again, listening(self.github, scaleset_name)):
            raise AssertionError(f"timed out awaiting {again}")

    def _assigned(self, job_id: int) -> bool:
        return any(j.id == job_id and j.state == "assigned" for j in self.github.jobs())

    def _runner_busy(self, scaleset_name: str, runner: str) -> bool:
        return any(r["name"] == runner and is_busy(r) for r in self.real.instances(scaleset_name))

    def _fingerprint(self) -> list[tuple[object, ...]]:
        rows: list[tuple[object, ...]] = []
        for scaleset in self.real.scalesets():
            rows.append((scaleset.get("name"), scaleset.get("enabled")))
            rows.extend(
                (r.get("name"), r.get("status"), r.get("runner_status"))
                for r in self.real.get(f"/scalesets/{scaleset['id']}/instances") or []
            )
        return rows


class PodGarm(RealGarm):
    """Real GARM restarted as Pebble restarts it in the pod.

    A GARM that exits at start (PostgreSQL refusing its login, say) is not an error of the hook
    that replanned: Pebble notes it and the charm finds GARM not answering. The harness's error
    is kept in :attr:`start_failure` instead of raised. And a GARM started on another database
    starts empty there, so its ``github.com`` endpoint is pointed at the stand-in again once
    the charm has set the controller URLs of that database.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Take :class:`RealGarm`'s arguments."""
        super().__init__(*args, **kwargs)
        self.start_failure: str | None = None
        self._database: tuple[str, ...] | None = None

    def lose_database(self) -> None:
        """Stop GARM and delete its SQLite file, as a replaced ``garm-data`` volume loses it.

        The stand-ins keep their state: GitHub and the cloud remember what the lost GARM made.
        """
        self.halt()
        for path in self.workdir.glob("garm.db*"):
            path.unlink()
        self._endpoint_pointed = False

    def back_up_database(self, to: Path) -> None:
        """Copy GARM's SQLite files to ``to``, GARM stopped meanwhile (a consistent copy)."""
        self.halt()
        to.mkdir(parents=True, exist_ok=True)
        for path in self.workdir.glob("garm.db*"):
            shutil.copy2(path, to / path.name)
        self.restart()

    def restore_database(self, copy: Path) -> None:
        """Stop GARM and put back the SQLite files of an earlier :meth:`back_up_database`."""
        self.halt()
        for path in self.workdir.glob("garm.db*"):
            path.unlink()
        for path in copy.glob("garm.db*"):
            shutil.copy2(path, self.workdir / path.name)

    def replan(self, environment: Mapping[str, str]) -> None:
        """Restart GARM with ``environment``; a GARM that exits at start is noted."""
        database = _database_identity(environment)
        if database != self._database:
            self._database = database
            self._endpoint_pointed = False
        self.start_failure = None
        try:
            super().replan(environment)
        except GarmStartError as exc:
            self.start_failure = str(exc)


def _uploads(writes: Iterable[Any]) -> int:
    """How many of ``writes`` (recorded calls) are garm-agent uploads."""
    return sum(1 for call in writes if call.method == "POST" and call.path == TOOLS_PATH)


def _database_identity(environment: Mapping[str, str]) -> tuple[str, ...]:
    """Which database an environment runs GARM on (never the password)."""
    keys = sorted(k for k in environment if k.startswith(("GARM_DB_", "POSTGRESQL_DB_")))
    return tuple(f"{k}={environment[k]}" for k in keys if "PASSWORD" not in k)


class _ShiftedDatetime(datetime):
    """``datetime`` whose ``now()`` is :data:`CHARM_CLOCK_SHIFT` ahead."""

    @classmethod
    def now(cls, tz: tzinfo | None = None) -> datetime:  # type: ignore[override]
        """The real time plus the shift."""
        return datetime.now(tz) + CHARM_CLOCK_SHIFT


@dataclass
class Backend:
    """A started GARM backend and the charm driver talking to it."""

    garm: StoryGarm
    driver: CharmDriver
    description: str


def ingress_relation(url: str) -> testing.Relation:
    """An ingress relation whose provider answered ``url``."""
    return testing.Relation(
        INGRESS_RELATION,
        remote_app_name="traefik",
        id=INGRESS_RELATION_ID,
        remote_app_data={"ingress": json.dumps({"url": url})},
    )


def serve_ingress(driver: CharmDriver, url: str) -> testing.State:
    """The ingress provider now answers ``url``: relation-changed (created first if new)."""
    current = next((r for r in driver.state.relations if r.endpoint == INGRESS_RELATION), None)
    if current is None:
        relation = ingress_relation(url)
        driver.state = dataclasses.replace(
            driver.state, relations={*driver.state.relations, relation}
        )
        driver.run(driver.ctx.on.relation_created(relation))
        return driver.run(driver.ctx.on.relation_changed(relation, remote_unit=0))
    assert isinstance(current, testing.Relation)
    relation = dataclasses.replace(current, remote_app_data={"ingress": json.dumps({"url": url})})
    others = {r for r in driver.state.relations if r.id != current.id}
    driver.state = dataclasses.replace(driver.state, relations={*others, relation})
    return driver.run(driver.ctx.on.relation_changed(relation))


def postgresql_relation(server: PostgresServer, password: str | None = None) -> testing.Relation:
    """The relation as a v0 ``database`` provider answers: endpoints and plaintext credentials."""
    return testing.Relation(
        "postgresql",
        interface="postgresql_client",
        remote_app_name="postgresql-k8s",
        id=POSTGRESQL_RELATION_ID,
        remote_app_data={
            "endpoints": server.endpoint,
            "database": DATABASE,
            "username": ROLE,
            "password": password or server.password,
        },
    )


@contextmanager
def open_backend(
    name: str,
    *,
    relations: Iterable[testing.Relation] = (),
    secrets: Iterable[testing.Secret] = (),
    workdir: Path | None = None,
    ready_timeout: float = 15.0,
    agent_standin: bool = False,
) -> Iterator[Backend]:
    """Start the ``name`` backend and a charm driver on a fresh deployment; stop it after.

    ``ready_timeout`` is how long the charm waits for real GARM to answer in a hook. With
    ``agent_standin`` (real GARM), the image ships garm-agent (the real one where found, else the
    stand-in) as its amd64 binary
    and a TLS front serves GARM on :attr:`StoryGarm.https_url`; otherwise the image's binaries
    are :func:`tests.charm_driver.write_agent_tools`'s few bytes, which no runner can run.
    """
    with tempfile.TemporaryDirectory() as scratch:
        root = workdir or Path(scratch)
        data = root / "data"
        data.mkdir()
        if name == EMULATOR:
            with GarmEmulator(providers=[]) as emulator:
                state = base_state(data, relations=set(relations), secrets=set(secrets))
                yield Backend(
                    EmulatorGarm(emulator),
                    CharmDriver(emulator, state),
                    "the GARM emulator (simulated clock)",
                )
            return
        with _real_backend(
            root, data, list(relations), list(secrets), ready_timeout, agent_standin
        ) as backend:
            yield backend


@contextmanager
def _real_backend(
    root: Path,
    data: Path,
    relations: list[testing.Relation],
    secrets: list[testing.Secret],
    ready_timeout: float,
    agent_standin: bool,
) -> Iterator[Backend]:
    binary = garm_binary()
    if binary is None:
        raise BackendUnavailableError(SKIP_REASON)
    agent_dir = ship_agent_standin(root / "garm-agent") if agent_standin else None
    with GitHubStandin() as github:
        real = PodGarm.prepare(root, binary=binary, github_endpoint=github.endpoint_params())
        register_configured_apps(real.proxy, github)
        front = tls_front(root / "front", real) if agent_standin else None
        story_garm = RealStoryGarm(real, github, front)
        try:
            # The charm's first replan starts GARM; the ingress URL is the proxy's, so the
            # controller URLs the charm sets (callbacks, metadata) are loopback ones.
            state = base_state(
                data,
                agent_dir=agent_dir,
                relations={ingress_relation(real.base_url), *relations},
                secrets=set(secrets),
            )
            description = (
                f"real GARM ({binary}) with the GitHub stand-in and the stand-in provider; "
                f"ingress URL {real.base_url} (the recording proxy)"
            )
            if front is not None:
                description += (
                    f", later {front.base_url} (a TLS front); the image's amd64 garm-agent is "
                    "the one the garm-agent line names"
                )
            yield Backend(
                story_garm, CharmDriver(real, state, ready_timeout=ready_timeout), description
            )
        finally:
            story_garm.close()
            real.stop()
            if front is not None:
                front.stop()


def tls_front(directory: Path, real: PodGarm) -> TlsFront:
    """A TLS front to ``real`` whose CA the stand-in cloud's runners trust."""
    directory.mkdir()
    front = TlsFront(directory, lambda: real.port).start()
    real.set_trusted_ca(front.ca_file.read_bytes())
    return front


def ship_agent_standin(directory: Path) -> Path:
    """The image's garm-agent directory with the real agent or its stand-in as amd64 binary."""
    try:
        # The stand-in runs on the runners as a program of its own, with websockets: only the
        # real backend's environment installs it.
        from tests.real_garm.garm_agent import shipped_agent

        agent = shipped_agent()
    except ImportError as exc:
        raise BackendUnavailableError(
            f"the garm-agent stand-in cannot run here ({exc}); tox -e simulate-real installs it"
        ) from exc
    print(agent.note, flush=True)
    directory.mkdir()
    return write_agent_tools(directory, binaries={"amd64": agent.content})
