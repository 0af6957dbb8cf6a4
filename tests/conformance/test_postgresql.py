"""Real GARM on a real PostgreSQL server, related through the charm's ``postgresql`` relation.

Real GARM only: the emulator has no database. A throwaway cluster
(:class:`~tests.real_garm.postgres.PostgresServer`) runs on 127.0.0.1; the relation carries its
endpoint and credentials as a v0 ``database`` provider publishes them (plaintext form), so the
charm plans the PostgreSQL backend, the entrypoint renders it and GARM runs on it. The story
steps are those of ``tox -e simulate`` (:mod:`tests.simulate`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import ops
import pytest
from ops import testing

from relations import database
from tests.charm_driver import CharmDriver, configurator, planned_providers, replaced_database
from tests.log_secrets import register_secret
from tests.real_garm.postgres import DATABASE, PostgresServer, started_or_skipped
from tests.simulate import Story, deploy, integrate, runners_come_up
from tests.simulate_backends import (
    REAL,
    Backend,
    PodGarm,
    RealStoryGarm,
    open_backend,
    postgresql_relation,
)

WRONG_PASSWORD = "Not-The-Password-4d2c"  # test value
register_secret(WRONG_PASSWORD)


@pytest.fixture
def postgres() -> Iterator[PostgresServer]:
    """A started PostgreSQL server on 127.0.0.1, stopped afterwards."""
    with started_or_skipped() as server:
        yield server


def set_relation(driver: CharmDriver, relation: testing.Relation) -> testing.State:
    """Put ``relation`` (new or changed) in the model and run its relation-changed hook."""
    others = {r for r in driver.state.relations if r.id != relation.id}
    driver.state = dataclasses.replace(driver.state, relations={*others, relation})
    return driver.run(driver.ctx.on.relation_changed(relation, remote_unit=0))


def garm_rows(server: PostgresServer, table: str) -> list[str]:
    """Names of the rows GARM keeps in ``table`` of its PostgreSQL database."""
    out = server.sql(f"SELECT name FROM {table} ORDER BY 1", DATABASE)  # noqa: S608 (fixed names)
    return out.splitlines() if out else []


def provider_servers(root: Path) -> set[str]:
    """Names of the servers the stand-in provider keeps (the "cloud"), all providers."""
    names: set[str] = set()
    for path in root.rglob("*.standin-state.json"):
        document = json.loads(path.read_text(encoding="utf-8"))
        names.update(str(s.get("name")) for s in document.get("servers", {}).values())
    return names


def real_garm(backend: Backend) -> PodGarm:
    """The real GARM of a real backend."""
    assert isinstance(backend.garm, RealStoryGarm)
    return backend.garm.real


def test_story_first_steps_on_postgresql(postgres: PostgresServer, tmp_path: Path):
    with open_backend(
        REAL, relations=[postgresql_relation(postgres)], workdir=tmp_path
    ) as backend:
        story = Story(backend.driver, backend.garm)
        deploy(story)
        integrate(story)
        runners_come_up(story)

        live = sorted(s["name"] for s in backend.garm.scalesets())
        assert garm_rows(postgres, "scale_sets") == live
        assert len(garm_rows(postgres, "instances")) == 2
        assert not (real_garm(backend).workdir / "garm.db").exists()


def test_switching_a_running_sqlite_deployment_to_postgresql_recovery(
    postgres: PostgresServer, tmp_path: Path
):
    """Relate PostgreSQL without emptying GARM first: the charm recovers on its own (ADR 0016)."""
    with open_backend(REAL, workdir=tmp_path) as backend:
        story = Story(backend.driver, backend.garm)
        deploy(story)
        integrate(story)
        runners_come_up(story)
        garm = real_garm(backend)
        github = backend.garm.github
        before = sorted(s["name"] for s in backend.garm.scalesets())
        stale = {v.name: v.id for v in github.scalesets()}
        old_runners = {r["name"] for r in garm.instances()}
        old_controller = garm.controller()["controller_id"]
        starts = garm.starts
        garm.clear_requests()

        print("\n=== Relate PostgreSQL to the deployment running on SQLite")
        state = set_relation(backend.driver, postgresql_relation(postgres))
        story.show(state)
        if state.unit_status != replaced_database(old_controller):
            state = story.hook()

        # GARM restarted once, on the empty PostgreSQL database: a new controller, whose admin
        # the charm created again; it re-created credentials and organisations from relation
        # data, and the scale sets under the same names: GitHub's stale ones, registered by
        # the charm through the SQLite-era GARM, were deleted in GitHub first.
        assert garm.starts == starts + 1
        assert garm.controller()["controller_id"] != old_controller
        assert sorted(c["name"] for c in backend.garm.credentials()) == [
            "app-101-202",
            "app-102-202",
        ]
        assert sorted(o["name"] for o in backend.garm.organizations()) == ["org-a", "org-b"]
        assert garm_rows(postgres, "scale_sets") == before
        assert sorted(v.name for v in github.scalesets()) == before
        assert all(v.id != stale[v.name] for v in github.scalesets())
        # The SQLite-era machines are named in the status by their controller's tag.
        assert state.unit_status == replaced_database(old_controller)
        # Runners: the SQLite-era machines are in no GARM listing (the new controller's GARM
        # sees only servers tagged with its own id) and stay in the cloud; their GitHub
        # registrations went with their scale sets.
        assert old_runners.isdisjoint(r["name"] for r in garm.instances())
        assert old_runners <= provider_servers(tmp_path)
        assert old_runners.isdisjoint(r.name for r in github.runners())
        # Providers stay published; the SQLite file is left as it was.
        assert planned_providers(state) == ["cfg-a-0", "cfg-b-0"]
        assert (garm.workdir / "garm.db").exists()


def test_wrong_password_blocks_with_the_refusal_and_deletes_nothing(
    postgres: PostgresServer, tmp_path: Path
):
    with open_backend(
        REAL, relations=[postgresql_relation(postgres)], workdir=tmp_path, ready_timeout=5.0
    ) as backend:
        story = Story(backend.driver, backend.garm)
        deploy(story)
        cfg = configurator("cfg-a", relation_id=1, org="org-a")
        backend.driver.add_configurator(cfg)
        story.await_garm(
            "an idle runner",
            lambda: any(r.get("runner_status") == "idle" for r in real_garm(backend).instances()),
        )
        garm = real_garm(backend)
        scalesets = garm_rows(postgres, "scale_sets")
        runners = garm_rows(postgres, "instances")
        servers = provider_servers(tmp_path)
        assert scalesets and runners

        print("\n=== The PostgreSQL provider hands out a wrong password")
        state = set_relation(backend.driver, postgresql_relation(postgres, WRONG_PASSWORD))
        print(f"  Unit  garm/0* {state.unit_status.name} {state.unit_status.message}")

        assert garm.start_failure is not None  # GARM exited at start
        assert state.unit_status == ops.BlockedStatus(database.DATABASE_LOGIN_REFUSED)
        state = backend.driver.run(backend.driver.ctx.on.update_status())
        assert state.unit_status == ops.BlockedStatus(database.DATABASE_LOGIN_REFUSED)
        # Nothing deleted: GARM's database, the provider record and the cloud are as they were.
        assert garm_rows(postgres, "scale_sets") == scalesets
        assert garm_rows(postgres, "instances") == runners
        assert planned_providers(state) == ["cfg-a-0"]
        assert provider_servers(tmp_path) == servers

        print("\n=== The right password again")
        state = set_relation(backend.driver, postgresql_relation(postgres))
        story.show(state)
        assert garm.start_failure is None
        assert state.unit_status == ops.ActiveStatus()
        assert garm_rows(postgres, "scale_sets") == scalesets
