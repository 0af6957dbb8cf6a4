"""The packed charm (``build/pack/prime``) run as Juju runs it, under the unit-agent stand-in.

Run by ``tox -e pack`` after the pack. The first two need no GARM and no Pebble: the packed
``install`` hook runs and sets a status; a non-executable entrypoint fails it with 126. The
story is ``python -m tests.simulate --packed`` (simulate-real's story and both actions) in a
pod of its own; so are ``python -m tests.packed_lifecycle restart`` (a converged pod made again
writes nothing to GARM but the login), ``removal`` (``juju remove-application`` runs the
cleanup, GARM left without the charm's objects) and ``kills`` (the charm SIGKILLed at sampled
tool calls of a hook that writes to GARM, Juju's retry: nothing lost or twice in GARM).
Without real GARM or Pebble they skip with the real-GARM line.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.juju_agent import pod
from tests.juju_agent.agent import PRIME_DIR, UnitAgent


@pytest.fixture
def prime() -> Path:
    if not (PRIME_DIR / "dispatch").exists():
        pytest.fail(f"no packed charm in {PRIME_DIR}: python -m tests.packing.pack first")
    return PRIME_DIR


def test_the_packed_install_hook_runs_and_sets_a_status(prime: Path, tmp_path: Path):
    unit = UnitAgent(tmp_path / "unit", prime_dir=prime)

    run = unit.hook("install")

    assert run.returncode == 0, run.stderr
    status = unit.read()["status"]["unit"]
    assert (status["status"], status["message"]) == ("waiting", "Waiting for pebble ready")
    assert run.tools["status-set"] >= 1
    assert run.tools["secret-add"] == 2  # garm-secrets and garm-admin-credentials


def test_a_non_executable_entrypoint_fails_the_hook_with_126(prime: Path, tmp_path: Path):
    copy = tmp_path / "prime"
    shutil.copytree(prime, copy, symlinks=True)
    (copy / "src" / "charm.py").chmod(0o644)
    unit = UnitAgent(tmp_path / "unit", prime_dir=copy)

    run = unit.hook("install")

    assert run.returncode == 126
    assert "Permission denied" in run.stderr


@pytest.mark.pod
def test_the_story_of_simulate_real_on_the_packed_charm(prime: Path):
    del prime
    reason = pod.skip_reason()
    if reason is not None:
        pytest.skip(reason)

    assert pod.run_in_pod("tests.simulate", ["--packed"]) == 0


@pytest.mark.pod
def test_a_converged_pods_restart_writes_nothing_to_garm_but_the_login(prime: Path):
    del prime
    reason = pod.skip_reason()
    if reason is not None:
        pytest.skip(reason)

    assert pod.run_in_pod("tests.packed_lifecycle", ["restart"]) == 0


@pytest.mark.pod
def test_removing_the_application_leaves_garm_without_the_charms_objects(prime: Path):
    del prime
    reason = pod.skip_reason()
    if reason is not None:
        pytest.skip(reason)

    assert pod.run_in_pod("tests.packed_lifecycle", ["removal"]) == 0


@pytest.mark.pod
def test_a_charm_killed_mid_hook_and_retried_loses_and_doubles_nothing_in_garm(prime: Path):
    del prime
    reason = pod.skip_reason()
    if reason is not None:
        pytest.skip(reason)

    assert pod.run_in_pod("tests.packed_lifecycle", ["kills"]) == 0
