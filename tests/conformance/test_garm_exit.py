"""GARM can exit or hang on its own; the harness starts it again, as the pod would need.

Real GARM only. Measured on v0.2.1-afda4e76: a scale set disabled while GARM's worker for it is
starting keeps a message session, because the worker makes its GitHub calls before it
registers for database events and so never hears of the disable. Deleting that scale set then
makes GARM delete a session GitHub dropped with the scale set; GitHub answers 404 and GARM
dies of a nil pointer in ``DeleteMessageSession``. The charm can retire a scale set at such a
moment (a replan restarts every worker; a new scale set's worker starts seconds after its
creation), so a suite test now and then lost its GARM for the rest of the test. In the pod,
Pebble restarts GARM; the harness does the same.

GARM was also seen to hang, now and then, while starting on a database with credentials and
entities (its cache worker never finished loading them). The harness has Go dump its
goroutines into the log (SIGQUIT) and starts it once more. Both are noted, and the run's
summary lists them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from garm import GarmClient, UpdateScaleSetParams
from tests.conformance.backends import wait_for
from tests.conformance.conftest import (
    ADMIN_PASSWORD,
    ADMIN_USERNAME,
    PROVIDER_NAME,
    provider_entry,
    real_garm_with_provider,
)
from tests.conformance.test_drain import _seed_scaleset
from tests.github_standin import GitHubStandin
from tests.real_garm import harness
from tests.real_garm.harness import (
    SKIP_REASON,
    UNEXPECTED_EXITS,
    RealGarm,
    garm_binary,
    standalone_environment,
)

pytestmark = pytest.mark.skipif(garm_binary() is None, reason=SKIP_REASON)
# How long GARM's worker for a new scale set may take to start (its entity worker first waits
# for the runner tools; the scale-set controller retries every 5 s).
WORKER_START_TIMEOUT = 60.0


@pytest.fixture
def real_garm(tmp_path: Path, github: GitHubStandin) -> Iterator[RealGarm]:
    """A real GARM with its controller URLs set."""
    for garm in real_garm_with_provider(tmp_path, github):
        garm.bootstrap(ADMIN_USERNAME, ADMIN_PASSWORD, urls=True)
        yield garm


def test_garm_dies_deleting_a_scaleset_whose_disable_it_missed_and_comes_back(
    real_garm: RealGarm, github: GitHubStandin
):
    with GarmClient(real_garm.url) as client:
        client.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        scaleset_id = _seed_scaleset(client, min_idle=0)
        # The worker's start looks the scale set up on GitHub: held there, it is mid-start.
        lookup = github.hold("list_scale_sets")
        assert lookup.arrived.wait(WORKER_START_TIMEOUT)
        client.update_scaleset(scaleset_id, UpdateScaleSetParams(enabled=False))
        lookup.release()
        assert github.wait_until(
            lambda: [s.has_session for s in github.scalesets()] == [True], WORKER_START_TIMEOUT
        ), "GARM's worker heard of the disable (GARM fixed?)"
        assert [s.enabled for s in client.list_scalesets()] == [None]

        client.delete_scaleset(scaleset_id)
        # Once the exit is noted, the read view waits for the harness's restart to be done.
        wait_for(
            real_garm,
            "GARM to start again",
            lambda: bool(real_garm.exits) and real_garm.controller(),
        )
        (exit_line,) = real_garm.exits
        assert "exited with 2" in exit_line
        assert "nil pointer dereference" in exit_line
        UNEXPECTED_EXITS.remove(exit_line)  # this one was expected: not for the run's summary

        # The same database, through the same proxy: the delete had been committed.
        client.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        assert [s.name for s in client.list_scalesets()] == []
        assert [o.name for o in client.list_organizations()] == ["drain-org"]
        assert github.scalesets() == []


def garm_hanging_once(directory: Path) -> Path:
    """A GARM whose first start hangs, as v0.2.1-afda4e76 was seen to; later starts are GARM.

    SIGQUIT ends the hung one as Go's runtime does, after writing where it waits.
    """
    real_binary = garm_binary()
    assert real_binary is not None
    hung_once = directory / "hung-once"
    wrapper = directory / "garm-hanging-once"
    wrapper.write_text(
        f"#!{sys.executable}\n"
        "import os, pathlib, signal, sys, time\n"
        f"marker = pathlib.Path({str(hung_once)!r})\n"
        "if not marker.exists():\n"
        "    marker.touch()\n"
        "    def dump(*_):\n"
        "        print('SIGQUIT: quit', flush=True)\n"
        "        os._exit(2)\n"
        "    signal.signal(signal.SIGQUIT, dump)\n"
        "    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGQUIT})\n"
        "    while True:\n"
        "        time.sleep(0.2)\n"
        f"os.execv({str(real_binary)!r}, [{str(real_binary)!r}, *sys.argv[1:]])\n",
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    return wrapper


def test_a_garm_that_hangs_at_start_is_dumped_and_started_again(
    tmp_path: Path, github: GitHubStandin, monkeypatch: pytest.MonkeyPatch
):
    wrapper = garm_hanging_once(tmp_path)
    monkeypatch.setattr(harness, "START_TIMEOUT", 5.0)
    garm = RealGarm.prepare(
        tmp_path / "root", binary=wrapper, github_endpoint=github.endpoint_params()
    )
    try:
        garm.start(standalone_environment([provider_entry(PROVIDER_NAME)]))
        (note,) = garm.exits
        assert note.endswith("hung at start (its goroutines are in its log); started again")
        UNEXPECTED_EXITS.remove(note)  # expected here
        assert "SIGQUIT: quit" in garm.log_path.read_text(encoding="utf-8")
        assert garm.starts == 2
        garm.bootstrap(ADMIN_USERNAME, ADMIN_PASSWORD, urls=True)
        assert garm.providers() == [PROVIDER_NAME]
    finally:
        garm.stop()
