"""Sending one request to GARM: bearer token, timeout, one trace span, errors mapped.

Owns the HTTP transport that ``GarmClient`` composes: the span of each call (method, route and
status only: never a body, a query or a header), the mapping of a failure to ``GarmApiError``
and its subclasses, and the parse of an answer into a model. Must not import ops or any module
but ``garm.models``.
"""

from __future__ import annotations

from typing import Any, TypeVar

import httpx
from opentelemetry import trace
from pydantic import TypeAdapter, ValidationError

from garm.models import (
    GATE_ERRORS,
    GarmApiError,
    GarmConflictError,
    GarmConnectionError,
    GarmNotFoundError,
    GarmNotReadyError,
    GarmProtocolError,
    GarmUnauthorizedError,
    ResponseModel,
)

GARM_API_URL = "http://127.0.0.1:8080/api/v1"
TRACER_NAME = "garm-charm.garm-api"
# Literal segments of GARM's API paths; any other segment is an id or a name, which a span
# shows as ``{id}`` so that the span name is the route and never carries a value.
_PATH_WORDS = frozenset(
    {
        "auth",
        "controller",
        "controller-info",
        "credentials",
        "endpoints",
        "enterprises",
        "first-run",
        "garm-agent",
        "github",
        "instances",
        "login",
        "metrics",
        "organizations",
        "pools",
        "providers",
        "repositories",
        "scalesets",
        "templates",
        "tools",
    }
)
HTTP_TIMEOUT = 30.0

_M = TypeVar("_M", bound=ResponseModel)


class GarmTransport:
    """Sends one request to GARM: bearer token, timeout, trace span, errors mapped."""

    def __init__(
        self,
        base_url: str = GARM_API_URL,
        timeout: float = HTTP_TIMEOUT,
        token: str | None = None,
    ) -> None:
        """Create the transport; no request is made until one is sent."""
        # httpx loads the CA bundle when a client is made, whatever the scheme: about 50 ms of
        # CPU in every hook for GARM, which listens on plain HTTP beside the charm. Certificates
        # are verified wherever the URL is https.
        verify = base_url.startswith("https:")
        self._http = httpx.Client(base_url=base_url, timeout=timeout, verify=verify)
        self.token = token

    def close(self) -> None:
        """Close the underlying connection pool."""
        self._http.close()

    def call_list(
        self, path: str, model: type[_M], params: dict[str, str] | None = None
    ) -> list[_M]:
        """GET a list; GARM's ``null`` for an empty list reads as ``[]``."""
        data = self.call("GET", path, params=params)
        if data is None:
            return []
        try:
            return TypeAdapter(list[model]).validate_python(data)
        except ValidationError as exc:
            raise GarmProtocolError(f"GARM answered {path} with an unexpected shape") from exc

    def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        params: dict[str, str] | None = None,
        authenticated: bool = True,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """Send one request and return its JSON answer; a failure raises ``GarmApiError``.

        ``content`` is a raw body sent instead of ``body`` (with ``headers`` added), for
        GARM's uploads, which take the file as the body and its description in headers.
        """
        response = self.send(
            method,
            path,
            body,
            params=params,
            authenticated=authenticated,
            content=content,
            headers=headers,
        )
        if response.is_success:
            try:
                return response.json() if response.content else None
            except ValueError as exc:
                raise GarmProtocolError(
                    f"GARM answered {method} {path} with a body that is not JSON",
                    status=response.status_code,
                ) from exc
        error, details = error_fields(response)
        raise api_error(response.status_code, error, details)

    def send(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        params: dict[str, str] | None = None,
        authenticated: bool = True,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """Send one request and return GARM's answer whatever its status."""
        sent = {**(headers or {}), "Accept": "application/json"}
        if authenticated and self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        route = path_template(httpx.URL(path).path)
        tracer = trace.get_tracer(TRACER_NAME)
        # One span per call: method, route and status only (no body, query or header).
        with tracer.start_as_current_span(
            f"GARM {method} {route}", kind=trace.SpanKind.CLIENT
        ) as span:
            span.set_attribute("http.request.method", method)
            span.set_attribute("url.template", route)
            try:
                if content is not None:
                    response = self._http.request(
                        method, path, content=content, params=params, headers=sent
                    )
                else:
                    response = self._http.request(
                        method, path, json=body, params=params, headers=sent
                    )
            except httpx.TransportError as exc:
                span.set_status(trace.StatusCode.ERROR, type(exc).__name__)
                # The message names the failure class only: httpx messages can echo the URL.
                raise GarmConnectionError(
                    f"cannot reach GARM ({type(exc).__name__}) on {method} {path}"
                ) from exc
            span.set_attribute("http.response.status_code", response.status_code)
            if response.is_error:
                span.set_status(trace.StatusCode.ERROR, str(response.status_code))
            return response

    def root_url(self, path: str) -> str:
        """The URL of ``path`` at GARM's root, beside its API (``/metrics``)."""
        return str(self._http.base_url.copy_with(path=path))


def path_template(path: str) -> str:
    """Return an API path's route: ``/scalesets/12/instances`` -> ``/scalesets/{id}/instances``."""
    return "/".join(
        part if not part or part in _PATH_WORDS else "{id}" for part in path.split("/")
    )


def parse_model(model: type[_M], data: Any) -> _M:
    """Validate one GARM answer; a shape GARM should never send is a GARM error."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise GarmProtocolError(f"GARM sent an unexpected {model.__name__}") from exc


def field_of(data: Any, key: str) -> object:
    """Return ``data[key]`` when ``data`` is a JSON object, else None."""
    if isinstance(data, dict):
        return data.get(key)  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
    return None


def error_fields(response: httpx.Response) -> tuple[str, str]:
    """Return GARM's ``error`` and ``details`` of a failed answer, empty when absent."""
    try:
        data = response.json()
    except ValueError:
        return "", ""
    error, details = field_of(data, "error"), field_of(data, "details")
    return (
        error if isinstance(error, str) else "",
        details if isinstance(details, str) else "",
    )


_ERRORS_BY_STATUS: dict[int, type[GarmApiError]] = {
    401: GarmUnauthorizedError,
    404: GarmNotFoundError,
    409: GarmConflictError,
}


def api_error(status: int, error: str, details: str) -> GarmApiError:
    """Return the error class GARM's status maps to, carrying its error and details."""
    cls = _ERRORS_BY_STATUS.get(status, GarmApiError)
    if status == 409 and error in GATE_ERRORS:
        cls = GarmNotReadyError
    message = f"GARM answered {status}"
    if error:
        message += f": {error}"
    if details:
        message += f" ({details})"
    return cls(message, status=status, error=error, details=details)
