"""One pass's parse of the configurator databags: providers, credentials, entities, scale sets."""

from __future__ import annotations

import json

import pytest

from relations.configurator_parser import parse_configurator_units
from tests.unit.configurator_data import (
    FULL,
    GITHUB,
    KEY_BODY_LINE,
    PASSWORD,
    PLAINTEXT_PASSWORD,
    PRIVATE_KEY,
    PROVIDER,
    SCALESET,
    SECRETS,
    no_secret_in_logs,  # noqa: F401 - autouse
    parse,
    unit,
    warnings,
)
from vocabulary.desired_state import (
    DEFAULT_GITHUB_ENDPOINT,
    MANAGED_CREDENTIAL_DESCRIPTION,
    InputProblem,
    credential_name,
    entity_key,
)
from vocabulary.runner_options import RunnerConfig

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
    assert credential.key.pem() == PRIVATE_KEY
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
    assert parsed.held.entities == {entity_key("organization", "canonical")}


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
    assert credential.key.pem() == PRIVATE_KEY


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
