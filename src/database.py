"""Requirer side of the ``postgresql_client`` relation (the v0 ``database`` protocol).

The leader asks for a database named ``garm`` and for its credentials to be shared as a Juju
secret. The provider answers in its application data with ``endpoints`` and either plaintext
``username``/``password`` or a ``secret-user`` secret URI holding them. Without the relation
GARM uses SQLite. Switching between the two never migrates data.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import json
import logging
import secrets
import socket
import ssl
import struct
from dataclasses import dataclass

import ops

from databag import write_changed
from runner_options import MAX_PORT
from workload import (
    DEFAULT_POSTGRESQL_DB_NAME,
    DEFAULT_POSTGRESQL_PORT,
    DEFAULT_POSTGRESQL_SSLMODE,
    DatabaseConfig,
)

__all__ = [
    "POSTGRESQL_RELATION",
    "DatabaseInput",
    "LoginProbe",
    "database_config",
    "probe_login",
    "request_database",
    "warn_on_backend_switch",
]

logger = logging.getLogger(__name__)

POSTGRESQL_RELATION = "postgresql"
DATABASE_LOGIN_REFUSED = (
    "PostgreSQL refused GARM's login: check the credentials of the postgresql relation"
)
REQUESTED_SECRETS = ("username", "password")


@dataclass(frozen=True)
class DatabaseInput:
    """The database GARM should use, as far as the relations tell.

    Attributes:
        config: the database configuration; SQLite without a relation, PostgreSQL when the data
            is complete, ``None`` while waiting for the provider.
    """

    config: DatabaseConfig | None

    @classmethod
    def sqlite(cls) -> DatabaseInput:
        """Return the input for "no relation, use SQLite"."""
        return cls(DatabaseConfig.sqlite())

    @classmethod
    def incomplete(cls) -> DatabaseInput:
        """Return the input for "related, waiting for the provider"."""
        return cls(None)

    @classmethod
    def complete(cls, config: DatabaseConfig) -> DatabaseInput:
        """Return the input for "related and complete".

        Args:
            config: the PostgreSQL configuration.
        """
        return cls(config)


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


def database_config(charm: ops.CharmBase) -> DatabaseInput:
    """Read the database inputs from the ``postgresql`` relation.

    Args:
        charm: the charm reading the relation and the provider's secret.

    Returns:
        SQLite without a relation; incomplete while endpoints or credentials are missing or
        unreadable; otherwise the PostgreSQL configuration (first endpoint, port 5432 when
        absent, database ``garm`` unless the provider names another, sslmode ``prefer``).
    """
    relation = charm.model.get_relation(POSTGRESQL_RELATION)
    if relation is None:
        return DatabaseInput.sqlite()
    data = relation.data[relation.app]
    endpoint = _parse_endpoint(data.get("endpoints", ""))
    if endpoint is None:
        logger.debug("PostgreSQL provider has not published usable endpoints yet")
        return DatabaseInput.incomplete()
    credentials = _credentials(charm, data)
    if credentials is None:
        return DatabaseInput.incomplete()
    host, port = endpoint
    username, password = credentials
    return DatabaseInput.complete(
        DatabaseConfig(
            backend="postgresql",
            host=host,
            port=port,
            username=username,
            password=password,
            name=data.get("database", "").strip() or DEFAULT_POSTGRESQL_DB_NAME,
            sslmode=DEFAULT_POSTGRESQL_SSLMODE,
        )
    )


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


# --- the login probe -------------------------------------------------------------------------
#
# GARM exits at start when PostgreSQL refuses its login, and only its own output says why,
# which the charm cannot read through Pebble. So when GARM does not answer and runs on
# PostgreSQL, the charm tries the same login itself, speaking just enough of the PostgreSQL
# wire protocol (v3) to learn whether the server accepts the credentials: SSL when the server
# offers it (as GARM's ``sslmode=prefer``), then cleartext, MD5 or SCRAM-SHA-256
# authentication. It never runs a query.

PROBE_TIMEOUT = 5.0
_PROTOCOL_V3 = 196608
_SSL_REQUEST = 80877103
_AUTH_OK, _AUTH_CLEARTEXT, _AUTH_MD5 = 0, 3, 5
_AUTH_SASL, _AUTH_SASL_CONTINUE, _AUTH_SASL_FINAL = 10, 11, 12
_SCRAM = "SCRAM-SHA-256"
# SQLSTATEs of a refused login: invalid_password, invalid_authorization_specification.
_REFUSED_CODES = frozenset({"28P01", "28000"})


class LoginProbe(enum.Enum):
    """What PostgreSQL answered to a login with the relation's credentials.

    Attributes:
        ACCEPTED: the server accepted the login.
        REFUSED: the server refused it (wrong user or password, or no matching pg_hba rule).
        UNREACHABLE: no connection could be made.
        UNKNOWN: anything else (another error, an unsupported method, a protocol surprise).
    """

    ACCEPTED = "accepted"
    REFUSED = "refused"
    UNREACHABLE = "unreachable"
    UNKNOWN = "unknown"


class _ProtocolError(Exception):
    """The server's answer was not what the protocol allows here."""


def _message(kind: bytes, payload: bytes) -> bytes:
    return kind + struct.pack("!i", len(payload) + 4) + payload


def _read_exact(conn: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = conn.recv(count - len(data))
        if not chunk:
            raise _ProtocolError("connection closed")
        data += chunk
    return data


def _read_message(conn: socket.socket) -> tuple[bytes, bytes]:
    header = _read_exact(conn, 5)
    (length,) = struct.unpack("!i", header[1:])
    return header[:1], _read_exact(conn, length - 4)


def _error_code(payload: bytes) -> str:
    for field in payload.split(b"\0"):
        if field[:1] == b"C":
            return field[1:].decode("ascii", "replace")
    return ""


class _Scram:
    """Client side of SCRAM-SHA-256 (RFC 5802, RFC 7677), without channel binding."""

    def __init__(self, password: str) -> None:
        self.password = password
        self.nonce = base64.b64encode(secrets.token_bytes(18)).decode()
        self.first_bare = f"n=,r={self.nonce}"

    def first(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def final(self, server_first: str) -> bytes:
        fields = dict(item.split("=", 1) for item in server_first.split(",") if "=" in item)
        nonce, salt, rounds = fields.get("r", ""), fields.get("s", ""), fields.get("i", "")
        if not nonce.startswith(self.nonce) or not salt or not rounds.isdecimal():
            raise _ProtocolError("unexpected SCRAM challenge")
        salted = hashlib.pbkdf2_hmac(
            "sha256", self.password.encode(), base64.b64decode(salt), int(rounds)
        )
        client_key = hmac.digest(salted, b"Client Key", "sha256")
        stored_key = hashlib.sha256(client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self.first_bare},{server_first},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, "sha256")
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def _answer_auth(
    conn: socket.socket, config: DatabaseConfig, payload: bytes, scram: _Scram
) -> None:
    """Send what the authentication request in ``payload`` asks for."""
    (code,) = struct.unpack("!i", payload[:4])
    if code == _AUTH_CLEARTEXT:
        conn.sendall(_message(b"p", config.password.encode() + b"\0"))
    elif code == _AUTH_MD5:
        inner = hashlib.md5((config.password + config.username).encode()).hexdigest()  # noqa: S324
        outer = hashlib.md5(inner.encode() + payload[4:8]).hexdigest()  # noqa: S324
        conn.sendall(_message(b"p", f"md5{outer}".encode() + b"\0"))
    elif code == _AUTH_SASL:
        if _SCRAM.encode() not in payload[4:].split(b"\0"):
            raise _ProtocolError("no supported SASL mechanism")
        first = scram.first()
        body = _SCRAM.encode() + b"\0" + struct.pack("!i", len(first)) + first
        conn.sendall(_message(b"p", body))
    elif code == _AUTH_SASL_CONTINUE:
        conn.sendall(_message(b"p", scram.final(payload[4:].decode())))
    elif code != _AUTH_SASL_FINAL:
        raise _ProtocolError(f"unsupported authentication request {code}")


def _login(conn: socket.socket, config: DatabaseConfig) -> LoginProbe:
    startup = struct.pack("!i", _PROTOCOL_V3)
    for key, value in (("user", config.username), ("database", config.name)):
        startup += key.encode() + b"\0" + value.encode() + b"\0"
    startup += b"\0"
    conn.sendall(struct.pack("!i", len(startup) + 4) + startup)
    scram = _Scram(config.password)
    while True:
        kind, payload = _read_message(conn)
        if kind == b"E":
            code = _error_code(payload)
            return LoginProbe.REFUSED if code in _REFUSED_CODES else LoginProbe.UNKNOWN
        if kind != b"R":
            raise _ProtocolError("unexpected message during authentication")
        if struct.unpack("!i", payload[:4])[0] == _AUTH_OK:
            conn.sendall(_message(b"X", b""))
            return LoginProbe.ACCEPTED
        _answer_auth(conn, config, payload, scram)


def _maybe_tls(conn: socket.socket, host: str) -> socket.socket:
    """Ask for SSL as ``sslmode=prefer`` does: use it when offered, without verification."""
    conn.sendall(struct.pack("!ii", 8, _SSL_REQUEST))
    if _read_exact(conn, 1) != b"S":
        return conn
    context = ssl.create_default_context()
    # sslmode=prefer encrypts without verifying the server, as GARM's own connection does.
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context.wrap_socket(conn, server_hostname=host)


def probe_login(config: DatabaseConfig, timeout: float = PROBE_TIMEOUT) -> LoginProbe:
    """Try to log in to PostgreSQL with ``config``'s credentials, as GARM would at start.

    Args:
        config: a PostgreSQL configuration (host, port, user, password, database).
        timeout: seconds for the connection and each answer.

    Returns:
        Whether the server accepted the login, refused it, could not be reached, or answered
        something else. Never raises for the server's or the network's behaviour.
    """
    try:
        conn = socket.create_connection((config.host, config.port), timeout=timeout)
    except OSError:
        return LoginProbe.UNREACHABLE
    try:
        with _maybe_tls(conn, config.host) as session:
            return _login(session, config)
    except (OSError, ValueError, struct.error, _ProtocolError) as exc:
        logger.debug("PostgreSQL login probe inconclusive (%s)", type(exc).__name__)
        return LoginProbe.UNKNOWN
    finally:
        conn.close()


def login_refused_status(planned: DatabaseConfig | None) -> ops.StatusBase | None:
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
