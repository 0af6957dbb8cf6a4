"""The stand-in's vocabulary: errors it answers with, the records it keeps, the views it shows.

Records are mutable and private to :mod:`.state` (always touched under its lock); views are
frozen snapshots handed to tests. Nothing here knows HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Job life cycle, as the Actions service reports it through the message queue.
QUEUED = "queued"  # JobAvailable sent; GARM may acquire it
ASSIGNED = "assigned"  # acquired by the scale set; JobAssigned sent
RUNNING = "running"  # JobStarted sent for a runner
COMPLETED = "completed"  # JobCompleted sent

ONLINE = "online"
OFFLINE = "offline"


class StandinError(Exception):
    """A refusal the stand-in answers over HTTP (and raises from the control API)."""

    status = 500
    type_name = "StandinError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFoundError(StandinError):
    """404: no such scale set, session, agent, job or route."""

    status = 404
    type_name = "NotFoundException"


class ConflictError(StandinError):
    """409: the thing exists already or is in use (a live session, a busy runner)."""

    status = 409
    type_name = "ConflictException"


class BadRequestError(StandinError):
    """400: the request is malformed or refused (e.g. a duplicate scale set name)."""

    status = 400
    type_name = "BadRequestException"


class UnauthorizedError(StandinError):
    """401: the credential is missing, not of the right shape, unknown or expired."""

    status = 401
    type_name = "UnauthorizedException"


@dataclass
class Tenant:
    """What ``runner-registration`` was asked about: an org, repo or enterprise URL."""

    id: int
    url: str


@dataclass
class RunnerGroup:
    id: int
    name: str
    is_default: bool = False


@dataclass
class Message:
    """One message on a scale set's queue; its body is a list of job messages."""

    id: int
    jobs: list[dict[str, Any]]


@dataclass
class ScaleSet:
    id: int
    tenant_id: int
    name: str
    runner_group_id: int
    labels: list[str]
    runner_setting: dict[str, Any]
    enabled: bool
    created_on: float
    max_capacity: int | None = None
    last_message_id: int = 0
    messages: list[Message] = field(default_factory=list)


@dataclass
class Session:
    id: str
    scale_set_id: int
    owner: str
    token: str
    expires: float
    last_seen: float
    polling: int = 0


@dataclass
class Job:
    id: int  # also the runnerRequestId GARM acquires with
    scale_set_id: int
    labels: list[str]
    repository: str
    owner: str
    workflow_ref: str
    display_name: str
    run_id: int
    queued_at: float
    state: str = QUEUED
    runner_id: int = 0
    runner_name: str = ""
    result: str = ""
    assigned_at: float = 0.0
    started_at: float = 0.0
    finished_at: float = 0.0


@dataclass
class Agent:
    """A runner registered through ``generatejitconfig`` (an "agent" to the Actions service)."""

    id: int
    tenant_id: int
    scale_set_id: int
    name: str
    runner_group_id: int
    labels: list[str]
    created_on: float
    status: str = OFFLINE
    busy: bool = False


@dataclass(frozen=True)
class ScaleSetView:
    id: int
    name: str
    entity_url: str
    runner_group_id: int
    labels: tuple[str, ...]
    enabled: bool
    max_capacity: int | None
    has_session: bool
    queued_messages: int


@dataclass(frozen=True)
class RunnerView:
    id: int
    name: str
    scale_set_id: int
    status: str
    busy: bool


@dataclass(frozen=True)
class JobView:
    id: int
    scale_set_id: int
    state: str
    labels: tuple[str, ...]
    runner_name: str
    result: str


@dataclass(frozen=True)
class AppJwtCheck:
    """How the stand-in judged one GitHub App JWT, as GitHub would.

    ``header`` and ``claims`` are as sent (empty when the token did not decode); ``key`` is the
    fingerprint of the App key whose signature verified, None when none did; ``refusal`` is
    GitHub's message when the JWT was refused, None when accepted; ``at`` is the stand-in's
    clock (epoch seconds) when it judged.
    """

    header: dict[str, Any]
    claims: dict[str, Any]
    key: str | None
    refusal: str | None
    at: float

    @property
    def accepted(self) -> bool:
        """Whether GitHub would take this JWT."""
        return self.refusal is None

    @property
    def app_id(self) -> str | None:
        """The ``iss`` claim as text (GARM sends the App id as a decimal string), or None."""
        issuer = self.claims.get("iss")
        return None if issuer is None else str(issuer)


@dataclass(frozen=True)
class RecordedRequest:
    """One answered request. ``route`` is the route's name, None when no route matched.

    ``app_jwt`` is the judgement of the App JWT on routes that take one (installation tokens).
    """

    method: str
    path: str
    query: str
    status: int
    route: str | None
    app_jwt: AppJwtCheck | None = None
