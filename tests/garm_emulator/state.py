"""The emulated GARM database and the rules GARM applies to it.

Everything here runs under :attr:`GarmState.lock`; the HTTP layer and the Python control API both
take it. Refusals are raised as :class:`ApiError` and turned into GARM's error envelope by the
server.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from container_scripts.garm_entrypoint import PROVIDER_SHIM
from tests.log_secrets import register_secret

from .endpoints import Endpoint, EndpointError, EndpointStore
from .password import is_too_weak
from .tools import ToolStore
from .wire import to_wire
from .workers import SCOPES, Workers

# GARM's error strings per status (apiserver/controllers: handleError).
ERROR_NAMES = {
    400: "Bad Request",
    401: "Not Authorized",
    404: "Not Found",
    409: "Conflict",
    422: "Unprocessable Content",
    500: "Server error",
}

# GARM's system templates, in the order (and so with the ids) it seeds them at first start.
# Bodies are short stand-ins; names, descriptions, OS and forge are as measured on GARM.
SYSTEM_TEMPLATES = (
    ("github_windows", "windows", "github", "Default Windows runner install template for GitHub"),
    ("github_linux", "linux", "github", "Default Linux runner install template for GitHub"),
    ("gitea_linux", "linux", "gitea", "Default Linux runner install template for Gitea"),
    ("gitea_windows", "windows", "gitea", "Default Windows runner install template for Gitea"),
)
SYSTEM_TEMPLATE_ID = 2
SYSTEM_TEMPLATE_NAME = "github_linux"
SYSTEM_TEMPLATE_BODY = (
    b"#!/bin/bash\n"
    b"# GARM system template (emulated): installs and starts the GitHub runner.\n"
    b"set -e\n"
    b'echo "bootstrapping runner"\n'
)
# What GARM answers when a scale set names a template it cannot use.
NO_SUITABLE_TEMPLATE = "failed to find suitable template: "
DEFAULT_ENDPOINT = "github.com"
# GARM stops listening to a disabled scale set's Actions messages (measured); its runner
# consolidation loop, which runs every five minutes, is what notices a job that ended then.
CONSOLIDATION_INTERVAL = timedelta(minutes=5)
DEFAULT_RUNNER_GROUP = "Default"
# First-run checks measured on GARM: a plain address (no display name, quotes, brackets or
# blanks; dot-separated domain labels) and a username of at most 64 letters or digits.
_EMAIL = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*")
_USERNAME_MAX = 64
# GARM's ErrBadRequest text: what a body Go's JSON decoder refuses answers, and the tail of
# errors GARM wraps around it.
INVALID_REQUEST = "invalid request"
DELETABLE_INSTANCE_STATUSES = frozenset(
    {"running", "error", "pending_delete", "pending_force_delete"}
)
PENDING_DELETE = frozenset({"pending_delete", "pending_force_delete"})
CREATE_INSTANCE = "CreateInstance"
DELETE_INSTANCE = "DeleteInstance"
# What GARM runs as the provider in the image (the provider shim): its path is in the faults.
PROVIDER_EXECUTABLE = PROVIDER_SHIM


def provider_fault(command: str, stderr: str, exit_code: int = 1) -> bytes:
    """What GARM stores as ``provider_fault`` when its external provider fails ``command``.

    Measured on GARM: its instance manager's error ("creating instance in provider" or
    "deleting instance in provider") around its external-provider error, which holds the
    provider's stdout (empty on a failure), its stderr and its exit status.
    """
    verb = "creating" if command == CREATE_INSTANCE else "deleting"
    return (
        f"{verb} instance in provider: provider binary {PROVIDER_EXECUTABLE} returned error: "
        f"provider binary failed with stdout: ; stderr: {stderr}: exit status {exit_code}"
    ).encode()


class ApiError(Exception):
    """A refusal GARM answers with its error envelope."""

    def __init__(self, status: int, details: str = "", error: str | None = None) -> None:
        super().__init__(f"{status}: {details}")
        self.status = status
        self.error = error or ERROR_NAMES.get(status, ERROR_NAMES[500])
        # GARM sends no details for 401 and 500.
        self.details = "" if status in (401, 500) and error is None else details


@dataclass
class User:
    id: str
    username: str
    password: str
    email: str
    full_name: str
    created_at: datetime
    updated_at: datetime


@dataclass
class Controller:
    controller_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    hostname: str = "garm-emulator"
    metadata_url: str = ""
    callback_url: str = ""
    webhook_url: str = ""
    agent_url: str = ""
    garm_agent_releases_url: str = ""
    enable_agent_tools_sync: bool = False
    garm_agent_version: str = ""
    allow_insecure_garm_agent: bool = False
    minimum_job_age_backoff: int = 30
    # The GARM the emulator models, in the form its build stamps (tag-commit); the
    # conformance test_version checks it against the pin in rockcraft.yaml.
    version: str = "v0.2.1-afda4e76"


@dataclass
class Credential:
    id: int
    name: str
    description: str
    auth_type: str
    app: dict[str, Any]
    pat: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    endpoint: str = DEFAULT_ENDPOINT


@dataclass
class Entity:
    id: str
    kind: str  # "organization" or "repository"
    name: str
    owner: str
    credentials_id: int
    webhook_secret: str
    created_at: datetime
    updated_at: datetime
    agent_mode: bool = False

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}" if self.kind == "repository" else self.name


@dataclass
class ScaleSetRow:
    id: int
    name: str
    entity_id: str
    provider_name: str
    created_at: datetime
    updated_at: datetime
    image: str = ""
    flavor: str = ""
    os_type: str = "linux"
    os_arch: str = "amd64"
    max_runners: int = 0
    min_idle_runners: int = 0
    enabled: bool = False
    runner_prefix: str = "garm"
    runner_bootstrap_timeout: int = 20
    extra_specs: str | None = None  # JSON text, as GARM keeps json.RawMessage
    runner_group: str = ""
    labels: list[str] = field(default_factory=lambda: list[str]())
    template_id: int = 0
    disable_update: bool = False
    enable_shell: bool = False
    generation: int = 0
    github_scale_set_id: int = 0
    state: str = "created"
    # GitHub's assigned jobs as GARM's database records them, and the scale-set worker's own
    # copy, which only a database event that changes the row (or a restart) refreshes.
    desired_runner_count: int = 0
    worker_demand: int = 0


@dataclass
class InstanceRow:
    id: str
    name: str
    scaleset_id: int
    provider_name: str
    status: str
    runner_status: str
    created_at: datetime
    updated_at: datetime
    provider_id: str = ""
    provider_fault: bytes | None = None
    job: dict[str, Any] | None = None
    github_unauthorized: bool = False
    # When the job ended without GARM hearing it (its scale set was disabled).
    unheard_job_end: datetime | None = None
    # What the runner's garm-agent last reported (it has no agent in the emulator: False).
    has_shell: bool = False


@dataclass
class TemplateRow:
    id: int
    name: str
    description: str
    os_type: str
    forge_type: str
    data: bytes
    owner_id: str
    created_at: datetime
    updated_at: datetime


def _now_utc() -> datetime:
    return datetime.now(UTC)


def _system_template_body(name: str, os_type: str) -> bytes:
    if name == SYSTEM_TEMPLATE_NAME:
        return SYSTEM_TEMPLATE_BODY
    if os_type == "windows":
        return f"#ps1_sysnative\n# GARM system template {name} (emulated)\n".encode()
    return f"#!/bin/bash\n# GARM system template {name} (emulated)\n".encode()


_HEX = frozenset("0123456789abcdefABCDEF")


def go_uuid_error(text: str) -> str | None:
    """Why Go's ``uuid.Parse`` (google/uuid) refuses ``text``, in its words; None if it parses.

    It takes 36 characters with dashes, the same in any two wrapping characters (38, braces
    not checked), with a ``urn:uuid:`` prefix (45), or 32 hex digits.
    """
    size = len(text.encode())
    if size == 32:
        return None if set(text) <= _HEX else "invalid UUID format"
    if size == 45:
        if text[:9].lower() != "urn:uuid:":
            return f'invalid urn prefix: "{text[:9]}"'
        text = text[9:]
    elif size == 38:
        text = text[1:]
    elif size != 36:
        return f"invalid UUID length: {size}"
    dashes = all(text[i] == "-" for i in (8, 13, 18, 23))
    digits = text[:8] + text[9:13] + text[14:18] + text[19:23] + text[24:36]
    return None if dashes and set(digits) <= _HEX else "invalid UUID format"


def _check_url(name: str, value: str) -> None:
    parts = urlsplit(value)
    if not value or parts.scheme not in ("http", "https") or not parts.netloc:
        raise ApiError(400, f"invalid {name}")


_PEM_BLOCK = re.compile(r"-----BEGIN ([^-\r\n]*)-----\r?\n(.*?)\r?\n?-----END \1-----", re.DOTALL)


def _pem_body(data: bytes) -> bytes | None:
    """The DER bytes of the first PEM block in ``data`` (Go's ``pem.Decode``), or ``None``."""
    match = _PEM_BLOCK.search(data.decode("latin-1"))
    if match is None:
        return None
    lines = match.group(2).splitlines()
    if any(":" in line for line in lines):
        return None  # PEM headers: never in a key GitHub hands out; keep the stand-in simple
    try:
        return base64.b64decode("".join(line.strip() for line in lines), validate=True)
    except (binascii.Error, ValueError):
        return None


def _is_pkcs1_rsa_key(der: bytes) -> bool:
    """Tell whether ``der`` is a PKCS#1 RSA private key (Go's ``x509.ParsePKCS1PrivateKey``)."""
    # Imported here: only the test environments that exercise App keys need cryptography.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    try:
        key = serialization.load_der_private_key(der, password=None)
    except (ValueError, TypeError):
        return False
    if not isinstance(key, rsa.RSAPrivateKey):
        return False
    # load_der_private_key also takes PKCS#8: only the PKCS#1 encoding round-trips exactly.
    pkcs1 = key.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    return pkcs1 == der


def check_app_key(key: bytes) -> None:
    """Refuse a GitHub App key as GARM's ``GithubApp.Validate`` does.

    Raises:
        ApiError: 400 ``invalid private_key_bytes`` when no PEM block decodes; 500 (GARM's bare
            ``fmt.Errorf``) when the block is not a PKCS#1 RSA key, a PKCS#8 key included.
    """
    der = _pem_body(key)
    if der is None:
        raise ApiError(400, "invalid private_key_bytes")
    if not _is_pkcs1_rsa_key(der):
        raise ApiError(500, "parsing private_key_path: x509: failed to parse private key")


def _jwt_shaped(claims: dict[str, Any]) -> str:
    """A token shaped as GARM's login JWT (header.claims.signature); the signature is random."""

    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")

    header = json.dumps({"alg": "HS256", "typ": "JWT"}).encode()
    body = json.dumps({**claims, "token_id": uuid.uuid4().hex[:16]}).encode()
    return ".".join((part(header), part(body), part(uuid.uuid4().bytes + uuid.uuid4().bytes)))


class GarmState:
    """All of GARM's rows plus the simulated clock and the loaded providers."""

    def __init__(self, providers: list[str], now: datetime | None = None) -> None:
        self.lock = threading.RLock()
        self.now = now or _now_utc()
        self.providers: list[str] = list(providers)
        self.user: User | None = None
        self.tokens: set[str] = set()
        self.controller = Controller()
        self.credentials: dict[int, Credential] = {}
        self.entities: dict[str, Entity] = {}
        self.scalesets: dict[int, ScaleSetRow] = {}
        self.instances: dict[str, InstanceRow] = {}
        self.templates: dict[int, TemplateRow] = {}
        self.tag_ids: dict[str, str] = {}
        self.endpoints = EndpointStore(self.now)
        self.tools = ToolStore()
        self.workers = Workers()
        self._ids = {"credential": 0, "scaleset": 0, "template": 0}
        # GitHub's side of a scale set, as GARM's error texts name it: the Actions service
        # tenant of each entity and the id of each runner group, numbered in order of first use.
        self._tenant_ids: dict[str, int] = {}
        self._runner_group_ids: dict[str, int] = {DEFAULT_RUNNER_GROUP.lower(): 1}
        self._runner_counters: dict[str, int] = {}
        # (provider, command) -> the stderr the provider fails that command with.
        self.provider_refusals: dict[tuple[str, str], str] = {}
        for name, os_type, forge_type, description in SYSTEM_TEMPLATES:
            tpl_id = self.next_id("template")
            self.templates[tpl_id] = TemplateRow(
                id=tpl_id,
                name=name,
                description=description,
                os_type=os_type,
                forge_type=forge_type,
                data=_system_template_body(name, os_type),
                owner_id="system",
                created_at=self.now,
                updated_at=self.now,
            )

    def next_id(self, table: str) -> int:
        self._ids[table] += 1
        return self._ids[table]

    # ---- controller and users -------------------------------------------------------------

    @property
    def initialised(self) -> bool:
        return self.user is not None

    @property
    def urls_ready(self) -> bool:
        # GARM's URLs middleware checks the metadata and callback URLs; not the agent URL.
        ctl = self.controller
        return bool(ctl.metadata_url and ctl.callback_url)

    def first_run(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.user is not None:
            raise ApiError(409, "already initialized")
        if not body.get("username") or not body.get("email"):
            raise ApiError(400, "missing username or email")
        if not _EMAIL.fullmatch(body["email"]):
            raise ApiError(400, "invalid email address")
        name = body["username"]
        if len(name) > _USERNAME_MAX or not all(c.isalpha() or c.isnumeric() for c in name):
            raise ApiError(400, "invalid username")
        if is_too_weak(body.get("password", "")):
            raise ApiError(400, "password is too weak")
        self.user = User(
            id=str(uuid.uuid4()),
            username=body["username"],
            password=body["password"],
            email=body["email"],
            full_name=body.get("full_name", ""),
            created_at=self.now,
            updated_at=self.now,
        )
        return self.user_wire()

    def user_wire(self) -> dict[str, Any]:
        user = self.user
        assert user is not None
        return to_wire(
            "User",
            {
                "id": user.id,
                "created_at": user.created_at,
                "updated_at": user.updated_at,
                "email": user.email,
                "username": user.username,
                "full_name": user.full_name,
                "enabled": True,
                "is_admin": True,
            },
        )

    def login(self, body: dict[str, Any]) -> str:
        # GARM answers a missing username or password as a wrong one: 401, no details.
        user = self.user
        sent = (body.get("username", ""), body.get("password", ""))
        if user is None or not all(sent) or sent != (user.username, user.password):
            raise ApiError(401)
        token = _jwt_shaped(
            {"user": user.id, "full_name": user.full_name, "is_admin": True, "iss": "garm"}
        )
        self.tokens.add(token)
        # An admin bearer token: the suite fails any test that logs it.
        register_secret(token)
        return token

    def controller_wire(self) -> dict[str, Any]:
        ctl = self.controller
        values = {name: getattr(ctl, name) for name in vars(ctl)}
        if ctl.webhook_url:
            values["controller_webhook_url"] = f"{ctl.webhook_url}/{ctl.controller_id}"
        return to_wire("ControllerInfo", values)

    def update_controller(self, body: dict[str, Any]) -> dict[str, Any]:
        urls = ("metadata_url", "callback_url", "webhook_url", "agent_url")
        for name in urls:
            if name in body:
                _check_url(name, body[name])
        for name, value in body.items():
            if hasattr(self.controller, name) and name != "controller_id":
                setattr(self.controller, name, value)
        return self.controller_wire()

    def providers_wire(self) -> list[dict[str, Any]]:
        return [
            to_wire(
                "Provider",
                {"name": name, "type": "external", "description": f"external provider {name}"},
            )
            for name in self.providers
        ]

    # ---- credentials ----------------------------------------------------------------------

    @property
    def endpoint(self) -> Endpoint:
        """github.com's endpoint (re-pointed at the GitHub stand-in by some tests)."""
        return self.endpoints.default

    def endpoint_values(self, name: str = DEFAULT_ENDPOINT) -> dict[str, Any]:
        row = self.endpoints.find(name) or self.endpoints.default
        return row.values()

    def endpoint_wire(self) -> dict[str, Any]:
        return self.endpoint.wire()

    def list_endpoints(self) -> list[dict[str, Any]]:
        return [row.wire() for row in self.endpoints.rows.values()]

    def _endpoint_users(self, row: Endpoint) -> tuple[bool, bool]:
        """Whether credentials, and whether entities, are on the endpoint."""
        creds = {c.id for c in self.credentials.values() if c.endpoint == row.name}
        return bool(creds), any(e.credentials_id in creds for e in self.entities.values())

    def get_endpoint(self, name: str) -> dict[str, Any]:
        try:
            return self.endpoints.get(name).wire()
        except EndpointError as exc:
            raise ApiError(exc.status, exc.details) from None

    def create_endpoint(self, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /github/endpoints``, as GARM's ``CreateGithubEndpoint``."""
        try:
            return self.endpoints.create(body, self.now).wire()
        except EndpointError as exc:
            raise ApiError(exc.status, exc.details) from None

    def update_endpoint(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """``PUT /github/endpoints/{name}``, as GARM's ``UpdateGithubEndpoint``."""
        row = self.endpoints.find(name)
        has_credentials = row is not None and self._endpoint_users(row)[0]
        try:
            return self.endpoints.update(name, body, self.now, has_credentials).wire()
        except EndpointError as exc:
            raise ApiError(exc.status, exc.details) from None

    def delete_endpoint(self, name: str) -> None:
        """``DELETE /github/endpoints/{name}``, as GARM's ``DeleteGithubEndpoint``."""
        row = self.endpoints.find(name)
        try:
            self.endpoints.delete(name, row is not None and any(self._endpoint_users(row)))
        except EndpointError as exc:
            raise ApiError(exc.status, exc.details) from None

    def credential_values(self, cred: Credential) -> dict[str, Any]:
        endpoint = self.endpoint_values(cred.endpoint)
        return {
            # GARM takes the credential's URLs from its endpoint.
            "id": cred.id,
            "name": cred.name,
            "description": cred.description,
            "api_base_url": endpoint["api_base_url"],
            "upload_base_url": endpoint["upload_base_url"],
            "base_url": endpoint["base_url"],
            "ca_bundle": endpoint["ca_cert_bundle"],
            "auth-type": cred.auth_type,
            "forge_type": "github",
            "endpoint": endpoint,
            "created_at": cred.created_at,
            "updated_at": cred.updated_at,
        }

    def credential_wire(self, cred: Credential) -> dict[str, Any]:
        # The wire struct has no field for keys: GARM never returns them.
        return to_wire("ForgeCredentials", self.credential_values(cred))

    def credential(
        self, cred_id: int, failure: str = "failed to get github credentials"
    ) -> Credential:
        try:
            return self.credentials[cred_id]
        except KeyError:
            raise ApiError(404, f"{failure}: github credentials not found: not found") from None

    def credential_by_name(self, name: str) -> Credential | None:
        return next((c for c in self.credentials.values() if c.name == name), None)

    @staticmethod
    def _check_app(app: dict[str, Any], prefix: str) -> None:
        # GARM's GithubApp.Validate, wrapped as "<prefix>invalid app: ...".
        for key in ("app_id", "installation_id", "private_key_bytes"):
            if not app.get(key):
                raise ApiError(400, f"{prefix}invalid app: missing {key}")
        try:
            check_app_key(app["private_key_bytes"])
        except ApiError as exc:
            raise ApiError(exc.status, f"{prefix}invalid app: {exc.details}") from None

    def _check_auth(self, auth_type: str, app: dict[str, Any], pat: dict[str, Any]) -> None:
        prefix = "failed to validate github credentials params: "
        if auth_type == "app":
            self._check_app(app, prefix)
        elif auth_type == "pat":
            if not pat.get("oauth2_token"):
                raise ApiError(400, f"{prefix}missing oauth2_token")
        else:
            raise ApiError(400, f"{prefix}invalid auth_type")

    def create_credential(self, body: dict[str, Any]) -> dict[str, Any]:
        name = body.get("name", "")
        if not name:
            raise ApiError(400, "missing name")
        if not body.get("endpoint"):
            raise ApiError(400, "missing endpoint")
        auth_type = body.get("auth_type", "")
        app, pat = body.get("app", {}), body.get("pat", {})
        self._check_auth(auth_type, app, pat)
        endpoint = self.endpoints.find(body["endpoint"])
        if endpoint is None:
            raise ApiError(
                404,
                "failed to create github credentials: error creating github credentials: "
                "github endpoint not found: not found",
            )
        if self.credential_by_name(name) is not None:
            raise ApiError(409, "github credentials already exists")
        cred = Credential(
            id=self.next_id("credential"),
            name=name,
            description=body.get("description", ""),
            auth_type=auth_type,
            app=app,
            pat=pat,
            created_at=self.now,
            updated_at=self.now,
            endpoint=endpoint.name,
        )
        self.credentials[cred.id] = cred
        return self.credential_wire(cred)

    def update_credential(self, cred_id: int, body: dict[str, Any]) -> dict[str, Any]:
        cred = self.credential(
            cred_id,
            "failed to update github credentials: error updating github credentials",
        )
        name = body.get("name")
        if name is not None:
            other = self.credential_by_name(name)
            if not name:
                raise ApiError(400, "name cannot be empty")
            if other is not None and other.id != cred.id:
                raise ApiError(409, "github credentials already exists")
        prefix = "failed to validate github credentials params: "
        if "app" in body and "pat" in body:
            raise ApiError(400, f"{prefix}cannot update both PAT and App")
        if "pat" in body and not body["pat"].get("oauth2_token"):
            raise ApiError(400, f"{prefix}missing oauth2_token")
        if "app" in body:
            # GARM validates the app it is sent on its own: app_id and installation_id too.
            self._check_app(body["app"], prefix)
        if "app" in body and cred.auth_type != "app":
            raise ApiError(400, "cannot update app credentials for non-app credentials")
        if "pat" in body and cred.auth_type != "pat":
            raise ApiError(400, "cannot update PAT credentials for non-PAT credentials")
        new_app = {**cred.app, **body.get("app", {})}
        new_pat = {**cred.pat, **body.get("pat", {})}
        cred.name = name or cred.name
        cred.description = body.get("description", cred.description)
        cred.app, cred.pat = new_app, new_pat
        cred.updated_at = self.now
        return self.credential_wire(cred)

    def delete_credential(self, cred_id: int) -> None:
        cred = self.credentials.get(cred_id)
        if cred is None:
            return  # GARM treats deleting unknown credentials as done (204)
        users = [e.kind for e in self.entities.values() if e.credentials_id == cred.id]
        # GARM checks repositories first, then organizations.
        for kind, plural in (("repository", "repositories"), ("organization", "organizations")):
            if kind in users:
                raise ApiError(
                    400,
                    "failed to delete github credentials: error deleting github credentials: "
                    f"cannot delete credentials with {plural}: {INVALID_REQUEST}",
                )
        del self.credentials[cred.id]

    # ---- organizations and repositories ---------------------------------------------------

    def entity_wire(self, entity: Entity) -> dict[str, Any]:
        cred = self.credentials.get(entity.credentials_id)
        values: dict[str, Any] = {
            "id": entity.id,
            "name": entity.name,
            "credentials_name": cred.name if cred else "",
            "credentials": self.credential_values(cred) if cred else None,
            "credentials_id": entity.credentials_id,
            "pool_manager_status": {"running": True},
            "pool_balancing_type": "roundrobin",
            "endpoint": self.endpoint_values(self.entity_endpoint(entity)),
            "created_at": entity.created_at,
            "updated_at": entity.updated_at,
            "agent_mode": entity.agent_mode,
        }
        if entity.kind == "repository":
            values["owner"] = entity.owner
            return to_wire("Repository", values)
        return to_wire("Organization", values)

    def entity_endpoint(self, entity: Entity) -> str:
        """An entity is on its credentials' endpoint."""
        cred = self.credentials.get(entity.credentials_id)
        return cred.endpoint if cred else DEFAULT_ENDPOINT

    def entity(self, kind: str, entity_id: str, failure: str) -> Entity:
        """The organization or repository ``entity_id``; ``failure`` leads GARM's error text.

        GARM parses the id as a UUID first: a malformed one is 400, an unknown one 404. Its
        organization lookup hides the parse error behind "invalid request"; the repository
        lookup passes on the UUID parser's own words.
        """
        short = "org" if kind == "organization" else "repo"
        malformed = go_uuid_error(entity_id)
        if malformed is not None:
            reason = INVALID_REQUEST if kind == "organization" else malformed
            raise ApiError(400, f"{failure}error fetching {short}: error parsing id: {reason}")
        entity = self.entities.get(entity_id)
        if entity is None or entity.kind != kind:
            raise ApiError(404, f"{failure}error fetching {short}: not found")
        return entity

    def entity_scalesets(self, kind: str, entity_id: str) -> list[ScaleSetRow]:
        """The scale sets of an entity, refused as GARM's listing refuses a bad id."""
        failure = "error fetching scale sets: error fetching scale sets: "
        if go_uuid_error(entity_id) is not None:
            raise ApiError(400, f"{failure}error parsing id: {INVALID_REQUEST}")
        entity = self.entities.get(entity_id)
        if entity is None or entity.kind != kind:
            raise ApiError(
                404, f"{failure}error checking entity existence: error entity not found: not found"
            )
        rows = sorted(self.scalesets.values(), key=lambda r: r.id)
        return [r for r in rows if r.entity_id == entity.id]

    def list_entities(self, kind: str, filters: dict[str, str]) -> list[dict[str, Any]]:
        # GARM filters its listings with a plain ``name = ?`` (and ``owner = ?``), which matches
        # the stored case only (database/sql/organizations.go, repositories.go).
        found = [
            e
            for e in self.entities.values()
            if e.kind == kind and all(getattr(e, key) == value for key, value in filters.items())
        ]
        return [self.entity_wire(e) for e in found]

    def _resolve_credentials(self, name: str) -> Credential:
        cred = self.credential_by_name(name) if name else None
        if cred is None:
            raise ApiError(400, f"credentials {name!r} not defined")
        return cred

    def create_entity(self, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        name, owner = body.get("name", ""), body.get("owner", "")
        if not name or (kind == "repository" and not owner):
            raise ApiError(
                400, "missing owner or name" if kind == "repository" else "missing name"
            )
        if not body.get("credentials_name"):
            raise ApiError(400, "missing credentials name")
        if not body.get("webhook_secret"):
            raise ApiError(400, "missing secret")
        cred = self._resolve_credentials(body["credentials_name"])
        # GARM looks an entity up without regard to case (``LOWER(name) = LOWER(?)``) and names
        # it, in its refusal, as the request spelled it.
        requested = f"{owner}/{name}" if kind == "repository" else name
        key = requested.lower()
        # One name per endpoint: the same organisation on github.com and on a GHES are two.
        if any(
            e.kind == kind
            and e.full_name.lower() == key
            and self.entity_endpoint(e) == cred.endpoint
            for e in self.entities.values()
        ):
            raise ApiError(409, f"{kind} {requested} already exists")
        entity = Entity(
            id=str(uuid.uuid4()),
            kind=kind,
            name=name,
            owner=owner,
            credentials_id=cred.id,
            webhook_secret=body["webhook_secret"],
            created_at=self.now,
            updated_at=self.now,
            agent_mode=body.get("agent_mode", False),
        )
        self.entities[entity.id] = entity
        return self.entity_wire(entity)

    def update_entity(self, kind: str, entity_id: str, body: dict[str, Any]) -> dict[str, Any]:
        short = "org" if kind == "organization" else "repo"
        entity = self.entity(kind, entity_id, f"error updating {short}: error saving {short}: ")
        if body.get("credentials_name"):
            cred = self._resolve_credentials(body["credentials_name"])
            if cred.endpoint != self.entity_endpoint(entity):
                raise ApiError(
                    400, f"error updating {short}: error saving {short}: endpoint mismatch"
                )
            entity.credentials_id = cred.id
        if body.get("webhook_secret"):
            entity.webhook_secret = body["webhook_secret"]
        if "agent_mode" in body:
            entity.agent_mode = body["agent_mode"]
        entity.updated_at = self.now
        return self.entity_wire(entity)

    def delete_entity(self, kind: str, entity_id: str) -> None:
        short = "org" if kind == "organization" else "repo"
        entity = self.entity(kind, entity_id, f"error fetching {short}: ")
        if any(s.entity_id == entity.id for s in self.scalesets.values()):
            name = "organization" if kind == "organization" else "repo"
            raise ApiError(400, f"{name} has scale sets defined; delete them first")
        del self.entities[entity.id]

    # ---- templates ------------------------------------------------------------------------

    def template_wire(self, tpl: TemplateRow, with_data: bool = True) -> dict[str, Any]:
        return to_wire(
            "Template",
            {
                "id": tpl.id,
                "created_at": tpl.created_at,
                "updated_at": tpl.updated_at,
                "name": tpl.name,
                "description": tpl.description,
                "os_type": tpl.os_type,
                "forge_type": tpl.forge_type,
                "data": tpl.data if with_data else None,
                "owner_id": tpl.owner_id,
            },
        )

    def template(self, tpl_id: int) -> TemplateRow:
        try:
            return self.templates[tpl_id]
        except KeyError:
            raise ApiError(
                404, "failed to get template: failed to get template: not found"
            ) from None

    def _check_template_name(self, name: str, own_id: int = 0) -> None:
        if any(t.name == name and t.id != own_id for t in self.templates.values()):
            raise ApiError(409, f"template {name!r} already exists")

    def create_template(self, body: dict[str, Any]) -> dict[str, Any]:
        name = body.get("name", "")
        if not name:
            raise ApiError(400, "missing template name")
        if body.get("os_type") not in ("linux", "windows"):
            raise ApiError(400, "invalid os_type")
        if body.get("forge_type", "github") not in ("github", "gitea"):
            raise ApiError(400, "invalid forge_type")
        if not body.get("data"):
            raise ApiError(400, "missing template data")
        self._check_template_name(name)
        assert self.user is not None
        tpl = TemplateRow(
            id=self.next_id("template"),
            name=name,
            description=body.get("description", ""),
            os_type=body["os_type"],
            forge_type=body.get("forge_type", "github"),
            data=body["data"],
            owner_id=self.user.id,
            created_at=self.now,
            updated_at=self.now,
        )
        self.templates[tpl.id] = tpl
        return self.template_wire(tpl)

    def update_template(self, tpl_id: int, body: dict[str, Any]) -> dict[str, Any]:
        tpl = self.template(tpl_id)
        if tpl.owner_id == "system":
            raise ApiError(400, "system templates cannot be modified")
        if body.get("name"):
            self._check_template_name(body["name"], tpl.id)
            tpl.name = body["name"]
        if "description" in body:
            tpl.description = body["description"]
        if body.get("data"):
            tpl.data = body["data"]
        tpl.updated_at = self.now
        return self.template_wire(tpl)

    def delete_template(self, tpl_id: int) -> None:
        tpl = self.templates.get(tpl_id)
        if tpl is None:
            return  # GARM treats deleting an unknown template as done
        if tpl.owner_id == "system":
            raise ApiError(400, "system templates cannot be deleted")
        if any(s.template_id == tpl.id for s in self.scalesets.values()):
            raise ApiError(409, "template is in use by one or more scale sets")
        del self.templates[tpl.id]

    # ---- scale sets -----------------------------------------------------------------------

    def tag_id(self, name: str) -> str:
        return self.tag_ids.setdefault(name, str(uuid.uuid4()))

    def scaleset_wire(self, row: ScaleSetRow) -> dict[str, Any]:
        entity = self.entities.get(row.entity_id)
        tpl = self.templates.get(row.template_id)
        values: dict[str, Any] = {
            "runner_prefix": row.runner_prefix,
            "created_at": row.created_at,
            "updated_at": row.updated_at,
            "id": row.id,
            "scale_set_id": row.github_scale_set_id,
            "name": row.name,
            "disable_update": row.disable_update,
            "state": row.state,
            "provider_name": row.provider_name,
            "max_runners": row.max_runners,
            "min_idle_runners": row.min_idle_runners,
            "image": row.image,
            "flavor": row.flavor,
            "os_type": row.os_type,
            "os_arch": row.os_arch,
            "enabled": row.enabled,
            "enable_shell": row.enable_shell,
            "generation": row.generation,
            "endpoint": self.endpoint_values(
                self.entity_endpoint(entity) if entity else DEFAULT_ENDPOINT
            ),
            "runner_bootstrap_timeout": row.runner_bootstrap_timeout,
            "desired_runner_count": row.desired_runner_count,
            "extra_specs": row.extra_specs,
            "github-runner-group": row.runner_group,
            # GARM returns tags in no fixed order: reversed here, so nothing can rely on one.
            "tags": [{"id": self.tag_id(label), "name": label} for label in reversed(row.labels)],
            "status_messages": [],
            "template_id": row.template_id,
            "template_name": tpl.name if tpl else "",
        }
        if entity is not None and entity.kind == "repository":
            values.update(repo_id=entity.id, repo_name=entity.full_name)
        elif entity is not None:
            values.update(org_id=entity.id, org_name=entity.name)
        return to_wire("ScaleSet", values)

    def scaleset(self, scaleset_id: int) -> ScaleSetRow:
        try:
            return self.scalesets[scaleset_id]
        except KeyError:
            raise ApiError(
                404, "error fetching scale set: error fetching scale set by ID: not found"
            ) from None

    def scaleset_by_name(self, name: str) -> ScaleSetRow | None:
        return next((s for s in self.scalesets.values() if s.name == name), None)

    def default_template_id(self, os_type: str, forge_type: str = "github") -> int | None:
        """The system template GARM picks for a scale set that names none, if any fits."""
        return next(
            (
                t.id
                for t in sorted(self.templates.values(), key=lambda t: t.id)
                if t.owner_id == "system" and (t.os_type, t.forge_type) == (os_type, forge_type)
            ),
            None,
        )

    def _suitable_template(self, template_id: int | None, os_type: str) -> int:
        """The template id a scale set gets; refused as GARM refuses it.

        None (not sent) is GARM's choice: the system template of the scale set's OS and forge.
        Any number sent, 0 included, is looked up as an id.
        """
        if template_id is None:
            found = self.default_template_id(os_type)
            if found is None:
                raise ApiError(
                    400,
                    NO_SUITABLE_TEMPLATE
                    + "no template ID supplied and no default template can be found",
                )
            return found
        tpl = self.templates.get(template_id)
        if tpl is None:
            raise ApiError(
                404,
                NO_SUITABLE_TEMPLATE + "failed to get template: failed to get template: not found",
            )
        # Only GitHub entities exist here, so a scale set's forge is always "github".
        for what, selected, wanted in (
            ("OS", tpl.os_type, os_type),
            ("forge", tpl.forge_type, "github"),
        ):
            if selected != wanted:
                raise ApiError(
                    400,
                    f"{NO_SUITABLE_TEMPLATE}selected template {what} type ({selected}) and pool"
                    f" {what} type ({wanted}) do not match",
                )
        return tpl.id

    def _check_name_on_github(
        self, row: ScaleSetRow | None, entity_id: str, body: dict[str, Any]
    ) -> None:
        """Refuse a scale set name GitHub already has in that runner group of that entity.

        GARM does not check names itself: it passes GitHub's 400 on, after the template and
        before its own database checks. The message is the GitHub stand-in's.
        """
        name = body.get("name") or (row.name if row else "")
        group = body.get("github-runner-group" if row is None else "runner_group") or (
            row.runner_group if row else DEFAULT_RUNNER_GROUP
        )
        taken = any(
            other.entity_id == entity_id
            and other.name == name
            and other.runner_group.lower() == group.lower()
            and other is not row
            for other in self.scalesets.values()
        )
        if not taken:
            return
        group_id = self._runner_group_ids.setdefault(
            group.lower(), len(self._runner_group_ids) + 1
        )
        tenant = self._tenant_ids.setdefault(entity_id, len(self._tenant_ids) + 1)
        path = f"{self.endpoint.base_url}/actions-service/{tenant}/_apis/runtime/runnerscalesets"
        github = json.dumps(
            {
                "message": f"a runner scale set named {name!r} already exists in runner group"
                f" {group_id}",
                "typeName": "BadRequestException",
                "typeKey": "BadRequestException",
                "errorCode": 0,
            }
        )
        if row is None:
            failure = "error creating runner scale set: failed to create runner scale set: "
        else:
            path += f"/{row.github_scale_set_id}"
            failure = (
                "error updating pool: error executing update callback: failed to update scaleset"
                " in github: failed to make request: "
            )
        raise ApiError(
            400,
            f"{failure}bad request while calling {path}?api-version=6.0-preview:"
            f" {json.dumps(github)}",
        )

    @staticmethod
    def _validate_create(body: dict[str, Any]) -> None:
        # GARM's database layer checks these (CreateScaleSetParams.Validate) only after it created
        # the scale set on GitHub, with a bare error: 500 "Server error", no details; then it
        # deletes the GitHub scale set again.
        checks = (
            (not body.get("provider_name"), "missing provider"),
            (
                body.get("min_idle_runners", 0) > body.get("max_runners", 0),
                "min_idle_runners cannot be larger than max_runners",
            ),
            (not body.get("max_runners"), "max_runners cannot be 0"),
            (not body.get("flavor"), "missing flavor"),
            (not body.get("image"), "missing image"),
            (not body.get("name"), "missing scale set name"),
        )
        for failed, details in checks:
            if failed:
                raise ApiError(500, f"failed to validate create params: {details}")

    def create_scaleset(self, kind: str, entity_id: str, body: dict[str, Any]) -> dict[str, Any]:
        entity = self.entity(
            kind, entity_id, "error getting entity: error failed to get entity from db: "
        )
        # GARM's order (measured): the template, then GitHub (a taken name), then its database
        # layer. It does not check that the provider is loaded.
        template_id = self._suitable_template(
            body.get("template_id"), body.get("os_type", "linux")
        )
        self._check_name_on_github(None, entity.id, body)
        self._validate_create(body)
        row = self.insert_scaleset(
            name=body["name"],
            entity_id=entity.id,
            provider_name=body["provider_name"],
            image=body["image"],
            flavor=body["flavor"],
            os_type=body.get("os_type", "linux"),
            os_arch=body.get("os_arch", "amd64"),
            max_runners=body["max_runners"],
            min_idle_runners=body.get("min_idle_runners", 0),
            enabled=body.get("enabled", False),
            runner_prefix=body.get("runner_prefix") or "garm",
            runner_bootstrap_timeout=body.get("runner_bootstrap_timeout") or 20,
            extra_specs=body.get("extra_specs"),
            runner_group=body.get("github-runner-group") or DEFAULT_RUNNER_GROUP,
            labels=list(body.get("labels", [])),
            template_id=template_id,
            disable_update=body.get("disable_update", False),
            enable_shell=body.get("enable_shell", False),
        )
        return self.scaleset_wire(row)

    def insert_scaleset(self, **values: Any) -> ScaleSetRow:
        row_id = self.next_id("scaleset")
        row = ScaleSetRow(
            id=row_id,
            created_at=self.now,
            updated_at=self.now,
            github_scale_set_id=1000 + row_id,
            **values,
        )
        self.scalesets[row.id] = row
        if row.provider_name in self.providers:
            self.workers.created(row.id, self.entities[row.entity_id].kind, row.enabled)
        return row

    def worker_rows(self) -> dict[int, tuple[str, bool]]:
        """The scale sets a (re)started GARM runs workers for: scope and enabled flag by id."""
        return {
            row.id: (SCOPES.get(self.entities[row.entity_id].kind, ""), row.enabled)
            for row in self.scalesets.values()
            if row.provider_name in self.providers
        }

    _POINTER_FIELDS = (
        ("enabled", "enabled"),
        ("max_runners", "max_runners"),
        ("min_idle_runners", "min_idle_runners"),
        ("runner_bootstrap_timeout", "runner_bootstrap_timeout"),
        ("disable_update", "disable_update"),
        ("enable_shell", "enable_shell"),
        ("runner_group", "runner_group"),
        ("extra_specs", "extra_specs"),
    )
    # Plain (non-pointer) strings: GARM only applies them when non-empty.
    _VALUE_FIELDS = ("name", "image", "flavor", "os_type", "os_arch", "runner_prefix")
    # What a runner is built from: a change to any of these starts a new scale set generation
    # (measured; extra_specs compare as the JSON text sent, so a reordered object counts).
    # Sizes, names, groups, the prefix, the template and the enabled flag do not.
    _GENERATION_FIELDS = ("image", "flavor", "os_type", "os_arch", "extra_specs", "enable_shell")

    def update_scaleset(self, scaleset_id: int, body: dict[str, Any]) -> dict[str, Any]:
        row = self.scaleset(scaleset_id)
        max_runners = body.get("max_runners", row.max_runners)
        if body.get("runner_bootstrap_timeout", 1) == 0:
            raise ApiError(400, "runner_bootstrap_timeout cannot be 0")
        if body.get("min_idle_runners", row.min_idle_runners) > max_runners:
            raise ApiError(400, "min_idle_runners cannot be larger than max_runners")
        template_id = row.template_id
        if "template_id" in body:
            # Checked against the OS this update leaves; an OS change alone is not checked.
            template_id = self._suitable_template(
                body["template_id"], body.get("os_type") or row.os_type
            )
        if body.get("name") or body.get("runner_group"):
            self._check_name_on_github(row, row.entity_id, body)
        unchanged = dataclasses.astuple(row)
        was_enabled = row.enabled
        row.template_id = template_id
        before = [getattr(row, key) for key in self._GENERATION_FIELDS]
        for key, attr in self._POINTER_FIELDS:
            # An empty runner group leaves the group as it is (measured on GARM).
            if key in body and not (key == "runner_group" and not body[key]):
                setattr(row, attr, body[key])
        for key in self._VALUE_FIELDS:
            if body.get(key):
                setattr(row, key, body[key])
        if [getattr(row, key) for key in self._GENERATION_FIELDS] != before:
            row.generation += 1
        self._written(row, unchanged, was_enabled)
        return self.scaleset_wire(row)

    def _written(self, row: ScaleSetRow, before: tuple[Any, ...], was_enabled: bool) -> None:
        kind = self.entities[row.entity_id].kind
        if row.enabled and not was_enabled:
            # Enabled again: the worker's listener opens a new message session.
            self.workers.enabled(row.id, kind)
        if dataclasses.astuple(row) != before:
            if row.provider_name in self.providers:
                self.workers.written(row.id, kind, row.enabled)
            # GARM writes the row, and tells the scale-set worker, only when a field changed:
            # the worker then takes the row as the database has it, desired count included.
            row.updated_at = self.now
            row.worker_demand = row.desired_runner_count

    def delete_scaleset(self, scaleset_id: int) -> None:
        row = self.scalesets.get(scaleset_id)
        if row is None:
            return  # GARM treats deleting an unknown scale set as done
        if any(i.scaleset_id == row.id for i in self.instances.values()):
            raise ApiError(400, "scale set has runners")
        if row.enabled:
            raise ApiError(400, "scale set is enabled; disable it first")
        del self.scalesets[row.id]
        self.workers.deleted(row.id, self.entities[row.entity_id].kind)

    # ---- instances ------------------------------------------------------------------------

    def instance_wire(self, inst: InstanceRow) -> dict[str, Any]:
        row = self.scalesets.get(inst.scaleset_id)
        return to_wire(
            "Instance",
            {
                "id": inst.id,
                "provider_id": inst.provider_id,
                "provider_name": inst.provider_name,
                "name": inst.name,
                "os_type": row.os_type if row else "linux",
                "os_arch": row.os_arch if row else "amd64",
                "status": inst.status,
                "runner_status": inst.runner_status,
                "scale_set_id": inst.scaleset_id,
                "provider_fault": inst.provider_fault,
                "created_at": inst.created_at,
                "updated_at": inst.updated_at,
                "github-runner-group": row.runner_group if row else "",
                "job": inst.job,
                "capabilities": {"has_shell": inst.has_shell},
                # GARM records no generation on a scale set's runners (its scale-set instance
                # create leaves it 0; seen in tox -e simulate-real), whatever the scale set's.
                "generation": 0,
            },
        )

    def scaleset_instances(self, scaleset_id: int) -> list[InstanceRow]:
        return [i for i in self.instances.values() if i.scaleset_id == scaleset_id]

    def instance(self, name: str) -> InstanceRow:
        try:
            return self.instances[name]
        except KeyError:
            raise ApiError(404, "instance not found") from None

    def insert_instance(
        self, row: ScaleSetRow, status: str = "pending_create", runner_status: str = "pending"
    ) -> InstanceRow:
        number = self._runner_counters.get(row.name, 0) + 1
        self._runner_counters[row.name] = number
        inst = InstanceRow(
            id=str(uuid.uuid4()),
            name=f"{row.name}-{number}",
            scaleset_id=row.id,
            provider_name=row.provider_name,
            status=status,
            runner_status=runner_status,
            created_at=self.now,
            updated_at=self.now,
        )
        if status != "pending_create":
            inst.provider_id = f"{row.provider_name}-{inst.id[:8]}"
        self.instances[inst.name] = inst
        return inst

    def delete_instance(self, name: str, force: bool, bypass_unauthorized: bool) -> None:
        inst = self.instance(name)
        if inst.status not in DELETABLE_INSTANCE_STATUSES:
            raise ApiError(400, f"runner is in {inst.status} state and cannot be removed yet")
        if inst.github_unauthorized and not bypass_unauthorized:
            raise ApiError(401)
        # GitHub refuses to remove a runner that is running a job; only a forced removal goes on.
        if inst.runner_status == "active" and not force:
            raise ApiError(400, "runner is busy")
        inst.status = "pending_force_delete" if force else "pending_delete"
        inst.updated_at = self.now

    def set_job(self, inst: InstanceRow, status: str, conclusion: str = "") -> None:
        job = inst.job or {
            "id": len(self.instances) + 1,
            "name": "build",
            "runner_name": inst.name,
            "started_at": self.now,
            "created_at": self.now,
        }
        job.update(status=status, conclusion=conclusion, updated_at=self.now)
        if status == "completed":
            job["completed_at"] = self.now
        inst.job = job
        inst.updated_at = self.now

    # ---- the clock ------------------------------------------------------------------------

    def provider_loaded(self, row: ScaleSetRow | None) -> bool:
        return row is not None and row.provider_name in self.providers

    def end_job(self, inst: InstanceRow) -> None:
        """GARM learns that the runner's job ended: the ephemeral runner goes away."""
        self.set_job(inst, "completed", conclusion="success")
        inst.runner_status = "terminated"
        inst.status = "pending_delete"
        inst.unheard_job_end = None

    def tick(self) -> None:
        """One pass of GARM's workers: finish deletes, boot runners, scale each scale set."""
        self._consolidate()
        self._retire_failed()
        self._finish_deletes()
        self._boot_pending()
        for row in sorted(self.scalesets.values(), key=lambda r: r.id):
            if not self.provider_loaded(row):
                continue
            self._scale_up(row)
            self._scale_down(row)

    def _consolidate(self) -> None:
        # GARM's runner consolidation finds the jobs that ended while nobody listened.
        for inst in self.instances.values():
            ended = inst.unheard_job_end
            if ended is not None and self.now - ended >= CONSOLIDATION_INTERVAL:
                self.end_job(inst)

    def _refusal(self, inst: InstanceRow, command: str) -> str | None:
        return self.provider_refusals.get((inst.provider_name, command))

    def _retire_failed(self) -> None:
        # GARM's instance manager sends a runner whose create failed to pending_delete, and the
        # status update clears its provider fault.
        for inst in self.instances.values():
            if inst.status == "error" and self.provider_loaded(
                self.scalesets.get(inst.scaleset_id)
            ):
                inst.status, inst.provider_fault = "pending_delete", None
                inst.updated_at = self.now

    def _finish_deletes(self) -> None:
        for inst in list(self.instances.values()):
            # GARM skips the runners of a provider it has not loaded: they stay as they are.
            if inst.status not in PENDING_DELETE or not self.provider_loaded(
                self.scalesets.get(inst.scaleset_id)
            ):
                continue
            refusal = self._refusal(inst, DELETE_INSTANCE)
            # A forced delete ignores the provider's error; a plain one stays pending, faulted.
            if refusal is not None and inst.status == "pending_delete":
                inst.provider_fault = provider_fault(DELETE_INSTANCE, refusal)
                inst.updated_at = self.now
                continue
            del self.instances[inst.name]

    def _boot_pending(self) -> None:
        for inst in self.instances.values():
            if inst.status != "pending_create":
                continue
            if not self.provider_loaded(self.scalesets.get(inst.scaleset_id)):
                continue
            inst.updated_at = self.now
            refusal = self._refusal(inst, CREATE_INSTANCE)
            if refusal is not None:
                inst.status, inst.provider_fault = (
                    "error",
                    provider_fault(CREATE_INSTANCE, refusal),
                )
                continue
            inst.status, inst.runner_status = "running", "idle"
            inst.provider_id = f"{inst.provider_name}-{inst.id[:8]}"

    def _scale_up(self, row: ScaleSetRow) -> None:
        if not row.enabled:
            return
        runners = self.scaleset_instances(row.id)
        # A runner whose create failed still counts until GARM has deleted it.
        ready = sum(
            1
            for i in runners
            if i.status in ("pending_create", "error")
            or (i.status == "running" and i.runner_status == "idle")
        )
        room = row.max_runners - len(runners)
        # GARM's worker scales to its own copy of the demand (measured: a stale copy stalls it).
        for _ in range(max(0, min(row.min_idle_runners + row.worker_demand - ready, room))):
            self.insert_instance(row)

    def _scale_down(self, row: ScaleSetRow) -> None:
        # GARM reaps idle runners above the scale set's idle target, enabled or not: disabling
        # alone stops new runners, but only zeroed counts (what the charm sends when it
        # retires or sweeps a scale set) let the idle ones go. The worker's copy of the job
        # demand (0 unless a test records one) keeps that many more.
        target = min(row.min_idle_runners + row.worker_demand, row.max_runners)
        idle = [
            i
            for i in self.scaleset_instances(row.id)
            if i.status == "running" and i.runner_status == "idle"
        ]
        idle.sort(key=lambda i: (i.created_at, i.name))
        for inst in idle[: max(0, len(idle) - target)]:
            inst.status = "pending_delete"
            inst.updated_at = self.now


class _JsonNull:
    """An answer whose body is JSON ``null`` (a handler's ``None`` means no body at all)."""


JSON_NULL = _JsonNull()


def dumps(value: Any) -> bytes:
    """Encode an answer as compact JSON, as Go does."""
    if value is JSON_NULL:
        return b"null"
    return json.dumps(value, separators=(",", ":")).encode("utf-8")
