"""The stand-in's memory and rules: tokens, tenants, scale sets, sessions, queues, jobs, runners.

GitHub Apps and their keys live in :class:`.apps.AppRegistry` (``StandinState.apps``).

Everything is kept under one condition variable, so HTTP handler threads and the tests'
control calls see a consistent world, and a long poll wakes as soon as a message is posted.
Methods return copies of records; refusals are raised as :class:`.model.StandinError`.
"""

from __future__ import annotations

import copy
import itertools
import secrets
import string
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from . import wire
from .apps import AppRegistry
from .model import (
    ASSIGNED,
    COMPLETED,
    OFFLINE,
    ONLINE,
    QUEUED,
    RUNNING,
    Agent,
    BadRequestError,
    ConflictError,
    Job,
    JobView,
    Message,
    NotFoundError,
    RunnerGroup,
    RunnerView,
    ScaleSet,
    ScaleSetView,
    Session,
    StandinError,
    Tenant,
    UnauthorizedError,
)
from .tokens import opaque_token, timed_jwt

DEFAULT_GROUP = RunnerGroup(id=1, name="Default", is_default=True)
JOB_MESSAGES = "RunnerScaleSetJobMessages"


@dataclass(frozen=True)
class StandinSnapshot:
    """The stand-in's world at one moment (:meth:`StandinState.snapshot`)."""

    records: dict[str, Any]
    next_ids: dict[str, int]
    next_group_id: int


def _registration_token() -> str:
    alphabet = string.ascii_uppercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(29))


class StandinState:
    """In-memory GitHub and Actions service."""

    def __init__(
        self,
        *,
        actions_url: Callable[[int], str],
        poll_timeout: float,
        token_lifetime: float,
        session_idle_timeout: float,
    ) -> None:
        self._actions_url = actions_url
        self.poll_timeout = poll_timeout
        self.token_lifetime = token_lifetime
        self.session_idle_timeout = session_idle_timeout
        self._cond = threading.Condition()
        self._closing = False
        self._next_id = {k: itertools.count(1) for k in ("tenant", "scaleset", "agent", "job")}
        self._next_group_id = itertools.count(2)
        self._groups: dict[int, RunnerGroup] = {DEFAULT_GROUP.id: copy.copy(DEFAULT_GROUP)}
        self._tenants: dict[str, Tenant] = {}
        self._scale_sets: dict[int, ScaleSet] = {}
        self._sessions: dict[str, Session] = {}
        self._jobs: dict[int, Job] = {}
        self._agents: dict[int, Agent] = {}
        self._installation_tokens: dict[str, float] = {}
        self._registration_tokens: dict[str, tuple[str, float]] = {}
        self._admin_tokens: dict[str, tuple[int, float]] = {}
        self.apps = AppRegistry()  # its own lock: App keys are not part of the Actions world

    # ----- life cycle

    def close(self) -> None:
        """Wake every long poll so that it answers at once."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()

    # ----- snapshots (the fault campaign puts a world back as it was)

    # The records that make up the Actions world (App keys are not part of it).
    _WORLD = (
        "_groups",
        "_tenants",
        "_scale_sets",
        "_sessions",
        "_jobs",
        "_agents",
        "_installation_tokens",
        "_registration_tokens",
        "_admin_tokens",
    )

    def snapshot(self) -> StandinSnapshot:
        """A copy of the world: records and the next ids.

        Message sessions are kept as abandoned (not polled for longer than
        ``session_idle_timeout``): whoever polled them is gone once the world is put back.
        """
        with self._cond:
            records = copy.deepcopy({name: getattr(self, name) for name in self._WORLD})
            next_ids = {kind: next(counter) for kind, counter in self._next_id.items()}
            self._next_id = {kind: itertools.count(n) for kind, n in next_ids.items()}
            next_group = next(self._next_group_id)
            self._next_group_id = itertools.count(next_group)
        for sess in records["_sessions"].values():
            sess.polling, sess.last_seen = 0, 0.0
        return StandinSnapshot(records, next_ids, next_group)

    def restore(self, snapshot: StandinSnapshot) -> None:
        """Put the world back as :meth:`snapshot` copied it; long polls on it end."""
        with self._cond:
            for name, value in copy.deepcopy(snapshot.records).items():
                setattr(self, name, value)
            self._next_id = {k: itertools.count(n) for k, n in snapshot.next_ids.items()}
            self._next_group_id = itertools.count(snapshot.next_group_id)
            self._cond.notify_all()

    # ----- GitHub REST credentials

    def issue_installation_token(self) -> tuple[str, float]:
        """Issue an App installation access token; return it and its expiry."""
        token = opaque_token("ghs_")
        expiry = time.time() + self.token_lifetime
        with self._cond:
            self._installation_tokens[token] = expiry
        return token, expiry

    def check_rest_token(self, token: str) -> None:
        """Refuse an installation token (``ghs_``) this stand-in did not issue or that expired.

        Other tokens (personal access tokens) are accepted as they come.
        """
        if not token.startswith("ghs_"):
            return
        with self._cond:
            expiry = self._installation_tokens.get(token)
        if expiry is None or expiry < time.time():
            raise UnauthorizedError("Bad credentials")

    def issue_registration_token(self, entity: str) -> tuple[str, float]:
        """Issue a runner registration token for ``entity`` (``org``, ``owner/repo``...)."""
        token = _registration_token()
        expiry = time.time() + self.token_lifetime
        with self._cond:
            self._registration_tokens[token] = (entity, expiry)
        return token, expiry

    def register(self, registration_token: str, url: str) -> tuple[int, str]:
        """Trade a registration token for the entity's Actions service tenant and admin token."""
        entity = urlsplit(url).path.strip("/")
        with self._cond:
            issued = self._registration_tokens.get(registration_token)
            if issued is None or issued[1] < time.time():
                raise UnauthorizedError("registration token is unknown or expired")
            if issued[0] != entity:
                raise UnauthorizedError(f"registration token was not issued for {url!r}")
            tenant = self._tenants.get(entity)
            if tenant is None:
                tenant = Tenant(id=next(self._next_id["tenant"]), url=url)
                self._tenants[entity] = tenant
            token, expiry = timed_jwt(self.token_lifetime, tenant=tenant.id, scp="actions")
            self._admin_tokens[token] = (tenant.id, expiry)
            return tenant.id, token

    def authorize_actions(self, tenant_id: int, token: str) -> None:
        """Accept the tenant's admin token or a live message queue token of that tenant."""
        now = time.time()
        with self._cond:
            admin = self._admin_tokens.get(token)
            if admin is not None and admin[0] == tenant_id and admin[1] >= now:
                return
            for sess in self._sessions.values():
                owner = self._scale_sets.get(sess.scale_set_id)
                mine = owner is not None and owner.tenant_id == tenant_id
                if mine and sess.token == token and sess.expires >= now:
                    return
        raise UnauthorizedError("the access token is unknown, expired or for another tenant")

    # ----- runner groups

    def add_runner_group(self, name: str) -> int:
        """Create a runner group; return its id."""
        with self._cond:
            group = RunnerGroup(id=next(self._next_group_id), name=name)
            self._groups[group.id] = group
            return group.id

    def runner_groups(self, name: str | None = None) -> list[RunnerGroup]:
        """Return the runner groups, optionally only those named ``name`` (case-insensitive)."""
        with self._cond:
            groups = [copy.copy(g) for g in self._groups.values()]
        if name is not None:
            groups = [g for g in groups if g.name.lower() == name.lower()]
        return groups

    def runner_group(self, group_id: int) -> RunnerGroup:
        """Return a runner group by id."""
        with self._cond:
            group = self._groups.get(group_id)
            if group is None:
                raise NotFoundError(f"runner group {group_id} does not exist")
            return copy.copy(group)

    # ----- scale sets

    def _scale_set(self, tenant_id: int, scale_set_id: int) -> ScaleSet:
        found = self._scale_sets.get(scale_set_id)
        if found is None or found.tenant_id != tenant_id:
            raise NotFoundError(f"runner scale set {scale_set_id} does not exist")
        return found

    def _check_name_free(self, tenant_id: int, group_id: int, name: str, own_id: int) -> None:
        for other in self._scale_sets.values():
            same_place = other.tenant_id == tenant_id and other.runner_group_id == group_id
            if same_place and other.name == name and other.id != own_id:
                raise BadRequestError(
                    f"a runner scale set named {name!r} already exists in runner group {group_id}"
                )

    def create_scale_set(self, tenant_id: int, body: dict[str, Any]) -> ScaleSet:
        """Create a scale set from a ``RunnerScaleSet`` body."""
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise BadRequestError("the runner scale set name is required")
        group_id = int(body.get("runnerGroupId") or DEFAULT_GROUP.id)
        with self._cond:
            if group_id not in self._groups:
                raise NotFoundError(f"runner group {group_id} does not exist")
            self._check_name_free(tenant_id, group_id, name, own_id=0)
            record = ScaleSet(
                id=next(self._next_id["scaleset"]),
                tenant_id=tenant_id,
                name=name,
                runner_group_id=group_id,
                labels=[str(label.get("name")) for label in body.get("labels") or []],
                runner_setting=dict(body.get("RunnerSetting") or {}),
                enabled=bool(body.get("enabled", True)),
                created_on=time.time(),
            )
            self._scale_sets[record.id] = record
            return copy.deepcopy(record)

    def add_foreign_scale_set(self, entity: str, name: str, group_name: str) -> int:
        """Register a scale set as someone other than GARM would (an ARC, a person); its id.

        ``entity`` is the entity URL's path (``org-b``, ``owner/repo``), the tenant GARM's
        scale sets of that entity are in. GitHub's name rule holds as for any create.
        """
        with self._cond:
            tenant = self._tenants.get(entity)
            if tenant is None:
                tenant = Tenant(id=next(self._next_id["tenant"]), url=f"/{entity}")
                self._tenants[entity] = tenant
            group = next(g for g in self._groups.values() if g.name == group_name)
        body = {"name": name, "runnerGroupId": group.id, "labels": [{"name": "foreign"}]}
        return self.create_scale_set(tenant.id, body).id

    def delete_scale_set_named(self, name: str) -> None:
        """Delete every scale set of ``name``, whoever registered it (a hand in GitHub)."""
        with self._cond:
            doomed = [(s.tenant_id, s.id) for s in self._scale_sets.values() if s.name == name]
        for tenant_id, scale_set_id in doomed:
            self.delete_scale_set(tenant_id, scale_set_id)

    def get_scale_set(self, tenant_id: int, scale_set_id: int) -> ScaleSet:
        """Return a scale set of the tenant."""
        with self._cond:
            return copy.deepcopy(self._scale_set(tenant_id, scale_set_id))

    def list_scale_sets(
        self, tenant_id: int, name: str | None = None, group_id: int | None = None
    ) -> list[ScaleSet]:
        """Return the tenant's scale sets, filtered by name and runner group when given."""
        with self._cond:
            found = [s for s in self._scale_sets.values() if s.tenant_id == tenant_id]
            if name is not None:
                found = [s for s in found if s.name == name]
            if group_id is not None:
                found = [s for s in found if s.runner_group_id == group_id]
            return copy.deepcopy(found)

    def update_scale_set(
        self, tenant_id: int, scale_set_id: int, body: dict[str, Any]
    ) -> ScaleSet:
        """Apply the fields present in a ``RunnerScaleSet`` body (a PATCH)."""
        with self._cond:
            record = self._scale_set(tenant_id, scale_set_id)
            group_id = int(body.get("runnerGroupId") or record.runner_group_id)
            if group_id not in self._groups:
                raise NotFoundError(f"runner group {group_id} does not exist")
            name = body.get("name") or record.name
            self._check_name_free(tenant_id, group_id, name, own_id=record.id)
            record.name, record.runner_group_id = name, group_id
            if body.get("labels"):
                record.labels = [str(label.get("name")) for label in body["labels"]]
            record.runner_setting.update(body.get("RunnerSetting") or {})
            if "enabled" in body:
                record.enabled = bool(body["enabled"])
            return copy.deepcopy(record)

    def delete_scale_set(self, tenant_id: int, scale_set_id: int) -> None:
        """Delete a scale set with its sessions, queue and runners."""
        with self._cond:
            self._scale_set(tenant_id, scale_set_id)
            del self._scale_sets[scale_set_id]
            for sid in [s.id for s in self._sessions.values() if s.scale_set_id == scale_set_id]:
                del self._sessions[sid]
            for aid in [a.id for a in self._agents.values() if a.scale_set_id == scale_set_id]:
                del self._agents[aid]
            self._cond.notify_all()

    def counts(self, scale_set_id: int) -> dict[str, int]:
        """Return the statistics counters of a scale set."""
        with self._cond:
            jobs = [j for j in self._jobs.values() if j.scale_set_id == scale_set_id]
            agents = [a for a in self._agents.values() if a.scale_set_id == scale_set_id]
            states = [j.state for j in jobs]
            return {
                "available": states.count(QUEUED),
                "acquired": states.count(ASSIGNED),
                "assigned": states.count(ASSIGNED) + states.count(RUNNING),
                "running": states.count(RUNNING),
                "registered": len(agents),
                "busy": sum(a.busy for a in agents),
                "idle": sum(a.status == ONLINE and not a.busy for a in agents),
            }

    # ----- message sessions and the queue

    def _live(self, sess: Session, now: float) -> bool:
        return sess.polling > 0 or now - sess.last_seen < self.session_idle_timeout

    def create_session(self, tenant_id: int, scale_set_id: int, owner: str) -> Session:
        """Open the scale set's message session; refuse while another one is live."""
        now = time.time()
        with self._cond:
            self._scale_set(tenant_id, scale_set_id)
            mine = [s for s in self._sessions.values() if s.scale_set_id == scale_set_id]
            if any(self._live(s, now) for s in mine):
                raise ConflictError(
                    f"runner scale set {scale_set_id} already has an active message session"
                )
            for stale in mine:
                del self._sessions[stale.id]
            sid = str(uuid.uuid4())
            token, expiry = timed_jwt(self.token_lifetime, sid=sid, scp="messagequeue")
            sess = Session(sid, scale_set_id, owner, token, expiry, last_seen=now)
            self._sessions[sid] = sess
            return copy.copy(sess)

    def _session(self, tenant_id: int, scale_set_id: int, session_id: str) -> Session:
        self._scale_set(tenant_id, scale_set_id)
        sess = self._sessions.get(session_id)
        if sess is None or sess.scale_set_id != scale_set_id:
            raise NotFoundError(f"message session {session_id} does not exist")
        return sess

    def refresh_session(self, tenant_id: int, scale_set_id: int, session_id: str) -> Session:
        """Give a session a fresh message queue token."""
        with self._cond:
            sess = self._session(tenant_id, scale_set_id, session_id)
            sess.token, sess.expires = timed_jwt(
                self.token_lifetime, sid=session_id, scp="messagequeue"
            )
            sess.last_seen = time.time()
            return copy.copy(sess)

    def delete_session(self, tenant_id: int, scale_set_id: int, session_id: str) -> None:
        """Close a session; a long poll on it ends."""
        with self._cond:
            self._session(tenant_id, scale_set_id, session_id)
            del self._sessions[session_id]
            self._cond.notify_all()

    def _queue_session(self, session_id: str, token: str) -> Session:
        sess = self._sessions.get(session_id)
        if sess is None:
            raise NotFoundError(f"message session {session_id} does not exist")
        if token != sess.token or sess.expires < time.time():
            raise UnauthorizedError("the message queue token is not this session's or expired")
        return sess

    def session_tenant(self, session_id: str) -> int:
        """Return the tenant of a session (to render its scale set)."""
        with self._cond:
            sess = self._sessions.get(session_id)
            if sess is None:
                raise NotFoundError(f"message session {session_id} does not exist")
            return self._scale_sets[sess.scale_set_id].tenant_id

    def poll(
        self, session_id: str, token: str, last_id: int, max_capacity: int | None
    ) -> tuple[Message | None, int]:
        """Long-poll a session's queue: the next message after ``last_id``, or None on timeout.

        Only ``DELETE`` removes a message; one not deleted is answered again to a poll whose
        ``last_id`` is below it (GARM relies on that to retry a message it failed to handle).
        Returns the message and the scale set id (for its statistics).
        """
        with self._cond:
            sess = self._queue_session(session_id, token)
            scale_set = self._scale_sets[sess.scale_set_id]
            if max_capacity is not None:
                scale_set.max_capacity = max_capacity
            sess.polling += 1
            try:
                return self._wait_message(sess, scale_set, last_id), scale_set.id
            finally:
                sess.polling -= 1
                sess.last_seen = time.time()

    def _wait_message(self, sess: Session, scale_set: ScaleSet, last_id: int) -> Message | None:
        deadline = time.monotonic() + self.poll_timeout
        while not self._closing:
            if sess.id not in self._sessions:
                raise NotFoundError(f"message session {sess.id} was deleted")
            ready = [m for m in scale_set.messages if m.id > last_id]
            if ready:
                return copy.deepcopy(ready[0])
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._cond.wait(remaining)
        return None

    def delete_message(self, session_id: str, token: str, message_id: int) -> None:
        """Acknowledge (delete) a message of the session's queue."""
        with self._cond:
            sess = self._queue_session(session_id, token)
            scale_set = self._scale_sets[sess.scale_set_id]
            kept = [m for m in scale_set.messages if m.id != message_id]
            if len(kept) == len(scale_set.messages):
                raise NotFoundError(f"message {message_id} is not on the queue")
            scale_set.messages = kept

    def _post(self, scale_set: ScaleSet, message_type: str, jobs: Iterable[Job]) -> None:
        acquire_url = (
            f"{self._actions_url(scale_set.tenant_id)}"
            f"_apis/runtime/runnerscalesets/{scale_set.id}/acquirejobs"
        )
        body = [wire.job_message(job, message_type, acquire_url) for job in jobs]
        if not body:
            return
        scale_set.last_message_id += 1
        scale_set.messages.append(Message(id=scale_set.last_message_id, jobs=body))
        self._cond.notify_all()

    # ----- jobs

    def _scale_set_named(self, name: str) -> ScaleSet:
        found = [s for s in self._scale_sets.values() if s.name == name]
        if len(found) != 1:
            raise NotFoundError(f"{len(found)} scale sets are named {name!r}; expected one")
        return found[0]

    def queue_job(self, scale_set_name: str, labels: list[str] | None, repository: str) -> int:
        """Queue a job for a scale set (JobAvailable); return its id."""
        with self._cond:
            job = self._new_job(scale_set_name, labels, repository)
            self._post(self._scale_sets[job.scale_set_id], "JobAvailable", [job])
            return job.id

    def assign_job_heard(self, scale_set_name: str) -> int:
        """A job GARM acquired and whose messages it acknowledged long ago; return its id."""
        with self._cond:
            job = self._new_job(scale_set_name, None, "repo")
            job.state, job.assigned_at = ASSIGNED, time.time()
            return job.id

    def _new_job(self, scale_set_name: str, labels: list[str] | None, repository: str) -> Job:
        with self._cond:
            scale_set = self._scale_set_named(scale_set_name)
            job_id = next(self._next_id["job"])
            owner = self._tenant_name(scale_set.tenant_id)
            job = Job(
                id=job_id,
                scale_set_id=scale_set.id,
                labels=list(labels) if labels is not None else [scale_set.name],
                repository=repository,
                owner=owner,
                workflow_ref=f"{owner}/{repository}/.github/workflows/ci.yaml@refs/heads/main",
                display_name=f"standin-job-{job_id}",
                run_id=1000 + job_id,
                queued_at=time.time(),
            )
            self._jobs[job_id] = job
            return job

    def _tenant_name(self, tenant_id: int) -> str:
        for entity, tenant in self._tenants.items():
            if tenant.id == tenant_id:
                return entity.split("/")[0]
        return ""

    def acquirable_jobs(self, tenant_id: int, scale_set_id: int) -> list[Job]:
        """Return the scale set's jobs that may still be acquired."""
        with self._cond:
            self._scale_set(tenant_id, scale_set_id)
            return [
                copy.deepcopy(j)
                for j in self._jobs.values()
                if j.scale_set_id == scale_set_id and j.state == QUEUED
            ]

    def acquire_jobs(self, tenant_id: int, scale_set_id: int, request_ids: list[int]) -> list[int]:
        """Acquire queued jobs by runner request id; post JobAssigned for those acquired."""
        with self._cond:
            scale_set = self._scale_set(tenant_id, scale_set_id)
            acquired = []
            for request_id in request_ids:
                job = self._jobs.get(request_id)
                if job is None or job.scale_set_id != scale_set_id or job.state != QUEUED:
                    continue
                job.state, job.assigned_at = ASSIGNED, time.time()
                acquired.append(job)
            self._post(scale_set, "JobAssigned", acquired)
            return [job.id for job in acquired]

    def _job(self, job_id: int) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise NotFoundError(f"job {job_id} does not exist")
        return job

    def start_job(self, job_id: int, runner_name: str) -> None:
        """Start an acquired job on a runner of its scale set (JobStarted; runner busy)."""
        with self._cond:
            job = self._job(job_id)
            if job.state != ASSIGNED:
                raise ConflictError(f"job {job_id} is {job.state}, not {ASSIGNED}")
            agent = self._agent_named(job.scale_set_id, runner_name)
            if agent.busy:
                raise ConflictError(f"runner {runner_name} is busy")
            agent.status, agent.busy = ONLINE, True
            job.state, job.started_at = RUNNING, time.time()
            job.runner_id, job.runner_name = agent.id, agent.name
            self._post(self._scale_sets[job.scale_set_id], "JobStarted", [job])

    def complete_job(self, job_id: int, result: str) -> None:
        """Complete a job (JobCompleted); its ephemeral runner, if any, is unregistered."""
        with self._cond:
            job = self._job(job_id)
            if job.state == COMPLETED:
                raise ConflictError(f"job {job_id} is already {COMPLETED}")
            self._agents.pop(job.runner_id, None)
            job.state, job.result, job.finished_at = COMPLETED, result, time.time()
            scale_set = self._scale_sets.get(job.scale_set_id)
            if scale_set is not None:
                self._post(scale_set, "JobCompleted", [job])

    # ----- runners (agents)

    def _agent_named(self, scale_set_id: int, name: str) -> Agent:
        for agent in self._agents.values():
            if agent.scale_set_id == scale_set_id and agent.name == name:
                return agent
        raise NotFoundError(f"scale set {scale_set_id} has no runner named {name!r}")

    def generate_jit(self, tenant_id: int, scale_set_id: int, name: str) -> Agent:
        """Register a runner for the scale set (``generatejitconfig``)."""
        if not name:
            raise BadRequestError("the runner name is required")
        with self._cond:
            scale_set = self._scale_set(tenant_id, scale_set_id)
            if any(a.tenant_id == tenant_id and a.name == name for a in self._agents.values()):
                raise ConflictError(f"a runner named {name!r} already exists")
            agent = Agent(
                id=next(self._next_id["agent"]),
                tenant_id=tenant_id,
                scale_set_id=scale_set_id,
                name=name,
                runner_group_id=scale_set.runner_group_id,
                labels=list(scale_set.labels),
                created_on=time.time(),
            )
            self._agents[agent.id] = agent
            return copy.deepcopy(agent)

    def list_agents(self, tenant_id: int, name: str | None = None) -> list[Agent]:
        """Return the tenant's runners, or only the one named ``name``."""
        with self._cond:
            found = [a for a in self._agents.values() if a.tenant_id == tenant_id]
            if name is not None:
                found = [a for a in found if a.name == name]
            return copy.deepcopy(found)

    def _agent(self, tenant_id: int, agent_id: int) -> Agent:
        agent = self._agents.get(agent_id)
        if agent is None or agent.tenant_id != tenant_id:
            raise NotFoundError(f"runner {agent_id} does not exist")
        return agent

    def get_agent(self, tenant_id: int, agent_id: int) -> Agent:
        """Return one runner."""
        with self._cond:
            return copy.deepcopy(self._agent(tenant_id, agent_id))

    def delete_agent(self, tenant_id: int, agent_id: int) -> None:
        """Remove a runner; a busy one is refused."""
        with self._cond:
            agent = self._agent(tenant_id, agent_id)
            if agent.busy:
                raise ConflictError(f"runner {agent.name} is running a job")
            del self._agents[agent_id]

    def set_runner_status(self, name: str, status: str) -> None:
        """Set a runner's status (``online``/``offline``), as a booting runner would."""
        if status not in {ONLINE, OFFLINE}:
            raise BadRequestError(f"status must be {ONLINE} or {OFFLINE}")
        with self._cond:
            found = [a for a in self._agents.values() if a.name == name]
            if not found:
                raise NotFoundError(f"no runner named {name!r}")
            found[0].status = status

    # ----- views for tests

    def scale_set_views(self) -> list[ScaleSetView]:
        """Snapshot of every scale set."""
        now = time.time()
        with self._cond:
            urls = {t.id: t.url for t in self._tenants.values()}
            return [
                ScaleSetView(
                    id=s.id,
                    name=s.name,
                    entity_url=urls.get(s.tenant_id, ""),
                    runner_group_id=s.runner_group_id,
                    labels=tuple(s.labels),
                    enabled=s.enabled,
                    max_capacity=s.max_capacity,
                    has_session=any(
                        x.scale_set_id == s.id and self._live(x, now)
                        for x in self._sessions.values()
                    ),
                    queued_messages=len(s.messages),
                )
                for s in sorted(self._scale_sets.values(), key=lambda s: s.id)
            ]

    def runner_views(self) -> list[RunnerView]:
        """Snapshot of every runner."""
        with self._cond:
            return [
                RunnerView(a.id, a.name, a.scale_set_id, a.status, a.busy)
                for a in sorted(self._agents.values(), key=lambda a: a.id)
            ]

    def job_views(self) -> list[JobView]:
        """Snapshot of every job."""
        with self._cond:
            return [
                JobView(j.id, j.scale_set_id, j.state, tuple(j.labels), j.runner_name, j.result)
                for j in sorted(self._jobs.values(), key=lambda j: j.id)
            ]


__all__ = ["StandinError", "StandinState"]
