"""A scale set's runner options, parsed once from untrusted relation data into typed values.

Owns :class:`RunnerConfig` (the options a configurator sets per scale set), :class:`IPv4Range`,
the one parse of the aproxy redirect ports and exclusions (``runner_template`` merges and
renders the parsed values without parsing them again) and the port bound :data:`MAX_PORT`.
Pure: must not import ops, the GARM client or any other charm module.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import cast

RUNNER_OPTION_DATABAG_KEYS = (
    "dockerhub_mirror",
    "runner_http_proxy",
    "aproxy_exclude_addresses",
    "aproxy_redirect_ports",
    "otel_collector_endpoint",
    "pre_job_script",
)

# The highest TCP port. The entrypoint, which runs in the container alone, has its own copy;
# tests/unit/workload/test_pebble_layer.py pins the two equal.
MAX_PORT = 65535
_PORT_TOKEN = re.compile(r"^(\d{1,5})(?:-(\d{1,5}))?$")

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class IPv4Range:
    """An inclusive range of IPv4 addresses, ``first-last`` in relation data and in nftables."""

    first: ipaddress.IPv4Address
    last: ipaddress.IPv4Address


AproxyExclusion = ipaddress.IPv4Network | IPv4Range


@dataclass(frozen=True)
class RunnerConfig:
    """Per-scale-set runner options, sanitised from untrusted relation data.

    Text options are strings, empty when unset. The aproxy options are parsed: exclusions and
    ``(low, high)`` port ranges in the order the configurator wrote them, empty when unset.
    """

    dockerhub_mirror: str = ""
    # A proxy URL may carry credentials and a script may embed tokens: keep both out of repr.
    runner_http_proxy: str = field(default="", repr=False)
    aproxy_exclude_addresses: tuple[AproxyExclusion, ...] = ()
    aproxy_redirect_ports: tuple[tuple[int, int], ...] = ()
    otel_collector_endpoint: str = ""
    pre_job_script: str = field(default="", repr=False)

    @classmethod
    def from_databag(cls, data: Mapping[str, str]) -> tuple[RunnerConfig, tuple[str, ...]]:
        """Build the options from a configurator unit databag.

        Line breaks are dropped from the single-line options; redirect ports outside
        1..MAX_PORT or written ``N-M`` with ``N > M`` are dropped. An exclusion that is not an
        IPv4 address, network (host bits allowed) or ``first-last`` range is a problem; IPv6
        exclusions are dropped, since aproxy redirects IPv4 only and IPv6 never reaches it.

        Args:
            data: the remote unit databag.

        Returns:
            The options, and the problems found (each names its key, never a value).
        """
        raw = {key: (data.get(key) or "").strip() for key in RUNNER_OPTION_DATABAG_KEYS}
        excludes, malformed = _aproxy_exclusions(raw["aproxy_exclude_addresses"])
        problems: tuple[str, ...] = ()
        if malformed:
            entries = "entry" if malformed == 1 else "entries"
            problems = (f"aproxy_exclude_addresses has {malformed} malformed {entries}",)
        config = cls(
            dockerhub_mirror=_strip_newlines(raw["dockerhub_mirror"]),
            runner_http_proxy=_strip_newlines(raw["runner_http_proxy"]),
            aproxy_exclude_addresses=excludes,
            aproxy_redirect_ports=tuple(_port_ranges(raw["aproxy_redirect_ports"])),
            otel_collector_endpoint=_strip_newlines(raw["otel_collector_endpoint"]),
            pre_job_script=raw["pre_job_script"],
        )
        return config, problems

    def has_config(self) -> bool:
        """Tell whether any option is set, which means the scale set needs its own template."""
        return any(getattr(self, key) for key in RUNNER_OPTION_DATABAG_KEYS)


def _tokens(value: str) -> Iterator[str]:
    """Yield the non-empty, stripped entries of a comma-separated list."""
    return (token for token in (t.strip() for t in value.split(",")) if token)


def _port_ranges(value: str) -> Iterator[tuple[int, int]]:
    """Yield the ``(low, high)`` range of each usable ``port`` or ``low-high`` entry."""
    for token in _tokens(value):
        match = _PORT_TOKEN.match(token)
        if not match:
            continue
        low = int(match.group(1))
        high = int(match.group(2) or low)
        if 1 <= low <= high <= MAX_PORT:
            yield low, high


def _aproxy_exclusions(value: str) -> tuple[tuple[AproxyExclusion, ...], int]:
    """Parse the exclusions; return the IPv4 ones and the number of malformed entries."""
    kept: list[AproxyExclusion] = []
    malformed = ipv6 = 0
    for token in _tokens(value):
        try:
            exclusion = _exclusion(token)
        except ValueError:
            malformed += 1
            continue
        if exclusion is None:
            ipv6 += 1
        else:
            kept.append(exclusion)
    if ipv6:
        logger.debug("ignoring %d IPv6 aproxy exclusions: aproxy redirects IPv4 only", ipv6)
    return tuple(kept), malformed


def _exclusion(token: str) -> AproxyExclusion | None:
    """Parse one exclusion; None for a well-formed IPv6 one.

    Raises:
        ValueError: the entry is not an address, a network or a ``first-last`` range of one
            family with ``first <= last``.
    """
    if "-" not in token:
        network = ipaddress.ip_network(token, strict=False)
        return network if isinstance(network, ipaddress.IPv4Network) else None
    first_text, _, last_text = token.partition("-")
    first = ipaddress.ip_address(first_text.strip())
    last = ipaddress.ip_address(last_text.strip())
    v4, v6 = ipaddress.IPv4Address, ipaddress.IPv6Address
    if isinstance(first, v4) and isinstance(last, v4) and first <= last:
        return IPv4Range(first, last)
    if isinstance(first, v6) and isinstance(last, v6) and first <= last:
        return None
    raise ValueError(token)


def _strip_newlines(value: str) -> str:
    return value.replace("\r", "").replace("\n", "")


def pre_install_scripts(raw: str) -> tuple[dict[str, str], bool]:
    """Parse ``pre_install_scripts`` (a JSON object of strings); the flag: was it acceptable."""
    if not raw.strip():
        return {}, True
    try:
        parsed: object = json.loads(raw)
    except ValueError:
        return {}, False
    if not isinstance(parsed, dict):
        return {}, False
    items = cast(dict[object, object], parsed).items()
    scripts = {k: v for k, v in items if isinstance(k, str) and isinstance(v, str)}
    return scripts, len(scripts) == len(items)
