"""Routing vocabulary shared by the route modules and the server.

Owns what a route handler sees (:class:`Call`), what it returns (:class:`Reply`), the URL
layout of the stand-in (:class:`Urls`) and the route table entries (:class:`Routes`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message
from typing import Any

from .model import AppJwtCheck, BadRequestError
from .state import StandinState

REST = "rest"  # GitHub REST API: errors as {"message", "documentation_url"}
ACTIONS = "actions"  # Actions service: errors as {"message", "typeName", ...}


@dataclass(frozen=True)
class Urls:
    """Where each part of the stand-in lives, from its base URL ``http://127.0.0.1:PORT``."""

    base: str

    @property
    def api(self) -> str:
        """REST API base, GitHub Enterprise Server style."""
        return f"{self.base}/api/v3/"

    @property
    def upload(self) -> str:
        """Upload API base, GitHub Enterprise Server style."""
        return f"{self.base}/api/uploads/"

    def actions(self, tenant_id: int) -> str:
        """Actions service base URL of one entity (what runner-registration answers)."""
        return f"{self.base}/actions-service/{tenant_id}/"

    def queue(self, session_id: str) -> str:
        """Message queue URL of one session."""
        return f"{self.base}/message-queue/{session_id}"


@dataclass
class Call:
    """One request as a handler sees it.

    A handler that judges an App JWT leaves the judgement in ``app_jwt`` for the record.
    """

    method: str
    path: str
    query: dict[str, list[str]]
    headers: Message
    body: bytes
    state: StandinState
    urls: Urls
    params: dict[str, str] = field(default_factory=dict)
    app_jwt: AppJwtCheck | None = None

    def arg(self, name: str) -> str | None:
        """Return the first value of a query parameter."""
        values = self.query.get(name)
        return values[0] if values else None

    def json(self) -> Any:
        """Return the decoded JSON body (tolerating a UTF-8 BOM); refuse bad JSON with 400."""
        text = self.body.decode("utf-8-sig", errors="replace").strip()
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise BadRequestError("the request body is not valid JSON") from exc

    def json_object(self) -> dict[str, Any]:
        """Return the body, which must be a JSON object."""
        body = self.json()
        if not isinstance(body, dict):
            raise BadRequestError("the request body must be a JSON object")
        return body


@dataclass
class Reply:
    """What a handler answers. ``body`` None means an empty body."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Call], Reply]


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    name: str
    flavor: str
    handler: Handler


class Routes:
    """A route table filled by the ``add`` decorator."""

    def __init__(self, flavor: str) -> None:
        self.flavor = flavor
        self.table: list[Route] = []

    def add(self, method: str, pattern: str) -> Callable[[Handler], Handler]:
        """Register the decorated function for ``method`` on paths matching ``pattern``."""

        def register(handler: Handler) -> Handler:
            compiled = re.compile(pattern)
            self.table.append(Route(method, compiled, handler.__name__, self.flavor, handler))
            return handler

        return register
