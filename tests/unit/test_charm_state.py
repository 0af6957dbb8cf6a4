"""Tests of the relation parsing in charm_state: the pure layer and the Juju adapter."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from ipaddress import IPv4Address, IPv4Network

import jsonschema
import ops
import ops.testing
import pytest

from charm_state import CharmState, describe_problems
from configurator_contract import (
    CONTRACT_KEYS,
    PROVIDER_NAME_PATTERN,
    has_contract_data,
    load_schema,
    provider_name_for_unit,
    schema_failures,
    unpublished_relation_ids,
)
from configurator_parser import parse_configurator_units
from debug_ssh import parse_debug_ssh
from desired_state import (
    DEFAULT_GITHUB_ENDPOINT,
    MANAGED_CREDENTIAL_DESCRIPTION,
    ConfiguratorInputs,
    DebugSshConnection,
    InputProblem,
    UnitData,
    credential_name,
)
from garm_entrypoint import UNIT_NAME_PATTERN
from runner_options import IPv4Range, RunnerConfig
from tests.rsa_keys import pkcs1_pem

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


# --- schema -----------------------------------------------------------------------------------


def test_schema_is_valid_and_describes_every_contract_key() -> None:
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(dict(schema))
    properties = schema["properties"]
    assert isinstance(properties, dict)
    assert set(properties) == set(CONTRACT_KEYS)
    for key, definition in properties.items():
        assert definition.get("description"), f"{key} has no description"


def test_schema_accepts_full_unit_and_juju_keys() -> None:
    data = {**FULL, "ingress-address": "10.1.2.3", "egress-subnets": "10.1.2.3/32"}
    assert schema_failures(data) == ()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("name", "small\n"),
        ("labels", "a,b\nc"),
        ("image_id", "img\r"),
        ("org", "canonical\nevil"),
        ("openstack_username", "user\n"),
        ("openstack_password", "pw\nline"),
        ("github_app_id", "11\n"),
        ("max_runner", "4\n"),
        ("provider_name", "garm-configurator-0\n"),
        ("provider_name", "../etc-0"),
        ("repo", "just-a-name"),
        ("repo", "owner/name/extra"),
        ("github_private_key_secret_uri", "not-a-secret-uri"),
    ],
)
def test_schema_failure_drops_unit_and_names_only_the_key(
    caplog: pytest.LogCaptureFixture, key: str, value: str
) -> None:
    parsed = parse(unit({**FULL, key: value}))

    assert parsed.providers == ()
    assert parsed.credentials == ()
    assert parsed.entities == ()
    assert parsed.scalesets == ()
    assert parsed.problems == (InputProblem("garm-configurator/0", f"invalid keys: {key}"),)
    lines = warnings(caplog)
    assert any("garm-configurator/0" in line and key in line for line in lines)
    assert all(value not in line for line in lines)


def test_schema_failure_lists_every_failing_key_sorted() -> None:
    parsed = parse(unit({**FULL, "org": "a\nb", "labels": "x\n"}))
    assert parsed.problems == (InputProblem("garm-configurator/0", "invalid keys: labels, org"),)


def test_multiline_fields_are_allowed() -> None:
    data = {
        **FULL,
        "pre_job_script": "#!/bin/bash\necho one\necho two",
        "pre_install_scripts": json.dumps({"pre.sh": "#!/bin/sh\necho hi\n"}, indent=2),
        "runner_http_proxy": "http://proxy:3128\n",
    }
    parsed = parse(unit(data))
    assert parsed.problems == ()
    (spec,) = parsed.scalesets
    assert spec.runner_config.pre_job_script == "#!/bin/bash\necho one\necho two"
    assert spec.runner_config.runner_http_proxy == "http://proxy:3128"
    assert spec.pre_install_scripts == {"pre.sh": "#!/bin/sh\necho hi\n"}


# --- full parse -------------------------------------------------------------------------------


def test_full_unit_yields_provider_credential_entity_and_scaleset() -> None:
    parsed = parse(unit({**FULL, "dockerhub_mirror": "https://mirror.example"}))

    (provider,) = parsed.providers
    assert provider.as_dict() == {
        "unit_name": "garm-configurator-0",
        "network": "runner-net",
        "auth_url": "https://keystone.example:5000/v3",
        "username": "runner-user",
        "password": PASSWORD,
        "project_name": "runners",
        "user_domain_name": "Default",
        "project_domain_name": "Default",
        "region_name": "RegionOne",
    }
    (credential,) = parsed.credentials
    assert credential.name == "app-11-22"
    assert credential.endpoint == DEFAULT_GITHUB_ENDPOINT == "github.com"
    assert (credential.app_id, credential.installation_id) == (11, 22)
    assert credential.private_key == PRIVATE_KEY
    assert credential.description == MANAGED_CREDENTIAL_DESCRIPTION == "Managed by garm"
    (entity,) = parsed.entities
    assert (entity.entity_type, entity.entity_name, entity.credentials_name) == (
        "organization",
        "canonical",
        "app-11-22",
    )
    (spec,) = parsed.scalesets
    assert spec.name == "small"
    assert spec.provider_name == "garm-configurator-0"
    assert (spec.image, spec.flavor, spec.os_arch) == ("img-123", "m1.small", "amd64")
    assert (spec.min_idle_runners, spec.max_runners) == (1, 4)
    assert (spec.entity_type, spec.entity_name) == ("organization", "canonical")
    assert spec.labels == ("noble", "x64")
    assert spec.os_type == "linux"
    assert spec.template_id == 0
    assert spec.pre_install_scripts == {}
    assert spec.runner_config == RunnerConfig(dockerhub_mirror="https://mirror.example")
    assert parsed.problems == ()


def test_secret_values_stay_out_of_reprs() -> None:
    parsed = parse(unit(FULL))
    assert PASSWORD not in repr(parsed)
    assert KEY_BODY_LINE not in repr(parsed)


def test_credential_name_format() -> None:
    assert credential_name(123, 456) == "app-123-456"


# --- providers (7.3) --------------------------------------------------------------------------


def test_unit_without_auth_url_publishes_no_provider(caplog: pytest.LogCaptureFixture) -> None:
    data = {key: value for key, value in FULL.items() if key != "openstack_auth_url"}
    parsed = parse(unit(data))
    assert parsed.providers == ()
    assert parsed.problems == ()
    assert warnings(caplog) == []


def test_plaintext_password_fallback_without_secret_uri() -> None:
    data = {**FULL, "openstack_password": PLAINTEXT_PASSWORD}
    del data["openstack_password_secret_uri"]
    (provider,) = parse(unit(data)).providers
    assert provider.password == PLAINTEXT_PASSWORD


def test_plaintext_password_wins_over_secret_when_both_present() -> None:
    (provider,) = parse(unit({**FULL, "openstack_password": PLAINTEXT_PASSWORD})).providers
    assert provider.password == PLAINTEXT_PASSWORD


def test_unreadable_password_secret_gives_no_provider(caplog: pytest.LogCaptureFixture) -> None:
    parsed = parse(unit(FULL), secrets={"secret:key": PRIVATE_KEY})
    assert parsed.providers == ()
    assert parsed.problems == (
        InputProblem("garm-configurator/0", "provider fields missing: password"),
    )
    assert any("garm-configurator/0" in w and "password" in w for w in warnings(caplog))
    # The configurator's objects are held as they are, not updated from half its data.
    assert parsed.scalesets == ()
    assert parsed.credentials == ()
    assert parsed.held.scalesets == {"small"}
    assert parsed.held.credentials == {"app-11-22"}
    assert parsed.held.entities == {("organization", "canonical")}


def test_missing_provider_fields_are_named(caplog: pytest.LogCaptureFixture) -> None:
    data = {**FULL}
    del data["openstack_region_name"]
    data["openstack_network"] = "  "
    parsed = parse(unit(data))
    assert parsed.providers == ()
    assert parsed.problems == (
        InputProblem("garm-configurator/0", "provider fields missing: network, region_name"),
    )
    assert any("network, region_name" in w for w in warnings(caplog))


@pytest.mark.parametrize(
    ("unit_name", "expected"),
    [
        ("garm-configurator/0", "garm-configurator-0"),
        ("cfg-b/12", "cfg-b-12"),
        ("../../etc/0", None),
        ("Garm/0", None),
        ("garm/x", None),
        ("garm/0\n", None),
    ],
)
def test_provider_name_for_unit(unit_name: str, expected: str | None) -> None:
    assert provider_name_for_unit(unit_name) == expected


@pytest.mark.parametrize(
    "name",
    ["garm-configurator-0", "a-1", "cfg-b-12", "A-1", "-1", "cfg-", "cfg-1\n", "cfg/1", "1-1"],
)
def test_provider_name_pattern_agrees_with_the_entrypoint(name: str) -> None:
    # The entrypoint, pushed alone into the container, checks provider names again with its
    # own pattern: whatever the charm publishes, the entrypoint must accept, and no more.
    charm_side = PROVIDER_NAME_PATTERN.fullmatch(name) is not None
    assert charm_side == (UNIT_NAME_PATTERN.fullmatch(name) is not None)


def test_unsafe_unit_name_contributes_no_provider(caplog: pytest.LogCaptureFixture) -> None:
    parsed = parse(unit(FULL, name="../../etc/0"))
    assert parsed.providers == ()
    # Its scale set names a provider that no unit of its own publishes: refused as well.
    assert parsed.problems == (
        InputProblem("../../etc/0", "unit name is not a valid provider name"),
        InputProblem("..", "provider garm-configurator-0 is not published by ..", blocked=True),
    )
    assert any("../../etc/0" in w for w in warnings(caplog))


def test_providers_follow_unit_order() -> None:
    parsed = parse(
        unit({**PROVIDER}, name="cfg-a/0", rid=1),
        unit({**PROVIDER}, name="cfg-b/0", rid=2),
    )
    assert [p.unit_name for p in parsed.providers] == ["cfg-a-0", "cfg-b-0"]


# --- credentials (7.4) ------------------------------------------------------------------------


@pytest.mark.parametrize("missing", sorted(GITHUB))
def test_partial_github_app_fields_are_a_problem_that_holds(
    caplog: pytest.LogCaptureFixture, missing: str
) -> None:
    data = {**FULL}
    del data[missing]
    parsed = parse(unit(data))
    assert parsed.credentials == ()
    assert parsed.scalesets == ()
    assert parsed.problems == (
        InputProblem("garm-configurator/0", f"GitHub App fields incomplete: missing {missing}"),
    )
    assert parsed.held.scalesets == {"small"}
    assert any(missing in w and "garm-configurator/0" in w for w in warnings(caplog))


def test_no_github_app_fields_at_all_is_not_a_problem() -> None:
    data = {k: v for k, v in FULL.items() if k not in GITHUB}
    parsed = parse(unit(data))
    assert parsed.problems == ()
    assert parsed.credentials == ()
    assert len(parsed.scalesets) == 1


@pytest.mark.parametrize(
    ("app_id", "installation_id"), [("abc", "22"), ("11", "2.5"), ("-1", "22"), ("1_0", "22")]
)
def test_non_numeric_ids_skip_credential_and_entity(
    caplog: pytest.LogCaptureFixture, app_id: str, installation_id: str
) -> None:
    data = {**FULL, "github_app_id": app_id, "github_installation_id": installation_id}
    parsed = parse(unit(data))
    assert parsed.credentials == ()
    assert parsed.entities == ()
    assert parsed.scalesets == ()
    assert parsed.held.scalesets == {"small"}
    assert parsed.problems == (
        InputProblem(
            "garm-configurator/0", "github_app_id or github_installation_id is not an integer"
        ),
    )
    (line,) = warnings(caplog)
    assert "garm-configurator/0" in line
    assert repr(app_id) in line
    assert repr(installation_id) in line


def test_unreadable_private_key_secret_is_named(caplog: pytest.LogCaptureFixture) -> None:
    parsed = parse(unit(FULL), secrets={"secret:pw": PASSWORD})
    assert parsed.credentials == ()
    # Everything of the configurator is held as it is until the key can be read again.
    assert parsed.entities == ()
    assert parsed.held.credentials == {"app-11-22"}
    assert parsed.problems == (
        InputProblem("garm-configurator/0", "GitHub private key secret is unreadable"),
    )
    assert any("secret:key" in w for w in warnings(caplog))


def test_empty_private_key_names_the_app_id(caplog: pytest.LogCaptureFixture) -> None:
    parsed = parse(unit(FULL), secrets={"secret:pw": PASSWORD, "secret:key": "  \n"})
    assert parsed.credentials == ()
    assert parsed.problems == (InputProblem("garm-configurator/0", "GitHub private key is empty"),)
    assert any("app id 11" in w for w in warnings(caplog))


def test_credentials_dedupe_first_wins() -> None:
    second = {**FULL, "github_private_key_secret_uri": "secret:other", "name": "large"}
    parsed = parse(unit(FULL, name="cfg-a/0", rid=1), unit(second, name="cfg-b/0", rid=2))
    (credential,) = parsed.credentials
    assert credential.private_key == PRIVATE_KEY


def test_distinct_installations_give_distinct_credentials() -> None:
    second = {**FULL, "github_installation_id": "33", "org": "other-org", "name": "large"}
    parsed = parse(unit(FULL, name="cfg-a/0", rid=1), unit(second, name="cfg-b/0", rid=2))
    assert [c.name for c in parsed.credentials] == ["app-11-22", "app-11-33"]
    assert [e.credentials_name for e in parsed.entities] == ["app-11-22", "app-11-33"]


def test_secret_is_read_once_per_uri() -> None:
    reads: list[str] = []

    def reader(uri: str) -> str | None:
        reads.append(uri)
        return SECRETS.get(uri)

    units = [unit(FULL, name=f"garm-configurator/{i}") for i in range(3)]
    parse_configurator_units(units, reader)
    assert sorted(reads) == ["secret:key", "secret:pw"]


# --- entities (7.5) ---------------------------------------------------------------------------


def test_org_wins_over_repo() -> None:
    parsed = parse(unit({**FULL, "repo": "canonical/garm"}))
    (entity,) = parsed.entities
    assert (entity.entity_type, entity.entity_name) == ("organization", "canonical")
    (spec,) = parsed.scalesets
    assert (spec.entity_type, spec.entity_name) == ("organization", "canonical")


def test_repo_entity_when_no_org() -> None:
    data = {**FULL, "repo": "canonical/garm-charm"}
    del data["org"]
    parsed = parse(unit(data))
    (entity,) = parsed.entities
    assert (entity.entity_type, entity.entity_name) == ("repository", "canonical/garm-charm")
    (spec,) = parsed.scalesets
    assert (spec.entity_type, spec.entity_name) == ("repository", "canonical/garm-charm")


def test_entity_needs_the_whole_app() -> None:
    data = {**FULL}
    del data["github_private_key_secret_uri"]
    assert parse(unit(data)).entities == ()
    del data["github_app_id"]
    del data["github_installation_id"]
    assert parse(unit(data)).entities == ()


def test_entity_dedupe_first_wins_and_warns_on_other_credential(
    caplog: pytest.LogCaptureFixture,
) -> None:
    second = {**FULL, "github_app_id": "99", "name": "large"}
    parsed = parse(unit(FULL, name="cfg-a/0", rid=1), unit(second, name="cfg-b/0", rid=2))
    (entity,) = parsed.entities
    assert entity.credentials_name == "app-11-22"
    # cfg-b is refused as a whole: its scale set is not built on cfg-a's organisation.
    assert [s.name for s in parsed.scalesets] == ["small"]
    assert parsed.problems == (
        InputProblem("cfg-b", "organization canonical belongs to cfg-a", blocked=True),
    )
    assert parsed.held.entities == frozenset()
    assert parsed.held.scalesets == {"large"}
    (line,) = warnings(caplog)
    assert "canonical" in line
    assert "cfg-a" in line
    assert "cfg-b" in line


def test_second_configurator_with_the_same_scaleset_name_is_refused() -> None:
    second = {**FULL, "org": "other-org", "github_app_id": "99"}
    parsed = parse(unit(FULL, name="cfg-a/0", rid=2), unit(second, name="cfg-b/0", rid=7))
    assert [(s.name, s.entity_name) for s in parsed.scalesets] == [("small", "canonical")]
    assert parsed.problems == (InputProblem("cfg-b", "scale set small belongs to cfg-a", True),)
    # The owner's name is not held: cfg-a keeps managing it.
    assert parsed.held.scalesets == frozenset()
    assert parsed.held.credentials == {"app-99-22"}


def test_entity_dedupe_same_credential_is_quiet(caplog: pytest.LogCaptureFixture) -> None:
    second = {**FULL, "name": "large"}
    parsed = parse(unit(FULL, name="cfg-a/0", rid=1), unit(second, name="cfg-b/0", rid=2))
    assert len(parsed.entities) == 1
    assert len(parsed.scalesets) == 2
    assert warnings(caplog) == []


# --- scale sets (7.6) -------------------------------------------------------------------------


def test_empty_name_skips_scaleset_silently(caplog: pytest.LogCaptureFixture) -> None:
    parsed = parse(unit({**FULL, "name": ""}))
    assert parsed.scalesets == ()
    assert parsed.problems == ()
    assert warnings(caplog) == []


def test_scaleset_without_org_or_repo_is_skipped(caplog: pytest.LogCaptureFixture) -> None:
    data = {**FULL}
    del data["org"]
    parsed = parse(unit(data))
    assert parsed.scalesets == ()
    assert parsed.entities == ()
    assert parsed.problems == (InputProblem("garm-configurator/0", "neither org nor repo is set"),)
    assert any("small" in w for w in warnings(caplog))


@pytest.mark.parametrize(
    ("missing_keys", "reported"),
    [
        (("provider_name",), "provider_name"),
        (("image_id",), "image"),
        (("flavor", "os_arch"), "flavor, os_arch"),
        (("max_runner",), "max_runner"),
        (
            ("provider_name", "image_id", "flavor", "os_arch", "max_runner"),
            "provider_name, image, flavor, os_arch, max_runner",
        ),
    ],
)
def test_missing_scaleset_fields_are_named(
    caplog: pytest.LogCaptureFixture, missing_keys: tuple[str, ...], reported: str
) -> None:
    data = {key: value for key, value in FULL.items() if key not in missing_keys}
    parsed = parse(unit(data))
    assert parsed.scalesets == ()
    assert parsed.problems == (
        InputProblem("garm-configurator/0", f"scale set fields missing: {reported}"),
    )
    assert any("small" in w and reported in w for w in warnings(caplog))


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"max_runner": "four"}, "max_runner is not an integer"),
        ({"max_runner": "2.5"}, "max_runner is not an integer"),
        ({"max_runner": "-1"}, "max_runner is not an integer"),
        ({"min_idle_runner": "x"}, "min_idle_runner is not an integer"),
        (
            {"min_idle_runner": "x", "max_runner": "y"},
            "min_idle_runner and max_runner is not an integer",
        ),
    ],
)
def test_non_integer_counts_skip_scaleset(
    caplog: pytest.LogCaptureFixture, overrides: dict[str, str], reason: str
) -> None:
    parsed = parse(unit({**FULL, **overrides}))
    assert parsed.scalesets == ()
    assert parsed.problems == (InputProblem("garm-configurator/0", reason),)
    assert any("small" in w for w in warnings(caplog))


def test_min_idle_runner_defaults_to_zero() -> None:
    data = {**FULL}
    del data["min_idle_runner"]
    (spec,) = parse(unit(data)).scalesets
    assert spec.min_idle_runners == 0


def test_labels_are_split_stripped_and_empties_dropped() -> None:
    (spec,) = parse(unit({**FULL, "labels": " b, a ,, ,b"})).scalesets
    assert spec.labels == ("b", "a", "b")
    (spec,) = parse(unit({**FULL, "labels": ""})).scalesets
    assert spec.labels == ()


def test_runner_group_defaults_to_empty() -> None:
    (spec,) = parse(unit(FULL)).scalesets
    assert spec.runner_group == ""
    (spec,) = parse(unit({**FULL, "runner_group": "builders"})).scalesets
    assert spec.runner_group == "builders"


def test_pre_install_scripts_object_is_kept() -> None:
    scripts = {"pre_install.sh": "#!/bin/bash\necho hi", "b.sh": "true"}
    (spec,) = parse(unit({**FULL, "pre_install_scripts": json.dumps(scripts)})).scalesets
    assert spec.pre_install_scripts == scripts


@pytest.mark.parametrize("raw", ["{not json", '["a.sh"]', '"text"', "42", "null"])
def test_bad_pre_install_scripts_hold_the_scaleset(
    caplog: pytest.LogCaptureFixture, raw: str
) -> None:
    parsed = parse(unit({**FULL, "pre_install_scripts": raw}))
    # Held as it is: never updated with its scripts removed.
    assert parsed.scalesets == ()
    assert parsed.held.scalesets == {"small"}
    assert parsed.problems == (
        InputProblem("garm-configurator/0", "pre_install_scripts is not a JSON object of strings"),
    )
    assert any("pre_install_scripts" in w for w in warnings(caplog))


@pytest.mark.parametrize(
    ("raw", "shell"), [(None, False), ("", False), ("false", False), ("true", True)]
)
def test_enable_shell_reads_true_or_false_and_absent_is_false(
    raw: str | None, shell: bool
) -> None:
    data = dict(FULL) if raw is None else {**FULL, "enable_shell": raw}
    parsed = parse(unit(data))
    assert parsed.problems == ()
    (spec,) = parsed.scalesets
    assert spec.enable_shell is shell


@pytest.mark.parametrize("raw", ["True", "yes", "1", " true", "false\n"])
def test_any_other_enable_shell_holds_the_configurator_naming_the_key(
    caplog: pytest.LogCaptureFixture, raw: str
) -> None:
    parsed = parse(unit({**FULL, "enable_shell": raw}))
    assert parsed.scalesets == ()
    assert parsed.held.scalesets == {"small"}
    assert parsed.problems == (InputProblem("garm-configurator/0", "invalid keys: enable_shell"),)
    assert any("enable_shell" in w for w in warnings(caplog))


def test_pre_install_scripts_drop_non_string_bodies() -> None:
    raw = json.dumps({"ok.sh": "true", "bad.sh": 3, "nested": {"x": "y"}})
    parsed = parse(unit({**FULL, "pre_install_scripts": raw}))
    assert parsed.scalesets == ()
    assert parsed.held.scalesets == {"small"}
    assert len(parsed.problems) == 1


def test_one_spec_per_relation_and_name_prefers_provider_unit() -> None:
    follower = {**SCALESET, "image_id": "img-from-follower"}
    leader = {**FULL, "image_id": "img-from-leader"}
    parsed = parse(
        unit(follower, name="garm-configurator/0"),
        unit(leader, name="garm-configurator/1"),
        unit(follower, name="garm-configurator/2"),
    )
    (spec,) = parsed.scalesets
    assert spec.image == "img-from-leader"


def test_one_spec_per_relation_and_name_falls_back_to_first_unit() -> None:
    parsed = parse(
        unit({**SCALESET, "image_id": "first"}, name="garm-configurator/0"),
        unit({**SCALESET, "image_id": "second"}, name="garm-configurator/1"),
    )
    assert [s.image for s in parsed.scalesets] == ["first"]


def test_same_name_in_another_relation_belongs_to_the_first() -> None:
    parsed = parse(
        unit({**FULL, "provider_name": "cfg-b-0"}, name="cfg-b/0", rid=2),
        unit(FULL, name="cfg-a/0", rid=1),
        unit({**FULL, "name": "large"}, name="cfg-a/1", rid=1),
    )
    # Relation ids are stable and never reused, so "first" does not change between hooks.
    assert [(s.name, s.provider_name) for s in parsed.scalesets] == [
        ("small", "cfg-a-0"),
        ("large", "cfg-a-1"),
    ]
    assert parsed.problems == (InputProblem("cfg-b", "scale set small belongs to cfg-a", True),)


def test_invalid_provider_unit_leaves_the_follower_spec() -> None:
    leader = {**FULL, "labels": "bad\nlabel", "image_id": "img-from-leader"}
    parsed = parse(
        unit(leader, name="garm-configurator/0"),
        unit({**SCALESET, "image_id": "img-from-follower"}, name="garm-configurator/1"),
    )
    assert parsed.providers == ()
    # One bad unit holds the whole configurator: its scale set stays as it is in GARM.
    assert parsed.scalesets == ()
    assert parsed.held.scalesets == {"small"}
    assert parsed.problems == (InputProblem("garm-configurator/0", "invalid keys: labels"),)


# --- gate (5.2 step 11) -----------------------------------------------------------------------


def test_has_contract_data() -> None:
    assert not has_contract_data({})
    assert not has_contract_data({"ingress-address": "10.0.0.1", "private-address": "10.0.0.1"})
    assert not has_contract_data({"name": ""})
    assert has_contract_data({"dockerhub_mirror": "https://mirror"})
    assert has_contract_data({"name": "small"})


def test_unpublished_relation_ids() -> None:
    units = [
        unit({"ingress-address": "10.0.0.1"}, name="cfg-a/0", rid=3),
        unit({"ingress-address": "10.0.0.2"}, name="cfg-b/0", rid=5),
        unit({"name": "small"}, name="cfg-b/1", rid=5),
    ]
    # Relation 7 has no units at all.
    assert unpublished_relation_ids([7, 5, 3], units) == (3, 7)
    assert unpublished_relation_ids([5], units) == ()


def test_invalid_but_published_unit_still_counts_as_published() -> None:
    units = [unit({"name": "bad\nname"}, rid=4)]
    assert unpublished_relation_ids([4], units) == ()


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


# --- debug-ssh (15.1) -------------------------------------------------------------------------

SSH = {
    "host": "tmate.example",
    "port": "10022",
    "rsa_fingerprint": "SHA256:rsa",
    "ed25519_fingerprint": "SHA256:ed",
}


def test_debug_ssh_sorted_by_host_and_port() -> None:
    units = [
        unit({**SSH, "host": "b.example", "port": "22"}, name="tmate/0"),
        unit({**SSH, "host": "a.example", "port": "2222"}, name="tmate/1"),
        unit({**SSH, "host": "a.example", "port": "222"}, name="tmate/2"),
    ]
    assert [(c.host, c.port) for c in parse_debug_ssh(units).connections] == [
        ("a.example", 222),
        ("a.example", 2222),
        ("b.example", 22),
    ]
    assert parse_debug_ssh(units).connections[0] == DebugSshConnection(
        "a.example", 222, "SHA256:rsa", "SHA256:ed"
    )


def test_debug_ssh_incomplete_is_not_ready(caplog: pytest.LogCaptureFixture) -> None:
    data = {**SSH}
    del data["ed25519_fingerprint"]
    assert parse_debug_ssh([unit(data, name="tmate/0")]).connections == ()
    assert any("not ready" in w and "tmate/0" in w for w in warnings(caplog))


def test_debug_ssh_newline_is_rejected(caplog: pytest.LogCaptureFixture) -> None:
    data = {**SSH, "rsa_fingerprint": "SHA256:rsa\nTMATE_SERVER_HOST=evil"}
    assert parse_debug_ssh([unit(data, name="tmate/0")]).connections == ()
    lines = warnings(caplog)
    assert any("rejected: possible injection" in w and "rsa_fingerprint" in w for w in lines)
    assert all("evil" not in w for w in lines)


@pytest.mark.parametrize("port", ["0", "65536", "ssh", "22.5", "-22"])
def test_debug_ssh_bad_port_is_rejected(caplog: pytest.LogCaptureFixture, port: str) -> None:
    assert parse_debug_ssh([unit({**SSH, "port": port}, name="tmate/0")]).connections == ()
    assert any("port" in w and "tmate/0" in w for w in warnings(caplog))


def test_debug_ssh_port_bounds_accepted() -> None:
    units = [unit({**SSH, "port": "1"}), unit({**SSH, "port": "65535"})]
    assert [c.port for c in parse_debug_ssh(units).connections] == [1, 65535]


# --- describe_problems ------------------------------------------------------------------------


def test_describe_problems() -> None:
    first = InputProblem("garm-configurator/1", "max_runner is not an integer")
    second = InputProblem("garm-configurator/2", "invalid keys: labels")
    third = InputProblem("cfg-b/0", "neither org nor repo is set")
    assert describe_problems([]) == ""
    assert describe_problems([first]) == (
        "invalid data from garm-configurator/1 (max_runner is not an integer)"
    )
    assert describe_problems([first, second, third]) == (
        "invalid data from garm-configurator/1 (max_runner is not an integer); +2 more"
    )


# --- Juju adapter through ops.testing ---------------------------------------------------------

CAPTURED: list[CharmState] = []

META = {
    "name": "garm",
    "requires": {
        "garm-configurator": {"interface": "garm_configurator_v0"},
        "debug-ssh": {"interface": "debug-ssh"},
        "ingress": {"interface": "ingress", "limit": 1},
    },
}


class StateProbeCharm(ops.CharmBase):
    """A minimal charm that records the CharmState it reads."""

    def __init__(self, framework: ops.Framework) -> None:
        super().__init__(framework)
        framework.observe(self.on.update_status, self._on_update_status)

    def _on_update_status(self, _: ops.EventBase) -> None:
        CAPTURED.append(CharmState.from_charm(self))


def run_probe(state: ops.testing.State) -> CharmState:
    CAPTURED.clear()
    ctx = ops.testing.Context(StateProbeCharm, meta=META)
    ctx.run(ctx.on.update_status(), state)
    (captured,) = CAPTURED
    return captured


def test_from_charm_reads_relations_and_secrets(caplog: pytest.LogCaptureFixture) -> None:
    password = ops.testing.Secret(tracked_content={"value": PASSWORD})
    key = ops.testing.Secret(tracked_content={"value": PRIVATE_KEY})
    leader_data = {
        **FULL,
        "openstack_password_secret_uri": password.id,
        "github_private_key_secret_uri": key.id,
    }
    follower_data = {**SCALESET, "image_id": "follower-image"}
    configurator = ops.testing.Relation(
        endpoint="garm-configurator",
        remote_app_name="garm-configurator",
        remote_units_data={1: follower_data, 0: leader_data},
    )
    tmate = ops.testing.Relation(
        endpoint="debug-ssh",
        remote_app_name="tmate",
        remote_units_data={0: {**SSH, "host": "z.example"}, 1: {**SSH, "host": "a.example"}},
    )
    state = run_probe(
        ops.testing.State(relations=[configurator, tmate], secrets=[password, key], leader=True)
    )

    assert state.configurator_relation_count == 1
    assert state.unpublished_relation_ids == ()
    assert state.problems == ()
    (provider,) = state.providers
    assert provider.unit_name == "garm-configurator-0"
    assert provider.password == PASSWORD
    (credential,) = state.credentials
    assert credential.private_key == PRIVATE_KEY
    assert [e.entity_name for e in state.entities] == ["canonical"]
    (spec,) = state.scalesets
    assert spec.image == "img-123"
    assert [c.host for c in state.debug_ssh] == ["a.example", "z.example"]
    assert warnings(caplog) == []


def test_from_charm_relations_without_data_are_unpublished() -> None:
    empty = ops.testing.Relation(
        endpoint="garm-configurator", remote_app_name="cfg-a", remote_units_data={}
    )
    juju_only = ops.testing.Relation(endpoint="garm-configurator", remote_app_name="cfg-b")
    published = ops.testing.Relation(
        endpoint="garm-configurator",
        remote_app_name="cfg-c",
        remote_units_data={0: {"name": "small"}},
    )
    state = run_probe(ops.testing.State(relations=[published, juju_only, empty]))
    assert state.configurator_relation_count == 3
    assert state.unpublished_relation_ids == tuple(sorted([empty.id, juju_only.id]))
    # The published unit has a name but nothing else: the spec is skipped with a problem.
    assert state.scalesets == ()
    assert [p.source for p in state.problems] == ["cfg-c/0"]


def test_from_charm_without_relations() -> None:
    state = run_probe(ops.testing.State(model=ops.testing.Model(name="garm-model")))
    in_cluster = "http://garm.garm-model.svc.cluster.local:8080"
    assert state == CharmState((), (), (), (), (), 0, (), (), external_url=in_cluster)


def test_from_charm_unreadable_secrets_are_named(caplog: pytest.LogCaptureFixture) -> None:
    no_value = ops.testing.Secret(tracked_content={"other": PRIVATE_KEY})
    data = {
        **FULL,
        "openstack_password_secret_uri": "secret:cvh7kchv0000000000missing",
        "github_private_key_secret_uri": no_value.id,
    }
    configurator = ops.testing.Relation(
        endpoint="garm-configurator",
        remote_app_name="garm-configurator",
        remote_units_data={0: data},
    )
    state = run_probe(ops.testing.State(relations=[configurator], secrets=[no_value]))

    assert state.providers == ()
    assert state.credentials == ()
    assert state.scalesets == ()
    assert state.held.scalesets == {"small"}
    assert state.prune  # what is held is known by name: the other configurators go on
    lines = warnings(caplog)
    assert any("secret:cvh7kchv0000000000missing" in w for w in lines)
    assert any(no_value.id in w and "value" in w for w in lines)
    assert {p.reason for p in state.problems} == {
        "provider fields missing: password",
        "GitHub private key secret is unreadable",
    }


def test_from_charm_collects_debug_ssh_problems() -> None:
    tmate = ops.testing.Relation(
        endpoint="debug-ssh",
        remote_app_name="tmate",
        remote_units_data={0: {**SSH, "port": "70000"}},
    )
    state = run_probe(ops.testing.State(relations=[tmate]))
    assert state.debug_ssh == ()
    assert state.problems == (InputProblem("tmate/0", "debug-ssh port is not in 1..65535"),)
    assert state.configurator_relation_count == 0
