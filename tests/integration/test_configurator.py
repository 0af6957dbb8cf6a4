"""garm with a stand-in configurator: the empty-relation gate and provider registration.

Uses the test charm in ``charms/configurator-stub`` deployed as ``configurator-stub``. The
OpenStack endpoint it publishes points at the pod's loopback, so no cloud is contacted; GARM
only loads the provider configuration. See ``test_bootstrap.py`` for how to run.
"""

from __future__ import annotations

import json
from pathlib import Path

import jubilant

from tests.integration import helpers
from tests.integration.helpers import AdminCredentials

STUB = "configurator-stub"
PROVIDER = "configurator-stub-0"
PROVIDER_DATA = {
    "openstack_auth_url": "http://127.0.0.1:5000/v3",
    "openstack_username": "stub-user",
    "openstack_project_name": "stub-project",
    "openstack_user_domain_name": "Default",
    "openstack_project_domain_name": "Default",
    "openstack_region_name": "RegionOne",
    "openstack_network": "stub-network",
}


def _idle(status: jubilant.Status) -> bool:
    return jubilant.all_agents_idle(status, helpers.APP, STUB) and jubilant.all_active(
        status, STUB
    )


def test_configurator_that_published_nothing_keeps_garm_waiting(
    juju: jubilant.Juju, admin: AdminCredentials, stub_charm: Path
) -> None:
    templates_before = helpers.templates_by_name(juju, admin)
    juju.deploy(stub_charm, STUB, config={"unit-data": "{}"})
    juju.wait(lambda s: jubilant.all_active(s, STUB), error=jubilant.any_error)
    juju.integrate(f"{helpers.APP}:garm-configurator", f"{STUB}:garm-configurator")

    status = juju.wait(
        lambda s: _idle(s) and "garm-configurator" in s.apps[helpers.APP].relations,
        error=jubilant.any_error,
    )

    assert helpers.app_message(status) == ("waiting", helpers.WAITING_CONFIGURATOR)
    # The gate skipped the reconcile chain, so nothing in GARM was pruned.
    assert helpers.templates_by_name(juju, admin) == templates_before


def test_published_provider_is_registered_in_garm(
    juju: jubilant.Juju, admin: AdminCredentials
) -> None:
    juju.config(
        STUB,
        {"unit-data": json.dumps(PROVIDER_DATA), "openstack-password": "stub-password"},
    )

    status = juju.wait(
        lambda s: _idle(s) and helpers.app_message(s)[0] == "active", error=jubilant.any_error
    )
    environment = helpers.garm_service_environment(juju)
    # Keep only the provider names: the JSON also holds the OpenStack password.
    names = [p.get("unit_name") for p in json.loads(environment.get("GARM_PROVIDERS_JSON", "[]"))]
    mode = helpers.in_garm_container(juju, f"stat -c %a /etc/garm/provider-{PROVIDER}.toml")
    clouds_mode = helpers.in_garm_container(juju, f"stat -c %a /etc/garm/clouds-{PROVIDER}.yaml")
    providers = helpers.garm_get(juju, "/api/v1/providers", admin)

    assert helpers.app_message(status)[0] == "active"
    assert names == [PROVIDER]
    assert mode.strip() == "600"
    assert clouds_mode.strip() == "600"
    assert providers.status == 200
    assert PROVIDER in [p.get("name") for p in providers.body or []]


def test_charmed_template_survives_a_published_configurator(
    juju: jubilant.Juju, admin: AdminCredentials
) -> None:
    templates = helpers.templates_by_name(juju, admin)

    assert helpers.CHARMED_TEMPLATE in templates
    assert helpers.BASE_TEMPLATE in templates
