"""Desired state of the charm, parsed once from relation data into frozen objects.

Everything the reconcilers work on is defined here. This module knows about Juju (it reads
relation databags and secrets) but nothing about GARM's API.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

RUNNER_OPTION_DATABAG_KEYS = (
    "dockerhub_mirror",
    "runner_http_proxy",
    "aproxy_exclude_addresses",
    "aproxy_redirect_ports",
    "otel_collector_endpoint",
    "pre_job_script",
)

_PORT_TOKEN = re.compile(r"^\d{1,5}(-\d{1,5})?$")
_MAX_PORT = 65535


@dataclass(frozen=True)
class RunnerConfig:
    """Per-scale-set runner options, re-sanitised from untrusted relation data.

    Every field is a string; an empty string means the option is unset.
    """

    dockerhub_mirror: str = ""
    runner_http_proxy: str = ""
    aproxy_exclude_addresses: str = ""
    aproxy_redirect_ports: str = ""
    otel_collector_endpoint: str = ""
    pre_job_script: str = ""

    @classmethod
    def from_databag(cls, data: Mapping[str, str]) -> RunnerConfig:
        """Build the options from a configurator unit databag, dropping unsafe values.

        Args:
            data: the remote unit databag.

        Returns:
            The sanitised options.
        """
        raw = {key: (data.get(key) or "").strip() for key in RUNNER_OPTION_DATABAG_KEYS}
        return cls(
            dockerhub_mirror=_strip_newlines(raw["dockerhub_mirror"]),
            runner_http_proxy=_strip_newlines(raw["runner_http_proxy"]),
            aproxy_exclude_addresses=_ipv4_networks(raw["aproxy_exclude_addresses"]),
            aproxy_redirect_ports=_port_ranges(raw["aproxy_redirect_ports"]),
            otel_collector_endpoint=_strip_newlines(raw["otel_collector_endpoint"]),
            pre_job_script=raw["pre_job_script"],
        )

    def has_config(self) -> bool:
        """Tell whether any option is set, which means the scale set needs its own template."""
        return any(getattr(self, key) for key in RUNNER_OPTION_DATABAG_KEYS)


def _strip_newlines(value: str) -> str:
    return value.replace("\r", "").replace("\n", "")


def _port_ranges(value: str) -> str:
    kept: list[str] = []
    for token in (t.strip() for t in value.split(",")):
        if not _PORT_TOKEN.match(token):
            continue
        first, _, last = token.partition("-")
        low, high = int(first), int(last or first)
        if 1 <= low <= high <= _MAX_PORT:
            kept.append(token)
    return ",".join(kept)


def _ipv4_networks(value: str) -> str:
    kept: list[str] = []
    for token in (t.strip() for t in value.split(",")):
        try:
            network = ipaddress.ip_network(token, strict=False)
        except ValueError:
            continue
        if network.version == 4:
            kept.append(token)
    return ",".join(kept)


@dataclass(frozen=True)
class ProviderConfig:
    """One OpenStack provider, named after the configurator unit that published it.

    The field set is exactly the entrypoint's ``PROVIDER_REQUIRED_FIELDS``.
    """

    unit_name: str
    network: str
    auth_url: str
    username: str
    password: str = field(repr=False)
    project_name: str
    user_domain_name: str
    project_domain_name: str
    region_name: str

    def as_dict(self) -> dict[str, str]:
        """Return the provider as the plain mapping published to the workload."""
        return {
            "unit_name": self.unit_name,
            "network": self.network,
            "auth_url": self.auth_url,
            "username": self.username,
            "password": self.password,
            "project_name": self.project_name,
            "user_domain_name": self.user_domain_name,
            "project_domain_name": self.project_domain_name,
            "region_name": self.region_name,
        }


@dataclass(frozen=True)
class CredentialSpec:
    """A GitHub App credential the charm keeps in GARM."""

    name: str
    endpoint: str
    app_id: int
    installation_id: int
    private_key: str = field(repr=False)
    description: str


@dataclass(frozen=True)
class EntitySpec:
    """An organisation or repository registered in GARM with one credential."""

    entity_type: str  # "organization" or "repository"
    entity_name: str  # org name, or "owner/repo"
    credentials_name: str


@dataclass(frozen=True)
class ScalesetSpec:
    """One logical scale set as a configurator describes it.

    ``name`` is the logical name; the live name in GARM adds a hash of the labels.
    """

    name: str
    provider_name: str
    image: str
    flavor: str
    os_arch: str
    min_idle_runners: int
    max_runners: int
    entity_type: str
    entity_name: str
    labels: tuple[str, ...] = ()
    runner_group: str = ""
    pre_install_scripts: Mapping[str, str] = field(default_factory=dict[str, str])
    os_type: str = "linux"
    template_id: int = 0
    runner_config: RunnerConfig = field(default_factory=RunnerConfig)


@dataclass(frozen=True)
class DebugSshConnection:
    """A tmate server published over the debug-ssh relation."""

    host: str
    port: int
    rsa_fingerprint: str
    ed25519_fingerprint: str
