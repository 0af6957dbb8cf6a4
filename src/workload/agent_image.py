"""garm-agent as the workload image ships it, read through Pebble.

Owns where the image keeps garm-agent (``AGENT_DIR``, the manifest at ``MANIFEST_PATH``, both
written by the rock's ``garm-agent`` part), the one parse of that manifest into ``AgentTools``
(a ``problem`` naming the path when it is missing or malformed), and the ``ToolReader`` that
pulls one binary and checks it against its manifest digest. Knows Pebble, not GARM: the tool
step in ``reconcile`` decides what to upload and calls the reader only for that.
"""

from __future__ import annotations

import hashlib
import json
import logging
import posixpath
import re
from typing import cast

import ops

from vocabulary.desired_state import AgentTool, AgentTools, AgentToolUnreadable, ToolReader

logger = logging.getLogger(__name__)

AGENT_DIR = "/opt/garm-agent"
MANIFEST_PATH = f"{AGENT_DIR}/manifest.json"
# GARM's own names (garm-provider-common's OSType and OSArch); GARM refuses what it does not know.
OS_TYPES = ("linux", "windows")
_ARCH = re.compile(r"[a-z0-9_]{1,16}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_VERSION = re.compile(r"[0-9A-Za-z.+_-]{1,64}")


def binary_path(os_type: str, os_arch: str) -> str:
    """Where the image keeps the garm-agent binary for one OS and architecture."""
    return f"{AGENT_DIR}/{os_type}/{os_arch}/garm-agent"


class ManifestError(ValueError):
    """The manifest does not describe garm-agent binaries; the message names the first fault."""


def read_manifest(container: ops.Container) -> AgentTools:
    """Read the garm-agent manifest from the workload container (one Pebble pull).

    Args:
        container: the workload container; the caller has checked that Pebble answers.

    Returns:
        The binaries the image ships, or no binary and a ``problem`` naming the manifest's path
        when it is missing, unreadable or malformed (logged as a warning).
    """
    try:
        with container.pull(MANIFEST_PATH) as source:
            raw = source.read()
    except ops.pebble.PathError as exc:
        if exc.kind == "not-found":
            return _problem(f"no manifest at {MANIFEST_PATH} in the workload image")
        return _problem(f"cannot read {MANIFEST_PATH} ({exc.kind})")
    except (ops.pebble.Error, UnicodeDecodeError) as exc:
        return _problem(f"cannot read {MANIFEST_PATH} ({type(exc).__name__})")
    try:
        return AgentTools(tools=parse_manifest(raw))
    except ManifestError as exc:
        return _problem(f"{MANIFEST_PATH} is malformed ({exc})")


def parse_manifest(raw: str) -> tuple[AgentTool, ...]:
    """Parse the manifest's text into its tools, sorted by OS and architecture.

    The manifest is ``{"version": "<v>", "tools": [{"os_type", "os_arch", "sha256", "path"}]}``
    with one entry per OS and architecture and every path under ``AGENT_DIR``.

    Raises:
        ManifestError: naming the first field that is wrong.
    """
    try:
        document: object = json.loads(raw)
    except ValueError:
        raise ManifestError("not JSON") from None
    if not isinstance(document, dict):
        raise ManifestError("not a JSON object")
    manifest = cast(dict[str, object], document)
    version = manifest.get("version")
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise ManifestError("version")
    entries = manifest.get("tools")
    if not isinstance(entries, list) or not entries:
        raise ManifestError("tools")
    tools: dict[tuple[str, str], AgentTool] = {}
    for index, entry in enumerate(cast(list[object], entries)):
        tool = _tool(entry, version, f"tools[{index}]")
        if (tool.os_type, tool.os_arch) in tools:
            raise ManifestError(f"tools[{index}]: {tool.os_type}/{tool.os_arch} twice")
        tools[tool.os_type, tool.os_arch] = tool
    return tuple(tools[key] for key in sorted(tools))


def _tool(entry: object, version: str, where: str) -> AgentTool:
    if not isinstance(entry, dict):
        raise ManifestError(f"{where} is not an object")
    fields = cast(dict[str, object], entry)
    values: dict[str, str] = {}
    for key in ("os_type", "os_arch", "sha256", "path"):
        value = fields.get(key)
        if not isinstance(value, str) or not _valid(key, value):
            raise ManifestError(f"{where}.{key}")
        values[key] = value
    return AgentTool(version=version, **values)


def _valid(key: str, value: str) -> bool:
    if key == "os_type":
        return value in OS_TYPES
    if key == "os_arch":
        return bool(_ARCH.fullmatch(value))
    if key == "sha256":
        return bool(_SHA256.fullmatch(value))
    # The charm pulls only what lies in the agent's directory of the image.
    return posixpath.normpath(value) == value and value.startswith(f"{AGENT_DIR}/")


def tool_reader(container: ops.Container) -> ToolReader:
    """Return the reader of shipped binaries: a Pebble pull, checked against the manifest."""

    def read(tool: AgentTool) -> bytes:
        try:
            with container.pull(tool.path, encoding=None) as source:
                data = source.read()
        except ops.pebble.PathError as exc:
            raise AgentToolUnreadable(f"cannot read {tool.path} ({exc.kind})") from None
        except ops.pebble.Error as exc:
            raise AgentToolUnreadable(f"cannot read {tool.path} ({type(exc).__name__})") from None
        if hashlib.sha256(data).hexdigest() != tool.sha256:
            logger.warning("%s does not match its sha256 in %s", tool.path, MANIFEST_PATH)
            raise AgentToolUnreadable(f"{tool.path} does not match its sha256 in the manifest")
        return data

    return read


def _problem(text: str) -> AgentTools:
    logger.warning("garm-agent binaries unknown this pass: %s", text)
    return AgentTools(problem=text)
