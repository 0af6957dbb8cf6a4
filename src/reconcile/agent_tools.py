"""The garm-agent binaries in GARM, and which entities may run their runners in agent mode.

Owns the tool step of the chain: GARM's tool store is listed once per pass; a binary is read
(through the charm's ``ToolReader``) and uploaded only for an OS and architecture whose stored
``sha256sum`` or ``version`` differs from the image's manifest, so a converged pass reads one
listing and never a binary. GARM keeps one tool per OS and architecture and drops the older
one itself, so nothing is ever deleted here.

Agent mode is decided from what GARM stores after the uploads: an entity is in agent mode when
GARM holds the manifest's binary for every (OS, architecture) its desired scale sets use, and
not otherwise (an entity without scale sets: off). Without a stored tool GARM falls back to a
github.com download or runs the runner without an agent, so agent mode must never be ahead of
the store. Any failure of the step (a manifest problem, an unreadable binary, an upload or a
listing GARM refused) holds agent mode only: entities keep their current ``agent_mode``, a
notice names the failure, the rest of the chain goes on. Makes no Juju call; must not import
ops.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from garm import AgentToolInfo, GarmClient
from reconcile.containment import contain
from vocabulary.desired_state import (
    AgentTool,
    AgentTools,
    AgentToolUnreadable,
    EntityKey,
    ScalesetSpec,
    ToolReader,
)
from vocabulary.notices import Notice, Severity

logger = logging.getLogger(__name__)

# The subject of the step's notices, as the operator knows the binary.
AGENT = "garm-agent"
UNREADABLE_BINARY = "cannot read the {os_arch} binary, agent mode held"
NO_READER = "cannot read the shipped binaries, agent mode held"
MANIFEST_PROBLEM = "{problem}; agent mode held"
WRONG_DIGEST = "GARM stored another {os_arch} binary than the image's, agent mode held"

OsArch = tuple[str, str]


@dataclass(frozen=True)
class AgentModes:
    """What the tool step leaves for the entity pass.

    Attributes:
        stored: (OS, architecture) pairs for which GARM holds the manifest's binary.
        held: agent mode is held this pass: entities keep their current mode.
        notices: the failures that hold it, one each.
        uploaded: (OS, architecture) pairs uploaded this pass.
    """

    stored: frozenset[OsArch] = frozenset()
    held: bool = False
    notices: list[Notice] = field(default_factory=list[Notice])
    uploaded: tuple[OsArch, ...] = ()

    def wanted(self, scalesets: Iterable[ScalesetSpec]) -> dict[EntityKey, bool] | None:
        """The agent mode of each entity with desired scale sets; None while held.

        An entity maps to True when GARM holds a tool for every (OS, architecture) of its
        scale sets. Entities absent from the map have no scale set: agent mode off.
        """
        if self.held:
            return None
        needs: dict[EntityKey, set[OsArch]] = {}
        for spec in scalesets:
            needs.setdefault(spec.entity_key, set()).add((spec.os_type or "linux", spec.os_arch))
        return {key: arches <= self.stored for key, arches in needs.items()}


def sync_agent_tools(
    client: GarmClient, tools: AgentTools, read_tool: ToolReader | None
) -> AgentModes:
    """Upload the image's garm-agent binaries GARM lacks; tell which (OS, arch) GARM holds.

    Args:
        client: a logged-in GARM client.
        tools: the image's manifest.
        read_tool: reads one shipped binary; None when the binaries cannot be read.

    Returns:
        What GARM stores after the step and whether agent mode is held.

    Raises:
        GarmConnectionError, GarmUnauthorizedError, GarmProtocolError: the pass ends.
    """
    if tools.problem:
        notice = Notice(Severity.BLOCKED, AGENT, MANIFEST_PROBLEM.format(problem=tools.problem))
        return AgentModes(held=True, notices=[notice])
    if not tools.tools:
        # The image ships no agent: agent mode is off everywhere, GARM need not be asked.
        return AgentModes()
    notices: list[Notice] = []
    with contain(notices, AGENT, "the garm-agent listing") as refused:
        listed = _by_os_arch(client.list_tools())
    if refused.error is not None:
        return AgentModes(held=True, notices=notices)
    stored: set[OsArch] = set()
    uploaded: list[OsArch] = []
    for tool in tools.tools:
        key = (tool.os_type, tool.os_arch)
        if _matches(listed.get(key), tool):
            stored.add(key)
        elif _upload(client, tool, read_tool, notices):
            stored.add(key)
            uploaded.append(key)
    return AgentModes(frozenset(stored), bool(notices), notices, tuple(uploaded))


def _by_os_arch(listed: Sequence[AgentToolInfo]) -> Mapping[OsArch, AgentToolInfo]:
    return {(t.os_type or "", t.os_arch or ""): t for t in listed}


def _matches(stored: AgentToolInfo | None, tool: AgentTool) -> bool:
    return (
        stored is not None
        and (stored.sha256sum or "").lower() == tool.sha256.lower()
        and stored.version == tool.version
    )


def _upload(
    client: GarmClient, tool: AgentTool, read_tool: ToolReader | None, notices: list[Notice]
) -> bool:
    """Read and upload one binary; on a failure add its notice and return False."""
    if read_tool is None:
        notices.append(Notice(Severity.WAITING, AGENT, NO_READER))
        return False
    try:
        data = read_tool(tool)
    except AgentToolUnreadable as exc:
        logger.warning("Cannot read the garm-agent binary for %s: %s", tool.os_arch, exc)
        text = UNREADABLE_BINARY.format(os_arch=tool.os_arch)
        notices.append(Notice(Severity.BLOCKED, AGENT, text))
        return False
    what = f"the {tool.os_arch} binary"
    with contain(notices, AGENT, what) as refused:
        stored = client.upload_tool(
            name=f"garm-agent-{tool.os_type}-{tool.os_arch}",
            os_type=tool.os_type,
            os_arch=tool.os_arch,
            version=tool.version,
            data=data,
        )
    if refused.error is not None:
        logger.warning("GARM did not store the garm-agent for %s: %s", tool.os_arch, refused.error)
        return False
    if (stored.sha256 or "").lower() != tool.sha256.lower():
        notices.append(Notice(Severity.BLOCKED, AGENT, WRONG_DIGEST.format(os_arch=tool.os_arch)))
        return False
    logger.info("Uploaded the garm-agent %s for %s/%s", tool.version, tool.os_type, tool.os_arch)
    return True
