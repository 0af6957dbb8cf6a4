"""GARM's JSON wire format: per-struct field tables and the (de)serialisers built on them.

The tables were transcribed from GARM's Go structs (params/params.go and params/requests.go; see
the project's shared reference ``garm-wire-fields.json``) so the emulator can drop exactly the
fields Go's ``encoding/json`` drops. The rules reproduced here are Go's, not Python's:

* ``omitempty`` drops ``false``, ``0``, ``""``, nil pointers and empty slices/maps.
* ``omitempty`` never drops a struct value: ``time.Time`` and nested structs are always present
  (a zero ``time.Time`` renders as ``0001-01-01T00:00:00Z``); ``uuid.UUID`` is a 16-byte array,
  so it is never empty either.
* ``[]byte`` is base64 text; ``json.RawMessage`` is embedded verbatim.
* a field without ``omitempty`` is always present; a nil slice, pointer or ``[]byte`` is ``null``.

Response field kinds: ``value`` (plain scalar, list or map), ``time``, ``uuid``, ``bytes``,
``raw`` (JSON text kept as ``str``), ``ptr`` (nil only when ``None``), ``ptr:<Struct>``,
``struct:<Struct>`` and ``list:<Struct>``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple


class Field(NamedTuple):
    """One JSON field of a Go struct."""

    name: str
    omitempty: bool
    kind: str


ZERO_TIME = "0001-01-01T00:00:00Z"
ZERO_UUID = "00000000-0000-0000-0000-000000000000"

RESPONSE_STRUCTS: dict[str, tuple[Field, ...]] = {
    # Not in the shared reference; shapes as GARM declares them (PoolManagerStatus) or reduced to
    # one flag (AgentCapabilities, whose inner fields nothing in the charm reads).
    "PoolManagerStatus": (
        Field("running", False, "value"),
        Field("failure_reason", True, "value"),
    ),
    "AgentCapabilities": (Field("has_shell", False, "value"),),
    # The garm-agent tool store (params.FileObject, params.GARMAgentTool and the paginated
    # response around it; measured on GARM, see tools.py).
    "FileObject": (
        Field("id", False, "value"),
        Field("created_at", False, "time"),
        Field("updated_at", False, "time"),
        Field("name", False, "value"),
        Field("description", True, "value"),
        Field("size", False, "value"),
        Field("tags", False, "value"),
        Field("sha256", True, "value"),
        Field("file_type", False, "value"),
    ),
    "GARMAgentTool": (
        Field("id", False, "value"),
        Field("name", False, "value"),
        Field("size", False, "value"),
        Field("sha256sum", False, "value"),
        Field("description", False, "value"),
        Field("created_at", False, "time"),
        Field("updated_at", False, "time"),
        Field("file_type", False, "value"),
        Field("version", False, "value"),
        Field("os_type", False, "value"),
        Field("os_arch", False, "value"),
        Field("download_url", False, "value"),
        Field("origin", False, "value"),
        Field("source", False, "value"),
    ),
    "GARMAgentToolsPaginatedResponse": (
        Field("total_count", False, "value"),
        Field("pages", False, "value"),
        Field("current_page", False, "value"),
        Field("next_page", True, "ptr"),
        Field("previous_page", True, "ptr"),
        Field("results", False, "list:GARMAgentTool"),
    ),
    "ScaleSet": (
        # embedded RunnerPrefix (its one field, `runner_prefix`, has no omitempty)
        Field("runner_prefix", False, "value"),
        Field("created_at", True, "time"),
        Field("updated_at", True, "time"),
        Field("id", True, "value"),
        Field("scale_set_id", True, "value"),
        Field("name", True, "value"),
        Field("disable_update", False, "value"),
        Field("state", False, "value"),
        Field("extended_state", True, "value"),
        Field("provider_name", True, "value"),
        Field("max_runners", True, "value"),
        Field("min_idle_runners", True, "value"),
        Field("image", True, "value"),
        Field("flavor", True, "value"),
        Field("os_type", True, "value"),
        Field("os_arch", True, "value"),
        Field("enabled", True, "value"),
        Field("instances", True, "list:Instance"),
        Field("desired_runner_count", True, "value"),
        Field("enable_shell", False, "value"),
        Field("generation", False, "value"),
        Field("endpoint", True, "struct:ForgeEndpoint"),
        Field("runner_bootstrap_timeout", True, "value"),
        Field("extra_specs", True, "raw"),
        Field("github-runner-group", True, "value"),
        Field("tags", True, "list:Tag"),
        Field("status_messages", False, "list:StatusMessage"),
        Field("repo_id", True, "value"),
        Field("repo_name", True, "value"),
        Field("org_id", True, "value"),
        Field("org_name", True, "value"),
        Field("enterprise_id", True, "value"),
        Field("enterprise_name", True, "value"),
        Field("template_id", True, "value"),
        Field("template_name", True, "value"),
        Field("proxy_id", True, "value"),
        Field("proxy_name", True, "value"),
    ),
    "Instance": (
        Field("id", True, "value"),
        Field("provider_id", True, "value"),
        Field("provider_name", False, "value"),
        Field("agent_id", True, "value"),
        Field("name", True, "value"),
        Field("os_type", True, "value"),
        Field("os_name", True, "value"),
        Field("os_version", True, "value"),
        Field("os_arch", True, "value"),
        Field("addresses", True, "value"),
        Field("status", True, "value"),
        Field("runner_status", True, "value"),
        Field("pool_id", True, "value"),
        Field("scale_set_id", True, "value"),
        Field("provider_fault", True, "bytes"),
        Field("status_messages", True, "list:StatusMessage"),
        Field("created_at", True, "time"),
        Field("updated_at", True, "time"),
        Field("github-runner-group", True, "value"),
        Field("job", True, "ptr:Job"),
        Field("heartbeat", False, "time"),
        Field("capabilities", False, "struct:AgentCapabilities"),
        Field("generation", False, "value"),
    ),
    "Template": (
        Field("id", False, "value"),
        Field("created_at", False, "time"),
        Field("updated_at", False, "time"),
        Field("name", False, "value"),
        Field("description", False, "value"),
        Field("os_type", False, "value"),
        Field("forge_type", True, "value"),
        Field("data", False, "bytes"),
        Field("owner_id", True, "value"),
    ),
    "ForgeCredentials": (
        Field("id", True, "value"),
        Field("name", True, "value"),
        Field("description", True, "value"),
        Field("api_base_url", True, "value"),
        Field("upload_base_url", True, "value"),
        Field("base_url", True, "value"),
        Field("ca_bundle", True, "bytes"),
        Field("auth-type", True, "value"),
        Field("forge_type", True, "value"),
        Field("repositories", True, "list:Repository"),
        Field("organizations", True, "list:Organization"),
        Field("enterprises", True, "value"),
        Field("endpoint", True, "struct:ForgeEndpoint"),
        Field("created_at", True, "time"),
        Field("updated_at", True, "time"),
        Field("rate_limit", True, "ptr"),
    ),
    "ForgeEndpoint": (
        Field("name", True, "value"),
        Field("description", True, "value"),
        Field("api_base_url", True, "value"),
        Field("upload_base_url", True, "value"),
        Field("base_url", True, "value"),
        Field("ca_cert_bundle", True, "bytes"),
        Field("created_at", True, "time"),
        Field("updated_at", True, "time"),
        Field("tools_metadata_url", True, "value"),
        Field("use_internal_tools_metadata", True, "ptr"),
        Field("endpoint_type", True, "value"),
    ),
    "Organization": (
        Field("id", True, "value"),
        Field("name", True, "value"),
        Field("pool", True, "value"),
        Field("credentials_name", True, "value"),
        Field("credentials", True, "struct:ForgeCredentials"),
        Field("credentials_id", True, "value"),
        Field("pool_manager_status", True, "struct:PoolManagerStatus"),
        Field("pool_balancing_type", True, "value"),
        Field("endpoint", True, "struct:ForgeEndpoint"),
        Field("created_at", True, "time"),
        Field("updated_at", True, "time"),
        Field("events", True, "value"),
        Field("agent_mode", False, "value"),
    ),
    "Repository": (
        Field("id", True, "value"),
        Field("owner", True, "value"),
        Field("name", True, "value"),
        Field("pool", True, "value"),
        Field("credentials_name", True, "value"),
        Field("credentials_id", True, "value"),
        Field("credentials", True, "struct:ForgeCredentials"),
        Field("agent_mode", False, "value"),
        Field("pool_manager_status", True, "struct:PoolManagerStatus"),
        Field("pool_balancing_type", True, "value"),
        Field("endpoint", True, "struct:ForgeEndpoint"),
        Field("created_at", True, "time"),
        Field("updated_at", True, "time"),
        Field("events", True, "value"),
    ),
    "Provider": (
        Field("name", True, "value"),
        Field("type", True, "value"),
        Field("description", True, "value"),
    ),
    "ControllerInfo": (
        Field("controller_id", True, "uuid"),
        Field("hostname", True, "value"),
        Field("metadata_url", True, "value"),
        Field("callback_url", True, "value"),
        Field("webhook_url", True, "value"),
        Field("controller_webhook_url", True, "value"),
        Field("agent_url", True, "value"),
        Field("garm_agent_releases_url", False, "value"),
        Field("enable_agent_tools_sync", False, "value"),
        Field("garm_agent_version", False, "value"),
        Field("allow_insecure_garm_agent", False, "value"),
        Field("minimum_job_age_backoff", True, "value"),
        Field("version", True, "value"),
        Field("ca_cert_bundle", True, "bytes"),
        Field("cached_garm_agent_release_fetched_at", True, "ptr"),
    ),
    "JWTResponse": (Field("token", True, "value"),),
    "APIErrorResponse": (
        Field("error", False, "value"),
        Field("details", False, "value"),
    ),
    "Job": (
        Field("id", True, "value"),
        Field("workflow_job_id", True, "value"),
        Field("scaleset_job_id", True, "value"),
        Field("run_id", True, "value"),
        Field("action", True, "value"),
        Field("conclusion", True, "value"),
        Field("status", True, "value"),
        Field("name", True, "value"),
        Field("started_at", True, "time"),
        Field("completed_at", True, "time"),
        Field("runner_id", True, "value"),
        Field("runner_name", True, "value"),
        Field("runner_group_id", True, "value"),
        Field("runner_group_name", True, "value"),
        Field("repository_name", True, "value"),
        Field("repository_owner", True, "value"),
        Field("workflow_run_url", True, "value"),
        Field("labels", True, "value"),
        Field("repo_id", True, "ptr"),
        Field("org_id", True, "ptr"),
        Field("enterprise_id", True, "ptr"),
        Field("forge_instance_id", True, "ptr"),
        Field("locked_by", True, "uuid"),
        Field("created_at", True, "time"),
        Field("updated_at", True, "time"),
    ),
    "StatusMessage": (
        Field("created_at", True, "time"),
        Field("message", True, "value"),
        Field("event_type", True, "value"),
        Field("event_level", True, "value"),
    ),
    "User": (
        Field("id", True, "value"),
        Field("created_at", True, "time"),
        Field("updated_at", True, "time"),
        Field("email", True, "value"),
        Field("username", True, "value"),
        Field("full_name", True, "value"),
        Field("enabled", True, "value"),
        Field("is_admin", True, "value"),
    ),
    "Tag": (
        Field("id", True, "value"),
        Field("name", True, "value"),
    ),
}
# Request structs: JSON name -> decoder kind (``str``, ``int``, ``uint``, ``bool``, ``bytes``,
# ``raw``, ``strlist`` or ``obj:<Struct>``). Go ignores unknown keys and rejects wrong types.
REQUEST_STRUCTS: dict[str, dict[str, str]] = {
    "GithubPAT": {"oauth2_token": "str"},
    "CreateScaleSetParams": {
        # embedded RunnerPrefix
        "runner_prefix": "str",
        "name": "str",
        "disable_update": "bool",
        "scale_set_id": "int",
        "provider_name": "str",
        "max_runners": "uint",
        "min_idle_runners": "uint",
        "image": "str",
        "flavor": "str",
        "os_type": "str",
        "os_arch": "str",
        "enabled": "bool",
        "runner_bootstrap_timeout": "uint",
        "extra_specs": "raw",
        "enable_shell": "bool",
        "github-runner-group": "str",
        "template_id": "uint",
        "labels": "strlist",
        "proxy_id": "uint",
    },
    "UpdateScaleSetParams": {
        # embedded RunnerPrefix
        "runner_prefix": "str",
        "name": "str",
        "disable_update": "bool",
        "enabled": "bool",
        "max_runners": "uint",
        "min_idle_runners": "uint",
        "runner_bootstrap_timeout": "uint",
        "image": "str",
        "flavor": "str",
        "os_type": "str",
        "os_arch": "str",
        "extra_specs": "raw",
        "enable_shell": "bool",
        "runner_group": "str",
        "state": "str",
        "extended_state": "str",
        "template_id": "uint",
        "proxy_id": "uint",
    },
    "CreateOrgParams": {
        "name": "str",
        "credentials_name": "str",
        "webhook_secret": "str",
        "pool_balancer_type": "str",
        "forge_type": "str",
        "agent_mode": "bool",
    },
    "CreateRepoParams": {
        "owner": "str",
        "name": "str",
        "credentials_name": "str",
        "webhook_secret": "str",
        "pool_balancer_type": "str",
        "forge_type": "str",
        "agent_mode": "bool",
    },
    "UpdateEntityParams": {
        "credentials_name": "str",
        "webhook_secret": "str",
        "pool_balancer_type": "str",
        "agent_mode": "bool",
    },
    "CreateGithubCredentialsParams": {
        "name": "str",
        "description": "str",
        "endpoint": "str",
        "auth_type": "str",
        "pat": "obj:GithubPAT",
        "app": "obj:GithubApp",
    },
    "UpdateGithubCredentialsParams": {
        "name": "str",
        "description": "str",
        "pat": "obj:GithubPAT",
        "app": "obj:GithubApp",
    },
    "GithubApp": {
        "app_id": "int",
        "installation_id": "int",
        "private_key_bytes": "bytes",
    },
    "CreateTemplateParams": {
        "name": "str",
        "description": "str",
        "data": "bytes",
        "os_type": "str",
        "forge_type": "str",
    },
    "UpdateTemplateParams": {
        "name": "str",
        "description": "str",
        "data": "bytes",
    },
    "CreateGithubEndpointParams": {
        "name": "str",
        "description": "str",
        "api_base_url": "str",
        "upload_base_url": "str",
        "base_url": "str",
        "ca_cert_bundle": "bytes",
    },
    "UpdateGithubEndpointParams": {
        "description": "str",
        "api_base_url": "str",
        "upload_base_url": "str",
        "base_url": "str",
        "ca_cert_bundle": "bytes",
    },
    "UpdateControllerParams": {
        "metadata_url": "str",
        "callback_url": "str",
        "webhook_url": "str",
        "agent_url": "str",
        "garm_agent_releases_url": "str",
        "enable_agent_tools_sync": "bool",
        "garm_agent_version": "str",
        "allow_insecure_garm_agent": "bool",
        "minimum_job_age_backoff": "uint",
        "ca_cert_bundle": "bytes",
        "clear_ca_cert_bundle": "bool",
    },
    "PasswordLoginParams": {
        "username": "str",
        "password": "str",
    },
    "NewUserParams": {
        "email": "str",
        "username": "str",
        "full_name": "str",
        "password": "str",
    },
}


def go_time(moment: datetime | None) -> str:
    """Render a timestamp the way Go's ``time.Time`` marshals a UTC time (RFC 3339, ``Z``)."""
    if moment is None:
        return ZERO_TIME
    utc = moment.astimezone(UTC) if moment.year > 1 else moment.replace(tzinfo=UTC)
    # Go pads the year to four digits; strftime("%Y") does not on every platform (year 1).
    text = f"{utc.year:04d}-" + utc.strftime("%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += "." + f"{moment.microsecond:06d}".rstrip("0")
    return text + "Z"


def _is_zero(value: Any) -> bool:
    # Go's notion of "empty" for omitempty: false, 0, "", nil, zero-length slice or map.
    if value is None or value is False:
        return True
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value == 0
    if isinstance(value, str | bytes | list | tuple | dict):
        return len(value) == 0
    return False


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return go_time(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def _encode_struct(struct: str, value: Any) -> Any:
    return to_wire(struct, value or {})


def _encode_list(struct: str, value: Any) -> Any:
    return None if value is None else [to_wire(struct, item) for item in value]


def _encode_ptr(struct: str, value: Any) -> Any:
    if value is None:
        return None
    return to_wire(struct, value) if struct else _plain(value)


def _encode_bytes(_struct: str, value: Any) -> Any:
    return None if value is None else base64.b64encode(value).decode("ascii")


def _encode_raw(_struct: str, value: Any) -> Any:
    return None if value is None else json.loads(value)


_ENCODERS: dict[str, Any] = {
    "time": lambda _s, v: go_time(v),  # pyright: ignore[reportUnknownLambdaType]
    "uuid": lambda _s, v: v or ZERO_UUID,  # pyright: ignore[reportUnknownLambdaType]
    "struct": _encode_struct,
    "list": _encode_list,
    "ptr": _encode_ptr,
    "bytes": _encode_bytes,
    "raw": _encode_raw,
    "value": lambda _s, v: _plain(v),  # pyright: ignore[reportUnknownLambdaType]
}

# Kinds that omitempty can never drop (Go structs and arrays) and kinds dropped only when nil.
_NEVER_OMITTED = frozenset({"time", "uuid", "struct"})


def _omitted(field: Field, kind: str, value: Any) -> bool:
    if not field.omitempty or kind in _NEVER_OMITTED:
        return False
    if kind == "ptr":
        return value is None
    return _is_zero(value)


def to_wire(struct: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Serialise ``values`` (keyed by JSON name) as GARM serialises the Go struct ``struct``.

    Missing keys take the Go zero value of their field.
    """
    answer: dict[str, Any] = {}
    for field in RESPONSE_STRUCTS[struct]:
        kind, _, nested = field.kind.partition(":")
        value = values.get(field.name)
        if _omitted(field, kind, value):
            continue
        answer[field.name] = _ENCODERS[kind](nested, value)
    return answer


class DecodeError(ValueError):
    """A request body that Go's JSON decoder would reject for its target struct."""


def _decode_bytes(name: str, value: Any) -> bytes:
    if not isinstance(value, str):
        raise DecodeError(f"{name}: expected base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise DecodeError(f"{name}: illegal base64 data") from exc


def _decode_int(name: str, value: Any, unsigned: bool) -> int:
    # Go refuses 2.0 for an integer field: JSON numbers with a fraction part are not integers.
    if isinstance(value, bool) or not isinstance(value, int):
        raise DecodeError(f"{name}: expected an integer")
    if unsigned and value < 0:
        raise DecodeError(f"{name}: expected an unsigned integer")
    return int(value)


def _decode_str(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise DecodeError(f"{name}: expected a string")
    return value


def _decode_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise DecodeError(f"{name}: expected a boolean")
    return value


def _decode_strlist(name: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):  # pyright: ignore[reportUnknownVariableType]
        raise DecodeError(f"{name}: expected a list of strings")
    return list(value)  # pyright: ignore[reportUnknownArgumentType]


_DECODERS: dict[str, Any] = {
    "raw": lambda _n, v: json.dumps(v),  # pyright: ignore[reportUnknownLambdaType]
    "str": _decode_str,
    "int": lambda n, v: _decode_int(n, v, unsigned=False),  # pyright: ignore[reportUnknownLambdaType]
    "uint": lambda n, v: _decode_int(n, v, unsigned=True),  # pyright: ignore[reportUnknownLambdaType]
    "bool": _decode_bool,
    "bytes": _decode_bytes,
    "strlist": _decode_strlist,
}


def _decode_value(name: str, kind: str, value: Any) -> Any:
    if kind.startswith("obj:"):
        return decode_request(kind.removeprefix("obj:"), value)
    return _DECODERS[kind](name, value)


def decode_request(struct: str, body: Any) -> dict[str, Any]:
    """Decode a request body into the keys GARM would see set for ``struct``.

    The result holds only keys present in the body with a non-null value (a JSON ``null`` leaves
    a Go field at its zero value or nil pointer), which is what pointer semantics need. Unknown
    keys are ignored, as Go does. ``json.RawMessage`` fields keep the JSON text of what was sent
    (``null`` included, since Go hands the literal to the raw message).

    Raises:
        DecodeError: the body is not an object or a field has the wrong JSON type.
    """
    if not isinstance(body, dict):
        raise DecodeError("request body must be a JSON object")
    decoded: dict[str, Any] = {}
    for name, kind in REQUEST_STRUCTS[struct].items():
        if name not in body:
            continue
        value = body[name]  # pyright: ignore[reportUnknownVariableType]
        if value is None and kind != "raw":
            continue
        decoded[name] = _decode_value(name, kind, value)
    return decoded


def error_body(error: str, details: str) -> dict[str, Any]:
    """GARM's error envelope (``APIErrorResponse``)."""
    return to_wire("APIErrorResponse", {"error": error, "details": details})
