"""Real GARM runs garm-provider-openstack through the provider shim, as the image does.

GARM hands the provider ``<scale set name>-<entity UUID>`` as the pool ID of a scale-set runner,
the provider tags the server ``garm-pool-id=<pool id>``, and Nova refuses a tag over 60
characters; the provider stand-in refuses it as Nova does. A scale set named like the
operators' (``ubuntu-noble-x64-large``) gets runners only through the shim. Real GARM only:
the emulator has no provider.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from container_scripts.provider_shim import POOL_TAG_PREFIX, nova_pool_id
from garm import GarmClient, UpdateScaleSetParams
from tests.conformance.backends import wait_for
from tests.conformance.conftest import (
    ADMIN_PASSWORD,
    ADMIN_USERNAME,
    PROVIDER_NAME,
    real_garm_with_provider,
)
from tests.conformance.test_drain import _seed_scaleset
from tests.github_standin import GitHubStandin
from tests.real_garm.harness import SKIP_REASON, RealGarm, garm_binary

SCALESET = "ubuntu-noble-x64-large"


@pytest.fixture
def github() -> Iterator[GitHubStandin]:
    with GitHubStandin() as standin:
        yield standin


def _garm(tmp_path: Path, github: GitHubStandin, shim: bool) -> Iterator[RealGarm]:
    if garm_binary() is None:
        pytest.skip(SKIP_REASON)
    for real in real_garm_with_provider(tmp_path, github, shim=shim):
        real.bootstrap(ADMIN_USERNAME, ADMIN_PASSWORD, urls=True)
        yield real


@pytest.fixture
def with_shim(tmp_path: Path, github: GitHubStandin) -> Iterator[RealGarm]:
    """Real GARM running the provider stand-in through the shim, as in the image."""
    yield from _garm(tmp_path, github, shim=True)


@pytest.fixture
def without_shim(tmp_path: Path, github: GitHubStandin) -> Iterator[RealGarm]:
    """Real GARM running the provider stand-in directly (an image without the shim)."""
    yield from _garm(tmp_path, github, shim=False)


def _client(garm: RealGarm) -> GarmClient:
    client = GarmClient(garm.url)
    client.login(ADMIN_USERNAME, ADMIN_PASSWORD)
    return client


def _pool_id(client: GarmClient) -> str:
    """GARM's pool ID for the scale set's runners: ``<scale set name>-<entity UUID>``."""
    (org,) = client.list_organizations()
    pool_id = f"{SCALESET}-{org.id}"
    assert len(POOL_TAG_PREFIX + pool_id) > 60
    return pool_id


def _runner(garm: RealGarm, **wanted: str) -> dict[str, Any] | None:
    runners = garm.instances(SCALESET)
    return next((r for r in runners if wanted.items() <= r.items()), None)


def _calls(garm: RealGarm, command: str) -> list[dict[str, Any]]:
    return [call for call in garm.provider_calls() if call["command"] == command]


def test_a_long_scaleset_name_gets_an_idle_runner_through_the_shim(with_shim: RealGarm):
    garm = with_shim
    with _client(garm) as client:
        scaleset_id = _seed_scaleset(client, min_idle=1, name=SCALESET)
        pool_id = _pool_id(client)
        idle = wait_for(garm, "an idle runner", lambda: _runner(garm, runner_status="idle"))
        assert "provider_fault" not in idle

        # The provider saw the derived pool ID, never GARM's.
        mapped = nova_pool_id(pool_id)
        assert mapped != pool_id
        creates = _calls(garm, "CreateInstance")
        assert [(c["pool_id"], c["exit_code"]) for c in creates] == [(mapped, 0)]
        # GARM's runner consolidation (every 5 minutes) lists the pool by GARM's pool ID and
        # deletes a runner the provider does not list: run that listing as GARM runs it.
        listed = garm.run_provider(PROVIDER_NAME, "ListInstances", GARM_POOL_ID=pool_id)
        assert listed.returncode == 0, listed.stderr
        assert [i["name"] for i in json.loads(listed.stdout)] == [idle["name"]]
        assert _calls(garm, "ListInstances")[-1]["pool_id"] == mapped

        # And the runner can be removed again: GARM reaps it, the provider deletes the server.
        client.update_scaleset(scaleset_id, UpdateScaleSetParams(min_idle_runners=0))
        wait_for(garm, "GARM to reap the runner", lambda: not garm.instances(SCALESET))
    deletes = _calls(garm, "DeleteInstance")
    assert deletes
    assert all(c["exit_code"] == 0 for c in deletes)
    assert garm.provider_servers() == []


def test_without_the_shim_the_runner_fails_with_nova_tag_refusal(without_shim: RealGarm):
    garm = without_shim
    with _client(garm) as client:
        _seed_scaleset(client, min_idle=1, name=SCALESET)
        pool_id = _pool_id(client)
    failed = wait_for(garm, "a runner in error with a provider fault", lambda: _faulted(garm))
    fault = base64.b64decode(failed["provider_fault"]).decode()
    tag = POOL_TAG_PREFIX + pool_id
    assert f"Invalid input for field/attribute 0. Value: {tag}. '{tag}' is too long" in fault
    assert fault.startswith(
        f"creating instance in provider: provider binary {garm.provider_binary} returned error: "
        "provider binary failed with stdout: ; stderr: failed to run command: failed to create "
        "instance in provider: failed to create server: failed to create server: Bad request"
    )
    assert fault.endswith(": exit status 1")
    assert garm.provider_servers() == []


def _faulted(garm: RealGarm) -> dict[str, Any] | None:
    runners = garm.instances(SCALESET)
    return next((r for r in runners if r["status"] == "error" and r.get("provider_fault")), None)
