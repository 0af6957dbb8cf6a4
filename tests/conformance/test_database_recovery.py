"""GARM's database lost under a converged deployment: runners come back alone.

Real GARM only: the emulator has no database to lose, and no GitHub. The story and its helpers:
:mod:`tests.conformance.database_loss`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import ops
import pytest

from tests.charm_driver import replaced_database
from tests.conformance.database_loss import (
    a_queued_job_gets_a_runner,
    converged,
    github_deletes,
    github_ids,
    github_names,
    real_garm,
    replace_pod,
    story_garm,
    until_active,
)
from tests.real_garm.harness import SKIP_REASON, garm_binary
from tests.security_log import security_events
from tests.simulate import Story, live_name
from tests.simulate_backends import Backend

pytestmark = pytest.mark.skipif(garm_binary() is None, reason=SKIP_REASON)


def test_lost_database_recovery_brings_the_scale_sets_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    def lost(backend: Backend, story: Story) -> None:
        before = sorted(s["name"] for s in backend.garm.scalesets())
        stale = github_ids(backend)
        old_runners = {r.name for r in story_garm(backend).github.runners()}
        old_controller = real_garm(backend).controller()["controller_id"]

        print("\n=== The garm-data volume is replaced: GARM's SQLite file is gone")
        real_garm(backend).lose_database()
        states = until_active(story, replace_pod(backend))

        # Active, naming the machines the lost database leaves in the cloud by their tag.
        assert states[-1].unit_status == replaced_database(old_controller)
        assert real_garm(backend).controller()["controller_id"] != old_controller
        assert sorted(s["name"] for s in backend.garm.scalesets()) == before
        # GitHub holds exactly one scale set of each name: the lost GARM's were deleted by the
        # charm (their ids, nothing else) and registered again.
        assert github_names(backend) == Counter(before)
        assert sorted(github_deletes(backend)) == sorted(
            d for d in github_deletes(backend) if int(d.rsplit("/", 1)[1]) in stale.values()
        )
        assert all(github_ids(backend)[name] != stale[name] for name in before)
        deleted = {str(e["object"]) for e in security_events(caplog, "sensitive_delete")}
        assert {f"github-scale-set/{name}" for name in before} <= deleted
        logged = [r.getMessage() for r in caplog.records]
        assert any("GARM's database was replaced" in line for line in logged)
        # The lost database's runner machines are named by the tag they carry in the cloud.
        assert any(f"garm-controller-id={old_controller}" in line for line in logged)
        # The recovered scale sets run jobs again.
        runner = a_queued_job_gets_a_runner(backend, before[0])
        assert runner not in old_runners

    converged(tmp_path, lost)


def test_a_foreign_github_scale_set_of_a_managed_name_is_never_deleted_recovery(
    tmp_path: Path,
):
    def foreign(backend: Backend, story: Story) -> None:
        before = sorted(s["name"] for s in backend.garm.scalesets())
        github = story_garm(backend).github
        real_garm(backend).lose_database()
        # Someone else (another GARM, a person) takes cfg-b's name in GitHub meanwhile.
        b_name = next(n for n in before if n.startswith("cfg-b"))
        b_id = github_ids(backend)[b_name]
        github.delete_scale_set_by_name(b_name)
        foreign_id = github.add_scale_set(b_name, entity="org-b")

        states = until_active(story, replace_pod(backend))
        state = story.hook()

        assert github_ids(backend)[b_name] == foreign_id != b_id
        assert all(not d.endswith(f"/{foreign_id}") for d in github_deletes(backend))
        assert state.unit_status == ops.BlockedStatus(
            f"cfg-b-runners: GitHub holds {b_name} in runner group Default (id {foreign_id}),"
            " not this charm's: delete it in GitHub;"
            " GARM: recovering 1 scale set(s) GARM's database lost; +1 more"
        )
        # cfg-a, whose stale scale set is the charm's own, is back and untouched by cfg-b's.
        assert live_name(backend.garm, "cfg-a") in before
        assert [s["name"] for s in backend.garm.scalesets()] == [
            n for n in before if n.startswith("cfg-a")
        ]
        assert states

    converged(tmp_path, foreign)
