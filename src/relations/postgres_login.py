"""Whether PostgreSQL accepts a login: the charm's probe of GARM's database credentials.

GARM exits at start when PostgreSQL refuses its login, and only its own output says why, which
the charm cannot read through Pebble. So the charm tries the same login itself with ``pg8000``
(a pure-Python driver) and tells a refused login apart from an unreachable server and from any
other answer. It never runs a query. Owns :class:`LoginProbe`, :func:`probe_login` and which
SQLSTATEs count as a refusal. Must not import ops: the caller hands over plain values.

The password goes only to the driver: no log line or returned value carries it, and the
driver's exceptions are logged by type and SQLSTATE, never by message.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import socket
from typing import Protocol, cast

__all__ = ["PROBE_TIMEOUT", "LoginProbe", "LoginTarget", "probe_login"]

logger = logging.getLogger(__name__)

PROBE_TIMEOUT = 5.0
# SQLSTATEs of a refused login: invalid_password, invalid_authorization_specification.
REFUSED_CODES = frozenset({"28P01", "28000"})


class LoginProbe(enum.Enum):
    """What PostgreSQL answered to a login with the relation's credentials.

    Attributes:
        ACCEPTED: the server accepted the login (the session started).
        REFUSED: the server refused it (wrong user or password, or no matching pg_hba rule).
        UNREACHABLE: no connection could be made.
        UNKNOWN: anything else (another error, an unsupported method, a protocol surprise).
    """

    ACCEPTED = "accepted"
    REFUSED = "refused"
    UNREACHABLE = "unreachable"
    UNKNOWN = "unknown"


class LoginTarget(Protocol):
    """Where to log in and as whom (``workload.DatabaseConfig`` is one)."""

    @property
    def host(self) -> str:
        """Host name or address of the server."""
        ...

    @property
    def port(self) -> int:
        """TCP port of the server."""
        ...

    @property
    def username(self) -> str:
        """The role to log in as."""
        ...

    @property
    def password(self) -> str:
        """The role's password; never logged."""
        ...

    @property
    def name(self) -> str:
        """The database to connect to."""
        ...


def _sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of the server's error behind ``exc``, if the server sent one.

    pg8000 closes the connection when the login fails; should that close fail too, the
    server's error is the context of the close's error.
    """
    import pg8000.exceptions  # noqa: PLC0415  # pyright: ignore[reportMissingTypeStubs]

    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, pg8000.exceptions.DatabaseError):
            # pg8000 hands over the ErrorResponse's fields as a dict keyed by field type.
            fields: object = current.args[0] if current.args else None
            code = (
                cast("dict[object, object]", fields).get("C") if isinstance(fields, dict) else None
            )
            return code if isinstance(code, str) else ""
        current = current.__context__
    return None


def _login(conn: socket.socket, target: LoginTarget) -> LoginProbe:
    # Imported here: the driver costs about 0.15 s of CPU to import, which every hook would
    # pay, and only a hook that probes a login needs it.
    import pg8000.native  # noqa: PLC0415  # pyright: ignore[reportMissingTypeStubs]

    try:
        # ssl_context=None is GARM's sslmode=prefer: ask for TLS, use it without verifying the
        # server's certificate when offered, go on in plain text when the server refuses it.
        session = pg8000.native.Connection(
            target.username,
            host=target.host,
            port=target.port,
            database=target.name,
            password=target.password,
            ssl_context=None,
            sock=conn,
        )
    except Exception as exc:  # the driver raises many kinds of error for an odd answer
        code = _sqlstate(exc)
        if code in REFUSED_CODES:
            return LoginProbe.REFUSED
        # The type and the SQLSTATE only: a driver message may quote what was sent.
        logger.debug("PostgreSQL login probe inconclusive (%s %s)", type(exc).__name__, code)
        return LoginProbe.UNKNOWN
    with contextlib.suppress(Exception):
        session.close()
    return LoginProbe.ACCEPTED


def probe_login(target: LoginTarget, timeout: float = PROBE_TIMEOUT) -> LoginProbe:
    """Try to log in to PostgreSQL with ``target``'s credentials, as GARM would at start.

    Args:
        target: host, port, user, password and database.
        timeout: seconds for the connection and each answer.

    Returns:
        Whether the server accepted the login, refused it, could not be reached, or answered
        something else. Never raises for the server's or the network's behaviour.
    """
    # The connection is opened here so that "no server there" stays apart from what a server
    # answered; pg8000 reports both as an InterfaceError.
    try:
        conn = socket.create_connection((target.host, target.port), timeout=timeout)
    except OSError:
        return LoginProbe.UNREACHABLE
    with conn:
        return _login(conn, target)
