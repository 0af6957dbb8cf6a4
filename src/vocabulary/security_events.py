"""Security events in the OWASP logging vocabulary: one JSON object per log line.

Each event is logged on the logger ``garm-charm.security`` as one JSON object, in the shape ops
gives its own security events (``"type": "security"``, ``datetime``, ``appid``, ``event`` as
``name:detail``, OWASP ``level``, ``description``), plus ``outcome``, ``object`` (what was acted
on) and who acted: ``unit``, and the ``hook`` or the ``action`` with its ``action_id``, read
from the environment Juju sets for every hook. Callers pass names, never secret values, and
nothing here reads a secret. The Juju log level follows the outcome: INFO for what went as
intended (a disclosure, a deletion, a stop), WARNING or ERROR for a failure.

The standard library only: the GARM side (``reconcile``) reports its deletions here without
knowing Juju. Forwarding the lines to Loki is the charm's business (``cos_logging``).
"""

from __future__ import annotations

import enum
import json
import logging
import os
from datetime import UTC, datetime

LOGGER_NAME = "garm-charm.security"
logger = logging.getLogger(LOGGER_NAME)

# The OWASP event names the charm uses.
SENSITIVE_READ = "sensitive_read"
AUTHN_LOGIN_FAIL = "authn_login_fail"
AUTHZ_FAIL = "authz_fail"
AUTHN_TOKEN_DELETE = "authn_token_delete"  # noqa: S105 - an event name
SENSITIVE_DELETE = "sensitive_delete"
SYS_SHUTDOWN = "sys_shutdown"
SYS_RESTART = "sys_restart"
SYS_CRASH = "sys_crash"

# sys_shutdown details: why GARM stops.
STANDBY = "standby"
APPLICATION_REMOVAL = "application-removal"
# sys_restart detail: why the charm restarts GARM.
STALLED_SCALESET = "stalled-scaleset"


class Level(enum.Enum):
    """OWASP levels: how much the event matters to an auditor (the ``level`` field)."""

    INFO = "INFO"
    WARN = "WARN"
    CRITICAL = "CRITICAL"


class Outcome(enum.Enum):
    """How the event ended."""

    SUCCESS = "success"
    FAILURE = "failure"
    SKIPPED = "skipped"


def _actor() -> dict[str, str]:
    """Who acted: the unit and the hook or action Juju is running (empty outside a hook)."""
    kind, _, name = os.environ.get("JUJU_DISPATCH_PATH", "").partition("/")
    actor = {"unit": os.environ.get("JUJU_UNIT_NAME", "")}
    if kind == "actions":
        actor["action"] = name
        actor["action_id"] = os.environ.get("JUJU_ACTION_UUID", "")
    elif name:
        actor["hook"] = name
    return actor


def _unit() -> str:
    return os.environ.get("JUJU_UNIT_NAME") or "charm"


def emit(
    name: str,
    detail: str,
    description: str,
    *,
    outcome: Outcome,
    level: Level = Level.WARN,
    obj: str = "",
) -> None:
    """Log one security event.

    Args:
        name: the OWASP event name (one of this module's constants).
        detail: what follows the name after ``:``, comma-separated, as OWASP lays it out.
        description: one sentence for a human; names only, never a secret value.
        outcome: how it ended.
        level: the OWASP level.
        obj: the object acted on, as ``kind/name``.
    """
    model_uuid = os.environ.get("JUJU_MODEL_UUID", "")
    record = {
        "datetime": datetime.now(UTC).isoformat(),
        "type": "security",
        # The appid ops gives its own security events, so both read as one application.
        "appid": f"{model_uuid}-{_unit()}" if model_uuid else _unit(),
        "event": f"{name}:{detail}",
        "level": level.name,
        "description": description,
        "outcome": outcome.value,
        **({"object": obj} if obj else {}),
        **_actor(),
    }
    logger.log(_log_level(level, outcome), json.dumps(record))


def _log_level(level: Level, outcome: Outcome) -> int:
    """The Juju log level: what went as intended is INFO, a failure at least WARNING."""
    if outcome is not Outcome.FAILURE:
        return logging.INFO
    return logging.ERROR if level is Level.CRITICAL else logging.WARNING


def credentials_disclosed(secret_label: str, username: str = "", *, disclosed: bool) -> None:
    """The ``get-credentials`` action ran: it handed out the admin credentials, or had none."""
    if disclosed:
        text = f"GARM admin credentials (user {username}) disclosed to the action's caller"
    else:
        text = "GARM admin credentials requested but not available yet: nothing disclosed"
    emit(
        SENSITIVE_READ,
        f"{_unit()},{secret_label}",
        f"{text} (secret {secret_label})",
        outcome=Outcome.SUCCESS if disclosed else Outcome.FAILURE,
        obj=f"secret/{secret_label}",
    )


def admin_login_refused(username: str, secret_label: str) -> None:
    """GARM refused the admin login with the credentials the charm holds."""
    emit(
        AUTHN_LOGIN_FAIL,
        username,
        f"GARM refused the login of admin user {username} (credentials from secret "
        f"{secret_label})",
        outcome=Outcome.FAILURE,
        obj=f"garm-user/{username}",
    )


def token_refused(username: str) -> None:
    """GARM refused the admin's token on a call after the login succeeded."""
    emit(
        AUTHZ_FAIL,
        f"{username},garm-api",
        f"GARM refused the token of admin user {username} after a successful login",
        outcome=Outcome.FAILURE,
        level=Level.CRITICAL,
        obj=f"garm-user/{username}",
    )


def deleted(kind: str, name: str, garm_id: object) -> None:
    """The charm deleted an object from GARM; a GitHub credential reads as a token deletion."""
    event = AUTHN_TOKEN_DELETE if kind == "github-credentials" else SENSITIVE_DELETE
    detail = name if event == AUTHN_TOKEN_DELETE else f"{_unit()},{kind}/{name}"
    emit(
        event,
        detail,
        f"The charm deleted {kind} {name} (id={garm_id}) from GARM",
        outcome=Outcome.SUCCESS,
        obj=f"{kind}/{name}",
    )


def deleted_in_github(kind: str, name: str, github_id: object) -> None:
    """The charm deleted one of its own objects from GitHub that GARM no longer knew."""
    emit(
        SENSITIVE_DELETE,
        f"{_unit()},github-{kind}/{name}",
        f"The charm deleted its {kind} {name} (GitHub id {github_id}) from GitHub",
        outcome=Outcome.SUCCESS,
        obj=f"github-{kind}/{name}",
    )


def garm_stopped(reason: str, description: str) -> None:
    """The charm stopped GARM on this unit (``reason``: ``standby``)."""
    _service_event(SYS_SHUTDOWN, reason, description)


def garm_restarted(reason: str, description: str) -> None:
    """The charm restarted GARM on this unit (``reason``: ``stalled-scaleset``)."""
    _service_event(SYS_RESTART, reason, description)


def _service_event(event: str, reason: str, description: str) -> None:
    emit(event, f"{_unit()},{reason}", description, outcome=Outcome.SUCCESS, obj="service/garm")


def application_removal(outcome: Outcome, description: str) -> None:
    """The leader's removal sweep ended: GARM cleaned up, left as it was, or it failed."""
    emit(
        SYS_SHUTDOWN,
        f"{_unit()},{APPLICATION_REMOVAL}",
        description,
        outcome=outcome,
        obj="application",
    )


def garm_down(check: str, description: str) -> None:
    """Pebble reported GARM's liveness check failing past its threshold."""
    emit(SYS_CRASH, f"garm,{check}", description, outcome=Outcome.FAILURE, obj="service/garm")
