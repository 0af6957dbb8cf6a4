"""The fault campaign's world: the real charm, real GARM, the GitHub stand-in, the provider.

One :class:`World` per test process, built from the existing pieces: the real-GARM harness
(:class:`~tests.simulate_backends.PodGarm`, restarted after an exit as Pebble would), its
recording proxy (which numbers the charm's calls and cuts or kills at one of them), the GitHub
stand-in and the charm driver, deployed as the conformance tests deploy it.

A story's precondition is built once, through the charm and GARM's own loops, and kept as a
:class:`Snapshot`: GARM stopped, its work directory copied (SQLite file, configuration, the
stand-in provider's servers), the GitHub stand-in's world copied, the charm's Juju state kept.
Each case puts the snapshot back and starts GARM on it, so no case waits for a runner to come up.

A world may run GARM on PostgreSQL (:class:`~tests.real_garm.postgres.PostgresServer`, related
as a v0 ``database`` provider): a snapshot then also copies GARM's database in the server, and
the proxy can restart the server at one of the charm's calls (``db-restart``).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ops import testing

from tests.charm_driver import CharmDriver, base_state, planned_providers, recorded_providers
from tests.github_standin import GitHubStandin
from tests.github_standin.state import StandinSnapshot
from tests.real_garm.github_apps import register_configured_apps
from tests.real_garm.harness import UNEXPECTED_EXITS, garm_binary
from tests.real_garm.postgres import DATABASE, PostgresServer
from tests.real_garm.proxy import RecordedCall, is_instance_call, writes
from tests.simulate_backends import PodGarm, ingress_relation, postgresql_relation
from workload.pebble_layer import CONTAINER_NAME

# How long a state of GARM's own (a runner up, a job taken) may take to come.
AWAIT_TIMEOUT = 90.0
POLL = 0.25


@dataclass(frozen=True)
class Snapshot:
    """A world at one moment: GARM's files, the stand-in's world, the charm's state."""

    directory: Path
    github: StandinSnapshot
    state: testing.State
    environment: dict[str, str]
    # GARM's database copied in the PostgreSQL server, on PostgreSQL.
    database: str | None = None


class MarkingDriver(CharmDriver):
    """The charm driver, noting after each hook how many calls GARM's proxy had seen."""

    def __init__(self, garm: PodGarm, state: testing.State, ready_timeout: float) -> None:
        """Drive the charm against ``garm``."""
        super().__init__(garm, state, ready_timeout=ready_timeout)
        self.garm = garm
        self.marks: list[int] = []

    def run(self, event: Any) -> testing.State:
        """Run one hook; note the proxy's call count after it, even if it failed."""
        try:
            return super().run(event)
        finally:
            self.marks.append(self.garm.proxy.arrivals)


class World:
    """Real GARM behind its proxy, the GitHub stand-in and the charm, in ``root``.

    With ``postgres``, the charm is related to that server and GARM runs on it.
    """

    def __init__(self, root: Path, postgres: PostgresServer | None = None) -> None:
        """Start the stand-in and the proxy and deploy the charm (its replan starts GARM)."""
        binary = garm_binary()
        assert binary is not None
        self.root = root
        self.postgres = postgres
        self.github = GitHubStandin().start()
        self.garm = PodGarm.prepare(
            root / "pod", binary=binary, github_endpoint=self.github.endpoint_params()
        )
        register_configured_apps(self.garm.proxy, self.github)
        self.garm.proxy.on_kill = self.garm.kill
        relations: set[testing.RelationBase] = {
            ingress_relation(self.garm.base_url),
        }
        if postgres is not None:
            self.garm.proxy.on_db_restart = postgres.restart
            relations.add(postgresql_relation(postgres))
        data = root / "data"
        data.mkdir()
        state = base_state(data, relations=relations)
        self.driver = MarkingDriver(self.garm, state, ready_timeout=10.0)
        self.driver.run(self.driver.ctx.on.install())
        self.driver.run(self.driver.ctx.on.leader_elected())
        container = self.driver.state.get_container(CONTAINER_NAME)
        self.driver.run(self.driver.ctx.on.pebble_ready(container))
        self._snapshots = 0

    def close(self) -> None:
        """Stop GARM (by pid), its proxy and the stand-in."""
        self.garm.stop()
        self.github.stop()

    # ---- snapshots ------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Copy the world as it is now; GARM is stopped for the copy and started again."""
        self.garm.halt()
        self._snapshots += 1
        target = self.root / "snapshots" / str(self._snapshots)
        shutil.copytree(self.garm.workdir, target, ignore=shutil.ignore_patterns("garm.log"))
        database = None
        if self.postgres is not None:
            database = f"snapshot_{self._snapshots}"
            self.postgres.copy_database(DATABASE, database)
        snapshot = Snapshot(
            target,
            self.github.snapshot(),
            self.driver.state,
            dict(self.garm.environment),
            database,
        )
        self.garm.start(snapshot.environment)
        return snapshot

    def restore(self, snapshot: Snapshot) -> None:
        """Put ``snapshot`` back: GARM stopped, its files and the stand-in's world restored."""
        self.garm.halt()
        self.garm.proxy.clear_faults()
        for child in self.garm.workdir.iterdir():
            if child.name == self.garm.log_path.name:
                continue
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()
        shutil.copytree(snapshot.directory, self.garm.workdir, dirs_exist_ok=True)
        if self.postgres is not None and snapshot.database is not None:
            self.postgres.copy_database(snapshot.database, DATABASE)
        self.github.restore(snapshot.github)
        self.garm.reset_restart_delay()
        self.driver.state = snapshot.state
        self.garm.start(snapshot.environment)
        self.await_listening()
        self.garm.proxy.clear()

    def restart_garm(self) -> None:
        """Stop GARM and start it again on the same files; return once it listens again."""
        self.garm.halt()
        self.garm.start(self.garm.environment)
        self.await_listening()

    def await_listening(self) -> None:
        """Wait until GARM listens to each enabled scale set (its message session is live).

        A scale set disabled and deleted while GARM's worker for it is still starting makes
        GARM v0.2.1-afda4e76 exit (``tests/conformance/test_garm_exit.py``); a case starts
        from a GARM that has been up long enough, as one that has run for a while in a pod.
        """

        def listening() -> bool:
            enabled = {s["name"] for s in self.garm.scalesets() if s.get("enabled")}
            live = {v.name for v in self.github.scalesets() if v.has_session}
            return enabled <= live

        self.await_state("GARM to listen to every enabled scale set", listening)

    # ---- what the campaign reads -----------------------------------------------------------

    def client_writes(self) -> list[RecordedCall]:
        """The writes the charm sent GARM since the last clear (runners' callbacks aside)."""
        return [c for c in writes(self.garm.requests) if not is_instance_call(c.path)]

    def provider_record(self) -> list[str]:
        """The providers the charm's ``garm-providers`` record keeps (unit names)."""
        return sorted(recorded_providers(self.driver.state))

    def planned(self) -> list[str]:
        """The providers of the charm's Pebble plan."""
        return sorted(planned_providers(self.driver.state))

    def wait_answering(self) -> None:
        """Return once GARM answers a logged-in read.

        After a kill, once Pebble's restart is done. After its PostgreSQL server restarted,
        once GARM has dropped the pooled connections the restart closed: each fails one query,
        and GARM's init gate reads that failure as ``409 init_required``, login included.
        """
        self.await_state("GARM to answer with its database", self._answers)

    def _answers(self) -> bool:
        try:
            self.garm.controller()
        except RuntimeError as exc:
            if "init_required" not in str(exc):
                raise
            return False
        return True

    def forget_expected_exits(self) -> None:
        """Drop the exits the campaign caused from the run's list of unexpected ones."""
        for line in self.garm.exits:
            if line in UNEXPECTED_EXITS:
                UNEXPECTED_EXITS.remove(line)
        self.garm.exits.clear()

    def await_state(self, what: str, probe: Callable[[], Any]) -> Any:
        """Poll until ``probe`` returns something truthy, within :data:`AWAIT_TIMEOUT`."""
        deadline = time.monotonic() + AWAIT_TIMEOUT
        while True:
            found = probe()
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(POLL)
