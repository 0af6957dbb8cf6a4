"""Runners that cannot start: GARM's provider faults, read for the status and the action.

When the provider refuses to create a runner (an image the cloud does not have, user data over
its limit, a tag it refuses), GARM keeps the instance in ``error`` with the provider's stderr
as ``provider_fault``. Nothing else tells the operator: the scale set itself stays enabled and
GARM keeps trying. Owns which instances count as faulted, the one line of a fault that is
shown, and the notice per scale set. Pure: makes no GARM call and must not import ops.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from garm import Instance, ScaleSet, from_base64
from notices import Notice, Severity
from reconcile.scalesets.names import logical_of

# GARM's instance status once the provider failed to create it.
ERROR_STATUS = "error"
# A status line must stay short; the whole fault is in GARM and in the action's table.
FAULT_LINE_LIMIT = 120


@dataclass(frozen=True)
class RunnerFault:
    """One runner GARM holds in ``error`` with a provider fault.

    Attributes:
        scaleset: the live name of its scale set.
        runner: the runner (instance) name.
        fault: the first non-empty line of the provider's fault, shortened.
    """

    scaleset: str
    runner: str
    fault: str


def fault_line(encoded: str | None) -> str:
    """Return the first non-empty line of a fault as GARM sends it (base64 of the bytes).

    Text that is not base64 is read as it is, so a fault is never lost to its encoding.
    """
    if not encoded:
        return ""
    try:
        text = from_base64(encoded).decode("utf-8", "replace")
    except ValueError:
        text = encoded
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    if len(line) > FAULT_LINE_LIMIT:
        return line[: FAULT_LINE_LIMIT - 3] + "..."
    return line


def runner_faults(
    scalesets: Iterable[ScaleSet], instances: Iterable[Instance]
) -> list[RunnerFault]:
    """List the faulted runners of named scale sets, by scale set then runner name.

    Args:
        scalesets: GARM's scale set listing (gives the names of ``scale_set_id``).
        instances: GARM's instance listing.

    Returns:
        One entry per instance in ``error`` whose provider fault is not empty.
    """
    names: dict[int | None, str] = {s.id: s.name for s in scalesets if s.id is not None and s.name}
    faults: list[RunnerFault] = []
    for instance in instances:
        name = names.get(instance.scale_set_id)
        if name is None or (instance.status or "").lower() != ERROR_STATUS:
            continue
        line = fault_line(instance.provider_fault)
        if line:
            faults.append(RunnerFault(name, instance.name or "?", line))
    return sorted(faults, key=lambda f: (f.scaleset, f.runner))


def fault_notices(faults: Sequence[RunnerFault]) -> list[Notice]:
    """One blocked notice per logical scale set with a runner that cannot start.

    The first fault (by live name, then runner) is shown: runners of one scale set fail for
    the same reason almost always, and the action lists every one.
    """
    notices: dict[str, Notice] = {}
    for fault in faults:
        logical = logical_of(fault.scaleset)
        if logical not in notices:
            text = f"runners fail to start: {fault.fault}"
            notices[logical] = Notice(Severity.BLOCKED, logical, text)
    return list(notices.values())
