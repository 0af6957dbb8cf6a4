"""Actions service routes: scale sets, sessions, the message queue, jobs and runners.

Owns the API GARM reaches through the URL runner-registration answered
(``/actions-service/{tenant}/_apis/...``, ``api-version`` in the query) and the per-session
message queue (``/message-queue/{session}``), including its bounded long poll.
"""

from __future__ import annotations

import json
from typing import Any

from . import wire
from .model import BadRequestError, Job, ScaleSet, Session, UnauthorizedError
from .routing import ACTIONS, Call, Reply, Routes
from .tokens import bearer_jwt_claims, credential

routes = Routes(ACTIONS)

TENANT = r"^/actions-service/(?P<tenant>\d+)/_apis/"
SCALE_SETS = TENANT + r"runtime/runnerscalesets"
ONE_SET = SCALE_SETS + r"/(?P<set>\d+)"
AGENTS = TENANT + r"distributedtask/pools/0/agents"
SESSION = r"(?P<session>[0-9a-fA-F-]{36})"


def tenant_of(call: Call) -> int:
    """Authorize the call for its tenant (a JWT-shaped Bearer token it issued); return it."""
    auth = call.headers.get("Authorization")
    if bearer_jwt_claims(auth) is None:
        raise UnauthorizedError("a JWT Bearer token is required")
    tenant_id = int(call.params["tenant"])
    call.state.authorize_actions(tenant_id, credential(auth, "Bearer") or "")
    return tenant_id


def render_set(call: Call, record: ScaleSet) -> dict[str, Any]:
    group = call.state.runner_group(record.runner_group_id)
    counts = call.state.counts(record.id)
    return wire.scale_set(record, group, call.urls.actions(record.tenant_id), counts)


def render_session(call: Call, tenant_id: int, record: Session) -> dict[str, Any]:
    scale_set = call.state.get_scale_set(tenant_id, record.scale_set_id)
    counts = call.state.counts(record.scale_set_id)
    return wire.session(record, render_set(call, scale_set), call.urls.queue(record.id), counts)


def int_arg(call: Call, name: str) -> int | None:
    value = call.arg(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise BadRequestError(f"{name} must be an integer") from exc


# ----- scale sets


@routes.add("GET", SCALE_SETS + "$")
def list_scale_sets(call: Call) -> Reply:
    tenant_id = tenant_of(call)
    found = call.state.list_scale_sets(
        tenant_id, name=call.arg("name"), group_id=int_arg(call, "runnerGroupId")
    )
    return Reply(200, wire.listing([render_set(call, s) for s in found]))


@routes.add("POST", SCALE_SETS + "$")
def create_scale_set(call: Call) -> Reply:
    record = call.state.create_scale_set(tenant_of(call), call.json_object())
    return Reply(200, render_set(call, record))


@routes.add("GET", ONE_SET + "$")
def get_scale_set(call: Call) -> Reply:
    record = call.state.get_scale_set(tenant_of(call), int(call.params["set"]))
    return Reply(200, render_set(call, record))


@routes.add("PATCH", ONE_SET + "$")
def update_scale_set(call: Call) -> Reply:
    tenant_id = tenant_of(call)
    record = call.state.update_scale_set(tenant_id, int(call.params["set"]), call.json_object())
    return Reply(200, render_set(call, record))


@routes.add("DELETE", ONE_SET + "$")
def delete_scale_set(call: Call) -> Reply:
    call.state.delete_scale_set(tenant_of(call), int(call.params["set"]))
    return Reply(204)


@routes.add("GET", TENANT + r"runtime/runnergroups/?$")
def runner_groups(call: Call) -> Reply:
    tenant_of(call)
    groups = call.state.runner_groups(call.arg("groupName"))
    sets = call.state.scale_set_views()
    return Reply(
        200,
        wire.listing(
            [
                wire.actions_runner_group(g, sum(s.runner_group_id == g.id for s in sets))
                for g in groups
            ]
        ),
    )


# ----- message sessions


@routes.add("POST", ONE_SET + r"/sessions$")
def create_session(call: Call) -> Reply:
    tenant_id = tenant_of(call)
    owner = str(call.json_object().get("ownerName", ""))
    record = call.state.create_session(tenant_id, int(call.params["set"]), owner)
    return Reply(200, render_session(call, tenant_id, record))


@routes.add("PATCH", ONE_SET + rf"/sessions/{SESSION}$")
def refresh_session(call: Call) -> Reply:
    tenant_id = tenant_of(call)
    record = call.state.refresh_session(tenant_id, int(call.params["set"]), call.params["session"])
    return Reply(200, render_session(call, tenant_id, record))


@routes.add("DELETE", ONE_SET + rf"/sessions/{SESSION}$")
def delete_session(call: Call) -> Reply:
    call.state.delete_session(tenant_of(call), int(call.params["set"]), call.params["session"])
    return Reply(204)


# ----- the message queue (authorized by the session's own token)


@routes.add("GET", rf"^/message-queue/{SESSION}$")
def get_message(call: Call) -> Reply:
    token = credential(call.headers.get("Authorization"), "Bearer") or ""
    capacity = call.headers.get("X-ScaleSetMaxCapacity")
    message, scale_set_id = call.state.poll(
        call.params["session"],
        token,
        last_id=int_arg(call, "lastMessageId") or 0,
        max_capacity=int(capacity) if capacity and capacity.isdigit() else None,
    )
    if message is None:
        return Reply(202)  # nothing arrived during the long poll: 202, empty body
    body = {
        "messageId": message.id,
        "messageType": "RunnerScaleSetJobMessages",
        "body": json.dumps(message.jobs),
        "statistics": wire.statistics(call.state.counts(scale_set_id)),
    }
    return Reply(200, body)


@routes.add("DELETE", rf"^/message-queue/{SESSION}/(?P<message>\d+)$")
def delete_message(call: Call) -> Reply:
    token = credential(call.headers.get("Authorization"), "Bearer") or ""
    call.state.delete_message(call.params["session"], token, int(call.params["message"]))
    return Reply(204)


# ----- jobs


def _acquirable(call: Call, job: Job) -> dict[str, Any]:
    url = f"{call.urls.actions(int(call.params['tenant']))}_apis/runtime/runnerscalesets/"
    return wire.acquirable_job(job, f"{url}{job.scale_set_id}/acquirejobs")


@routes.add("GET", ONE_SET + r"/acquirablejobs$")
def acquirable_jobs(call: Call) -> Reply:
    jobs = call.state.acquirable_jobs(tenant_of(call), int(call.params["set"]))
    return Reply(200, wire.listing([_acquirable(call, j) for j in jobs]))


@routes.add("POST", ONE_SET + r"/acquirejobs$")
def acquire_jobs(call: Call) -> Reply:
    tenant_id = tenant_of(call)
    ids = call.json()
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        raise BadRequestError("the body must be a JSON list of runner request ids")
    acquired = call.state.acquire_jobs(tenant_id, int(call.params["set"]), ids)
    return Reply(200, wire.listing(acquired))


# ----- runners (agents)


@routes.add("POST", ONE_SET + r"/generatejitconfig$")
def generate_jit_config(call: Call) -> Reply:
    tenant_id = tenant_of(call)
    name = str(call.json_object().get("name") or "")
    agent = call.state.generate_jit(tenant_id, int(call.params["set"]), name)
    group = call.state.runner_group(agent.runner_group_id)
    body = wire.jit_config(agent, wire.agent(agent, group), call.urls.actions(tenant_id))
    return Reply(200, body)


@routes.add("GET", AGENTS + "$")
def list_agents(call: Call) -> Reply:
    agents = call.state.list_agents(tenant_of(call), name=call.arg("agentName"))
    return Reply(
        200,
        wire.listing([wire.agent(a, call.state.runner_group(a.runner_group_id)) for a in agents]),
    )


@routes.add("GET", AGENTS + r"/(?P<agent>\d+)$")
def get_agent(call: Call) -> Reply:
    agent = call.state.get_agent(tenant_of(call), int(call.params["agent"]))
    return Reply(200, wire.agent(agent, call.state.runner_group(agent.runner_group_id)))


@routes.add("DELETE", AGENTS + r"/(?P<agent>\d+)$")
def delete_agent(call: Call) -> Reply:
    call.state.delete_agent(tenant_of(call), int(call.params["agent"]))
    return Reply(204)
