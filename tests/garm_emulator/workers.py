"""GARM's scale-set workers as its ``/metrics`` counts them: started, or still to start.

GARM v0.2.1-afda4e76 starts a scale set's worker in its organisation's retry loop (every 5 s,
one worker after another): a new scale set's seconds after its create, and every one again
after each start of GARM. Its API shows nothing of it; its Prometheus counter of GitHub calls
does (``garm_github_operations_total{operation, scope}``): a worker's start looks its scale set
up on GitHub once (``GetRunnerScaleSetByNameAndRunnerGroup``) and an enabled worker's listener
opens a message session (``CreateMessageSession``); disabled and enabled again, it opens one
more; a delete through the API deletes the scale set on GitHub (``DeleteRunnerScaleSet``).
``scope`` is the kind of entity (``Organization``, ``Repository``). Counted since the process
started; an operation never made has no sample. A scale set on a provider GARM did not load
gets no worker. When the process started is there too, as Prometheus' default process
collector exports it beside GARM's own metrics (``process_start_time_seconds``, seconds since
the epoch in clock ticks of 10 ms, written as Go writes a float): each restart a new one.

The emulator starts a worker at once (its retry loop never lags) unless a test holds the starts
(:meth:`Workers.hold`, ``GarmEmulator.hold_worker_starts``), as real GARM does while it works
through hundreds after its start; :meth:`Workers.release` starts them. A test can also have
GARM lose a scale set's worker (:meth:`Workers.forget`, ``GarmEmulator.forget_worker``), as
GARM does with a scale set created between its organisation's controller listing the database
and registering its watcher at GARM's start: no worker until a change to the scale set makes
the controller create one (``handleScaleSetUpdateOperation``) or GARM starts again. The
emulator has no listener, so a disable that a worker misses does not crash it: tests assert
the calls made.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal

LOOKUP = "GetRunnerScaleSetByNameAndRunnerGroup"
SESSION = "CreateMessageSession"
DELETED = "DeleteRunnerScaleSet"
SCOPES = {"organization": "Organization", "repository": "Repository"}
# Linux counts a process's start in clock ticks (USER_HZ, 100 a second).
TICK = 0.01


def _process_start() -> float:
    return round(time.time(), 2)


def go_float(value: float) -> str:
    """``value`` as Go's Prometheus client writes a sample (``strconv``'s ``'g'``, shortest).

    The shortest digits that read back the same, with an exponent from 10**6 or below 10**-4:
    ``3``, ``0.5``, ``1.79662711288e+09``.
    """
    if value == 0:
        return "0"
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    shown = "".join(str(d) for d in digits)
    power = len(digits) + exponent - 1
    minus = "-" if sign else ""
    if power < -4 or power >= 6:
        mantissa = shown[0] + (f".{shown[1:]}" if len(shown) > 1 else "")
        return f"{minus}{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"
    if exponent >= 0:
        return minus + shown + "0" * exponent
    whole = shown[:exponent] if len(shown) > -exponent else "0"
    return f"{minus}{whole}.{shown[exponent:].rjust(-exponent, '0')}"


@dataclass
class Workers:
    """The counters of one GARM process, and the workers it has yet to start."""

    counts: Counter[tuple[str, str]] = field(default_factory=Counter[tuple[str, str]])
    held: bool = False
    # Scale-set id -> (scope, enabled) of the workers waiting to start, in creation order.
    waiting: dict[int, tuple[str, bool]] = field(default_factory=dict[int, tuple[str, bool]])
    started: set[int] = field(default_factory=set[int])
    # When this process started (``process_start_time_seconds``).
    process_start: float = field(default_factory=_process_start)

    def created(self, scaleset_id: int, kind: str, enabled: bool) -> None:
        """A scale set GARM will run a worker for: started now, unless starts are held."""
        self.waiting[scaleset_id] = (SCOPES.get(kind, ""), enabled)
        if not self.held:
            self.release()

    def enabled(self, scaleset_id: int, kind: str) -> None:
        """A started worker's scale set enabled again: its listener opens a new session."""
        if scaleset_id in self.started:
            self.counts[(SESSION, SCOPES.get(kind, ""))] += 1
        elif scaleset_id in self.waiting:
            self.waiting[scaleset_id] = (self.waiting[scaleset_id][0], True)

    def written(self, scaleset_id: int, scope_kind: str, enabled: bool) -> None:
        """A change to a scale set GARM has no worker for: its controller makes one now."""
        if scaleset_id not in self.started and scaleset_id not in self.waiting:
            self.created(scaleset_id, scope_kind, enabled)

    def forget(self, scaleset_id: int) -> None:
        """GARM lost the scale set's create at its own start: no worker, none to start."""
        self.waiting.pop(scaleset_id, None)
        self.started.discard(scaleset_id)

    def deleted(self, scaleset_id: int, kind: str) -> None:
        """A scale set deleted (on GitHub, then in the database): its worker stops."""
        self.counts[(DELETED, SCOPES.get(kind, ""))] += 1
        self.waiting.pop(scaleset_id, None)
        self.started.discard(scaleset_id)

    def restarted(self, rows: dict[int, tuple[str, bool]]) -> None:
        """A new process: counters from zero, every worker (``rows``) to start again."""
        self.process_start = max(_process_start(), round(self.process_start + TICK, 2))
        self.counts.clear()
        self.started.clear()
        self.waiting = dict(rows)
        if not self.held:
            self.release()

    def hold(self) -> None:
        """Hold every worker start from now on (GARM's retry loop busy elsewhere)."""
        self.held = True

    def release(self, count: int | None = None) -> None:
        """Start ``count`` waiting workers (all when None), oldest first; stop holding when all."""
        ids = list(self.waiting)[: len(self.waiting) if count is None else count]
        for scaleset_id in ids:
            scope, enabled = self.waiting.pop(scaleset_id)
            self.counts[(LOOKUP, scope)] += 1
            if enabled:
                self.counts[(SESSION, scope)] += 1
            self.started.add(scaleset_id)
        if count is None:
            self.held = False

    def exposition(self) -> str:
        """The counter as GARM's ``/metrics`` shows it (no sample for an operation not made).

        And the process's start, as the default registry's process collector shows it.
        """
        lines: list[str] = []
        if self.counts:
            lines += [
                "# HELP garm_github_operations_total Total number of github operation attempts",
                "# TYPE garm_github_operations_total counter",
            ]
        for (operation, scope), value in sorted(self.counts.items()):
            lines.append(
                f'garm_github_operations_total{{operation="{operation}",scope="{scope}"}} '
                f"{go_float(value)}"
            )
        lines += [
            "# HELP process_start_time_seconds Start time of the process since unix epoch in "
            "seconds.",
            "# TYPE process_start_time_seconds gauge",
            f"process_start_time_seconds {go_float(self.process_start)}",
        ]
        return "\n".join(lines) + "\n"
