"""The garm-agent a real-GARM test ships to its runners: the real one, else the stand-in.

The real agent is a local part (:data:`tests.local_parts.GARM_AGENT`), built outside the
repositories from the commit the rock pins; where it is not found, the stand-in
(:mod:`tests.real_garm.agent_standin`, as strict as that commit) ships instead and
:attr:`ShippedAgent.note` says so in one line. Both run on the stand-in cloud's simulated
runners (``provider_standin``), which give them the same ``garm-agent.toml`` and ``run.sh``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.local_parts import GARM_AGENT


@dataclass(frozen=True)
class ShippedAgent:
    """The amd64 garm-agent binary a test uploads, and the line that says which it is."""

    content: bytes
    real: bool
    note: str


def shipped_agent() -> ShippedAgent:
    """The real garm-agent where the local part is found, else the stand-in."""
    path = GARM_AGENT.find()
    if path is not None:
        return ShippedAgent(path.read_bytes(), True, f"garm-agent: the real one, {path}")
    # Imported only here: the stand-in needs websockets, which only real-GARM envs install.
    from tests.real_garm import agent_standin

    note = f"garm-agent: the stand-in ships instead; {GARM_AGENT.skip_reason()}"
    return ShippedAgent(agent_standin.executable(), False, note)
