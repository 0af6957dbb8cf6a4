"""The debug-ssh relation: the tmate servers runners may offer a debug session through.

Owns the relation name, its keys and the parse of its unit databags into
``tmate_relay.DebugSshConnection``s; the charmed template puts the first one into every runner
(a scale set with a tmate relay has the relay's address in its own template). Must not import
ops or the GARM client: it works on detached ``UnitData``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from relations.configurator_contract import DECIMAL
from vocabulary.desired_state import InputProblem, UnitData
from vocabulary.runner_options import MAX_PORT
from vocabulary.tmate_relay import DebugSshConnection

logger = logging.getLogger(__name__)

DEBUG_SSH_RELATION_NAME = "debug-ssh"
DEBUG_SSH_KEYS = ("host", "port", "rsa_fingerprint", "ed25519_fingerprint")


@dataclass(frozen=True)
class DebugSshInputs:
    """What the debug-ssh units publish this pass.

    Attributes:
        connections: the usable tmate servers, sorted by ``(host, port)``.
        problems: the rejected units, for the status.
    """

    connections: tuple[DebugSshConnection, ...]
    problems: tuple[InputProblem, ...]


def parse_debug_ssh(units: Sequence[UnitData]) -> DebugSshInputs:
    """Parse the tmate servers published over debug-ssh.

    Incomplete units are skipped as not ready; a value with a line break is rejected as a
    possible injection (it would start a new line in the runner's ``.env``); a port outside
    1..MAX_PORT is rejected. Each skip is a warning.

    Args:
        units: remote unit databags of the debug-ssh relations.

    Returns:
        The usable connections and the problems.
    """
    connections: list[DebugSshConnection] = []
    problems: list[InputProblem] = []
    for unit in units:
        values = {key: unit.data.get(key) or "" for key in DEBUG_SSH_KEYS}
        missing = [key for key, value in values.items() if not value.strip()]
        if missing:
            logger.warning(
                "debug-ssh unit %s not ready: %s unset", unit.unit_name, ", ".join(missing)
            )
            continue
        injected = [key for key, value in values.items() if "\n" in value or "\r" in value]
        if injected:
            logger.warning(
                "debug-ssh data of %s rejected: possible injection (line break in %s)",
                unit.unit_name,
                ", ".join(injected),
            )
            problems.append(InputProblem(unit.unit_name, "line break in debug-ssh data"))
            continue
        port = values["port"].strip()
        if not (DECIMAL.fullmatch(port) and 1 <= int(port) <= MAX_PORT):
            logger.warning(
                "debug-ssh data of %s rejected: port is not in 1..65535", unit.unit_name
            )
            problems.append(InputProblem(unit.unit_name, "debug-ssh port is not in 1..65535"))
            continue
        connections.append(
            DebugSshConnection(
                host=values["host"].strip(),
                port=int(port),
                rsa_fingerprint=values["rsa_fingerprint"].strip(),
                ed25519_fingerprint=values["ed25519_fingerprint"].strip(),
                unit_name=unit.unit_name,
            )
        )
    connections.sort(key=lambda c: (c.host, c.port))
    return DebugSshInputs(tuple(connections), tuple(problems))
