"""A scale set's runner options, and the port and IPv4 parsing they share with the templates.

Owns :class:`RunnerConfig` (the options a configurator sets per scale set, re-sanitised from
untrusted relation data) and the single parser of port ranges and IPv4 networks, which
``runner_template`` uses again when it renders the aproxy script. Owns the port bound
:data:`MAX_PORT` too. Pure: must not import ops, the GARM client or any other charm module.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

RUNNER_OPTION_DATABAG_KEYS = (
    "dockerhub_mirror",
    "runner_http_proxy",
    "aproxy_exclude_addresses",
    "aproxy_redirect_ports",
    "otel_collector_endpoint",
    "pre_job_script",
)

# The highest TCP port. The entrypoint, which runs in the container alone, has its own copy;
# tests/unit/test_workload.py pins the two equal.
MAX_PORT = 65535
_PORT_TOKEN = re.compile(r"^(\d{1,5})(?:-(\d{1,5}))?$")


@dataclass(frozen=True)
class RunnerConfig:
    """Per-scale-set runner options, re-sanitised from untrusted relation data.

    Every field is a string; an empty string means the option is unset.
    """

    dockerhub_mirror: str = ""
    # A proxy URL may carry credentials and a script may embed tokens: keep both out of repr.
    runner_http_proxy: str = field(default="", repr=False)
    aproxy_exclude_addresses: str = ""
    aproxy_redirect_ports: str = ""
    otel_collector_endpoint: str = ""
    pre_job_script: str = field(default="", repr=False)

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
            aproxy_exclude_addresses=",".join(
                token for token, _ in ipv4_networks(raw["aproxy_exclude_addresses"])
            ),
            aproxy_redirect_ports=",".join(
                token for token, _ in port_ranges(raw["aproxy_redirect_ports"])
            ),
            otel_collector_endpoint=_strip_newlines(raw["otel_collector_endpoint"]),
            pre_job_script=raw["pre_job_script"],
        )

    def has_config(self) -> bool:
        """Tell whether any option is set, which means the scale set needs its own template."""
        return any(getattr(self, key) for key in RUNNER_OPTION_DATABAG_KEYS)


def port_ranges(value: str) -> Iterator[tuple[str, tuple[int, int]]]:
    """Yield each valid ``port`` or ``low-high`` token of a comma-separated list.

    Args:
        value: the list as the operator wrote it.

    Yields:
        The stripped token and its ``(low, high)`` range, for tokens within 1..MAX_PORT with
        ``low <= high``; every other token is dropped.
    """
    for token in (t.strip() for t in value.split(",")):
        match = _PORT_TOKEN.match(token)
        if not match:
            continue
        low = int(match.group(1))
        high = int(match.group(2) or low)
        if 1 <= low <= high <= MAX_PORT:
            yield token, (low, high)


def ipv4_networks(value: str) -> Iterator[tuple[str, ipaddress.IPv4Network]]:
    """Yield each IPv4 address or network of a comma-separated list.

    Args:
        value: the list as the operator wrote it.

    Yields:
        The stripped token and its network (host bits allowed); IPv6 and unparsable tokens
        are dropped.
    """
    for token in (t.strip() for t in value.split(",")):
        try:
            network = ipaddress.ip_network(token, strict=False)
        except ValueError:
            continue
        if isinstance(network, ipaddress.IPv4Network):
            yield token, network


def _strip_newlines(value: str) -> str:
    return value.replace("\r", "").replace("\n", "")
