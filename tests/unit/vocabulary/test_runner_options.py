"""RunnerConfig: a configurator's runner options parsed once into typed values."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network

import pytest

from tests.unit.configurator_data import (
    FULL,
    no_secret_in_logs,  # noqa: F401 - autouse
    parse,
    unit,
    warnings,
)
from vocabulary.desired_state import (
    InputProblem,
)
from vocabulary.runner_options import IPv4Range, RunnerConfig

# --- RunnerConfig (7.7) -----------------------------------------------------------------------


def _net(text: str) -> IPv4Network:
    return IPv4Network(text, strict=False)


def _range(first: str, last: str) -> IPv4Range:
    return IPv4Range(IPv4Address(first), IPv4Address(last))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("80,443", ((80, 80), (443, 443))),
        (" 80 , 443 ", ((80, 80), (443, 443))),
        ("0,22", ((22, 22),)),
        ("65535,65536", ((65535, 65535),)),
        ("1-65535", ((1, 65535),)),
        ("8000-8080,9000-8999", ((8000, 8080),)),
        ("0-10,10-10", ((10, 10),)),
        ("443,80,8000-8100,8050", ((443, 443), (80, 80), (8000, 8100), (8050, 8050))),
        ("abc,80;rm -rf,123456,1-2-3,,", ()),
        ("22;reboot,70000,90-80", ()),
    ],
)
def test_runner_config_redirect_ports(raw: str, expected: tuple[tuple[int, int], ...]) -> None:
    config, problems = RunnerConfig.from_databag({"aproxy_redirect_ports": raw})
    # Parsed once, in the order written; merging is the renderer's. Bad ports are dropped.
    assert config.aproxy_redirect_ports == expected
    assert problems == ()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("10.0.0.0/8,192.168.1.1", (_net("10.0.0.0/8"), _net("192.168.1.1/32"))),
        ("10.1.2.3/8", (_net("10.0.0.0/8"),)),
        (" 10.0.0.1-10.0.0.9 ,", (_range("10.0.0.1", "10.0.0.9"),)),
        ("10.0.0.5 - 10.0.0.5", (_range("10.0.0.5", "10.0.0.5"),)),
        (
            "172.16.0.0/12,10.0.0.1-10.0.0.9,10.0.0.1",
            (_net("172.16.0.0/12"), _range("10.0.0.1", "10.0.0.9"), _net("10.0.0.1/32")),
        ),
        # aproxy redirects IPv4 only: IPv6 never reaches it, so IPv6 entries are dropped quietly.
        ("::1,fe80::/10,fe80::1-fe80::9,172.16.0.0/12", (_net("172.16.0.0/12"),)),
        ("", ()),
    ],
)
def test_runner_config_exclude_addresses(raw: str, expected: tuple[object, ...]) -> None:
    config, problems = RunnerConfig.from_databag({"aproxy_exclude_addresses": raw})
    assert config.aproxy_exclude_addresses == expected
    assert problems == ()


@pytest.mark.parametrize(
    ("raw", "count"),
    [
        ("10.0.0.9-10.0.0.1", 1),
        ("10.0.0.1-", 1),
        ("-10.0.0.1", 1),
        ("10.0.0.1-fe80::1", 1),
        ("fe80::9-fe80::1", 1),
        ("10.0.0.1-10.0.0.2-10.0.0.3", 1),
        ("10.0.0.0/8-10.0.0.9", 1),
        ("not-an-ip, 10.0.0.0/33 ,10.0.0.1", 2),
        ("$(reboot),10.0.0.1", 1),
    ],
)
def test_runner_config_malformed_exclusions_are_a_problem(raw: str, count: int) -> None:
    config, problems = RunnerConfig.from_databag({"aproxy_exclude_addresses": raw})
    entries = "entry" if count == 1 else "entries"
    assert problems == (f"aproxy_exclude_addresses has {count} malformed {entries}",)
    assert all(isinstance(e, IPv4Network | IPv4Range) for e in config.aproxy_exclude_addresses)


def test_malformed_exclusions_hold_the_configurator(caplog: pytest.LogCaptureFixture) -> None:
    parsed = parse(unit({**FULL, "aproxy_exclude_addresses": "10.0.0.1,10.0.0.9-10.0.0.1"}))
    # Held as it is: never updated with an exclusion silently gone.
    assert parsed.scalesets == ()
    assert parsed.held.scalesets == {"small"}
    assert parsed.problems == (
        InputProblem("garm-configurator/0", "aproxy_exclude_addresses has 1 malformed entry"),
    )
    (warning,) = [w for w in warnings(caplog) if "aproxy_exclude_addresses" in w]
    assert "small" in warning and "garm-configurator/0" in warning
    assert "10.0.0.9" not in warning


def test_exclusion_ranges_and_ipv6_are_accepted_by_the_parser() -> None:
    raw = "10.0.0.1-10.0.0.9,fd00::/8"
    (spec,) = parse(unit({**FULL, "aproxy_exclude_addresses": raw})).scalesets
    assert spec.runner_config.aproxy_exclude_addresses == (_range("10.0.0.1", "10.0.0.9"),)


def test_runner_config_strips_newlines_from_urls_and_keeps_script() -> None:
    config, problems = RunnerConfig.from_databag(
        {
            "dockerhub_mirror": "https://mir\r\nror.example\n",
            "runner_http_proxy": "http://proxy\n:3128",
            "otel_collector_endpoint": "\nhttp://otel:4317\r",
            "pre_job_script": "  #!/bin/bash\necho a\n\necho b\n",
        }
    )
    assert problems == ()
    assert config.dockerhub_mirror == "https://mirror.example"
    assert config.runner_http_proxy == "http://proxy:3128"
    assert config.otel_collector_endpoint == "http://otel:4317"
    assert config.pre_job_script == "#!/bin/bash\necho a\n\necho b"
    assert config.has_config()


def test_runner_config_empty_has_no_config() -> None:
    config, _ = RunnerConfig.from_databag({"name": "x", "aproxy_redirect_ports": "0"})
    assert config == RunnerConfig()
    assert not config.has_config()


def test_runner_config_with_only_exclusions_has_config() -> None:
    config, _ = RunnerConfig.from_databag({"aproxy_exclude_addresses": "10.0.0.1-10.0.0.2"})
    assert config.has_config()
    # Frozen and made of tuples: equal values compare and hash equal.
    again, _ = RunnerConfig.from_databag({"aproxy_exclude_addresses": " 10.0.0.1-10.0.0.2 "})
    assert config == again and hash(config) == hash(again)
