"""The GitHub Enterprise Server keys of the configurator contract, parsed into the specs.

``github_base_url`` and ``github_ca_bundle`` (ADR 0014): absent means github.com and changes
nothing; a GHES gives an endpoint spec, a credential and an entity on that endpoint; bad values
refuse the configurator, name the key and never the value, and hold what it described.
"""

from __future__ import annotations

import logging

import pytest

from relations.configurator_parser import parse_configurator_units
from tests.real_garm.tls_front import make_certificates
from tests.unit.configurator_data import (
    FULL,
    GITHUB,
    SCALESET,
    SECRETS,
    no_secret_in_logs,  # noqa: F401 - autouse
    parse,
    unit,
)
from vocabulary.desired_state import DEFAULT_GITHUB_ENDPOINT, Incumbents, entity_key
from vocabulary.github_endpoint import ca_bundle_problem, endpoint_name

GHES = "https://ghes.example.com"


@pytest.fixture(scope="module")
def pems(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    """Two CA certificates and a server certificate (PEM)."""
    first, server, _ = make_certificates(tmp_path_factory.mktemp("ca1"))
    second, _, _ = make_certificates(tmp_path_factory.mktemp("ca2"))
    return first.read_text(), second.read_text(), server.read_text()


def test_without_a_base_url_everything_is_on_github_com() -> None:
    parsed = parse(unit(FULL))
    assert parsed.endpoints == ()
    assert [c.endpoint for c in parsed.credentials] == [DEFAULT_GITHUB_ENDPOINT]
    assert [c.name for c in parsed.credentials] == ["app-11-22"]
    assert [e.key for e in parsed.entities] == [entity_key("organization", "canonical")]
    assert [s.endpoint for s in parsed.scalesets] == [DEFAULT_GITHUB_ENDPOINT]


def test_github_com_s_own_url_is_github_com() -> None:
    parsed = parse(unit({**FULL, "github_base_url": "https://github.com/"}))
    assert parsed.endpoints == ()
    assert [c.name for c in parsed.credentials] == ["app-11-22"]


def test_a_ghes_configurator_gets_an_endpoint_and_its_own_credential_and_entity(
    pems: tuple[str, str, str],
) -> None:
    data = {**FULL, "github_base_url": GHES + "/", "github_ca_bundle": pems[0]}
    parsed = parse(unit(data))
    (endpoint,) = parsed.endpoints
    assert endpoint.name == "ghes.example.com"
    assert endpoint.urls == (
        GHES,
        f"{GHES}/api/v3/",
        f"{GHES}/api/uploads/",
    )
    assert endpoint.ca_bundle == pems[0].strip()
    assert [(c.name, c.endpoint) for c in parsed.credentials] == [
        ("app-11-22-ghes.example.com", "ghes.example.com")
    ]
    (entity,) = parsed.entities
    assert entity.key == entity_key("organization", "canonical", "ghes.example.com")
    assert entity.credentials_name == "app-11-22-ghes.example.com"
    assert [s.entity_key for s in parsed.scalesets] == [entity.key]


def test_the_same_organisation_on_github_com_and_on_a_ghes_is_two_entities() -> None:
    ghes = {**FULL, "name": "big", "github_base_url": GHES}
    parsed = parse(unit(FULL), unit(ghes, "other/0", rid=2))
    assert parsed.problems == ()
    assert {e.key for e in parsed.entities} == {
        entity_key("organization", "canonical"),
        entity_key("organization", "canonical", "ghes.example.com"),
    }
    assert {c.name for c in parsed.credentials} == {"app-11-22", "app-11-22-ghes.example.com"}


def test_the_endpoint_name_is_stable_and_keeps_a_port() -> None:
    assert endpoint_name("https://GHES.example.com") == "ghes.example.com"
    assert endpoint_name("https://ghes.example.com:443/") == "ghes.example.com"
    assert endpoint_name("https://10.0.0.5:8443") == "10.0.0.5-8443"
    # An IPv6 host: one name per address however it is spelt, and no colon in it.
    assert endpoint_name("https://[2001:db8::1]") == "ipv6-2001-db8--1"
    assert endpoint_name("https://[2001:0DB8:0:0::1]:8443/") == "ipv6-2001-db8--1-8443"
    assert endpoint_name("") == DEFAULT_GITHUB_ENDPOINT


@pytest.mark.parametrize(
    "url",
    [
        "http://ghes.example.com",
        "ghes.example.com",
        "https://ghes.example.com/api/v3",
        "https://ghes.example.com?x=1",
        "https://user:pw@ghes.example.com",
        "https://ghes.example.com:notaport",
        "https://bad_host!",
    ],
)
def test_a_malformed_base_url_holds_the_configurator_and_stops_deletions(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    good = {**FULL, "name": "other", "org": "elsewhere"}
    parsed = parse(unit(good, "good/0", rid=1), unit({**FULL, "github_base_url": url}, rid=2))
    (problem,) = parsed.problems
    assert problem.source == "garm-configurator/0"
    assert problem.reason.startswith("github_base_url ")
    assert "small" in parsed.held.scalesets
    assert parsed.identity_unknown
    # The other configurator goes on; nothing of the refused one is desired.
    assert [s.name for s in parsed.scalesets] == ["other"]
    assert all(url not in r.getMessage() for r in caplog.records)


def test_a_bad_ca_bundle_names_the_key_and_holds_what_the_configurator_described(
    pems: tuple[str, str, str],
) -> None:
    incumbents = Incumbents(
        entities={entity_key("organization", "canonical", "ghes.example.com"): "garm-configurator"}
    )
    bad = {**FULL, "github_base_url": GHES, "github_ca_bundle": "not a certificate"}
    parsed = parse_configurator_units([unit(bad)], SECRETS.get, incumbents)
    (problem,) = parsed.problems
    assert problem.reason == "github_ca_bundle holds no PEM certificate"
    assert parsed.endpoints == () and parsed.credentials == () and parsed.entities == ()
    assert parsed.held.credentials == {"app-11-22-ghes.example.com"}
    assert parsed.held.entities == {entity_key("organization", "canonical", "ghes.example.com")}
    assert not parsed.identity_unknown


def test_a_ca_bundle_without_a_ghes_url_is_refused(pems: tuple[str, str, str]) -> None:
    parsed = parse(unit({**FULL, "github_ca_bundle": pems[0]}))
    assert [p.reason for p in parsed.problems] == [
        "github_ca_bundle is set without a GitHub Enterprise Server base URL"
    ]


def test_ca_bundle_checks(pems: tuple[str, str, str]) -> None:
    ca, other, server = pems
    assert ca_bundle_problem(ca) == ""
    assert ca_bundle_problem(ca + other) == ""
    assert ca_bundle_problem(server) == ""  # GARM trusts any certificate it is given
    key_block = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
    assert "not a CERTIFICATE" in ca_bundle_problem(ca + key_block)
    assert "outside its PEM blocks" in ca_bundle_problem("hello\n" + ca)
    broken = ca.replace(ca.splitlines()[2], "A" * 64)
    assert "does not parse" in ca_bundle_problem(broken)
    # A whole public CA store is refused: every bundle also rides in GARM's environment.
    store = "\n".join([ca] * (64 * 1024 // len(ca) + 1))
    assert ca_bundle_problem(store) == "github_ca_bundle is over 65,536 bytes"


def test_two_configurators_on_one_ghes_with_other_bundles_refuse_the_later(
    pems: tuple[str, str, str],
) -> None:
    first = {**SCALESET, **GITHUB, "github_base_url": GHES, "github_ca_bundle": pems[0]}
    second = {**first, "name": "big", "org": "other", "github_ca_bundle": pems[1]}
    second = {**second, "github_installation_id": "23"}
    parsed = parse(unit(first, "one/0", rid=1), unit(second, "two/0", rid=2))
    (problem,) = parsed.problems
    assert problem.blocked
    assert problem.reason == "github_ca_bundle for ghes.example.com differs from one's"
    assert [e.ca_bundle for e in parsed.endpoints] == [pems[0].strip()]
    # The same certificates, in another text form, are the same bundle.
    same = {**second, "github_ca_bundle": "\n\n" + pems[0] + pems[0]}
    parsed = parse(unit(first, "one/0", rid=1), unit(same, "two/0", rid=2))
    assert parsed.problems == ()


def test_units_of_one_configurator_naming_other_servers_hold_it(
    pems: tuple[str, str, str],
) -> None:
    on_ghes = {**FULL, "github_base_url": GHES, "github_ca_bundle": pems[0]}
    # A change rolling through the units: the second still names the old server.
    moved = {**on_ghes, "github_base_url": "https://ghes2.example.com"}
    parsed = parse(unit(on_ghes, "cfg/0", rid=1), unit(moved, "cfg/1", rid=1))
    (problem,) = parsed.problems
    assert (problem.source, problem.reason) == (
        "cfg/1",
        "github_base_url differs between the units of cfg",
    )
    assert parsed.endpoints == () and parsed.scalesets == ()
    assert "small" in parsed.held.scalesets
    # Another bundle for the same server holds it too; the same certificates do not.
    rotated = {**on_ghes, "github_ca_bundle": pems[1]}
    parsed = parse(unit(on_ghes, "cfg/0", rid=1), unit(rotated, "cfg/1", rid=1))
    assert [p.reason for p in parsed.problems] == [
        "github_ca_bundle differs between the units of cfg"
    ]
    same = {**on_ghes, "github_ca_bundle": pems[0] + pems[0]}
    parsed = parse(unit(on_ghes, "cfg/0", rid=1), unit(same, "cfg/1", rid=1))
    assert parsed.problems == ()
    assert [e.name for e in parsed.endpoints] == ["ghes.example.com"]
    # A unit that names no server (it publishes no GitHub data) is not compared.
    provider_only = {k: v for k, v in FULL.items() if not k.startswith("github_")}
    parsed = parse(unit(on_ghes, "cfg/0", rid=1), unit(provider_only, "cfg/1", rid=1))
    assert parsed.problems == ()


def test_schema_takes_a_multi_line_bundle_and_refuses_a_multi_line_url(
    pems: tuple[str, str, str],
) -> None:
    parsed = parse(unit({**FULL, "github_base_url": GHES, "github_ca_bundle": pems[0]}))
    assert parsed.problems == ()
    parsed = parse(unit({**FULL, "github_base_url": GHES + "\nx", "github_ca_bundle": pems[0]}))
    assert [p.reason for p in parsed.problems] == ["invalid keys: github_base_url"]
