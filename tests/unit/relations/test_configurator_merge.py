"""The merge of configurators: a provider and a GitHub App each belong to one configurator."""

from __future__ import annotations

from collections.abc import Mapping

from relations.configurator_parser import parse_configurator_units
from tests.rsa_keys import pkcs1_pem, rewrapped
from vocabulary.desired_state import (
    ConfiguratorInputs,
    Incumbents,
    InputProblem,
    UnitData,
    entity_key,
)
from vocabulary.github_key import public_key_digest

KEY_A, KEY_B = pkcs1_pem(0), pkcs1_pem(1)
SECRETS = {"secret:pw": "os-password", "secret:a": KEY_A, "secret:b": KEY_B}


def data(app: str, *, key: str, app_id: str, provider: str | None = None) -> dict[str, str]:
    """A configurator's one unit: its provider, its App and a scale set in its organisation."""
    return {
        "name": f"{app}-runners",
        "provider_name": provider or f"{app}-0",
        "image_id": "img",
        "flavor": "small",
        "os_arch": "amd64",
        "max_runner": "2",
        "labels": "linux",
        "org": f"org-{app}",
        "openstack_auth_url": "https://keystone.example:5000/v3",
        "openstack_username": "u",
        "openstack_password_secret_uri": "secret:pw",
        "openstack_project_name": "p",
        "openstack_user_domain_name": "Default",
        "openstack_project_domain_name": "Default",
        "openstack_region_name": "RegionOne",
        "openstack_network": "net",
        "github_app_id": app_id,
        "github_installation_id": "202",
        "github_private_key_secret_uri": key,
    }


def parse(
    *configurators: tuple[int, str, Mapping[str, str]],
    incumbents: Incumbents | None = None,
    secrets: Mapping[str, str] = SECRETS,
) -> ConfiguratorInputs:
    units = [UnitData(rid, f"{app}/0", dict(d)) for rid, app, d in configurators]
    return parse_configurator_units(units, secrets.get, incumbents)


def _scalesets(parsed: ConfiguratorInputs) -> list[tuple[str, str]]:
    return [(s.name, s.provider_name) for s in parsed.scalesets]


# --- providers ---------------------------------------------------------------------------------


def test_a_scale_set_on_another_configurator_s_provider_is_refused() -> None:
    parsed = parse(
        (1, "cfg-a", data("cfg-a", key="secret:a", app_id="101")),
        (2, "cfg-b", data("cfg-b", key="secret:b", app_id="102", provider="cfg-a-0")),
    )
    assert parsed.problems == (
        InputProblem("cfg-b", "provider cfg-a-0 belongs to cfg-a", blocked=True),
    )
    # The holder is untouched; the erring configurator is held as it is, its provider kept.
    assert _scalesets(parsed) == [("cfg-a-runners", "cfg-a-0")]
    assert [p.unit_name for p in parsed.providers] == ["cfg-a-0", "cfg-b-0"]
    assert parsed.held.scalesets == frozenset({"cfg-b-runners"})
    assert parsed.held.entities == frozenset({entity_key("organization", "org-cfg-b")})
    assert parsed.held.apps == frozenset({"cfg-b"})


def test_the_holder_keeps_its_provider_whatever_the_relation_order() -> None:
    parsed = parse(
        (1, "cfg-b", data("cfg-b", key="secret:b", app_id="102", provider="cfg-a-0")),
        (2, "cfg-a", data("cfg-a", key="secret:a", app_id="101")),
    )
    assert parsed.problems == (
        InputProblem("cfg-b", "provider cfg-a-0 belongs to cfg-a", blocked=True),
    )
    assert _scalesets(parsed) == [("cfg-a-runners", "cfg-a-0")]


def test_a_provider_nobody_publishes_is_refused_unless_it_is_one_of_its_own_units() -> None:
    parsed = parse((1, "cfg-b", data("cfg-b", key="secret:b", app_id="102", provider="cfg-c-0")))
    assert parsed.problems == (
        InputProblem("cfg-b", "provider cfg-c-0 is not published by cfg-b", blocked=True),
    )
    assert parsed.scalesets == ()
    # Its own unit's provider, missing for a pass (the unit is leaving), is not another's.
    parsed = parse((1, "cfg-b", data("cfg-b", key="secret:b", app_id="102", provider="cfg-b-3")))
    assert parsed.problems == ()
    assert _scalesets(parsed) == [("cfg-b-runners", "cfg-b-3")]


def test_any_unit_of_the_configurator_may_name_its_provider() -> None:
    full = data("cfg-a", key="secret:a", app_id="101")
    follower = {k: v for k, v in full.items() if not k.startswith("openstack_")}
    units = [
        UnitData(1, "cfg-a/0", data("cfg-a", key="secret:a", app_id="101")),
        UnitData(1, "cfg-a/1", {**follower, "name": "cfg-a-large"}),
    ]
    parsed = parse_configurator_units(units, SECRETS.get)
    assert parsed.problems == ()
    assert _scalesets(parsed) == [("cfg-a-runners", "cfg-a-0"), ("cfg-a-large", "cfg-a-0")]


# --- GitHub Apps -------------------------------------------------------------------------------


def test_an_app_with_another_key_is_refused_and_the_holder_s_credential_kept() -> None:
    parsed = parse(
        (1, "cfg-a", data("cfg-a", key="secret:a", app_id="101")),
        (2, "cfg-b", data("cfg-b", key="secret:b", app_id="101")),
    )
    assert parsed.problems == (
        InputProblem(
            "cfg-b",
            "GitHub App 101 belongs to cfg-a; the key in github_private_key_secret_uri differs",
            blocked=True,
        ),
    )
    (credential,) = parsed.credentials
    assert (credential.name, credential.source, credential.key.pem()) == (
        "app-101-202",
        "cfg-a",
        KEY_A,
    )
    assert parsed.held.apps == frozenset({"cfg-b"})


def test_the_holder_keeps_its_app_against_a_lower_relation_id() -> None:
    held = Incumbents(credentials={"app-102-202": ("cfg-b", public_key_digest(KEY_B))})
    parsed = parse(
        (1, "cfg-a", data("cfg-a", key="secret:a", app_id="102")),
        (2, "cfg-b", data("cfg-b", key="secret:b", app_id="102")),
        incumbents=held,
    )
    assert [p.source for p in parsed.problems] == ["cfg-a"]
    assert "GitHub App 102 belongs to cfg-b" in parsed.problems[0].reason
    (credential,) = parsed.credentials
    assert (credential.source, credential.key.pem()) == ("cfg-b", KEY_B)


def test_the_same_key_shares_the_app_and_only_the_holder_s_data_is_written() -> None:
    secrets = {**SECRETS, "secret:a-again": rewrapped(KEY_A)}
    held = Incumbents(credentials={"app-101-202": ("cfg-b", public_key_digest(KEY_A))})
    parsed = parse(
        (1, "cfg-a", data("cfg-a", key="secret:a-again", app_id="101")),
        (2, "cfg-b", data("cfg-b", key="secret:a", app_id="101")),
        incumbents=held,
        secrets=secrets,
    )
    assert parsed.problems == ()
    (credential,) = parsed.credentials
    assert (credential.source, credential.key.pem()) == ("cfg-b", KEY_A)
    assert sorted(e.entity_name for e in parsed.entities) == ["org-cfg-a", "org-cfg-b"]
    assert {e.credentials_name for e in parsed.entities} == {"app-101-202"}


def test_while_the_holder_is_held_its_shared_credential_is_held_too() -> None:
    held = Incumbents(credentials={"app-101-202": ("cfg-a", public_key_digest(KEY_A))})
    broken = {**data("cfg-a", key="secret:a", app_id="101"), "max_runner": "many"}
    parsed = parse(
        (1, "cfg-a", broken),
        (2, "cfg-b", data("cfg-b", key="secret:a", app_id="101")),
        incumbents=held,
    )
    assert [p.source for p in parsed.problems] == ["cfg-a/0"]
    # cfg-b shares the App: its organisation uses the credential as GARM has it.
    assert parsed.credentials == ()
    assert "app-101-202" in parsed.held.credentials
    assert [e.entity_name for e in parsed.entities] == ["org-cfg-b"]


def test_the_holder_rotates_and_a_sharer_follows_only_once_it_rotates_too() -> None:
    held = Incumbents(credentials={"app-101-202": ("cfg-a", public_key_digest(KEY_A))})
    rotated = parse(
        (1, "cfg-a", data("cfg-a", key="secret:b", app_id="101")),
        (2, "cfg-b", data("cfg-b", key="secret:a", app_id="101")),
        incumbents=held,
    )
    (credential,) = rotated.credentials
    assert (credential.source, credential.key.pem()) == ("cfg-a", KEY_B)
    assert [(p.source, p.blocked) for p in rotated.problems] == [("cfg-b", True)]
    assert "GitHub App 101 belongs to cfg-a" in rotated.problems[0].reason

    after = Incumbents(credentials={"app-101-202": ("cfg-a", public_key_digest(KEY_B))})
    both = parse(
        (1, "cfg-a", data("cfg-a", key="secret:b", app_id="101")),
        (2, "cfg-b", data("cfg-b", key="secret:b", app_id="101")),
        incumbents=after,
    )
    assert both.problems == ()
    assert [c.source for c in both.credentials] == ["cfg-a"]


def test_no_key_reaches_a_problem_or_a_repr() -> None:
    parsed = parse(
        (1, "cfg-a", data("cfg-a", key="secret:a", app_id="101")),
        (2, "cfg-b", data("cfg-b", key="secret:b", app_id="101")),
    )
    text = repr(parsed)
    for key in (KEY_A, KEY_B):
        assert key.splitlines()[1] not in text
