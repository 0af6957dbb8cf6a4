"""GARM's garm-agent tool store: uploads, the newest one per OS and arch, the paginated listing.

Measured on the real binary (afda4e76, 2026-12; ``tests/conformance/test_agent_tools.py`` pins
it on both backends) and read in GARM's source (``apiserver/controllers/metadata.go``,
``runner/garm_tools.go``, ``runner/metadata.go``):

* ``POST /tools/garm-agent`` takes the binary as the raw body and its description in headers
  ``X-Tool-Name``, ``X-Tool-OS-Type``, ``X-Tool-OS-Arch``, ``X-Tool-Version`` (all required,
  checked first) and ``X-Tool-Description``. The OS must be ``windows`` or ``linux``, the
  architecture ``amd64`` or ``arm64``. An empty body is accepted (size 0). It answers the
  stored ``FileObject`` (digest under ``sha256``, tags ``category=garm-agent``, ``os_type=...``,
  ``os_arch=...``, ``version=...``, ``origin=manual``) and deletes every other tool of the same
  OS and architecture, whatever its version.
* ``GET /tools/garm-agent`` is paginated (``page`` from 1, ``pageSize`` 25 by default; page 0
  reads as 1), newest first; the digest is ``sha256sum`` there, ``download_url`` is the
  metadata URL's ``tools/garm-agent/<id>/download``; an empty store answers ``results: null``
  and ``pages: 0``. ``next_page``/``previous_page`` appear only when there is such a page.
* The admin route ``GET /tools/garm-agent/<id>/download`` checks the tool against the calling
  runner, and an admin is no runner: it cannot download an existing tool (400, the OS types
  differ) and an unknown one is 404. Runners fetch through the metadata route.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

OS_TYPES = ("windows", "linux")
OS_ARCHES = ("amd64", "arm64")
DEFAULT_PAGE_SIZE = 25
MISSING_HEADERS = (
    "missing required headers: X-Tool-Name, X-Tool-OS-Type, X-Tool-OS-Arch, X-Tool-Version"
)
BAD_OS_TYPE = "invalid os_type: must be 'windows' or 'linux'"
BAD_OS_ARCH = "invalid os_arch: must be 'amd64' or 'arm64'"
# What Go's http.DetectContentType says of the bytes GARM stores (it sniffs the content).
TEXT_TYPE = "text/plain; charset=utf-8"
BINARY_TYPE = "application/octet-stream"


class ToolRefusedError(Exception):
    """GARM refused an upload or a download: ``status`` and GARM's ``details``."""

    def __init__(self, status: int, details: str) -> None:
        super().__init__(details)
        self.status = status
        self.details = details


@dataclass
class StoredTool:
    """One file object GARM keeps for a garm-agent binary."""

    id: int
    name: str
    description: str
    os_type: str
    os_arch: str
    version: str
    content: bytes
    created_at: datetime
    updated_at: datetime
    origin: str = "manual"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    @property
    def file_type(self) -> str:
        # Go's sniffer: no known signature, so text unless a byte says binary.
        binary = any(b < 0x09 or 0x0D < b < 0x20 or b == 0x7F for b in self.content[:512])
        return BINARY_TYPE if binary else TEXT_TYPE

    @property
    def tags(self) -> list[str]:
        return [
            "category=garm-agent",
            f"os_type={self.os_type}",
            f"os_arch={self.os_arch}",
            f"version={self.version}",
            f"origin={self.origin}",
        ]


@dataclass
class ToolStore:
    """The garm-agent binaries GARM holds; file object ids count up and are never reused."""

    tools: dict[int, StoredTool] = field(default_factory=dict[int, StoredTool])
    last_id: int = 0

    def upload(self, headers: dict[str, str], content: bytes, now: datetime) -> dict[str, Any]:
        """Store an upload and drop the older tools of its OS and arch; return the FileObject."""
        name = headers.get("x-tool-name", "")
        os_type = headers.get("x-tool-os-type", "")
        os_arch = headers.get("x-tool-os-arch", "")
        version = headers.get("x-tool-version", "")
        if not (name and os_type and os_arch and version):
            raise ToolRefusedError(400, MISSING_HEADERS)
        if os_type not in OS_TYPES:
            raise ToolRefusedError(400, BAD_OS_TYPE)
        if os_arch not in OS_ARCHES:
            raise ToolRefusedError(400, BAD_OS_ARCH)
        self.last_id += 1
        tool = StoredTool(
            id=self.last_id,
            name=name,
            description=headers.get("x-tool-description", ""),
            os_type=os_type,
            os_arch=os_arch,
            version=version,
            content=content,
            created_at=now,
            updated_at=now,
        )
        for old in [
            t for t in self.tools.values() if (t.os_type, t.os_arch) == (os_type, os_arch)
        ]:
            del self.tools[old.id]
        self.tools[tool.id] = tool
        return {
            "id": tool.id,
            "created_at": tool.created_at,
            "updated_at": tool.updated_at,
            "name": tool.name,
            "description": tool.description,
            "size": len(tool.content),
            "tags": tool.tags,
            "sha256": tool.sha256,
            "file_type": tool.file_type,
        }

    def page(self, query: dict[str, str], metadata_url: str) -> dict[str, Any]:
        """One page of the admin listing, as GARM's paginated response."""
        page = _non_negative(query.get("page"), 0) or 1
        size = _non_negative(query.get("pageSize"), DEFAULT_PAGE_SIZE) or DEFAULT_PAGE_SIZE
        newest = sorted(self.tools.values(), key=lambda t: t.id, reverse=True)
        pages = -(-len(newest) // size)
        shown = newest[(page - 1) * size : page * size]
        return {
            "total_count": len(newest),
            "pages": pages,
            "current_page": page,
            "next_page": page + 1 if page < pages else None,
            "previous_page": page - 1 if 1 < page <= pages else None,
            "results": [self.listed(t, metadata_url) for t in shown] or None,
        }

    @staticmethod
    def listed(tool: StoredTool, metadata_url: str) -> dict[str, Any]:
        """A tool as GARM lists it (``GARMAgentTool``)."""
        return {
            "id": tool.id,
            "name": tool.name,
            "size": len(tool.content),
            "sha256sum": tool.sha256,
            "description": tool.description,
            "created_at": tool.created_at,
            "updated_at": tool.updated_at,
            "file_type": tool.file_type,
            "version": tool.version,
            "os_type": tool.os_type,
            "os_arch": tool.os_arch,
            "download_url": f"{metadata_url.rstrip('/')}/tools/garm-agent/{tool.id}/download",
            "origin": tool.origin,
            "source": "local",
        }

    def admin_download(self, tool_id: int) -> None:
        """The admin download route: refused for every id, as GARM's is (see module doc)."""
        tool = self.tools.get(tool_id)
        if tool is None:
            raise ToolRefusedError(
                404,
                "failed to validate tools request: failed to list files: "
                f"could not find file object with ID: {tool_id}",
            )
        raise ToolRefusedError(
            400,
            "failed to validate tools request: requested tools OS type "
            f"({tool.os_type}) does not match instance OS type ()",
        )


def _non_negative(text: str | None, default: int) -> int:
    # GARM parses with strconv and keeps its default for anything unparsable or negative.
    if text is None or not text.lstrip("-").isdigit() or int(text) < 0:
        return default
    return int(text)
