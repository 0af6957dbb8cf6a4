"""Configurator databags and secrets the configurator parse tests share (no test here)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping

import pytest

from relations.configurator_contract import provider_name_for_unit
from relations.configurator_parser import parse_configurator_units
from tests.rsa_keys import pkcs1_pem
from vocabulary.desired_state import ConfiguratorInputs, UnitData

PASSWORD = "os-pw-Xq7!never-logged"
PRIVATE_KEY = pkcs1_pem(0)
OTHER_KEY = pkcs1_pem(1)
# A line of the key's body: it must never reach a log or a repr.
KEY_BODY_LINE = PRIVATE_KEY.splitlines()[1]
PLAINTEXT_PASSWORD = "legacy-plain-pw-never-logged"
SECRET_VALUES = (PASSWORD, PRIVATE_KEY, OTHER_KEY, PLAINTEXT_PASSWORD, KEY_BODY_LINE)

SECRETS = {"secret:pw": PASSWORD, "secret:key": PRIVATE_KEY, "secret:other": OTHER_KEY}

SCALESET = {
    "name": "small",
    "provider_name": "garm-configurator-0",
    "image_id": "img-123",
    "flavor": "m1.small",
    "os_arch": "amd64",
    "min_idle_runner": "1",
    "max_runner": "4",
    "labels": "noble,x64",
    "org": "canonical",
}
PROVIDER = {
    "openstack_auth_url": "https://keystone.example:5000/v3",
    "openstack_username": "runner-user",
    "openstack_password_secret_uri": "secret:pw",
    "openstack_project_name": "runners",
    "openstack_user_domain_name": "Default",
    "openstack_project_domain_name": "Default",
    "openstack_region_name": "RegionOne",
    "openstack_network": "runner-net",
}
GITHUB = {
    "github_app_id": "11",
    "github_installation_id": "22",
    "github_private_key_secret_uri": "secret:key",
}
FULL = {**SCALESET, **PROVIDER, **GITHUB}
# A tmate server as the debug-ssh relation publishes it.
SSH = {
    "host": "tmate.example",
    "port": "10022",
    "rsa_fingerprint": "SHA256:rsa",
    "ed25519_fingerprint": "SHA256:ed",
}


def unit(data: Mapping[str, str], name: str = "garm-configurator/0", rid: int = 1) -> UnitData:
    """One unit's data, its scale set on this unit's own provider.

    A scale set naming the default provider names this unit's instead, as a configurator names
    the provider its own unit publishes.
    """
    data = dict(data)
    own = provider_name_for_unit(name)
    if own and data.get("provider_name") == SCALESET["provider_name"]:
        data["provider_name"] = own
    return UnitData(relation_id=rid, unit_name=name, data=data)


def parse(*units: UnitData, secrets: Mapping[str, str] = SECRETS) -> ConfiguratorInputs:
    return parse_configurator_units(units, secrets.get)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.fixture(autouse=True)
def no_secret_in_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fail any test whose run logged a secret value."""
    caplog.set_level(logging.DEBUG)
    yield
    for record in caplog.get_records("call"):
        text = record.getMessage()
        for secret in SECRET_VALUES:
            assert secret not in text, f"secret value logged: {text!r}"
