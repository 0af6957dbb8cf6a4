"""Runners that cannot start: GARM's provider faults, read for the status and the action.

When the provider refuses to create a runner (an image the cloud does not have, user data over
its limit, a tag it refuses), GARM puts the runner in ``error`` with the provider's failure as
``provider_fault``, about five seconds later moves it to ``pending_delete`` (which clears the
fault), deletes it and tries again with a new runner. Nothing else tells the operator: the
scale set stays enabled. Since a pass sees a fault only in that short window, the fault is
remembered per scale set (``reconcile.memory.RememberedFault``, kept between passes) until a
runner of that scale set comes up or the scale set is changed. Owns which runners count as
faulted, the part of a fault that is shown, the memory's rule and the notice per scale set.
Pure: makes no GARM call and must not import ops.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from garm import Instance, ScaleSet, from_base64
from reconcile.memory import RememberedFault
from reconcile.scalesets.names import logical_of
from vocabulary.notices import Notice, Severity

# GARM's instance status once the provider failed to create it, and once a runner came up.
ERROR_STATUS = "error"
RUNNING_STATUS = "running"
# A status line must stay short; the whole fault is in GARM and in the action's table.
FAULT_LINE_LIMIT = 120
# GARM wraps what the provider printed: "... provider binary failed with stdout: <out>;
# stderr: <err>: exit status <n>". The provider's stderr is what says what went wrong.
_PROVIDER_OUTPUT = re.compile(r"stdout: .*?; stderr: (?P<stderr>.*): exit status \d+$", re.S)
# A cloud's refusal can quote what it refused: user data (which holds the runner's token) or
# a key. Any long run of token characters is cut out of what is shown, except a server tag
# (``garm-pool-id=<scale set>-<entity UUID>``, which Nova refuses over 60 characters): a
# lower-case key and a value of short hyphenated words, which no token or key looks like.
_TOKEN_RUN = re.compile(r"[A-Za-z0-9+/=_-]{32,}")
_TAG = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*=(?:[A-Za-z0-9_]{1,16}-)*[A-Za-z0-9_]{1,16}")


@dataclass(frozen=True)
class RunnerFault:
    """One runner GARM holds in ``error`` with a provider fault.

    Attributes:
        scaleset: the live name of its scale set.
        runner: the runner (instance) name.
        fault: what the provider said, shortened (see :func:`fault_line`).
    """

    scaleset: str
    runner: str
    fault: str


def fault_line(encoded: str | None) -> str:
    """Return the part of a fault worth a status line, from GARM's base64 of its bytes.

    The provider's stderr when GARM's wrapper is there, else the whole first line; token-like
    runs are cut out. Errors are wrapped outside in, so the cause is at the end: a long line
    keeps its end. Text that is not base64 is read as it is, so a fault is never lost.
    """
    if not encoded:
        return ""
    try:
        text = from_base64(encoded).decode("utf-8", "replace")
    except ValueError:
        text = encoded
    output = _PROVIDER_OUTPUT.search(text)
    if output:
        text = output.group("stderr")
    line = " ".join(part.strip() for part in text.splitlines() if part.strip())
    line = _TOKEN_RUN.sub(_cut_token, line)
    if len(line) > FAULT_LINE_LIMIT:
        return "..." + line[-(FAULT_LINE_LIMIT - 3) :]
    return line


def _cut_token(run: re.Match[str]) -> str:
    return run.group() if _TAG.fullmatch(run.group()) else "[...]"


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


def carry_faults(
    remembered: Mapping[str, RememberedFault],
    scalesets: Sequence[ScaleSet],
    instances: Sequence[Instance],
) -> dict[str, RememberedFault]:
    """Return the faults to show after this pass, by live scale set name.

    A fault seen now is (re)remembered. A remembered one is kept while the scale set still
    exists unchanged and none of its runners is running; it is forgotten once one runs, the
    scale set is updated or it is gone.
    """
    seen = {f.scaleset: f.fault for f in reversed(runner_faults(scalesets, instances))}
    running = {i.scale_set_id for i in instances if (i.status or "").lower() == RUNNING_STATUS}
    carried: dict[str, RememberedFault] = {}
    for scaleset in scalesets:
        name = scaleset.name
        if not name:
            continue
        since = scaleset.updated_at.isoformat() if scaleset.updated_at else ""
        if name in seen:
            carried[name] = RememberedFault(seen[name], since)
        elif name in remembered and scaleset.id not in running and remembered[name].since == since:
            carried[name] = remembered[name]
    return carried


def fault_notices(faults: Mapping[str, RememberedFault]) -> list[Notice]:
    """One blocked notice per logical scale set whose runners cannot start.

    The first scale set by live name speaks for its logical name: its generations almost
    always fail for the same reason, and the action lists every faulted runner.
    """
    notices: dict[str, Notice] = {}
    for name in sorted(faults):
        logical = logical_of(name)
        if logical not in notices:
            text = f"runners fail to start: {faults[name].fault}"
            notices[logical] = Notice(Severity.BLOCKED, logical, text)
    return list(notices.values())
