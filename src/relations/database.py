"""Requirer side of the ``postgresql_client`` relation (the v0 ``database`` protocol).

The leader asks for a database named ``garm`` and for its credentials to be shared as a Juju
secret. The provider answers in its application data with ``endpoints`` and either plaintext
``username``/``password`` or a ``secret-user`` secret URI holding them. Without the relation
GARM uses SQLite. Switching between the two never migrates data.

Also owns the status of a refused login: when GARM does not answer on PostgreSQL,
:func:`refused_login_status` asks :mod:`postgres_login` whether the server refuses the
credentials GARM runs with.
"""

from __future__ import annotations

import json
import logging

import ops

from relations.databag import write_changed
from relations.postgres_login import LoginProbe, probe_login
from vocabulary.runner_options import MAX_PORT
from vocabulary.telemetry import traced
from workload.pebble_layer import (
    DEFAULT_POSTGRESQL_DB_NAME,
    DEFAULT_POSTGRESQL_PORT,
    DEFAULT_POSTGRESQL_SSLMODE,
    DatabaseConfig,
)

__all__ = [
    "DATABASE_LOGIN_REFUSED",
    "POSTGRESQL_RELATION",
    "choose_database",
    "database_config",
    "refused_login_status",
    "request_database",
    "warn_on_backend_switch",
]

logger = logging.getLogger(__name__)

POSTGRESQL_RELATION = "postgresql"
DATABASE_LOGIN_REFUSED = (
    "PostgreSQL refused GARM's login: check the credentials of the postgresql relation"
)
REQUESTED_SECRETS = ("username", "password")


def request_database(charm: ops.CharmBase) -> None:
    """Ask the PostgreSQL provider for the ``garm`` database, if related.

    Only the leader writes (application data); values already in place are not rewritten, so
    the provider does not see a change on every hook.

    Args:
        charm: the charm whose application data is written.
    """
    relation = charm.model.get_relation(POSTGRESQL_RELATION)
    if relation is None or not charm.unit.is_leader():
        return
    databag = relation.data[charm.app]
    wanted = {
        "database": DEFAULT_POSTGRESQL_DB_NAME,
        "requested-secrets": json.dumps(list(REQUESTED_SECRETS)),
    }
    write_changed(databag, wanted)


def _parse_endpoint(endpoints: str) -> tuple[str, int] | None:
    """Return host and port of the first ``host[:port]`` entry, or None if it is unusable."""
    first = endpoints.split(",")[0].strip()
    if not first:
        return None
    if first.startswith("["):
        # Bracketed IPv6 literal, optionally followed by ":port".
        host, _, rest = first[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif first.count(":") == 1:
        host, _, port_text = first.partition(":")
    else:
        # No colon, or a bare IPv6 address that cannot carry a port.
        host, port_text = first, ""
    if not host:
        return None
    if not port_text:
        return host, DEFAULT_POSTGRESQL_PORT
    if not port_text.isdecimal() or not 0 < int(port_text) <= MAX_PORT:
        logger.warning("PostgreSQL endpoint has an invalid port; waiting for valid data")
        return None
    return host, int(port_text)


def _secret_credentials(charm: ops.CharmBase, secret_id: str) -> tuple[str, str] | None:
    try:
        content = charm.model.get_secret(id=secret_id).get_content(refresh=True)
    except ops.ModelError as exc:  # SecretNotFoundError is a ModelError too
        logger.warning(
            "Cannot read PostgreSQL credentials secret %s (%s)", secret_id, type(exc).__name__
        )
        return None
    missing = [key for key in REQUESTED_SECRETS if not content.get(key)]
    if missing:
        logger.warning(
            "PostgreSQL credentials secret %s lacks %s", secret_id, ", ".join(sorted(missing))
        )
        return None
    return content["username"], content["password"]


def _credentials(charm: ops.CharmBase, data: ops.RelationDataContent) -> tuple[str, str] | None:
    # A provider that honours requested-secrets shares the credentials as a secret; older ones
    # put them in plain relation data.
    secret_id = data.get("secret-user", "").strip()
    if secret_id:
        return _secret_credentials(charm, secret_id)
    username = data.get("username", "")
    password = data.get("password", "")
    if username and password:
        return username, password
    logger.debug("PostgreSQL provider has not shared credentials yet")
    return None


def database_config(charm: ops.CharmBase) -> DatabaseConfig | None:
    """Read the database GARM should use from the ``postgresql`` relation.

    Args:
        charm: the charm reading the relation and the provider's secret.

    Returns:
        SQLite without a relation; None (waiting for the provider) while endpoints or
        credentials are missing or unreadable; otherwise the PostgreSQL configuration (first
        endpoint, port 5432 when absent, database ``garm`` unless the provider names another,
        sslmode ``prefer``).
    """
    relation = charm.model.get_relation(POSTGRESQL_RELATION)
    if relation is None:
        return DatabaseConfig.sqlite()
    data = relation.data[relation.app]
    endpoint = _parse_endpoint(data.get("endpoints", ""))
    if endpoint is None:
        logger.debug("PostgreSQL provider has not published usable endpoints yet")
        return None
    credentials = _credentials(charm, data)
    if credentials is None:
        return None
    host, port = endpoint
    username, password = credentials
    return DatabaseConfig(
        backend="postgresql",
        host=host,
        port=port,
        username=username,
        password=password,
        name=data.get("database", "").strip() or DEFAULT_POSTGRESQL_DB_NAME,
        sslmode=DEFAULT_POSTGRESQL_SSLMODE,
    )


@traced("reconcile.database")
def choose_database(charm: ops.CharmBase, planned: DatabaseConfig | None) -> DatabaseConfig | None:
    """Return the database to run GARM with, or None while waiting for PostgreSQL data.

    Args:
        charm: the charm reading the relation.
        planned: the database of the plan GARM runs with, if any.
    """
    wanted = database_config(charm)
    if wanted is None:
        # Related but incomplete: keep what the plan already runs, if anything.
        return planned
    warn_on_backend_switch(planned.backend if planned else None, wanted.backend)
    return wanted


def warn_on_backend_switch(previous_backend: str | None, new_backend: str) -> bool:
    """Warn when GARM's database backend changes, because nothing is migrated.

    Args:
        previous_backend: the backend GARM ran with so far (from the current Pebble plan), or
            ``None`` when GARM has not run yet.
        new_backend: the backend GARM is about to run with.

    Returns:
        True if this is a switch and the warning was logged.
    """
    if previous_backend is None or previous_backend == new_backend:
        return False
    logger.warning(
        "GARM database backend changes from %s to %s: data is not migrated, GARM starts with an "
        "empty database and the %s database is left untouched",
        previous_backend,
        new_backend,
        previous_backend,
    )
    return True


def refused_login_status(planned: DatabaseConfig | None) -> ops.StatusBase | None:
    """Say when the database is why GARM does not answer; None when it is not.

    On PostgreSQL, GARM exits at start when the server refuses its login, and only GARM's own
    output, which the charm cannot read, says so. The charm therefore tries the same login with
    the credentials of the plan GARM runs with (:func:`probe_login`): a refusal blocks with
    :data:`DATABASE_LOGIN_REFUSED` until the relation data changes. Nothing is written anywhere.

    Args:
        planned: the database of the plan GARM runs with, if any.
    """
    if planned is None or planned.backend != "postgresql":
        return None
    if probe_login(planned) is not LoginProbe.REFUSED:
        return None
    logger.error(
        "PostgreSQL at %s:%d refused the login of user %s: GARM cannot start",
        planned.host,
        planned.port,
        planned.username,
    )
    return ops.BlockedStatus(DATABASE_LOGIN_REFUSED)
