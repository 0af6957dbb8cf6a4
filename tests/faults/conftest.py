"""Fixtures of the fault campaign: one world per test process, its preconditions built once.

Each xdist worker builds its own :class:`~tests.faults.world.World` and, when a test first needs
it, each precondition (``empty``, ``two``, ``busy``) as a snapshot, and each story's unfaulted
reference. A worker that runs a PostgreSQL case also builds a second world, GARM on a
throwaway PostgreSQL server (``postgres_campaign``). Every case's outcome is appended to
``$FAULTS_RESULTS/<worker>.jsonl`` when that variable names a directory (the ``faults`` tox env
sets it; ``tests/faults/report.py`` reads it and writes the table in
``docs/reference/faults.md``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults import stories
from tests.faults.campaign import Outcome, Reference, reference
from tests.faults.stories import BUSY, EMPTY, TWO, Story
from tests.faults.world import Snapshot, World
from tests.real_garm.harness import SKIP_REASON, garm_binary
from tests.real_garm.postgres import PostgresServer, started_or_skipped

RESULTS_ENV = "FAULTS_RESULTS"


class Campaign:
    """The world of this process, its snapshots and references, built on first use."""

    def __init__(self, root: Path, postgres: PostgresServer | None = None) -> None:
        self.world = World(root, postgres)
        self._snapshots: dict[str, Snapshot] = {EMPTY: self.world.snapshot()}
        self._references: dict[str, Reference] = {}

    def snapshot(self, start: str) -> Snapshot:
        """The precondition ``start``, built the first time it is asked for."""
        if start not in self._snapshots:
            if start == TWO:
                self.world.restore(self.snapshot(EMPTY))
                stories.story("a").step(self.world)
                stories.update_status(self.world)
            elif start == BUSY:
                self.world.restore(self.snapshot(TWO))
                stories.start_busy_runner(self.world)
            self._snapshots[start] = self.world.snapshot()
        return self._snapshots[start]

    def reference(self, story: Story) -> tuple[Snapshot, Reference]:
        """The story's precondition and its unfaulted run."""
        snapshot = self.snapshot(story.start)
        if story.key not in self._references:
            self._references[story.key] = reference(self.world, snapshot, story)
        return snapshot, self._references[story.key]


@pytest.fixture(scope="session")
def campaign() -> Iterator[Campaign]:
    """This process's campaign world; stopped (by pid) at the end."""
    if garm_binary() is None:
        pytest.skip(SKIP_REASON)
    with tempfile.TemporaryDirectory(prefix="garm-faults-") as root:
        built = Campaign(Path(root))
        try:
            yield built
        finally:
            built.world.close()


@pytest.fixture(scope="session")
def postgres_campaign() -> Iterator[Campaign]:
    """A campaign world whose GARM runs on a throwaway PostgreSQL server; stopped at the end."""
    with (
        started_or_skipped() as server,
        tempfile.TemporaryDirectory(prefix="garm-faults-pg-") as root,
    ):
        built = Campaign(Path(root), server)
        try:
            yield built
        finally:
            built.world.close()


def record(ref: Reference, outcomes: list[Outcome]) -> None:
    """Append the outcomes (and the reference they ran against) to the results file."""
    directory = os.environ.get(RESULTS_ENV)
    if not directory or not outcomes:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    Path(directory).mkdir(parents=True, exist_ok=True)
    path = Path(directory) / f"{worker}.jsonl"
    with path.open("a", encoding="utf-8") as out:
        for outcome in outcomes:
            row = dataclasses.asdict(outcome)
            row["reference"] = {"calls": ref.calls, "hooks": ref.hooks}
            out.write(json.dumps(row) + "\n")
