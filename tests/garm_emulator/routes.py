"""GARM's HTTP routes: which middleware guards each one and what it does to the state.

Gates, in GARM's middleware order:

* ``open``: no middleware (``/first-run``, ``/metrics``).
* ``init``: the init middleware only (``/auth/login``).
* ``admin``: init, then auth (``/controller``; never the URLs gate).
* ``general``: init, then URLs, then auth (everything else, ``/controller-info`` included).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .state import INVALID_REQUEST, JSON_NULL, ApiError, GarmState
from .tools import ToolRefusedError
from .wire import to_wire

# (state, path parameters, query, decoded body) -> (status, JSON payload or None for no body)
Handler = Callable[[GarmState, tuple[str, ...], dict[str, str], dict[str, Any]], tuple[int, Any]]


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    gate: str
    handler: Handler
    request_struct: str | None = None
    # The body is a file, not JSON: the handler gets ``{"content": bytes, "headers": {...}}``
    # (header names in lower case).
    raw_body: bool = False


_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


def _int_id(text: str) -> int:
    # GARM parses numeric ids with strconv and answers 400 to anything else.
    if not text.isdigit():
        raise ApiError(400, INVALID_REQUEST)
    return int(text)


def _first_run(s: GarmState, _p: tuple[str, ...], _q: dict[str, str], b: dict[str, Any]):
    return 200, s.first_run(b)


def _login(s: GarmState, _p: tuple[str, ...], _q: dict[str, str], b: dict[str, Any]):
    return 200, to_wire("JWTResponse", {"token": s.login(b)})


def _controller(s: GarmState, _p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
    return 200, s.controller_wire()


def _update_controller(s: GarmState, _p: tuple[str, ...], _q: dict[str, str], b: dict[str, Any]):
    return 200, s.update_controller(b)


def _providers(s: GarmState, _p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
    return 200, s.providers_wire()


def _list_credentials(s: GarmState, _p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
    # GARM's credentials list is a nil slice when empty: it answers `null`, not `[]`.
    return 200, [s.credential_wire(c) for c in s.credentials.values()] or JSON_NULL


def _get_credential(s: GarmState, p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
    return 200, s.credential_wire(s.credential(_int_id(p[0])))


def _create_credential(s: GarmState, _p: tuple[str, ...], _q: dict[str, str], b: dict[str, Any]):
    return 200, s.create_credential(b)


def _update_credential(s: GarmState, p: tuple[str, ...], _q: dict[str, str], b: dict[str, Any]):
    return 200, s.update_credential(_int_id(p[0]), b)


def _delete_credential(s: GarmState, p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
    s.delete_credential(_int_id(p[0]))
    return 204, None


def _list_endpoints(s: GarmState, _p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
    return 200, s.list_endpoints()


def _create_endpoint(s: GarmState, _p: tuple[str, ...], _q: dict[str, str], b: dict[str, Any]):
    return 200, s.create_endpoint(b)


def _delete_endpoint(s: GarmState, p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
    s.delete_endpoint(p[0])
    return 204, None


def _get_endpoint(s: GarmState, p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
    return 200, s.get_endpoint(p[0])


def _update_endpoint(s: GarmState, p: tuple[str, ...], _q: dict[str, str], b: dict[str, Any]):
    return 200, s.update_endpoint(p[0], b)


def _entity_routes(kind: str, plural: str, create_struct: str) -> list[Route]:
    filters = ("name",) if kind == "organization" else ("owner", "name")

    def list_(s: GarmState, _p: tuple[str, ...], q: dict[str, str], _b: dict[str, Any]):
        return 200, s.list_entities(kind, {k: v for k, v in q.items() if k in filters and v})

    def get(s: GarmState, p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
        return 200, s.entity_wire(s.entity(kind, p[0], f"error fetching {kind}: "))

    def create(s: GarmState, _p: tuple[str, ...], _q: dict[str, str], b: dict[str, Any]):
        return 200, s.create_entity(kind, b)

    def update(s: GarmState, p: tuple[str, ...], _q: dict[str, str], b: dict[str, Any]):
        return 200, s.update_entity(kind, p[0], b)

    def delete(s: GarmState, p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
        s.delete_entity(kind, p[0])
        return 200, None

    def create_scaleset(s: GarmState, p: tuple[str, ...], _q: dict[str, str], b: dict[str, Any]):
        return 200, s.create_scaleset(kind, p[0], b)

    def list_scalesets(s: GarmState, p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
        return 200, [s.scaleset_wire(r) for r in s.entity_scalesets(kind, p[0])]

    one = rf"/{plural}/([^/]+)"
    return [
        _route("GET", rf"/{plural}", list_),
        _route("POST", rf"/{plural}", create, create_struct),
        _route("GET", one, get),
        _route("PUT", one, update, "UpdateEntityParams"),
        _route("DELETE", one, delete),
        _route("GET", one + "/scalesets", list_scalesets),
        _route("POST", one + "/scalesets", create_scaleset, "CreateScaleSetParams"),
    ]


def _list_scalesets(s: GarmState, _p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
    return 200, [s.scaleset_wire(r) for r in sorted(s.scalesets.values(), key=lambda r: r.id)]


def _get_scaleset(s: GarmState, p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
    return 200, s.scaleset_wire(s.scaleset(_int_id(p[0])))


def _update_scaleset(s: GarmState, p: tuple[str, ...], _q: dict[str, str], b: dict[str, Any]):
    return 200, s.update_scaleset(_int_id(p[0]), b)


def _delete_scaleset(s: GarmState, p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
    s.delete_scaleset(_int_id(p[0]))
    return 200, None


def _scaleset_instances(s: GarmState, p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
    # GARM lists by the id alone: an unknown scale set has no instances (200 []).
    return 200, [s.instance_wire(i) for i in s.scaleset_instances(_int_id(p[0]))]


def _list_instances(s: GarmState, _p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
    return 200, [s.instance_wire(i) for i in s.instances.values()]


def _get_instance(s: GarmState, p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
    return 200, s.instance_wire(s.instance(p[0]))


def _delete_instance(s: GarmState, p: tuple[str, ...], q: dict[str, str], _b: dict[str, Any]):
    force = q.get("forceRemove", "") in _TRUE
    bypass = q.get("bypassGHUnauthorized", "") in _TRUE
    s.delete_instance(p[0], force=force, bypass_unauthorized=bypass)
    return 200, None


def _list_templates(s: GarmState, _p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
    # GARM leaves the body out of list answers: clients fetch each template for its data.
    rows = sorted(s.templates.values(), key=lambda t: t.id)
    return 200, [s.template_wire(t, with_data=False) for t in rows]


def _get_template(s: GarmState, p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
    return 200, s.template_wire(s.template(_int_id(p[0])))


def _create_template(s: GarmState, _p: tuple[str, ...], _q: dict[str, str], b: dict[str, Any]):
    return 200, s.create_template(b)


def _update_template(s: GarmState, p: tuple[str, ...], _q: dict[str, str], b: dict[str, Any]):
    return 200, s.update_template(_int_id(p[0]), b)


def _delete_template(s: GarmState, p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
    s.delete_template(_int_id(p[0]))
    return 200, None


def _list_tools(s: GarmState, _p: tuple[str, ...], q: dict[str, str], _b: dict[str, Any]):
    return 200, to_wire(
        "GARMAgentToolsPaginatedResponse", s.tools.page(q, s.controller.metadata_url)
    )


def _upload_tool(s: GarmState, _p: tuple[str, ...], _q: dict[str, str], b: dict[str, Any]):
    try:
        stored = s.tools.upload(b["headers"], b["content"], s.now)
    except ToolRefusedError as exc:
        raise ApiError(exc.status, exc.details) from None
    return 200, to_wire("FileObject", stored)


def _download_tool(s: GarmState, p: tuple[str, ...], _q: dict[str, str], _b: dict[str, Any]):
    try:
        s.tools.admin_download(_int_id(p[0]))
    except ToolRefusedError as exc:
        raise ApiError(exc.status, exc.details) from None
    return 200, None  # never reached: GARM's admin download refuses every tool


def _route(method: str, path: str, handler: Handler, struct: str | None = None) -> Route:
    return Route(method, re.compile(path), "general", handler, struct)


def _build_routes() -> list[Route]:
    routes = [
        Route("POST", re.compile("/first-run"), "open", _first_run, "NewUserParams"),
        Route("POST", re.compile("/auth/login"), "init", _login, "PasswordLoginParams"),
        Route("GET", re.compile("/controller"), "admin", _controller),
        Route(
            "PUT", re.compile("/controller"), "admin", _update_controller, "UpdateControllerParams"
        ),
        _route("GET", "/controller-info", _controller),
        _route("GET", "/providers", _providers),
        _route("GET", "/github/endpoints", _list_endpoints),
        _route("POST", "/github/endpoints", _create_endpoint, "CreateGithubEndpointParams"),
        _route("GET", r"/github/endpoints/([^/]+)", _get_endpoint),
        _route("DELETE", r"/github/endpoints/([^/]+)", _delete_endpoint),
        _route(
            "PUT", r"/github/endpoints/([^/]+)", _update_endpoint, "UpdateGithubEndpointParams"
        ),
        _route("GET", "/github/credentials", _list_credentials),
        _route("POST", "/github/credentials", _create_credential, "CreateGithubCredentialsParams"),
        _route("GET", r"/github/credentials/([^/]+)", _get_credential),
        _route(
            "PUT",
            r"/github/credentials/([^/]+)",
            _update_credential,
            "UpdateGithubCredentialsParams",
        ),
        _route("DELETE", r"/github/credentials/([^/]+)", _delete_credential),
        *_entity_routes("organization", "organizations", "CreateOrgParams"),
        *_entity_routes("repository", "repositories", "CreateRepoParams"),
        _route("GET", "/scalesets", _list_scalesets),
        _route("GET", r"/scalesets/([^/]+)", _get_scaleset),
        _route("PUT", r"/scalesets/([^/]+)", _update_scaleset, "UpdateScaleSetParams"),
        _route("DELETE", r"/scalesets/([^/]+)", _delete_scaleset),
        _route("GET", r"/scalesets/([^/]+)/instances", _scaleset_instances),
        _route("GET", "/instances", _list_instances),
        _route("GET", r"/instances/([^/]+)", _get_instance),
        _route("DELETE", r"/instances/([^/]+)", _delete_instance),
        _route("GET", "/templates", _list_templates),
        _route("POST", "/templates", _create_template, "CreateTemplateParams"),
        _route("GET", r"/templates/([^/]+)", _get_template),
        _route("PUT", r"/templates/([^/]+)", _update_template, "UpdateTemplateParams"),
        _route("DELETE", r"/templates/([^/]+)", _delete_template),
        _route("GET", "/tools/garm-agent", _list_tools),
        Route("POST", re.compile("/tools/garm-agent"), "general", _upload_tool, raw_body=True),
        _route("GET", r"/tools/garm-agent/([^/]+)/download", _download_tool),
    ]
    return routes


ROUTES = _build_routes()


def find_route(method: str, path: str) -> tuple[Route, tuple[str, ...]] | None:
    """The route for ``method`` and ``path`` (relative to ``/api/v1``) and its parameters.

    Raises:
        ApiError: 405 when the path exists but not for this method.
    """
    path_known = False
    for route in ROUTES:
        match = route.pattern.fullmatch(path)
        if match is None:
            continue
        path_known = True
        if route.method == method:
            return route, match.groups()
    if path_known:
        raise ApiError(405, "method not allowed")
    return None


def check_gate(state: GarmState, gate: str, authorization: str | None) -> None:
    """Apply GARM's middleware chain for ``gate`` (init, then URLs, then auth).

    Raises:
        ApiError: 409 ``init_required``, 409 ``urls_required`` or 401, in that order. The auth
            middleware's 401 says ``Authentication failed`` (handlers say ``Not Authorized``).
    """
    if gate == "open":
        return
    if not state.initialised:
        raise ApiError(409, "Missing superuser", error="init_required")
    if gate == "init":
        return
    if gate == "general" and not state.urls_ready:
        raise ApiError(
            409,
            "Missing required URLs. Make sure you update the metadata and callback URLs",
            error="urls_required",
        )
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or token.strip() not in state.tokens:
        raise ApiError(401, error="Authentication failed")
