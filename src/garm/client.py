"""The GARM client: one method per GARM call the charm makes.

``GarmSession`` owns the connection and what comes before any object (readiness, first run,
login, GARM's own counters in its ``/metrics``); ``GarmClient`` adds one method per call on
GARM's objects. Both compose a :class:`garm.transport.GarmTransport`, which sends each request
(one trace span per call), maps a failure to :class:`GarmApiError` and its subclasses and
parses the answer. Callers import it from the package (``from garm import GarmClient``). Must
not import ops or any module outside the ``garm`` package.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self

from garm.models import (
    INIT_REQUIRED,
    URLS_REQUIRED,
    AgentToolInfo,
    AgentToolsPage,
    ControllerInfo,
    CreateCredentialParams,
    CreateEndpointParams,
    CreateScaleSetParams,
    CreateTemplateParams,
    Credential,
    Endpoint,
    FileObject,
    GarmConnectionError,
    GarmProtocolError,
    Instance,
    Organization,
    Provider,
    Repository,
    ScaleSet,
    Template,
    UpdateCredentialParams,
    UpdateEndpointParams,
    UpdateScaleSetParams,
)
from garm.transport import (
    GARM_API_URL,
    HTTP_TIMEOUT,
    GarmTransport,
    api_error,
    error_fields,
    field_of,
    parse_model,
)

READY_TIMEOUT = 30.0
READY_INTERVAL = 1.0
# GARM keeps one garm-agent per OS and architecture (four at most): one page holds them all.
TOOLS_PAGE_SIZE = 100
# Pages followed at most, should GARM keep announcing a next page.
MAX_TOOL_PAGES = 10
# One sample of GARM's Prometheus counter of its GitHub calls: its labels and its value.
_GITHUB_OPERATIONS = re.compile(r"^garm_github_operations_total\{([^}]*)\} (\S+)$", re.MULTILINE)
_OPERATION_LABEL = re.compile(r'(?:^|,)operation="([^"]*)"')
# When GARM's process started, in seconds since the epoch: Prometheus' default process
# collector, which GARM's ``/metrics`` (``promhttp.Handler()``, the default registry) serves.
_PROCESS_START = re.compile(r"^process_start_time_seconds (\S+)$", re.MULTILINE)


@dataclass(frozen=True)
class GarmCounters:
    """What GARM's ``/metrics`` says of its process: when it started, its calls to GitHub.

    Attributes:
        operations: GARM's calls to GitHub since its process started, by operation.
        started: when GARM's process started (seconds since the epoch); None when not shown.
    """

    operations: dict[str, float]
    started: float | None


class GarmSession:
    """A synchronous session with one GARM server: the connection, readiness, login, counters.

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
        self._transport = GarmTransport(base_url, timeout, token)
        # Whether this session ran GARM's first-run: GARM's database was empty when reached.
        self.first_ran = False

    def close(self) -> None:
        """Close the underlying connection pool."""
        self._transport.close()

    def __enter__(self) -> Self:
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
        response = self._transport.send("GET", "/controller-info", authenticated=False)
        if response.status_code in (200, 401):
            return True
        error, details = error_fields(response)
        if response.status_code == 409 and error == INIT_REQUIRED:
            return False
        if response.status_code == 409 and error == URLS_REQUIRED:
            return True
        raise api_error(response.status_code, error, details)

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

    def counters(self) -> GarmCounters:
        """GARM's calls to GitHub since its process started, and that start (its ``/metrics``).

        ``garm_github_operations_total`` counts each call as it starts, labelled with the
        operation (``GetRunnerScaleSetByNameAndRunnerGroup``) and the kind of entity it is
        for (``scope``); the kinds are summed. An operation GARM has not made since it started
        is absent (Prometheus exports no sample for it). ``process_start_time_seconds`` tells
        one process of GARM from the next.

        Raises:
            GarmConnectionError: GARM is not reachable.
            GarmApiError: GARM answered with an error status.
        """
        response = self._transport.send(
            "GET", self._transport.root_url("/metrics"), authenticated=False
        )
        if response.is_error:
            raise api_error(response.status_code, *error_fields(response))
        counts: dict[str, float] = {}
        for labels, value in _GITHUB_OPERATIONS.findall(response.text):
            operation = _OPERATION_LABEL.search(labels)
            counted = _number(value)
            if operation is None or counted is None:
                continue
            counts[operation[1]] = counts.get(operation[1], 0.0) + counted
        start = _PROCESS_START.search(response.text)
        return GarmCounters(counts, _number(start[1]) if start else None)

    def first_run(self, username: str, password: str, email: str, full_name: str) -> None:
        """Create the admin user on a fresh GARM."""
        body = {"username": username, "password": password, "email": email, "full_name": full_name}
        self._transport.call("POST", "/first-run", body, authenticated=False)
        self.first_ran = True

    def login(self, username: str, password: str) -> str:
        """Log in, keep the JWT for later calls and return it."""
        body = {"username": username, "password": password}
        data = self._transport.call("POST", "/auth/login", body, authenticated=False)
        token: object = field_of(data, "token")
        if not isinstance(token, str) or not token:
            raise GarmProtocolError("GARM returned no token on login", status=200)
        self._transport.token = token
        return token


class GarmClient(GarmSession):
    """A synchronous client for one GARM server: one method per call on GARM's objects."""

    def get_controller(self) -> ControllerInfo:
        """Return the controller information, including its URLs."""
        return parse_model(ControllerInfo, self._transport.call("GET", "/controller"))

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
        return parse_model(ControllerInfo, self._transport.call("PUT", "/controller", body))

    # --- providers and credentials ----------------------------------------------------------

    def list_providers(self) -> list[Provider]:
        """List the providers the running GARM process loaded."""
        return self._transport.call_list("/providers", Provider)

    def list_endpoints(self) -> list[Endpoint]:
        """List GitHub endpoints (github.com and any GitHub Enterprise Server)."""
        return self._transport.call_list("/github/endpoints", Endpoint)

    def create_endpoint(self, params: CreateEndpointParams) -> Endpoint:
        """Create a GitHub endpoint."""
        return parse_model(
            Endpoint, self._transport.call("POST", "/github/endpoints", params.wire())
        )

    def update_endpoint(self, name: str, params: UpdateEndpointParams) -> Endpoint:
        """Update a GitHub endpoint in place (its name cannot change)."""
        path = f"/github/endpoints/{name}"
        return parse_model(Endpoint, self._transport.call("PUT", path, params.wire()))

    def delete_endpoint(self, name: str) -> None:
        """Delete a GitHub endpoint (GARM refuses while credentials use it)."""
        self._transport.call("DELETE", f"/github/endpoints/{name}")

    def list_credentials(self) -> list[Credential]:
        """List GitHub credentials."""
        return self._transport.call_list("/github/credentials", Credential)

    def create_credential(self, params: CreateCredentialParams) -> Credential:
        """Create GitHub App credentials."""
        return parse_model(
            Credential, self._transport.call("POST", "/github/credentials", params.wire())
        )

    def update_credential(self, credential_id: int, params: UpdateCredentialParams) -> Credential:
        """Update GitHub credentials in place."""
        path = f"/github/credentials/{credential_id}"
        return parse_model(Credential, self._transport.call("PUT", path, params.wire()))

    def delete_credential(self, credential_id: int) -> None:
        """Delete GitHub credentials (GARM refuses while an entity uses them)."""
        self._transport.call("DELETE", f"/github/credentials/{credential_id}")

    # --- entities ----------------------------------------------------------------------------

    def list_organizations(self, name: str | None = None) -> list[Organization]:
        """List organisations, optionally filtered by name on the server."""
        params = {"name": name} if name else None
        return self._transport.call_list("/organizations", Organization, params)

    def create_organization(
        self, name: str, credentials_name: str, webhook_secret: str, agent_mode: bool = False
    ) -> Organization:
        """Register an organisation (``agent_mode``: its runners run the garm-agent)."""
        body: dict[str, Any] = {
            "name": name,
            "credentials_name": credentials_name,
            "webhook_secret": webhook_secret,
        }
        if agent_mode:
            body["agent_mode"] = True
        return parse_model(Organization, self._transport.call("POST", "/organizations", body))

    def update_organization(
        self, org_id: str, credentials_name: str | None = None, agent_mode: bool | None = None
    ) -> Organization:
        """Point an organisation at other credentials and/or switch its agent mode."""
        body = _entity_update(credentials_name, agent_mode)
        return parse_model(
            Organization, self._transport.call("PUT", f"/organizations/{org_id}", body)
        )

    def delete_organization(self, org_id: str) -> None:
        """Delete an organisation (GARM refuses while scale sets use it)."""
        self._transport.call("DELETE", f"/organizations/{org_id}")

    def list_repositories(self) -> list[Repository]:
        """List repositories."""
        return self._transport.call_list("/repositories", Repository)

    def create_repository(
        self,
        owner: str,
        name: str,
        credentials_name: str,
        webhook_secret: str,
        agent_mode: bool = False,
    ) -> Repository:
        """Register a repository (``agent_mode``: its runners run the garm-agent)."""
        body: dict[str, Any] = {
            "owner": owner,
            "name": name,
            "credentials_name": credentials_name,
            "webhook_secret": webhook_secret,
        }
        if agent_mode:
            body["agent_mode"] = True
        return parse_model(Repository, self._transport.call("POST", "/repositories", body))

    def update_repository(
        self, repo_id: str, credentials_name: str | None = None, agent_mode: bool | None = None
    ) -> Repository:
        """Point a repository at other credentials and/or switch its agent mode."""
        body = _entity_update(credentials_name, agent_mode)
        return parse_model(
            Repository, self._transport.call("PUT", f"/repositories/{repo_id}", body)
        )

    def delete_repository(self, repo_id: str) -> None:
        """Delete a repository (GARM refuses while scale sets use it)."""
        self._transport.call("DELETE", f"/repositories/{repo_id}")

    # --- scale sets and instances ------------------------------------------------------------

    def list_scalesets(self) -> list[ScaleSet]:
        """List every scale set."""
        return self._transport.call_list("/scalesets", ScaleSet)

    def create_org_scaleset(self, org_id: str, params: CreateScaleSetParams) -> ScaleSet:
        """Create a scale set on an organisation and return it as GARM stored it."""
        path = f"/organizations/{org_id}/scalesets"
        return parse_model(ScaleSet, self._transport.call("POST", path, params.wire()))

    def create_repo_scaleset(self, repo_id: str, params: CreateScaleSetParams) -> ScaleSet:
        """Create a scale set on a repository and return it as GARM stored it."""
        path = f"/repositories/{repo_id}/scalesets"
        return parse_model(ScaleSet, self._transport.call("POST", path, params.wire()))

    def update_scaleset(self, scaleset_id: int, params: UpdateScaleSetParams) -> ScaleSet:
        """Update the fields set in ``params``."""
        path = f"/scalesets/{scaleset_id}"
        return parse_model(ScaleSet, self._transport.call("PUT", path, params.wire()))

    def delete_scaleset(self, scaleset_id: int) -> None:
        """Delete a scale set (GARM refuses while it is enabled or lists instances)."""
        self._transport.call("DELETE", f"/scalesets/{scaleset_id}")

    def list_scaleset_instances(self, scaleset_id: int) -> list[Instance]:
        """List the runner instances of a scale set."""
        return self._transport.call_list(f"/scalesets/{scaleset_id}/instances", Instance)

    def list_instances(self) -> list[Instance]:
        """Return every runner instance GARM manages, of every scale set."""
        return self._transport.call_list("/instances", Instance)

    def delete_instance(
        self, name: str, *, force_remove: bool = False, bypass_github_unauthorized: bool = False
    ) -> None:
        """Ask GARM to remove a runner."""
        params = {
            "forceRemove": str(force_remove).lower(),
            "bypassGHUnauthorized": str(bypass_github_unauthorized).lower(),
        }
        self._transport.call("DELETE", f"/instances/{name}", params=params)

    # --- templates ---------------------------------------------------------------------------

    def list_templates(self) -> list[Template]:
        """List templates (bodies may be left out; use :meth:`get_template`)."""
        return self._transport.call_list("/templates", Template)

    def get_template(self, template_id: int) -> Template:
        """Fetch one template with its body."""
        return parse_model(Template, self._transport.call("GET", f"/templates/{template_id}"))

    def create_template(self, params: CreateTemplateParams) -> Template:
        """Create a template."""
        return parse_model(Template, self._transport.call("POST", "/templates", params.wire()))

    def update_template(self, template_id: int, data: str) -> Template:
        """Replace a template's body (base64) in place, keeping its id."""
        path = f"/templates/{template_id}"
        return parse_model(Template, self._transport.call("PUT", path, {"data": data}))

    def delete_template(self, template_id: int) -> None:
        """Delete a template."""
        self._transport.call("DELETE", f"/templates/{template_id}")

    # --- garm-agent tools ----------------------------------------------------------------

    def list_tools(self) -> list[AgentToolInfo]:
        """List the garm-agent binaries GARM stores (its own store, never upstream)."""
        tools: list[AgentToolInfo] = []
        page = 1
        for _ in range(MAX_TOOL_PAGES):
            params = {"page": str(page), "pageSize": str(TOOLS_PAGE_SIZE)}
            data = self._transport.call("GET", "/tools/garm-agent", params=params)
            listed = parse_model(AgentToolsPage, data)
            tools.extend(listed.results or [])
            if not listed.next_page or listed.next_page <= page:
                break
            page = listed.next_page
        return tools

    def upload_tool(
        self, *, name: str, os_type: str, os_arch: str, version: str, data: bytes
    ) -> FileObject:
        """Upload a garm-agent binary; GARM then drops every other one of its OS and arch."""
        headers = {
            "Content-Type": "application/octet-stream",
            "X-Tool-Name": name,
            "X-Tool-OS-Type": os_type,
            "X-Tool-OS-Arch": os_arch,
            "X-Tool-Version": version,
        }
        answer = self._transport.call("POST", "/tools/garm-agent", content=data, headers=headers)
        return parse_model(FileObject, answer)


def _entity_update(credentials_name: str | None, agent_mode: bool | None) -> dict[str, Any]:
    """The body of an entity update: only the fields given (GARM keeps the others)."""
    body: dict[str, Any] = {}
    if credentials_name:
        body["credentials_name"] = credentials_name
    if agent_mode is not None:
        body["agent_mode"] = agent_mode
    return body


def _number(text: str) -> float | None:
    """A sample's value as Prometheus writes it (``1.79662711288e+09``); None if unreadable."""
    try:
        return float(text)
    except ValueError:
        return None
