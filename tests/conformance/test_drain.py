"""What GARM does to a scale set the charm retires, measured on both backends.

The charm's drain deadline counts from a disabled scale set's ``updated_at``, trusting that
nothing but the charm's own disable moves it. These tests hold GARM to that while its own
workers act on the scale set: a runner comes up, the scale set is disabled and zeroed as the
charm retires it, GARM reaps the idle runner.
"""

from __future__ import annotations

import base64
from typing import Any

from garm import (
    CreateCredentialParams,
    CreateScaleSetParams,
    GarmClient,
    GithubApp,
    UpdateScaleSetParams,
)
from tests.conformance.backends import wait_for
from tests.conformance.conftest import PROVIDER_NAME, Garm
from tests.rsa_keys import pkcs1_pem
from vocabulary.desired_state import MANAGED_CREDENTIAL_DESCRIPTION

SCALESET = "drain-me-1a2b3c4d"


def _seed_scaleset(client: GarmClient, min_idle: int, name: str = SCALESET) -> int:
    """Credentials, an organisation and its enabled scale set ``name``; return its id."""
    key = base64.b64encode(pkcs1_pem().encode()).decode()
    app = GithubApp(app_id=11, installation_id=22, private_key_bytes=key)
    client.create_credential(
        CreateCredentialParams(
            name="app-11-22",
            description=MANAGED_CREDENTIAL_DESCRIPTION,
            endpoint="github.com",
            app=app,
        )
    )
    org = client.create_organization("drain-org", "app-11-22", "a1" * 32)
    assert org.id is not None
    created = client.create_org_scaleset(
        org.id,
        CreateScaleSetParams(
            name=name,
            provider_name=PROVIDER_NAME,
            image="ubuntu-24.04",
            flavor="m1.small",
            os_type="linux",
            os_arch="amd64",
            max_runners=2,
            min_idle_runners=min_idle,
            enabled=True,
            labels=["linux"],
        ),
    )
    assert created.id is not None
    return created.id


def _idle_runner(garm: Garm) -> dict[str, Any] | None:
    runners = garm.instances(SCALESET)
    return next((r for r in runners if r.get("runner_status") == "idle"), None)


def test_disabled_scaleset_keeps_its_updated_at_while_garm_reaps_its_runner(
    ready_garm: Garm, client: GarmClient
):
    scaleset_id = _seed_scaleset(client, min_idle=1)
    wait_for(ready_garm, "an idle runner of the new scale set", lambda: _idle_runner(ready_garm))

    # As the charm retires a replaced generation.
    disabled = client.update_scaleset(
        scaleset_id, UpdateScaleSetParams(enabled=False, min_idle_runners=0, max_runners=0)
    )
    assert disabled.enabled is None  # GARM omits false
    disabled_at = disabled.updated_at
    assert disabled_at is not None

    wait_for(
        ready_garm, "GARM to reap the idle runner", lambda: not ready_garm.instances(SCALESET)
    )
    ready_garm.settle()
    (listed,) = [s for s in client.list_scalesets() if s.name == SCALESET]
    assert listed.updated_at == disabled_at
    assert listed.enabled is None
