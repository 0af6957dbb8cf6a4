"""The GARM wire format: the models of the fields the charm uses, errors, base64 fields.

Every response model treats a missing key as ``None`` because GARM omits zero values of fields
tagged ``omitempty`` (a disabled scale set has no ``enabled`` key at all). Unknown keys are
ignored. Request models are sent with ``exclude_none``, so ``None`` means "do not send"; to clear
a field send its explicit empty value (``{}`` for ``extra_specs``, ``0`` for ``template_id``).
Errors carry GARM's ``error`` and ``details`` fields and never the request body.

Pure data: must not import httpx, ops or any charm module (``garm.client`` sends these).
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


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


class GarmProtocolError(GarmApiError):
    """GARM answered, but not in a shape the charm can read (not JSON, a field missing)."""


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


# GARM's own gates (its ``error`` field with a 409), answered before any route, whatever the
# object asked for: no admin user yet, then no controller URLs yet.
INIT_REQUIRED = "init_required"
URLS_REQUIRED = "urls_required"
GATE_ERRORS = frozenset({INIT_REQUIRED, URLS_REQUIRED})


class GarmNotReadyError(GarmConflictError):
    """GARM answered 409 with one of its gates (:data:`GATE_ERRORS`): about GARM, not the object.

    ``init_required`` also comes from an initialised GARM that cannot read its database: GARM
    v0.2.1-afda4e76 on PostgreSQL answers it to every call while the server is down, and to a
    few calls after it is back (each pooled connection the restart closed fails once).
    """


class ResponseModel(BaseModel):
    """A GARM answer: unknown keys ignored, missing ones None."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class RequestModel(BaseModel):
    """A body sent to GARM: unknown fields refused, None fields not sent."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def wire(self) -> dict[str, Any]:
        """Return the JSON body with unset (None) fields left out."""
        return self.model_dump(mode="json", exclude_none=True, by_alias=True)


# --- response models -------------------------------------------------------------------------


class ControllerInfo(ResponseModel):
    """Controller information (``GET /controller``)."""

    controller_id: str | None = None
    hostname: str | None = None
    metadata_url: str | None = None
    callback_url: str | None = None
    webhook_url: str | None = None
    agent_url: str | None = None
    version: str | None = None


class Provider(ResponseModel):
    """A provider loaded by the running GARM process."""

    name: str | None = None
    type: str | None = None
    description: str | None = None


class Endpoint(ResponseModel):
    """A GitHub endpoint (github.com or a GitHub Enterprise Server) as GARM lists it.

    ``ca_cert_bundle`` is base64 of the PEM bundle GARM trusts for it, None when it has none.
    """

    name: str | None = None
    description: str | None = None
    base_url: str | None = None
    api_base_url: str | None = None
    upload_base_url: str | None = None
    ca_cert_bundle: str | None = None


class EndpointRef(ResponseModel):
    """The endpoint an object of GARM's sits on, as nested in its answer (name only read)."""

    name: str | None = None


class Credential(ResponseModel):
    """GitHub credentials as listed by GARM (keys are never returned)."""

    id: int | None = None
    name: str | None = None
    description: str | None = None
    auth_type: str | None = Field(default=None, alias="auth-type")
    endpoint: EndpointRef | None = None


class Organization(ResponseModel):
    """A GitHub organisation registered in GARM."""

    id: str | None = None
    name: str | None = None
    credentials_name: str | None = None
    credentials_id: int | None = None
    agent_mode: bool | None = None
    endpoint: EndpointRef | None = None


class Repository(ResponseModel):
    """A GitHub repository registered in GARM."""

    id: str | None = None
    owner: str | None = None
    name: str | None = None
    credentials_name: str | None = None
    credentials_id: int | None = None
    agent_mode: bool | None = None
    endpoint: EndpointRef | None = None


class Tag(ResponseModel):
    """A runner label of a scale set."""

    id: str | None = None
    name: str | None = None


class ScaleSet(ResponseModel):
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
    # The id GitHub gave the scale set when GARM registered it (omitted when 0).
    scale_set_id: int | None = None
    updated_at: datetime | None = None
    # Jobs GitHub has assigned to the scale set, as GARM last recorded them (omitted when 0).
    desired_runner_count: int | None = None
    runner_bootstrap_timeout: int | None = None
    provider_name: str | None = None
    org_id: str | None = None
    org_name: str | None = None
    repo_id: str | None = None
    repo_name: str | None = None
    enable_shell: bool | None = None
    endpoint: EndpointRef | None = None


class Job(ResponseModel):
    """The job a runner is working on."""

    status: str | None = None
    updated_at: datetime | None = None


class AgentCapabilities(ResponseModel):
    """What a runner's garm-agent reported in its last heartbeat."""

    has_shell: bool | None = None


class Instance(ResponseModel):
    """A runner instance of a scale set."""

    name: str | None = None
    scale_set_id: int | None = None
    status: str | None = None
    runner_status: str | None = None
    job: Job | None = None
    updated_at: datetime | None = None
    provider_fault: str | None = None  # base64 bytes on the wire
    capabilities: AgentCapabilities | None = None


class Template(ResponseModel):
    """A runner install template; ``data`` is the base64 body and may be empty in lists."""

    id: int | None = None
    name: str | None = None
    description: str | None = None
    os_type: str | None = None
    forge_type: str | None = None
    data: str | None = None


class AgentToolInfo(ResponseModel):
    """A garm-agent binary GARM stores (``GET /tools/garm-agent``); one per OS and arch."""

    id: int | None = None
    name: str | None = None
    size: int | None = None
    sha256sum: str | None = None
    version: str | None = None
    os_type: str | None = None
    os_arch: str | None = None
    origin: str | None = None
    source: str | None = None


class AgentToolsPage(ResponseModel):
    """One page of GARM's tool listing; ``results`` is ``null`` on an empty page."""

    total_count: int | None = None
    pages: int | None = None
    current_page: int | None = None
    next_page: int | None = None
    results: list[AgentToolInfo] | None = None


class FileObject(ResponseModel):
    """What GARM stored for an upload: its digest is ``sha256`` here, ``sha256sum`` in lists."""

    id: int | None = None
    name: str | None = None
    size: int | None = None
    sha256: str | None = None
    tags: list[str] | None = None


# --- request models --------------------------------------------------------------------------


class GithubApp(RequestModel):
    """GitHub App authentication; ``private_key_bytes`` is base64 of the PEM key."""

    app_id: int
    installation_id: int
    private_key_bytes: str = Field(repr=False)


class CreateCredentialParams(RequestModel):
    """Body of ``POST /github/credentials``."""

    name: str
    description: str
    endpoint: str
    auth_type: str = "app"
    app: GithubApp


class CreateEndpointParams(RequestModel):
    """Body of ``POST /github/endpoints``; ``ca_cert_bundle`` is base64 of a PEM bundle."""

    name: str
    description: str
    base_url: str
    api_base_url: str
    upload_base_url: str
    ca_cert_bundle: str | None = None


class UpdateEndpointParams(RequestModel):
    """Body of ``PUT /github/endpoints/{name}``: only what is set changes (no rename, no clear)."""

    description: str | None = None
    base_url: str | None = None
    api_base_url: str | None = None
    upload_base_url: str | None = None
    ca_cert_bundle: str | None = None


class UpdateCredentialParams(RequestModel):
    """Body of ``PUT /github/credentials/{id}`` (pointer fields: only what is set changes)."""

    description: str | None = None
    app: GithubApp | None = None


class CreateScaleSetParams(RequestModel):
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
    enable_shell: bool | None = None


class UpdateScaleSetParams(RequestModel):
    """Body of ``PUT /scalesets/{id}``: GARM's pointer fields, so ``False`` and ``0`` are sent."""

    enabled: bool | None = None
    image: str | None = None
    flavor: str | None = None
    max_runners: int | None = None
    min_idle_runners: int | None = None
    runner_group: str | None = None
    extra_specs: dict[str, Any] | None = None
    template_id: int | None = None
    enable_shell: bool | None = None
    runner_bootstrap_timeout: int | None = None


class CreateTemplateParams(RequestModel):
    """Body of ``POST /templates``; ``data`` is base64."""

    name: str
    description: str
    forge_type: str = "github"
    os_type: str = "linux"
    data: str
