"""The GARM workload: its Pebble layer, its environment and the entrypoint pushed to it.

Everything here is a pure builder except what talks to Pebble: :func:`apply_workload`,
:func:`stand_by` and :func:`report_check_failed` (GARM down, as Pebble's liveness check reports
it: a security event). The variable names come from ``garm_entrypoint`` so the charm and the
container agree on them; the rest is the charm's own: GARM's port, the SQLite file, the
PostgreSQL defaults of :class:`DatabaseConfig`. The layer and environment hold secrets: callers
must never log them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import ops

from container_scripts.garm_entrypoint import (
    APP_BASE_URL,
    BACKEND_POSTGRESQL,
    BACKEND_SQLITE,
    GARM_CONFIG_VERSION,
    GARM_DB_BACKEND,
    GARM_JWT_SECRET,
    GARM_PASSPHRASE,
    GARM_SQLITE_DB_FILE,
    POSTGRESQL_DB_HOSTNAME,
    POSTGRESQL_DB_NAME,
    POSTGRESQL_DB_PASSWORD,
    POSTGRESQL_DB_PORT,
    POSTGRESQL_DB_SSLMODE,
    POSTGRESQL_DB_USERNAME,
    STAND_BY_FLAG,
    joined_providers_json,
    split_providers_json,
)
from vocabulary import security_events
from workload import endpoint_trust

__all__ = [
    "CHECK_NAME",
    "CONTAINER_NAME",
    "DATA_DIR",
    "DEFAULT_POSTGRESQL_DB_NAME",
    "DEFAULT_POSTGRESQL_PORT",
    "DEFAULT_POSTGRESQL_SSLMODE",
    "ENTRYPOINT_PATH",
    "GARM_PORT",
    "JUJU_PROXY_ENV_VARS",
    "LAYER_LABEL",
    "SERVICE_NAME",
    "SQLITE_DB_FILE",
    "DatabaseBackend",
    "DatabaseConfig",
    "GarmExitedError",
    "apply_workload",
    "build_environment",
    "build_layer",
    "config_version",
    "entrypoint_source",
    "planned_database",
    "planned_environment",
    "planned_providers_json",
    "proxy_environment",
    "report_check_failed",
    "service_state",
    "stand_by",
]

CONTAINER_NAME = "garm"
SERVICE_NAME = "garm"
LAYER_LABEL = "garm"
CHECK_NAME = "garm-alive"
ENTRYPOINT_PATH = "/opt/garm-charm/garm_entrypoint.py"
ENTRYPOINT_PERMISSIONS = 0o755
DATA_DIR = "/var/lib/garm"
SQLITE_DB_FILE = f"{DATA_DIR}/garm.db"
# The entrypoint has its own copy of this port and of the PostgreSQL defaults below (it runs in
# the container alone); tests/unit/workload/test_pebble_layer.py pins each pair equal.
GARM_PORT = 8080
DEFAULT_POSTGRESQL_PORT = 5432
DEFAULT_POSTGRESQL_DB_NAME = "garm"
# Encrypted when the server offers TLS, without checking its certificate.
DEFAULT_POSTGRESQL_SSLMODE = "prefer"
SERVICE_COMMAND = f"python3 {ENTRYPOINT_PATH}"
# What a unit that must not run GARM runs instead: the entrypoint, which then exits at once.
STAND_BY_COMMAND = f"{SERVICE_COMMAND} {STAND_BY_FLAG}"
METRICS_URL = f"http://127.0.0.1:{GARM_PORT}/metrics"
CHECK_PERIOD = "5s"
CONFIG_VERSION_LENGTH = 12

# Juju model proxy variable -> the workload variables it sets (both spellings).
JUJU_PROXY_ENV_VARS: dict[str, tuple[str, str]] = {
    "JUJU_CHARM_HTTP_PROXY": ("HTTP_PROXY", "http_proxy"),
    "JUJU_CHARM_HTTPS_PROXY": ("HTTPS_PROXY", "https_proxy"),
    "JUJU_CHARM_NO_PROXY": ("NO_PROXY", "no_proxy"),
}

_ENTRYPOINT_FILE = Path(__file__).parents[1] / "container_scripts" / "garm_entrypoint.py"

DatabaseBackend = Literal["sqlite3", "postgresql"]


@dataclass(frozen=True)
class DatabaseConfig:
    """The database GARM uses.

    Attributes:
        backend: ``sqlite3`` (the default, on the storage mount) or ``postgresql``.
        host: PostgreSQL host name or address.
        port: PostgreSQL port.
        username: PostgreSQL user.
        password: PostgreSQL password (kept out of ``repr``).
        name: PostgreSQL database name.
        sslmode: PostgreSQL SSL mode.
    """

    backend: DatabaseBackend = "sqlite3"
    host: str = ""
    port: int = DEFAULT_POSTGRESQL_PORT
    username: str = ""
    password: str = field(default="", repr=False)
    name: str = DEFAULT_POSTGRESQL_DB_NAME
    sslmode: str = DEFAULT_POSTGRESQL_SSLMODE

    def __post_init__(self) -> None:
        """Refuse a backend GARM does not support.

        Raises:
            ValueError: the backend is neither ``sqlite3`` nor ``postgresql``.
        """
        if self.backend not in (BACKEND_SQLITE, BACKEND_POSTGRESQL):
            raise ValueError(f"unsupported database backend {self.backend!r}")

    @classmethod
    def sqlite(cls) -> DatabaseConfig:
        """Return the default SQLite configuration."""
        return cls(backend="sqlite3")


def proxy_environment(juju_env: Mapping[str, str]) -> dict[str, str]:
    """Map the Juju model proxy settings to the proxy variables GARM and its providers read.

    Args:
        juju_env: the charm's environment (``os.environ``).

    Returns:
        Upper- and lower-case variables for each Juju proxy setting that is set and non-empty.
    """
    return {
        name: juju_env[juju_name]
        for juju_name, names in JUJU_PROXY_ENV_VARS.items()
        if juju_env.get(juju_name)
        for name in names
    }


def entrypoint_source() -> str:
    """Return the source of ``garm_entrypoint.py``, which is pushed into the container."""
    return _ENTRYPOINT_FILE.read_text(encoding="utf-8")


def config_version(source: str) -> str:
    """Return the first 12 hex digits of the entrypoint source's SHA-256 (new source, new GARM)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:CONFIG_VERSION_LENGTH]


def _database_environment(database: DatabaseConfig) -> dict[str, str]:
    if database.backend == BACKEND_SQLITE:
        return {GARM_DB_BACKEND: BACKEND_SQLITE, GARM_SQLITE_DB_FILE: SQLITE_DB_FILE}
    return {
        GARM_DB_BACKEND: BACKEND_POSTGRESQL,
        POSTGRESQL_DB_HOSTNAME: database.host,
        POSTGRESQL_DB_PORT: str(database.port),
        POSTGRESQL_DB_USERNAME: database.username,
        POSTGRESQL_DB_PASSWORD: database.password,
        POSTGRESQL_DB_NAME: database.name,
        POSTGRESQL_DB_SSLMODE: database.sslmode,
    }


def build_environment(
    *,
    providers_json: str,
    jwt_secret: str,
    passphrase: str,
    database: DatabaseConfig,
    app_base_url: str,
    proxy_env: Mapping[str, str],
    config_version: str,
    ca_bundles: Mapping[str, str],
) -> dict[str, str]:
    """Build the GARM service environment read by the entrypoint.

    Args:
        providers_json: the canonical provider JSON (``[]`` when there is none).
        jwt_secret: the JWT signing secret.
        passphrase: the 32-character database passphrase.
        database: the database settings.
        app_base_url: GARM's external base URL; a trailing slash is dropped.
        proxy_env: proxy variables from :func:`proxy_environment`.
        config_version: the digest from :func:`config_version`.
        ca_bundles: the CA bundles GARM's process trusts, by endpoint (``endpoint_trust``).

    Returns:
        The environment, with keys in sorted order.
    """
    environment = {
        **split_providers_json(providers_json),
        GARM_JWT_SECRET: jwt_secret,
        GARM_PASSPHRASE: passphrase,
        APP_BASE_URL: app_base_url.rstrip("/"),
        GARM_CONFIG_VERSION: config_version,
        **_database_environment(database),
        **proxy_env,
        **endpoint_trust.to_environment(ca_bundles),
    }
    return dict(sorted(environment.items()))


def build_layer(environment: Mapping[str, str]) -> ops.pebble.LayerDict:
    """Build the Pebble layer running GARM through the entrypoint.

    Args:
        environment: the service environment from :func:`build_environment`.

    Returns:
        The layer; the same environment always gives an equal layer.
    """
    service: ops.pebble.ServiceDict = {
        "override": "replace",
        "summary": "GARM",
        "startup": "enabled",
        "command": SERVICE_COMMAND,
        "environment": dict(sorted(environment.items())),
        # A GARM that hangs (it never answers, never exits) is restarted by Pebble when the
        # check goes down; one that stays down (it never passed again) is left to Juju's
        # liveness probe on this alive check, which restarts the container.
        "on-check-failure": {CHECK_NAME: "restart"},
    }
    check: ops.pebble.CheckDict = {
        "override": "replace",
        "level": "alive",
        "startup": "enabled",
        # Three failures 5 s apart (Pebble's default threshold and 3 s timeout): a hang costs
        # about 25 s, and the restarted GARM passes a check before Juju's liveness probe (three
        # failures 5 s apart) would restart the container as well (docs/reference/workload.md).
        "period": CHECK_PERIOD,
        "http": {"url": METRICS_URL},
    }
    return {
        "summary": "garm",
        "services": {SERVICE_NAME: service},
        "checks": {CHECK_NAME: check},
    }


def _pushed_entrypoint(container: ops.Container) -> str | None:
    try:
        with container.pull(ENTRYPOINT_PATH) as handle:
            return handle.read()
    except (ops.pebble.PathError, UnicodeDecodeError):
        return None


class GarmExitedError(Exception):
    """GARM exited within Pebble's start window: the replan's start failed.

    The message is Pebble's (``exited quickly with code 2``, say); Pebble keeps restarting the
    service with its back-off, so the layer stays applied.
    """


def apply_workload(
    container: ops.Container,
    layer: ops.pebble.LayerDict,
    entrypoint: str,
    *,
    plan: ops.pebble.Plan | None = None,
) -> bool:
    """Push the entrypoint when it changed and, when the layer differs from the plan, replan.

    An unchanged input touches nothing, so a running GARM is never restarted and a service an
    operator stopped stays stopped. A changed input (providers, secrets, database, proxy,
    entrypoint) restarts GARM through the replan.

    Args:
        container: the GARM container; Pebble must be reachable.
        layer: the layer from :func:`build_layer`.
        entrypoint: the entrypoint source from :func:`entrypoint_source`.
        plan: the plan as the caller read it this hook (None: read here).

    Returns:
        Whether the layer was replanned.

    Raises:
        GarmExitedError: GARM exited within a second of the replan's start (Pebble's words).
    """
    if _pushed_entrypoint(container) != entrypoint:
        container.push(
            ENTRYPOINT_PATH, entrypoint, make_dirs=True, permissions=ENTRYPOINT_PERMISSIONS
        )
    if _plan_matches(plan or container.get_plan(), layer):
        return False
    container.add_layer(LAYER_LABEL, layer, combine=True)
    try:
        container.replan()
    except ops.pebble.ChangeError as exc:
        # Pebble waits a second to see a started service stay up; one that exits before makes
        # the replan fail, and Pebble goes on restarting it with its back-off.
        raise GarmExitedError(_start_failure(exc.err)) from None
    return True


def _start_failure(err: str) -> str:
    """Pebble's reason for a failed start, without the change's framing."""
    detail = err.rpartition("(")[2].rstrip(")") if "(" in err else err
    return detail.removeprefix("service start attempt: ").strip() or "failed to start"


def service_state(container: ops.Container) -> str:
    """Pebble's state of the GARM service: ``active``, ``backoff``, ``inactive``, ...

    ops 3.9 has no enum member for ``backoff`` (or ``starting``): it then reports the plain
    string, which this reads as it is.
    """
    current = container.get_service(SERVICE_NAME).current
    return current.value if isinstance(current, ops.pebble.ServiceStatus) else str(current)


def _plan_matches(plan: ops.pebble.Plan, layer: ops.pebble.LayerDict) -> bool:
    """Tell whether the plan already holds every value the layer sets.

    Only the keys the layer sets are compared: Pebble fills in defaults (a check's
    ``threshold``, for one) when it combines layers, and those must not read as a change.
    """
    wanted = ops.pebble.Layer(layer)
    pairs = [
        *(
            (service.to_dict(), plan.services.get(name))
            for name, service in wanted.services.items()
        ),
        *((check.to_dict(), plan.checks.get(name)) for name, check in wanted.checks.items()),
    ]
    for want, current in pairs:
        if current is None:
            return False
        have: Mapping[str, object] = current.to_dict()
        if any(have.get(key) != value for key, value in want.items()):
            return False
    return True


def stand_by(container: ops.Container) -> str | None:
    """Stop GARM on a unit that must not run it, whatever Pebble's state, and keep it stopped.

    The service becomes the entrypoint's stand-by, which exits at once without starting GARM
    (and Pebble leaves it so: ``on-success: ignore``), with ``startup: disabled`` and its
    liveness check stopped and disabled. Nothing on this unit can then start GARM: not a
    replan (Pebble restarts a service whose command changed since it started), not the pod's
    restart, not Pebble's back-off timer of a GARM that had exited. When the unit leads again,
    the full layer differs from the plan and the replan starts GARM with its check.

    Returns:
        The state GARM was stopped in (``active``, ``backoff``, ...), or None when no GARM ran.
    """
    plan = container.get_plan()
    service = plan.services.get(SERVICE_NAME)
    if service is None:
        return None
    if service.command != STAND_BY_COMMAND or service.startup != "disabled":
        # The liveness check goes too: a failing alive check would get the pod restarted.
        override: ops.pebble.LayerDict = {
            "services": {
                SERVICE_NAME: {
                    "override": "merge",
                    "startup": "disabled",
                    "command": STAND_BY_COMMAND,
                    "on-success": "ignore",
                }
            },
            "checks": {CHECK_NAME: {"override": "merge", "startup": "disabled"}},
        }
        container.add_layer(LAYER_LABEL, override, combine=True)
        container.stop_checks(CHECK_NAME)
    state = service_state(container)
    if state == ops.pebble.ServiceStatus.INACTIVE.value:
        return None
    # A GARM in back-off would be started again by Pebble's timer: stopping ends that too.
    container.stop(SERVICE_NAME)
    return state


def report_check_failed(event: ops.PebbleCheckFailedEvent) -> None:
    """Log GARM's liveness check failing past its threshold as ``sys_crash``.

    Pebble restarts a GARM that exits; the check reaches its threshold when GARM stays down or
    keeps exiting, and that is what Pebble reports to the charm.
    """
    info = event.info
    if info.name != CHECK_NAME:
        return
    try:
        service = service_state(event.workload)
    except (ops.ModelError, ops.pebble.ConnectionError):
        service = "unknown"
    security_events.garm_down(
        CHECK_NAME,
        f"GARM's liveness check {CHECK_NAME} failed {info.failures} time(s) in a row "
        f"(threshold {info.threshold}); Pebble reports the garm service {service}",
    )


def planned_environment(plan: ops.pebble.Plan) -> dict[str, str]:
    """Return the GARM service environment of ``plan`` (empty when it has none)."""
    service = plan.services.get(SERVICE_NAME)
    if service is None:
        return {}
    return {key: str(value) for key, value in service.environment.items()}


def planned_providers_json(plan: ops.pebble.Plan) -> str:
    """Return the provider list GARM runs with in ``plan`` (empty when it has none)."""
    return joined_providers_json(planned_environment(plan))


def planned_database(plan: ops.pebble.Plan) -> DatabaseConfig | None:
    """Rebuild the database settings ``plan`` runs GARM with, if it runs GARM."""
    environment = planned_environment(plan)
    backend = environment.get(GARM_DB_BACKEND)
    if backend == BACKEND_SQLITE:
        return DatabaseConfig.sqlite()
    if backend != BACKEND_POSTGRESQL:
        return None
    try:
        port = int(environment.get(POSTGRESQL_DB_PORT, ""))
    except ValueError:
        return None
    return DatabaseConfig(
        backend="postgresql",
        host=environment.get(POSTGRESQL_DB_HOSTNAME, ""),
        port=port,
        username=environment.get(POSTGRESQL_DB_USERNAME, ""),
        password=environment.get(POSTGRESQL_DB_PASSWORD, ""),
        name=environment.get(POSTGRESQL_DB_NAME, DEFAULT_POSTGRESQL_DB_NAME),
        sslmode=environment.get(POSTGRESQL_DB_SSLMODE, DEFAULT_POSTGRESQL_SSLMODE),
    )
