"""The garm-configurator relation contract: its keys, its JSON Schema, and how its fields read.

Owns the relation name, the databag keys, the schema check every unit databag passes before it
is parsed, the provider name derived from a unit name, and the small readers of single fields
that the parser and the ownership merge share. Must not import ops or the GARM client: it
works on detached ``UnitData``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Protocol, cast

import jsonschema

from container_scripts.garm_entrypoint import UNIT_NAME_PATTERN
from vocabulary.desired_state import UnitData
from vocabulary.github_endpoint import BASE_URL_FIELD, CA_BUNDLE_FIELD, endpoint_name
from vocabulary.runner_options import RUNNER_OPTION_DATABAG_KEYS

CONFIGURATOR_RELATION_NAME = "garm-configurator"
SCHEMA_PATH = Path(__file__).parent / "interfaces" / "garm_configurator_v0.schema.json"

SCALESET_DATABAG_KEYS = (
    "name",
    "provider_name",
    "image_id",
    "flavor",
    "os_arch",
    "min_idle_runner",
    "max_runner",
    "labels",
    "runner_group",
    "pre_install_scripts",
    "org",
    "repo",
    "enable_shell",
)
PROVIDER_DATABAG_KEYS = (
    "openstack_auth_url",
    "openstack_username",
    "openstack_password_secret_uri",
    "openstack_password",
    "openstack_project_name",
    "openstack_user_domain_name",
    "openstack_project_domain_name",
    "openstack_region_name",
    "openstack_network",
)
PRIVATE_KEY_FIELD = "github_private_key_secret_uri"
GITHUB_DATABAG_KEYS = ("github_app_id", "github_installation_id", PRIVATE_KEY_FIELD)
# Published with org/repo by every unit: they say which GitHub the organisation is on.
ENDPOINT_DATABAG_KEYS = (BASE_URL_FIELD, CA_BUNDLE_FIELD)
CONTRACT_KEYS = (
    SCALESET_DATABAG_KEYS
    + RUNNER_OPTION_DATABAG_KEYS
    + PROVIDER_DATABAG_KEYS
    + GITHUB_DATABAG_KEYS
    + ENDPOINT_DATABAG_KEYS
)
# The entrypoint is the source: it checks the same name again inside the container, where it
# becomes a file path, and cannot import this module.
PROVIDER_NAME_PATTERN = UNIT_NAME_PATTERN
# Where the schema's own definitions live; its references are all local.
REF_PREFIX = "#/$defs/"
# Ids and counts must fit GARM's 64-bit integers; only ASCII digits (str.isdigit accepts more).
DECIMAL = re.compile(r"[0-9]{1,18}")


def schema_failures(data: Mapping[str, str]) -> tuple[str, ...]:
    """Validate one unit databag against the relation schema.

    Args:
        data: the unit databag.

    Returns:
        The sorted names of the keys that fail the schema (``<databag>`` for a failure of the
        whole mapping); empty when the databag is valid. Error messages are not returned because
        they quote the offending values.
    """
    keys = {
        str(error.absolute_path[0]) if error.absolute_path else "<databag>"
        for error in _validator().iter_errors(dict(data))
    }
    return tuple(sorted(keys))


@cache
def load_schema() -> Mapping[str, object]:
    """Return the garm_configurator_v0 JSON Schema shipped in ``src/relations/interfaces``."""
    return cast(Mapping[str, object], json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def has_contract_data(data: Mapping[str, str]) -> bool:
    """Tell whether a databag sets any contract key; a unit that sets none has said nothing."""
    return any(data.get(key) for key in CONTRACT_KEYS)


def unpublished_relation_ids(
    relation_ids: Sequence[int], units: Sequence[UnitData]
) -> tuple[int, ...]:
    """Return the relations none of whose remote units set a contract key.

    Reconciling such a relation would read "nothing desired" and delete live objects, so the
    caller skips the GARM chain while any of these exist. A relation without units counts as
    unpublished.

    Args:
        relation_ids: ids of all garm-configurator relations.
        units: the remote unit databags of those relations.

    Returns:
        The unpublished relation ids, sorted.
    """
    published = {unit.relation_id for unit in units if has_contract_data(unit.data)}
    return tuple(sorted(rid for rid in set(relation_ids) if rid not in published))


def provider_name_for_unit(unit_name: str) -> str | None:
    """Derive the provider name from a configurator unit name.

    Args:
        unit_name: Juju unit name such as ``garm-configurator/0``.

    Returns:
        The name with ``/`` replaced by ``-``, or None when the result is not a safe provider
        name (it ends up in file paths inside the workload).
    """
    name = unit_name.replace("/", "-")
    return name if PROVIDER_NAME_PATTERN.fullmatch(name) else None


def text(data: Mapping[str, str], key: str) -> str:
    """The stripped value of ``key``, ``""`` when unset."""
    return (data.get(key) or "").strip()


def single_line(data: Mapping[str, str], key: str) -> str:
    """The stripped value of ``key`` when it is one printable line, else ``""``."""
    value = text(data, key)
    return value if value.isprintable() else ""


def entity_target(data: Mapping[str, str]) -> tuple[str, str] | None:
    """The ``(type, name)`` of the organisation or repository a databag names, if any."""
    if org := text(data, "org"):
        return ("organization", org)
    if repo := text(data, "repo"):
        return ("repository", repo)
    return None


def lenient_endpoint(data: Mapping[str, str]) -> str | None:
    """The GARM endpoint a databag's ``github_base_url`` names; None when it does not parse."""
    return endpoint_name(text(data, BASE_URL_FIELD))


def lenient_ids(data: Mapping[str, str]) -> tuple[int, int] | None:
    """The GitHub App and installation ids when both read as integers, else None."""
    app_raw = text(data, "github_app_id")
    installation_raw = text(data, "github_installation_id")
    if DECIMAL.fullmatch(app_raw) and DECIMAL.fullmatch(installation_raw):
        return int(app_raw), int(installation_raw)
    return None


class _SchemaError(Protocol):
    @property
    def absolute_path(self) -> Sequence[str | int]: ...


class _SchemaValidator(Protocol):
    def iter_errors(self, instance: object) -> Iterator[_SchemaError]: ...


@cache
def _validator() -> _SchemaValidator:
    # The schema's local references inlined: resolving a $ref per property and databag was
    # most of a converged hook's CPU with hundreds of configurators.
    schema = dict(load_schema())
    defs = cast(Mapping[str, object], schema.pop("$defs", {}))
    inlined = cast(Mapping[str, object], negations_as_patterns(inline_refs(schema, defs)))
    return cast(_SchemaValidator, jsonschema.Draft202012Validator(inlined))


def negations_as_patterns(node: object) -> object:
    r"""``node`` with each string's ``not: {pattern: P}`` checked as one positive pattern.

    jsonschema runs a whole sub-validation for every ``not``; for a node that must be a string,
    "P matches nowhere" is the pattern ``^(?![\s\S]*(?:P))`` (anchored at the start, the
    look-ahead scans the whole string), which refuses exactly the same strings. Any other
    ``not`` is left as it is; where the node has its own ``pattern`` the new one goes into an
    ``allOf``.
    """
    if isinstance(node, list):
        return [negations_as_patterns(item) for item in cast(list[object], node)]
    if not isinstance(node, dict):
        return node
    own = {k: negations_as_patterns(v) for k, v in cast(dict[str, object], node).items()}
    negated = own.get("not")
    if own.get("type") != "string" or not isinstance(negated, dict):
        return own
    pattern = cast(dict[str, object], negated).get("pattern")
    if not isinstance(pattern, str) or len(cast(dict[str, object], negated)) != 1:
        return own
    del own["not"]
    positive = f"^(?![\\s\\S]*(?:{pattern}))"
    if "pattern" in own:
        return {**own, "allOf": [{"pattern": positive}]}
    return {**own, "pattern": positive}


def inline_refs(node: object, defs: Mapping[str, object]) -> object:
    """``node`` with every ``{"$ref": "#/$defs/NAME", ...}`` replaced by what it refers to.

    The referenced keywords are merged into the node where none collides with the node's own;
    otherwise the reference becomes an ``allOf`` entry. Either way the node validates exactly
    what it did with the reference.
    """
    if isinstance(node, list):
        return [inline_refs(item, defs) for item in cast(list[object], node)]
    if not isinstance(node, dict):
        return node
    own = {k: inline_refs(v, defs) for k, v in cast(dict[str, object], node).items()}
    ref = own.pop("$ref", None)
    if not isinstance(ref, str):
        return own
    target = cast(dict[str, object], inline_refs(defs[ref.removeprefix(REF_PREFIX)], defs))
    referred = {k: v for k, v in target.items() if k != "description"}
    if referred.keys() & own.keys():
        return {**own, "allOf": [referred]}
    return {**referred, **own}
