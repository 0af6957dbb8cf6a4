"""GARM's stale desired count, provoked on demand on either backend.

GARM's scale-set worker (v0.2.1-afda4e76) scales to its own copy of the scale set, refreshed by
database events handed over on fresh goroutines in no fixed order: when the event of a job's
message id lands after the one carrying the new desired count, the worker keeps the old count,
and GARM's database holds the new one (``tests/real_garm/job_demand.py``). The race is rare and
cannot be timed from outside, so the tests leave GARM in the state it ends in: the count is
written into GARM's database behind GARM's back (real GARM on SQLite), where the API shows it at
once and no event ever reaches the worker; the emulator is told the same through its control
hook. ``recorded_at`` is the time GARM would have written the row (its ``updated_at``).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import datetime

from tests.conformance.backends import EMULATOR, ProxiedEmulator
from tests.real_garm.harness import RealGarm

# How GARM's SQLite driver writes a time (gorm, Go's time.Time in UTC).
_SQLITE_TIME = "%Y-%m-%d %H:%M:%S.%f+00:00"


def stall(garm: ProxiedEmulator | RealGarm, name: str, count: int, recorded_at: datetime) -> None:
    """Have GARM's database record ``count`` desired runners of ``name`` its worker never heard."""
    if garm.name == EMULATOR:
        assert isinstance(garm, ProxiedEmulator)
        garm.emulator.stall_demand(name, count, recorded_at)
        return
    assert isinstance(garm, RealGarm)
    with closing(sqlite3.connect(garm.workdir / "garm.db", timeout=30)) as db, db:
        changed = db.execute(
            "UPDATE scale_sets SET desired_runner_count = ?, updated_at = ?"
            " WHERE name = ? AND deleted_at IS NULL",
            (count, recorded_at.strftime(_SQLITE_TIME), name),
        ).rowcount
    assert changed == 1, f"GARM's database has {changed} live scale sets named {name}"
