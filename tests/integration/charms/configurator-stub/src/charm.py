#!/usr/bin/env python3
"""Test stand-in for a garm-configurator and a debug-ssh provider.

Every unit writes the ``unit-data`` option's keys into its unit databag on each
``garm-configurator`` relation, plus the URIs of two leader-owned secrets (OpenStack password,
GitHub private key) granted to that relation. On ``debug-ssh`` relations every unit publishes
the tmate server settings from its ``debug-ssh-*`` options. Nothing here is production code.
"""

from __future__ import annotations

import json
import logging

import ops

logger = logging.getLogger(__name__)

CONFIGURATOR = "garm-configurator"
DEBUG_SSH = "debug-ssh"
# Keys Juju itself writes into every unit databag; the stub leaves them alone.
JUJU_KEYS = frozenset({"egress-subnets", "ingress-address", "private-address"})
# (config option, secret label, databag key of the URI)
SECRETS = (
    ("openstack-password", "stub-openstack-password", "openstack_password_secret_uri"),
    ("github-private-key", "stub-github-private-key", "github_private_key_secret_uri"),
)
DEBUG_SSH_OPTIONS = (
    ("debug-ssh-host", "host"),
    ("debug-ssh-port", "port"),
    ("debug-ssh-rsa-fingerprint", "rsa_fingerprint"),
    ("debug-ssh-ed25519-fingerprint", "ed25519_fingerprint"),
)


class InvalidUnitDataError(ValueError):
    """The ``unit-data`` option is not a JSON object of strings."""


class ConfiguratorStubCharm(ops.CharmBase):
    """Publishes relation data taken from config, for the garm integration tests."""

    def __init__(self, framework: ops.Framework) -> None:
        super().__init__(framework)
        events = [self.on.config_changed, self.on.leader_elected, self.on.upgrade_charm]
        for endpoint in (CONFIGURATOR, DEBUG_SSH):
            events += [self.on[endpoint].relation_joined, self.on[endpoint].relation_changed]
        for event in events:
            framework.observe(event, self._publish)

    def _publish(self, _: ops.EventBase) -> None:
        try:
            data = self._unit_data()
        except InvalidUnitDataError as exc:
            self.unit.status = ops.BlockedStatus(str(exc))
            return
        for relation in self.model.relations[CONFIGURATOR]:
            _replace_databag(relation.data[self.unit], {**data, **self._secret_uris(relation)})
        tmate = {key: str(self.config[option]) for option, key in DEBUG_SSH_OPTIONS}
        for relation in self.model.relations[DEBUG_SSH]:
            _replace_databag(relation.data[self.unit], tmate)
        self.unit.status = ops.ActiveStatus()

    def _unit_data(self) -> dict[str, str]:
        try:
            data = json.loads(str(self.config["unit-data"]) or "{}")
        except json.JSONDecodeError:
            raise InvalidUnitDataError("unit-data is not valid JSON") from None
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str)
            for k, v in data.items()  # type: ignore[union-attr]
        ):
            raise InvalidUnitDataError("unit-data must be a JSON object of strings")
        return dict(data)  # type: ignore[arg-type]

    def _secret_uris(self, relation: ops.Relation) -> dict[str, str]:
        """Store the secret options in leader-owned secrets granted to ``relation``."""
        if not self.unit.is_leader():
            return {}
        uris: dict[str, str] = {}
        for option, label, key in SECRETS:
            value = str(self.config[option])
            if not value:
                continue
            secret = self._ensure_secret(label, value)
            secret.grant(relation)
            uri = secret.id or secret.get_info().id
            uris[key] = uri
        return uris

    def _ensure_secret(self, label: str, value: str) -> ops.Secret:
        content = {"value": value}
        try:
            secret = self.model.get_secret(label=label)
        except ops.SecretNotFoundError:
            logger.info("creating secret %s", label)
            return self.app.add_secret(content, label=label)
        if secret.get_content(refresh=True) != content:
            logger.info("updating secret %s", label)
            secret.set_content(content)
        return secret


def _replace_databag(bag: ops.RelationDataContent, data: dict[str, str]) -> None:
    """Make ``bag`` hold exactly ``data`` (besides Juju's own keys)."""
    for key in list(bag):
        if key not in JUJU_KEYS and key not in data:
            del bag[key]
    bag.update(data)


if __name__ == "__main__":  # pragma: nocover
    ops.main(ConfiguratorStubCharm)
