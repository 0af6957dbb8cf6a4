"""GARM's garm-agent tool store, agent mode on entities and the shell flag on scale sets.

Pinned on both backends through raw HTTP and through the charm's client. What the charm relies
on: an upload replaces every other tool of its OS and architecture; the listing carries each
tool's ``sha256sum`` and ``version``; ``agent_mode`` is set on create and switched by an update
that names it alone; ``enable_shell`` is kept by an update that does not name it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from garm import GarmApiError, GarmClient, UpdateScaleSetParams
from tests.conformance.conftest import ADMIN_PASSWORD, ADMIN_USERNAME, Garm
from tests.conformance.test_client import WEBHOOK_SECRET, app_credential, scaleset_params

TOOLS = "/tools/garm-agent"
LISTED_KEYS = {
    "id",
    "name",
    "size",
    "sha256sum",
    "description",
    "created_at",
    "updated_at",
    "file_type",
    "version",
    "os_type",
    "os_arch",
    "download_url",
    "origin",
    "source",
}


def tool_headers(arch: str = "amd64", version: str = "v0.1.0", **overrides: str) -> dict[str, str]:
    return {
        "X-Tool-Name": f"garm-agent-linux-{arch}",
        "X-Tool-OS-Type": "linux",
        "X-Tool-OS-Arch": arch,
        "X-Tool-Version": version,
        **overrides,
    }


@pytest.fixture
def admin(client: GarmClient, ready_garm: Garm) -> Iterator[httpx.Client]:
    """Raw HTTP to GARM's API as the admin, through the proxy."""
    token = client.login(ADMIN_USERNAME, ADMIN_PASSWORD)
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=ready_garm.url, headers=headers, timeout=30) as http:
        yield http


def refusal(response: httpx.Response) -> tuple[int, Any]:
    return response.status_code, response.json()


def test_uploads_keep_the_newest_tool_per_os_and_arch(admin: httpx.Client, ready_garm: Garm):
    empty = admin.get(TOOLS)
    assert (empty.status_code, empty.json()) == (
        200,
        {"total_count": 0, "pages": 0, "current_page": 1, "results": None},
    )

    missing = {k: v for k, v in tool_headers().items() if k != "X-Tool-Version"}
    assert refusal(admin.post(TOOLS, content=b"x", headers=missing)) == (
        400,
        {
            "error": "Bad Request",
            "details": "missing required headers: X-Tool-Name, X-Tool-OS-Type, X-Tool-OS-Arch,"
            " X-Tool-Version",
        },
    )
    bad_os = tool_headers(**{"X-Tool-OS-Type": "darwin"})
    assert refusal(admin.post(TOOLS, content=b"x", headers=bad_os)) == (
        400,
        {"error": "Bad Request", "details": "invalid os_type: must be 'windows' or 'linux'"},
    )
    bad_arch = tool_headers(arch="s390x")
    assert refusal(admin.post(TOOLS, content=b"x", headers=bad_arch)) == (
        400,
        {"error": "Bad Request", "details": "invalid os_arch: must be 'amd64' or 'arm64'"},
    )
    assert admin.get(TOOLS).json()["total_count"] == 0

    first = admin.post(TOOLS, content=b"amd64 v1", headers=tool_headers())
    assert first.status_code == 200
    stored = first.json()
    assert set(stored) == {
        "id",
        "created_at",
        "updated_at",
        "name",
        "size",
        "tags",
        "sha256",
        "file_type",
    }
    assert (stored["name"], stored["size"], stored["sha256"]) == (
        "garm-agent-linux-amd64",
        8,
        hashlib.sha256(b"amd64 v1").hexdigest(),
    )
    assert stored["tags"] == [
        "category=garm-agent",
        "os_type=linux",
        "os_arch=amd64",
        "version=v0.1.0",
        "origin=manual",
    ]
    second = admin.post(TOOLS, content=b"amd64 v2", headers=tool_headers(version="v0.2.0"))
    arm = admin.post(TOOLS, content=b"arm64 v1", headers=tool_headers(arch="arm64"))
    assert second.status_code == arm.status_code == 200

    listing = admin.get(TOOLS)
    assert listing.status_code == 200
    page = listing.json()
    assert {k: v for k, v in page.items() if k != "results"} == {
        "total_count": 2,
        "pages": 1,
        "current_page": 1,
    }
    tools = page["results"]
    assert all(set(tool) == LISTED_KEYS for tool in tools)
    # Newest first; the first amd64 upload is gone.
    assert [(t["id"], t["os_arch"], t["version"], t["sha256sum"]) for t in tools] == [
        (arm.json()["id"], "arm64", "v0.1.0", hashlib.sha256(b"arm64 v1").hexdigest()),
        (second.json()["id"], "amd64", "v0.2.0", hashlib.sha256(b"amd64 v2").hexdigest()),
    ]
    metadata_url = ready_garm.controller()["metadata_url"]
    assert [t["download_url"] for t in tools] == [
        f"{metadata_url}/tools/garm-agent/{t['id']}/download" for t in tools
    ]
    assert {(t["origin"], t["source"], t["os_type"]) for t in tools} == {
        ("manual", "local", "linux")
    }

    one = admin.get(TOOLS, params={"page": 1, "pageSize": 1}).json()
    two = admin.get(TOOLS, params={"page": 2, "pageSize": 1}).json()
    assert {k: v for k, v in one.items() if k != "results"} == {
        "total_count": 2,
        "pages": 2,
        "current_page": 1,
        "next_page": 2,
    }
    assert {k: v for k, v in two.items() if k != "results"} == {
        "total_count": 2,
        "pages": 2,
        "current_page": 2,
        "previous_page": 1,
    }
    assert [t["id"] for t in one["results"] + two["results"]] == [t["id"] for t in tools]

    # The admin download route checks the tool against a runner the admin is not.
    gone = admin.get(f"{TOOLS}/{first.json()['id']}/download")
    assert refusal(gone) == (
        404,
        {
            "error": "Not Found",
            "details": "failed to validate tools request: failed to list files: could not find"
            f" file object with ID: {first.json()['id']}",
        },
    )
    kept = admin.get(f"{TOOLS}/{second.json()['id']}/download")
    assert kept.status_code == 400


def test_client_lists_and_uploads_tools(client: GarmClient, ready_garm: Garm):
    assert client.list_tools() == []
    stored = client.upload_tool(
        name="garm-agent-linux-arm64",
        os_type="linux",
        os_arch="arm64",
        version="v1.2.3",
        data=b"\x7fELF arm64",
    )
    assert stored.sha256 == hashlib.sha256(b"\x7fELF arm64").hexdigest()
    [listed] = client.list_tools()
    assert (listed.os_type, listed.os_arch, listed.version, listed.sha256sum, listed.size) == (
        "linux",
        "arm64",
        "v1.2.3",
        stored.sha256,
        len(b"\x7fELF arm64"),
    )
    with pytest.raises(GarmApiError) as refused:
        client.upload_tool(
            name="garm-agent", os_type="linux", os_arch="riscv64", version="v1", data=b"x"
        )
    assert (refused.value.status, refused.value.details) == (
        400,
        "invalid os_arch: must be 'amd64' or 'arm64'",
    )
    calls = [(c.method, c.path, c.query, c.status) for c in ready_garm.requests]
    page = {"page": "1", "pageSize": "100"}
    assert calls == [
        ("GET", TOOLS, page, 200),
        ("POST", TOOLS, {}, 200),
        ("GET", TOOLS, page, 200),
        ("POST", TOOLS, {}, 400),
    ]


def test_agent_mode_on_entities_and_the_shell_flag_on_scale_sets(
    client: GarmClient, ready_garm: Garm
):
    client.create_credential(app_credential("agent-cred"))
    org = client.create_organization("agent-org", "agent-cred", WEBHOOK_SECRET, agent_mode=True)
    repo = client.create_repository("agent-org", "repo", "agent-cred", WEBHOOK_SECRET)
    assert (org.agent_mode, repo.agent_mode) == (True, False)
    assert org.id and repo.id
    assert client.update_organization(org.id, agent_mode=False).agent_mode is False
    assert client.update_repository(repo.id, agent_mode=True).agent_mode is True
    # An update that does not name agent_mode leaves it.
    assert client.update_repository(repo.id, credentials_name="agent-cred").agent_mode is True
    listed = {o.name: o.agent_mode for o in client.list_organizations()}
    assert listed == {"agent-org": False}
    assert [r.agent_mode for r in client.list_repositories()] == [True]

    created = client.create_org_scaleset(org.id, scaleset_params("shell-set", enable_shell=True))
    assert created.enable_shell is True and created.id is not None
    kept = client.update_scaleset(created.id, UpdateScaleSetParams(max_runners=3))
    assert (kept.enable_shell, kept.max_runners) == (True, 3)
    off = client.update_scaleset(created.id, UpdateScaleSetParams(enable_shell=False))
    assert off.enable_shell is False
    plain = client.create_org_scaleset(org.id, scaleset_params("plain"))
    assert plain.enable_shell is False
    bodies = [c.body for c in ready_garm.writes() if c.method == "PUT"]
    assert bodies[:3] == [
        {"agent_mode": False},
        {"agent_mode": True},
        {"credentials_name": "agent-cred"},
    ]
