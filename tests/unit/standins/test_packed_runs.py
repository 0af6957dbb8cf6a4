"""A packed run that cannot happen (no real GARM or Pebble, not root) never passes.

Under pytest the packed story skips with one line (``tests/packing/test_packed_charm.py``); run
directly, ``python -m tests.simulate --packed`` and ``python -m tests.bench_packed`` print one
line saying what was not run and why, and exit non-zero.
"""

from __future__ import annotations

import pytest

from tests import bench_packed, simulate
from tests.juju_agent import pod


@pytest.fixture
def no_local_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pod, "skip_reason", lambda: "no GARM here")
    monkeypatch.delenv(pod.IN_POD, raising=False)


@pytest.mark.usefixtures("no_local_parts")
def test_the_packed_story_that_cannot_run_says_so_and_fails(capsys: pytest.CaptureFixture[str]):
    code = simulate.main(["--packed"])

    assert code == pod.NOT_RUN != 0
    assert capsys.readouterr().out == "SIMULATION NOT RUN on the packed charm: no GARM here\n"


@pytest.mark.usefixtures("no_local_parts")
def test_the_packed_bench_that_cannot_run_says_so_and_fails(capsys: pytest.CaptureFixture[str]):
    code = bench_packed.main(["--sizes", "10"])

    assert code == pod.NOT_RUN != 0
    assert capsys.readouterr().out == "BENCH NOT RUN on the packed charm: no GARM here\n"


def test_the_packed_bench_counts_every_tool_that_writes_to_juju():
    from tests.juju_agent.hook_tool import NOW, PENDING, TOOLS

    writers = {name for name, (_, kind, _, _) in TOOLS.items() if kind in (PENDING, NOW)}
    # Left out: the status (see JUJU_WRITES), what an action reports, and a consumer's tracked
    # revision (secret-get saves it as it reads).
    not_counted = {"status-set", "action-set", "action-log", "action-fail", "secret-get"}
    assert set(bench_packed.JUJU_WRITES) == writers - not_counted
