"""The ``scaleset-status`` action's tables: live generations, and runners that cannot start.

Owns the read of what the tables need from GARM (reads only, never writes), the rows and their
rendering. Knows GARM through the client; must not import ops (the action handler in
``charm.py`` turns the table into action results).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from garm import GarmClient, ScaleSet
from reconcile.memory import RememberedFault
from reconcile.scalesets.faults import RunnerFault, runner_faults
from reconcile.scalesets.names import Generations, dedupe_specs
from reconcile.scalesets.placement import resolve_target
from reconcile.scalesets.retirement import Phase, draining_phase
from reconcile.scalesets.stall import shortfalls
from vocabulary.desired_state import ScalesetSpec


@dataclass(frozen=True)
class StatusReport:
    """What the ``scaleset-status`` action shows: the table rows and the runners that fail."""

    rows: list[StatusRow]
    faults: list[RunnerFault]


def read_status(
    client: GarmClient,
    desired: Sequence[ScalesetSpec],
    remembered: Mapping[str, RememberedFault] | None = None,
) -> StatusReport:
    """Read what the ``scaleset-status`` action needs from GARM; reads only, never writes.

    Args:
        client: an authenticated GARM client.
        desired: the desired specs.
        remembered: the faults the reconcile passes remember, by live scale set name.

    Returns:
        The rows, as :func:`scaleset_status_rows` orders them, and every faulted runner; a
        scale set whose runner GARM has replaced since its fault shows it with runner ``-``.
    """
    client.list_providers()  # fails early, with a clear class, when GARM is not usable
    scalesets = client.list_scalesets()
    instances = client.list_instances()
    per_id = Counter(i.scale_set_id for i in instances)
    counts: dict[str, int | None] = {
        s.name: per_id[s.id] for s in scalesets if s.name and s.id is not None
    }
    faults = runner_faults(scalesets, instances)
    current = {f.scaleset for f in faults}
    found = shortfalls(
        scalesets, instances, datetime.now(UTC), faulted=current | set(remembered or {})
    )
    stalled = {s.scaleset.name or "" for s in found if s.stall is not None}
    rows = scaleset_status_rows(desired, scalesets, counts, stalled)
    faults += [
        RunnerFault(name, REPLACED_RUNNER, memory.fault)
        for name, memory in sorted((remembered or {}).items())
        if name not in current and name in counts
    ]
    return StatusReport(rows, faults)


STATUS_TABLE_COLUMNS = (
    "LOGICAL",
    "SCALESET",
    "ENABLED",
    "PHASE",
    "RUNNERS",
    "PROVIDER",
    "SCALING",
)
# In the SCALING column: GARM wants more runners than it lists and is not creating them.
STALLED = "stalled"
SCALING = "ok"
FAULT_TABLE_COLUMNS = ("RUNNER", "SCALESET", "FAULT")
# In the RUNNER column: GARM has already replaced the runner that had this fault.
REPLACED_RUNNER = "-"
ORPHAN_LOGICAL = "-"


@dataclass(frozen=True)
class StatusRow:
    """One live generation as the ``scaleset-status`` action shows it."""

    logical: str
    scaleset: str
    enabled: bool
    phase: str
    runners: int | None
    provider: str
    scaling: str = SCALING

    def cells(self) -> tuple[str, ...]:
        """Return the row's table cells, in column order."""
        return (
            self.logical,
            self.scaleset,
            "true" if self.enabled else "false",
            self.phase,
            "?" if self.runners is None else str(self.runners),
            self.provider or "-",
            self.scaling,
        )


def _row_phase(
    scaleset: ScaleSet, target: str, observed: Mapping[str, ScaleSet], runners: int | None
) -> str:
    enabled = scaleset.enabled is True
    if scaleset.name == target:
        return "active" if enabled else "re-enabling"
    target_live = target in observed and observed[target].enabled is True
    if not target_live:
        return Phase.CREATING_REPLACEMENT.words()
    if enabled:
        return Phase.RETIRING_PREDECESSOR.words()
    return draining_phase(runners)


def scaleset_status_rows(
    desired: Sequence[ScalesetSpec],
    scalesets: Sequence[ScaleSet],
    runner_counts: Mapping[str, int | None],
    stalled: Collection[str] = (),
) -> list[StatusRow]:
    """Compute the rows of the ``scaleset-status`` table; makes no GARM call.

    Args:
        desired: the desired specs (the first of each logical name wins).
        scalesets: GARM's scale set listing.
        runner_counts: runners listed per live name; a missing or None count shows as unknown.
        stalled: live names GARM has stopped scaling (``reconcile.scalesets.stall``).

    Returns:
        One row per named live scale set: claimed generations sorted by logical then live name,
        then orphans sorted by live name.
    """
    observed = {s.name: s for s in scalesets if s.name}
    generations = Generations(observed)
    owner: dict[str, tuple[str, str]] = {}
    for spec in dedupe_specs(desired, warn=False):
        target = resolve_target(spec, observed)
        for name in generations.family(spec.name, target):
            owner.setdefault(name, (spec.name, target))
    claimed: list[StatusRow] = []
    orphans: list[StatusRow] = []
    for name in sorted(observed):
        scaleset = observed[name]
        runners = runner_counts.get(name)
        enabled = scaleset.enabled is True
        provider = scaleset.provider_name or ""
        scaling = STALLED if name in stalled else SCALING
        if name not in owner:
            orphans.append(
                StatusRow(ORPHAN_LOGICAL, name, enabled, "orphaned", runners, provider, scaling)
            )
            continue
        logical, target = owner[name]
        phase = _row_phase(scaleset, target, observed, runners)
        claimed.append(StatusRow(logical, name, enabled, phase, runners, provider, scaling))
    claimed.sort(key=lambda row: (row.logical, row.scaleset))
    return claimed + orphans


def format_scaleset_table(rows: Sequence[StatusRow]) -> str:
    """Render rows as a fixed-width text table with a header line.

    Args:
        rows: the rows to show.

    Returns:
        The table, one line per row, columns separated by at least two spaces.
    """
    return _format_table(STATUS_TABLE_COLUMNS, [row.cells() for row in rows])


def _format_table(header: Sequence[str], cells: Sequence[Sequence[str]]) -> str:
    lines = [header, *cells]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def format_runner_faults(faults: Sequence[RunnerFault]) -> str:
    """Render faulted runners as a fixed-width table with a header line, like the scale sets."""
    return _format_table(FAULT_TABLE_COLUMNS, [(f.runner, f.scaleset, f.fault) for f in faults])
