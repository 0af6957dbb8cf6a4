"""The garm-configurator contract: its JSON Schema, the provider name of a unit, the gate."""

from __future__ import annotations

import json

import jsonschema
import pytest

from container_scripts.garm_entrypoint import UNIT_NAME_PATTERN
from relations.configurator_contract import (
    CONTRACT_KEYS,
    PROVIDER_NAME_PATTERN,
    has_contract_data,
    inline_refs,
    load_schema,
    negations_as_patterns,
    provider_name_for_unit,
    schema_failures,
    unpublished_relation_ids,
)
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


INLINE_CASES = [
    {"name": "large", "github_app_id": "11", "github_private_key_secret_uri": "secret:k"},
    {"name": "two\nlines", "github_app_id": "11\r"},
    {"github_private_key_secret_uri": "not-a-secret", "provider_name": "Bad_Name"},
    {"github_private_key_secret_uri": "secret:a\nb", "org": ""},
    {"openstack_password_secret_uri": "secret:x y", "unknown-key": "v"},
    {"max_runner": ["not", "a", "string"]},
    # Single lines, checked as one positive pattern instead of a negation (negations_as_patterns).
    {"name": "trailing\n", "org": "\n", "image": "\r", "flavor": "a\r\nb", "labels": ""},
    {"name": "x\u2028y", "org": "tab\there", "image": "\\n", "flavor": "end\r"},
    {"github_private_key_secret_uri": "secret:k\n", "openstack_password_secret_uri": "\nsecret:k"},
    {"name": 7, "org": None, "image": {"not": "a string"}, "flavor": True},
]


@pytest.mark.parametrize("databag", INLINE_CASES)
def test_the_inlined_schema_refuses_exactly_what_the_published_one_refuses(
    databag: dict[str, object],
) -> None:
    published = jsonschema.Draft202012Validator(dict(load_schema()))
    refused = {
        str(e.absolute_path[0]) if e.absolute_path else "<databag>"
        for e in published.iter_errors(databag)
    }
    assert schema_failures(databag) == tuple(sorted(refused))  # pyright: ignore[reportArgumentType]


def test_inlining_keeps_a_reference_whose_keywords_collide_as_all_of() -> None:
    defs = {"line": {"type": "string", "pattern": "^a", "description": "d"}}
    node = {"$ref": "#/$defs/line", "pattern": "b$"}
    assert inline_refs(node, defs) == {
        "pattern": "b$",
        "allOf": [{"type": "string", "pattern": "^a"}],
    }
    assert inline_refs({"$ref": "#/$defs/line"}, defs) == {"type": "string", "pattern": "^a"}


def test_a_strings_negated_pattern_becomes_one_positive_pattern() -> None:
    node = {
        "properties": {
            "a": {"type": "string", "not": {"pattern": "[\\r\\n]"}},
            "b": {"type": "string", "pattern": "^x", "not": {"pattern": "y"}},
            "c": {"not": {"pattern": "y"}},
            "d": {"type": "string", "not": {"pattern": "y", "minLength": 2}},
        }
    }
    assert negations_as_patterns(node) == {
        "properties": {
            "a": {"type": "string", "pattern": "^(?![\\s\\S]*(?:[\\r\\n]))"},
            "b": {
                "type": "string",
                "pattern": "^x",
                "allOf": [{"pattern": "^(?![\\s\\S]*(?:y))"}],
            },
            # Not known to be a string, or more than a pattern negated: left as it is.
            "c": {"not": {"pattern": "y"}},
            "d": {"type": "string", "not": {"pattern": "y", "minLength": 2}},
        }
    }
