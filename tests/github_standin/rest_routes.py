"""GitHub REST API routes (under ``/api/v3``) and the runner-registration exchange.

Owns what GARM asks github.com (or a GitHub Enterprise Server): the rate limit, App
installation access tokens (for an App JWT that :mod:`.apps` verifies), registration tokens,
runner downloads, runner groups, and ``POST /actions/runner-registration``, which points GARM
at the Actions service.
"""

from __future__ import annotations

import time

from . import wire
from .model import UnauthorizedError
from .routing import REST, Call, Reply, Routes
from .tokens import credential, rfc3339

routes = Routes(REST)

# orgs/{org}, repos/{owner}/{repo} or enterprises/{enterprise}
ENTITY = r"(?P<entity>orgs/[^/]+|repos/[^/]+/[^/]+|enterprises/[^/]+)"
RATE_LIMIT = 5000


def entity_key(path_entity: str) -> str:
    """Map ``orgs/o`` to ``o``, ``repos/o/r`` to ``o/r``; enterprises keep their prefix.

    The key matches the path of the entity URL GARM later sends to runner-registration.
    """
    kind, _, rest = path_entity.partition("/")
    return rest if kind in {"orgs", "repos"} else path_entity


def rate_headers() -> dict[str, str]:
    """Rate limit headers go-github reads from every REST answer."""
    return {
        "X-RateLimit-Limit": str(RATE_LIMIT),
        "X-RateLimit-Remaining": str(RATE_LIMIT - 1),
        "X-RateLimit-Used": "1",
        "X-RateLimit-Reset": str(int(time.time()) + 3600),
        "X-RateLimit-Resource": "core",
    }


def require_token(call: Call) -> None:
    """Require ``Authorization: token X`` or ``Bearer X``; refuse unknown installation tokens."""
    auth = call.headers.get("Authorization")
    token = credential(auth, "token") or credential(auth, "Bearer")
    if token is None:
        raise UnauthorizedError("Requires authentication")
    call.state.check_rest_token(token)


@routes.add("GET", r"^/api/v3/rate_limit$")
def rate_limit(call: Call) -> Reply:
    require_token(call)
    rate = {"limit": RATE_LIMIT, "remaining": RATE_LIMIT - 1, "reset": int(time.time()) + 3600}
    rate["used"] = 1
    resources = {
        name: {**rate, "resource": name}
        for name in ("core", "search", "graphql", "actions_runner_registration")
    }
    return Reply(200, {"resources": resources, "rate": {**rate, "resource": "core"}})


@routes.add("POST", r"^/api/v3/app/installations/(?P<installation>\d+)/access_tokens$")
def installation_token(call: Call) -> Reply:
    call.app_jwt = call.state.apps.verify(call.headers.get("Authorization"))
    if call.app_jwt.refusal is not None:
        raise UnauthorizedError(call.app_jwt.refusal)
    token, expiry = call.state.issue_installation_token()
    body = {
        "token": token,
        "expires_at": rfc3339(expiry),
        "permissions": {"administration": "write", "organization_self_hosted_runners": "write"},
        "repository_selection": "all",
    }
    return Reply(201, body)


@routes.add("POST", rf"^/api/v3/{ENTITY}/actions/runners/registration-token$")
def registration_token(call: Call) -> Reply:
    require_token(call)
    token, expiry = call.state.issue_registration_token(entity_key(call.params["entity"]))
    return Reply(201, {"token": token, "expires_at": rfc3339(expiry)})


@routes.add("GET", rf"^/api/v3/{ENTITY}/actions/runners/downloads$")
def runner_downloads(call: Call) -> Reply:
    require_token(call)
    return Reply(200, wire.runner_downloads(call.urls.base))


@routes.add("GET", r"^/api/v3/(?P<entity>orgs/[^/]+|enterprises/[^/]+)/actions/runner-groups$")
def runner_groups(call: Call) -> Reply:
    require_token(call)
    base = f"{call.urls.api}{call.params['entity']}/actions"
    return Reply(200, wire.rest_runner_groups(call.state.runner_groups(), base))


@routes.add("POST", r"^/actions/runner-registration$")
def runner_registration(call: Call) -> Reply:
    token = credential(call.headers.get("Authorization"), "RemoteAuth")
    if token is None:
        raise UnauthorizedError("runner-registration needs Authorization: RemoteAuth <token>")
    body = call.json_object()
    tenant_id, admin_token = call.state.register(token, str(body.get("url", "")))
    return Reply(200, {"url": call.urls.actions(tenant_id), "token": admin_token})
