"""HTTP client for GARM's REST API and the models of the fields the charm uses.

Every response model treats a missing key as ``None`` because GARM omits zero values of fields
tagged ``omitempty`` (a disabled scale set has no ``enabled`` key at all). Unknown keys are
ignored. Request models are sent with ``exclude_none``, so ``None`` means "do not send"; to clear
a field send its explicit empty value (``{}`` for ``extra_specs``, ``0`` for ``template_id``).

Errors map to :class:`GarmApiError` and its subclasses; they carry GARM's ``error`` and
``details`` fields and never the request body.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import httpx
from opentelemetry import trace
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

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
        "github",
        "instances",
        "login",
        "organizations",
        "pools",
        "providers",
        "repositories",
        "scalesets",
        "templates",
    }
)
HTTP_TIMEOUT = 30.0
READY_TIMEOUT = 30.0
READY_INTERVAL = 1.0


def to_base64(data: bytes | str) -> str:
    """Encode bytes (or text as UTF-8) the way GARM carries template bodies, keys and scripts.

    Text that UTF-8 cannot encode (a lone surrogate from relation data) is replaced, never
    raised on.
    """
    raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
    return base64.b64encode(raw).decode("ascii")


def from_base64(text: str) -> bytes:
    """Decode a base64 field from GARM; raises ``ValueError`` when it is not valid base64."""
    return base64.b64decode(text, validate=True)


class GarmApiError(Exception):
    """A GARM call failed.

    Attributes:
        status: HTTP status code, or None when no answer arrived.
        error: GARM's ``error`` field, if any.
        details: GARM's ``details`` field, if any.
    """

    def __init__(
        self, message: str, status: int | None = None, error: str = "", details: str = ""
    ) -> None:
        """Build the error from a message and what GARM answered."""
        super().__init__(message)
        self.status = status
        self.error = error
        self.details = details


class GarmConnectionError(GarmApiError):
    """GARM could not be reached, or the connection failed or timed out."""


class GarmUnauthorizedError(GarmApiError):
    """GARM answered 401: missing, expired or rejected credentials."""


class GarmNotFoundError(GarmApiError):
    """GARM answered 404."""


def describe_failure(exc: GarmApiError) -> str:
    """Say in a few words why a call failed, telling an outage from a refusal.

    Args:
        exc: the error a client call raised.

    Returns:
        ``GARM is unreachable``, ``GARM rejected the token`` or ``GARM refused it (<status>)``.
    """
    if isinstance(exc, GarmConnectionError):
        return "GARM is unreachable"
    if isinstance(exc, GarmUnauthorizedError):
        return "GARM rejected the token"
    return f"GARM refused it ({exc.status})"


class GarmConflictError(GarmApiError):
    """GARM answered 409 (duplicate, still referenced, or a gate such as ``urls_required``)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def wire(self) -> dict[str, Any]:
        """Return the JSON body with unset (None) fields left out."""
        return self.model_dump(mode="json", exclude_none=True, by_alias=True)


# --- response models -------------------------------------------------------------------------


class ControllerInfo(_Model):
    """Controller information (``GET /controller``)."""

    controller_id: str | None = None
    hostname: str | None = None
    metadata_url: str | None = None
    callback_url: str | None = None
    webhook_url: str | None = None
    agent_url: str | None = None
    version: str | None = None


class Provider(_Model):
    """A provider loaded by the running GARM process."""

    name: str | None = None
    type: str | None = None
    description: str | None = None


class Credential(_Model):
    """GitHub credentials as listed by GARM (keys are never returned)."""

    id: int | None = None
    name: str | None = None
    description: str | None = None
    auth_type: str | None = Field(default=None, alias="auth-type")


class Organization(_Model):
    """A GitHub organisation registered in GARM."""

    id: str | None = None
    name: str | None = None
    credentials_name: str | None = None
    credentials_id: int | None = None


class Repository(_Model):
    """A GitHub repository registered in GARM."""

    id: str | None = None
    owner: str | None = None
    name: str | None = None
    credentials_name: str | None = None
    credentials_id: int | None = None


class Tag(_Model):
    """A runner label of a scale set."""

    id: str | None = None
    name: str | None = None


class ScaleSet(_Model):
    """A GARM scale set; omitted fields read as None (disabled reads as ``enabled is None``)."""

    id: int | None = None
    name: str | None = None
    enabled: bool | None = None
    image: str | None = None
    flavor: str | None = None
    os_type: str | None = None
    os_arch: str | None = None
    max_runners: int | None = None
    min_idle_runners: int | None = None
    github_runner_group: str | None = Field(default=None, alias="github-runner-group")
    extra_specs: dict[str, Any] | None = None
    tags: list[Tag] | None = None
    template_id: int | None = None
    updated_at: datetime | None = None
    provider_name: str | None = None
    org_id: str | None = None
    org_name: str | None = None
    repo_id: str | None = None
    repo_name: str | None = None


class Job(_Model):
    """The job a runner is working on."""

    status: str | None = None
    updated_at: datetime | None = None


class Instance(_Model):
    """A runner instance of a scale set."""

    name: str | None = None
    status: str | None = None
    runner_status: str | None = None
    job: Job | None = None
    updated_at: datetime | None = None
    provider_fault: str | None = None  # base64 bytes on the wire


class Template(_Model):
    """A runner install template; ``data`` is the base64 body and may be empty in lists."""

    id: int | None = None
    name: str | None = None
    description: str | None = None
    os_type: str | None = None
    forge_type: str | None = None
    data: str | None = None


# --- request models --------------------------------------------------------------------------


class GithubApp(_Request):
    """GitHub App authentication; ``private_key_bytes`` is base64 of the PEM key."""

    app_id: int
    installation_id: int
    private_key_bytes: str = Field(repr=False)


class CreateCredentialParams(_Request):
    """Body of ``POST /github/credentials``."""

    name: str
    description: str
    endpoint: str
    auth_type: str = "app"
    app: GithubApp


class UpdateCredentialParams(_Request):
    """Body of ``PUT /github/credentials/{id}`` (pointer fields: only what is set changes)."""

    description: str | None = None
    app: GithubApp | None = None


class CreateScaleSetParams(_Request):
    """Body of ``POST /{organizations,repositories}/{id}/scalesets``."""

    name: str
    provider_name: str
    image: str
    flavor: str
    os_type: str
    os_arch: str
    max_runners: int
    min_idle_runners: int
    enabled: bool
    labels: list[str]
    github_runner_group: str | None = Field(default=None, alias="github-runner-group")
    extra_specs: dict[str, Any] | None = None
    template_id: int | None = None


class UpdateScaleSetParams(_Request):
    """Body of ``PUT /scalesets/{id}``: GARM's pointer fields, so ``False`` and ``0`` are sent."""

    enabled: bool | None = None
    image: str | None = None
    flavor: str | None = None
    max_runners: int | None = None
    min_idle_runners: int | None = None
    runner_group: str | None = None
    extra_specs: dict[str, Any] | None = None
    template_id: int | None = None


class CreateTemplateParams(_Request):
    """Body of ``POST /templates``; ``data`` is base64."""

    name: str
    description: str
    forge_type: str = "github"
    os_type: str = "linux"
    data: str


_M = TypeVar("_M", bound=_Model)


class GarmClient:
    """A synchronous client for one GARM server.

    Call :meth:`login` before any authenticated call; the JWT it returns is sent as a bearer
    token. Every request has a timeout.
    """

    def __init__(
        self,
        base_url: str = GARM_API_URL,
        timeout: float = HTTP_TIMEOUT,
        token: str | None = None,
    ) -> None:
        """Create the client; no request is made until a method is called."""
        self._http = httpx.Client(base_url=base_url, timeout=timeout)
        self._token = token

    def close(self) -> None:
        """Close the underlying connection pool."""
        self._http.close()

    def __enter__(self) -> GarmClient:
        """Use the client as a context manager that closes it on exit."""
        return self

    def __exit__(self, *_exc: object) -> None:
        """Close the client."""
        self.close()

    # --- bootstrap ---------------------------------------------------------------------------

    def is_initialized(self) -> bool:
        """Tell whether GARM has its admin user, deciding on GARM's ``error`` field.

        GARM guards ``/controller-info`` with the init, then the URLs, then the auth
        middleware, so only ``init_required`` means "not initialised".

        Raises:
            GarmConnectionError: GARM is not reachable.
            GarmApiError: any other unexpected answer.
        """
        response = self._send("GET", "/controller-info", authenticated=False)
        if response.status_code in (200, 401):
            return True
        error, details = _error_fields(response)
        if response.status_code == 409 and error == "init_required":
            return False
        if response.status_code == 409 and error == "urls_required":
            return True
        raise _api_error(response.status_code, error, details)

    def wait_for_ready(
        self,
        timeout: float = READY_TIMEOUT,
        interval: float = READY_INTERVAL,
        sleep: Callable[[float], None] = time.sleep,
    ) -> bool:
        """Poll GARM until it answers, then return whether it is initialised.

        Raises:
            GarmConnectionError: GARM did not answer within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.is_initialized()
            except GarmConnectionError:
                if time.monotonic() + interval > deadline:
                    raise
                sleep(interval)

    def first_run(self, username: str, password: str, email: str, full_name: str) -> None:
        """Create the admin user on a fresh GARM."""
        body = {"username": username, "password": password, "email": email, "full_name": full_name}
        self._call("POST", "/first-run", body, authenticated=False)

    def login(self, username: str, password: str) -> str:
        """Log in, keep the JWT for later calls and return it."""
        body = {"username": username, "password": password}
        data = self._call("POST", "/auth/login", body, authenticated=False)
        token: object = _field(data, "token")
        if not isinstance(token, str) or not token:
            raise GarmApiError("GARM returned no token on login", status=200)
        self._token = token
        return token

    def get_controller(self) -> ControllerInfo:
        """Return the controller information, including its URLs."""
        return _parse(ControllerInfo, self._call("GET", "/controller"))

    def update_controller(
        self, *, metadata_url: str, callback_url: str, webhook_url: str, agent_url: str
    ) -> ControllerInfo:
        """Set the four controller URLs."""
        body = {
            "metadata_url": metadata_url,
            "callback_url": callback_url,
            "webhook_url": webhook_url,
            "agent_url": agent_url,
        }
        return _parse(ControllerInfo, self._call("PUT", "/controller", body))

    # --- providers and credentials ----------------------------------------------------------

    def list_providers(self) -> list[Provider]:
        """List the providers the running GARM process loaded."""
        return self._list("/providers", Provider)

    def list_credentials(self) -> list[Credential]:
        """List GitHub credentials."""
        return self._list("/github/credentials", Credential)

    def create_credential(self, params: CreateCredentialParams) -> Credential:
        """Create GitHub App credentials."""
        return _parse(Credential, self._call("POST", "/github/credentials", params.wire()))

    def update_credential(self, credential_id: int, params: UpdateCredentialParams) -> Credential:
        """Update GitHub credentials in place."""
        path = f"/github/credentials/{credential_id}"
        return _parse(Credential, self._call("PUT", path, params.wire()))

    def delete_credential(self, credential_id: int) -> None:
        """Delete GitHub credentials (GARM refuses while an entity uses them)."""
        self._call("DELETE", f"/github/credentials/{credential_id}")

    # --- entities ----------------------------------------------------------------------------

    def list_organizations(self, name: str | None = None) -> list[Organization]:
        """List organisations, optionally filtered by name on the server."""
        params = {"name": name} if name else None
        return self._list("/organizations", Organization, params)

    def create_organization(
        self, name: str, credentials_name: str, webhook_secret: str
    ) -> Organization:
        """Register an organisation."""
        body = {
            "name": name,
            "credentials_name": credentials_name,
            "webhook_secret": webhook_secret,
        }
        return _parse(Organization, self._call("POST", "/organizations", body))

    def update_organization(self, org_id: str, credentials_name: str) -> Organization:
        """Point an organisation at other credentials."""
        body = {"credentials_name": credentials_name}
        return _parse(Organization, self._call("PUT", f"/organizations/{org_id}", body))

    def delete_organization(self, org_id: str) -> None:
        """Delete an organisation (GARM refuses while scale sets use it)."""
        self._call("DELETE", f"/organizations/{org_id}")

    def list_repositories(self) -> list[Repository]:
        """List repositories."""
        return self._list("/repositories", Repository)

    def create_repository(
        self, owner: str, name: str, credentials_name: str, webhook_secret: str
    ) -> Repository:
        """Register a repository."""
        body = {
            "owner": owner,
            "name": name,
            "credentials_name": credentials_name,
            "webhook_secret": webhook_secret,
        }
        return _parse(Repository, self._call("POST", "/repositories", body))

    def update_repository(self, repo_id: str, credentials_name: str) -> Repository:
        """Point a repository at other credentials."""
        body = {"credentials_name": credentials_name}
        return _parse(Repository, self._call("PUT", f"/repositories/{repo_id}", body))

    def delete_repository(self, repo_id: str) -> None:
        """Delete a repository (GARM refuses while scale sets use it)."""
        self._call("DELETE", f"/repositories/{repo_id}")

    # --- scale sets and instances ------------------------------------------------------------

    def list_scalesets(self) -> list[ScaleSet]:
        """List every scale set."""
        return self._list("/scalesets", ScaleSet)

    def create_org_scaleset(self, org_id: str, params: CreateScaleSetParams) -> ScaleSet:
        """Create a scale set on an organisation and return it as GARM stored it."""
        path = f"/organizations/{org_id}/scalesets"
        return _parse(ScaleSet, self._call("POST", path, params.wire()))

    def create_repo_scaleset(self, repo_id: str, params: CreateScaleSetParams) -> ScaleSet:
        """Create a scale set on a repository and return it as GARM stored it."""
        path = f"/repositories/{repo_id}/scalesets"
        return _parse(ScaleSet, self._call("POST", path, params.wire()))

    def update_scaleset(self, scaleset_id: int, params: UpdateScaleSetParams) -> ScaleSet:
        """Update the fields set in ``params``."""
        path = f"/scalesets/{scaleset_id}"
        return _parse(ScaleSet, self._call("PUT", path, params.wire()))

    def delete_scaleset(self, scaleset_id: int) -> None:
        """Delete a scale set (GARM refuses while it is enabled or lists instances)."""
        self._call("DELETE", f"/scalesets/{scaleset_id}")

    def list_scaleset_instances(self, scaleset_id: int) -> list[Instance]:
        """List the runner instances of a scale set."""
        return self._list(f"/scalesets/{scaleset_id}/instances", Instance)

    def delete_instance(
        self, name: str, *, force_remove: bool = False, bypass_github_unauthorized: bool = False
    ) -> None:
        """Ask GARM to remove a runner."""
        params = {
            "forceRemove": str(force_remove).lower(),
            "bypassGHUnauthorized": str(bypass_github_unauthorized).lower(),
        }
        self._call("DELETE", f"/instances/{name}", params=params)

    # --- templates ---------------------------------------------------------------------------

    def list_templates(self) -> list[Template]:
        """List templates (bodies may be left out; use :meth:`get_template`)."""
        return self._list("/templates", Template)

    def get_template(self, template_id: int) -> Template:
        """Fetch one template with its body."""
        return _parse(Template, self._call("GET", f"/templates/{template_id}"))

    def create_template(self, params: CreateTemplateParams) -> Template:
        """Create a template."""
        return _parse(Template, self._call("POST", "/templates", params.wire()))

    def update_template(self, template_id: int, data: str) -> Template:
        """Replace a template's body (base64) in place, keeping its id."""
        path = f"/templates/{template_id}"
        return _parse(Template, self._call("PUT", path, {"data": data}))

    def delete_template(self, template_id: int) -> None:
        """Delete a template."""
        self._call("DELETE", f"/templates/{template_id}")

    # --- plumbing ----------------------------------------------------------------------------

    def _list(self, path: str, model: type[_M], params: dict[str, str] | None = None) -> list[_M]:
        data = self._call("GET", path, params=params)
        if data is None:
            return []
        try:
            return TypeAdapter(list[model]).validate_python(data)
        except ValidationError as exc:
            raise GarmApiError(f"GARM answered {path} with an unexpected shape") from exc

    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        params: dict[str, str] | None = None,
        authenticated: bool = True,
    ) -> Any:
        response = self._send(method, path, body, params=params, authenticated=authenticated)
        if response.is_success:
            try:
                return response.json() if response.content else None
            except ValueError as exc:
                raise GarmApiError(
                    f"GARM answered {method} {path} with a body that is not JSON",
                    status=response.status_code,
                ) from exc
        error, details = _error_fields(response)
        raise _api_error(response.status_code, error, details)

    def _send(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        params: dict[str, str] | None = None,
        authenticated: bool = True,
    ) -> httpx.Response:
        headers = {"Accept": "application/json"}
        if authenticated and self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        route = path_template(path)
        tracer = trace.get_tracer(TRACER_NAME)
        # One span per call: method, route and status only (no body, query or header).
        with tracer.start_as_current_span(
            f"GARM {method} {route}", kind=trace.SpanKind.CLIENT
        ) as span:
            span.set_attribute("http.request.method", method)
            span.set_attribute("url.template", route)
            try:
                response = self._http.request(
                    method, path, json=body, params=params, headers=headers
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


def path_template(path: str) -> str:
    """Return an API path's route: ``/scalesets/12/instances`` -> ``/scalesets/{id}/instances``."""
    return "/".join(
        part if not part or part in _PATH_WORDS else "{id}" for part in path.split("/")
    )


def _parse(model: type[_M], data: Any) -> _M:
    """Validate one GARM answer; a shape GARM should never send is a GARM error."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise GarmApiError(f"GARM sent an unexpected {model.__name__}") from exc


def _field(data: Any, key: str) -> object:
    """Return ``data[key]`` when ``data`` is a JSON object, else None."""
    if isinstance(data, dict):
        return data.get(key)  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
    return None


def _error_fields(response: httpx.Response) -> tuple[str, str]:
    try:
        data = response.json()
    except ValueError:
        return "", ""
    error, details = _field(data, "error"), _field(data, "details")
    return (
        error if isinstance(error, str) else "",
        details if isinstance(details, str) else "",
    )


_ERRORS_BY_STATUS: dict[int, type[GarmApiError]] = {
    401: GarmUnauthorizedError,
    404: GarmNotFoundError,
    409: GarmConflictError,
}


def _api_error(status: int, error: str, details: str) -> GarmApiError:
    cls = _ERRORS_BY_STATUS.get(status, GarmApiError)
    message = f"GARM answered {status}"
    if error:
        message += f": {error}"
    if details:
        message += f" ({details})"
    return cls(message, status=status, error=error, details=details)
