"""Keep GARM's organisations and repositories equal to what the configurators publish.

An entity belongs to the charm when the credential it is bound to carries the charm's marker
description; only such entities are switched to another credential or deleted. Failures to
register or update one entity are logged and retried on the next pass, so one bad entity does
not hold back the others. GARM refuses to delete an entity while scale sets use it, so an
entity is deleted only once the scale-set pass of the same hook has left none that names it;
it then tells the credential pruning which credentials are still used. Agent mode is set as
the tool step decided it (``reconcile.agent_tools``), on create or by an update, and left as it
is while that step holds it.

The entities' writes run beside the scale-set step (:class:`EntityStep`, ADR 0015): GARM
registers organisations one at a time, so a scale set goes to GARM as soon as its own entity is
done rather than after every entity.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from garm import (
    Credential,
    GarmClient,
    Organization,
    Repository,
    ScaleSet,
    describe_failure,
)
from reconcile.containment import contain
from reconcile.credentials import is_managed
from reconcile.endpoints import endpoint_of
from reconcile.writes import Background, Writes
from vocabulary.desired_state import EntityKey, EntitySpec, entity_key
from vocabulary.notices import Notice, Severity
from vocabulary.security_events import deleted

logger = logging.getLogger(__name__)

ORGANIZATION = "organization"
REPOSITORY = "repository"
# The steps' words when the pass's budget cuts them (``reconcile.writes``).
ENSURE_STEP = "registering organisations and repositories"
DELETE_STEP = "deleting organisations and repositories"


def new_webhook_secret() -> str:
    """Return a fresh webhook secret: GARM refuses an empty one, and the charm installs no hook.

    Returns:
        64 lowercase hex characters.
    """
    return secrets.token_hex(32)


def split_repository(entity_name: str) -> tuple[str, str] | None:
    """Split ``owner/name`` into its two parts.

    Args:
        entity_name: the repository as a configurator publishes it.

    Returns:
        ``(owner, name)``, or None when the value is not of that shape.
    """
    owner, sep, name = entity_name.partition("/")
    if not sep or not owner or not name or "/" in name:
        return None
    return owner, name


@dataclass
class _Observed:
    """One live entity, whichever its kind."""

    entity_type: str
    key: str
    id: str | None
    credentials_name: str | None
    credentials_id: int | None
    agent_mode: bool = False


class EntityReconciler:
    """Create, re-bind and delete organisations and repositories so they match ``desired``.

    GARM's entities are listed once, when the reconciler is made. :meth:`ensure` runs before
    the scale-set pass; :meth:`prune` after it, so an entity goes in the same hook as its last
    scale set and GARM is never asked for a delete it would refuse.
    """

    def __init__(
        self,
        client: GarmClient,
        credentials: Sequence[Credential],
        writes: Writes | None = None,
    ) -> None:
        """List GARM's organisations and repositories.

        Args:
            client: an authenticated GARM client.
            credentials: GARM's credentials as listed in this pass (ownership is read there).
            writes: the pass's writes (pool and budget); None: one at a time, no budget.

        Raises:
            GarmApiError: a listing failed.
        """
        self._client = client
        self._writes = writes or Writes(size=1)
        self.notices: list[Notice] = []
        self._creds_by_id = {c.id: c for c in credentials if c.id is not None}
        self._creds_by_name = {c.name: c for c in credentials if c.name}
        self._observed: dict[EntityKey, _Observed] = {}
        # The entities this pass registered, by key: what a scale set waiting for one needs.
        self.created: dict[EntityKey, str] = {}
        for org in client.list_organizations():
            if org.name:
                key = entity_key(ORGANIZATION, org.name, endpoint_of(org.endpoint))
                self._observed[key] = _from_org(org)
        for repo in client.list_repositories():
            if repo.owner and repo.name:
                live = _from_repo(repo)
                key = entity_key(REPOSITORY, live.key, endpoint_of(repo.endpoint))
                self._observed[key] = live

    def ensure(
        self,
        desired: Sequence[EntitySpec],
        *,
        missing_credentials: Collection[str] = (),
        held: Collection[EntityKey] = (),
        agent_modes: Mapping[EntityKey, bool] | None = None,
    ) -> None:
        """Register the desired entities GARM lacks, re-bind those on another credential.

        A refused registration is logged, noted and retried on the next pass; it never stops
        the others. An entity whose credential GARM does not hold is not tried at all.

        Args:
            desired: the entities the configurators publish.
            missing_credentials: desired credentials GARM does not hold this pass.
            held: ``(type, name)`` of entities whose configurator input is invalid: left
                exactly as they are.
            agent_modes: the agent mode of each entity by ``(type, name)`` (absent: off);
                None holds agent mode: existing entities keep theirs, new ones start off.

        Raises:
            GarmConnectionError: GARM is unreachable.
            GarmUnauthorizedError: GARM rejected the token.
            GarmProtocolError: GARM answered in a shape the charm cannot read.
        """
        EntityStep(self, self._writes).prepare(
            desired, missing_credentials, held, agent_modes
        ).settled()

    def prune(
        self,
        desired: Sequence[EntitySpec],
        live: Sequence[ScaleSet],
        held: Collection[EntityKey] = (),
    ) -> set[str]:
        """Delete managed entities nobody desires once no scale set in GARM belongs to them.

        Args:
            desired: the entities the configurators publish.
            live: the scale sets GARM holds after this pass's scale-set reconcile.
            held: ``(type, name)`` of entities whose configurator input is invalid: kept.

        Returns:
            Names of the credentials still used by an entity left in GARM.

        Raises:
            GarmConnectionError: GARM became unreachable (no further delete is tried).
        """
        wanted = _by_key(desired)
        owners = {s.org_id for s in live if s.org_id} | {s.repo_id for s in live if s.repo_id}
        in_use = {spec.credentials_name for spec in wanted.values()}
        doomed = [e for key, e in self._observed.items() if key not in wanted and key not in held]
        gone = self._writes.each(
            DELETE_STEP, doomed, lambda entity, _: self._delete_if_managed(entity, owners)
        )
        left = {id(entity) for entity, went in zip(doomed, gone, strict=True) if went}
        for entity in self._observed.values():
            name = self._credential_name(entity) if id(entity) not in left else None
            if name:
                in_use.add(name)
        return in_use

    def ensure_one(self, spec: EntitySpec, agent_mode: bool | None, notices: list[Notice]) -> None:
        """Register or re-bind one entity (:meth:`ensure`); its notices go to ``notices``."""
        if spec.entity_type not in (ORGANIZATION, REPOSITORY):
            logger.warning(
                "Skipping entity %s: unknown entity type %r", spec.entity_name, spec.entity_type
            )
            return
        if spec.entity_type == REPOSITORY and split_repository(spec.entity_name) is None:
            logger.warning(
                "Skipping repository %r: expected the form owner/name", spec.entity_name
            )
            return
        # A configurator that changes only the case of a name names the same entity: GitHub
        # and GARM compare names without regard to case, and GARM cannot rename one.
        live = self._observed.get(spec.key)
        subject = spec.source or spec.entity_name
        what = f"{spec.entity_type} {spec.entity_name}"
        with contain(notices, subject, what) as refused:
            if live is None:
                self._create(spec, bool(agent_mode))
            else:
                switch_mode = agent_mode is not None and agent_mode != live.agent_mode
                rebind = self._needs_credential_update(live, spec)
                if rebind or switch_mode:
                    self._update(live, spec, rebind, agent_mode if switch_mode else None)
        if refused.error is not None:
            logger.warning(
                "Deferring registration of %s %s; will retry: %s",
                spec.entity_type,
                spec.entity_name,
                refused.error,
            )

    def _current_credential(self, live: _Observed) -> Credential | None:
        if live.credentials_id is not None and live.credentials_id in self._creds_by_id:
            return self._creds_by_id[live.credentials_id]
        if live.credentials_name:
            return self._creds_by_name.get(live.credentials_name)
        return None

    def _needs_credential_update(self, live: _Observed, spec: EntitySpec) -> bool:
        if live.credentials_name == spec.credentials_name:
            return False
        current = self._current_credential(live)
        if current is not None and not is_managed(current):
            logger.warning(
                "%s %s uses credential %s, which the charm does not manage; not switching it"
                " to %s",
                spec.entity_type,
                spec.entity_name,
                current.name,
                spec.credentials_name,
            )
            return False
        return True

    def _create(self, spec: EntitySpec, agent_mode: bool) -> None:
        # One line once GARM answers: under Juju each log line is a juju-log process, and a
        # refused or failed create is logged where it is contained.
        if spec.entity_type == ORGANIZATION:
            created: Organization | Repository = self._client.create_organization(
                spec.entity_name, spec.credentials_name, new_webhook_secret(), agent_mode
            )
        else:
            owner, name = split_repository(spec.entity_name) or ("", "")
            created = self._client.create_repository(
                owner, name, spec.credentials_name, new_webhook_secret(), agent_mode
            )
        logger.info(
            "Registered %s %s (id=%s) with credential %s (agent mode %s)",
            spec.entity_type,
            spec.entity_name,
            created.id,
            spec.credentials_name,
            "on" if agent_mode else "off",
        )
        if created.id:
            self.created[spec.key] = created.id

    def _update(
        self, live: _Observed, spec: EntitySpec, rebind: bool, agent_mode: bool | None
    ) -> None:
        """One update of ``live``: its credential when ``rebind``, its agent mode when given."""
        if not live.id:
            logger.warning(
                "%s %s has no id in GARM; cannot update it", spec.entity_type, spec.entity_name
            )
            return
        credentials_name = spec.credentials_name if rebind else None
        changes = [f"credential {live.credentials_name} -> {credentials_name}"] if rebind else []
        if agent_mode is not None:
            changes.append(f"agent mode {'on' if agent_mode else 'off'}")
        logger.info(
            "Updating %s %s (id=%s): %s",
            spec.entity_type,
            spec.entity_name,
            live.id,
            ", ".join(changes),
        )
        if spec.entity_type == ORGANIZATION:
            self._client.update_organization(live.id, credentials_name, agent_mode)
        else:
            self._client.update_repository(live.id, credentials_name, agent_mode)

    def _credential_name(self, live: _Observed) -> str | None:
        current = self._current_credential(live)
        return current.name if current is not None else live.credentials_name

    def _delete_if_managed(self, live: _Observed, owners: set[str]) -> bool:
        """Delete ``live`` when the charm owns it and no scale set uses it; tell if it went."""
        if not live.id:
            return False
        credential = self._creds_by_id.get(live.credentials_id or 0)
        if not is_managed(credential):
            logger.debug("Leaving %s %s: not managed by the charm", live.entity_type, live.key)
            return False
        if live.id in owners:
            logger.info(
                "Keeping %s %s (id=%s) until its scale sets are gone",
                live.entity_type,
                live.key,
                live.id,
            )
            return False
        logger.info(
            "Deleting %s %s (id=%s): no longer desired", live.entity_type, live.key, live.id
        )
        with contain() as refused:
            if live.entity_type == ORGANIZATION:
                self._client.delete_organization(live.id)
            else:
                self._client.delete_repository(live.id)
        if refused.error is not None:
            logger.warning(
                "Cannot delete %s %s (id=%s): %s; will retry",
                live.entity_type,
                live.key,
                live.id,
                describe_failure(refused.error),
            )
            return False
        deleted(live.entity_type, live.key, live.id)
        return True


class EntityStep:
    """The entity step beside the template and the scale sets (ADR 0015).

    The scale-set step starts it once it has read GARM (its reads then come before the
    entities' writes, the same in every pass); a scale set waits for its own entity's object
    (:meth:`created`), not for the whole step; the deletions wait for the whole step
    (:meth:`settled`).
    """

    def __init__(self, entities: EntityReconciler, writes: Writes) -> None:
        """The step of ``entities`` on the pass's ``writes``; :meth:`start` starts it."""
        self._entities = entities
        self._writes = writes
        self._running: Background[EntityKey] | None = None

    def prepare(
        self,
        desired: Sequence[EntitySpec],
        missing_credentials: Collection[str] = (),
        held: Collection[EntityKey] = (),
        agent_modes: Mapping[EntityKey, bool] | None = None,
    ) -> EntityStep:
        """Ready the writes of ``desired`` (arguments as :meth:`EntityReconciler.ensure`'s).

        Returns this step, which :meth:`start` starts beside the caller.
        """
        entities = self._entities
        todo = _plan(desired, missing_credentials, held, agent_modes, entities.notices)
        self._running = self._writes.beside(
            ENSURE_STEP,
            todo,
            lambda item, notices: entities.ensure_one(*item, notices),
            lambda item: item[0].key,
            entities.notices,
        )
        return self

    def start(self) -> None:
        """Start the step (once): the scale-set step does, once it has read GARM."""
        if self._running is not None:
            self._running.start()

    def created(self, key: EntityKey) -> str | None:
        """Wait for this pass's object of the entity ``key``; the id it registered, if any."""
        if self._running is not None:
            self._running.wait(key)
        return self._entities.created.get(key)

    def settled(self, *, quiet: bool = False) -> None:
        """Wait for the step.

        Args:
            quiet: drop its failure (the caller is raising another).

        Raises:
            GarmApiError: the step's pass-ending failure (``reconcile.containment``).
        """
        if self._running is not None:
            self._running.start()  # a step the scale-set step never reached still runs
            self._running.join(quiet=quiet)


def _plan(
    desired: Sequence[EntitySpec],
    missing_credentials: Collection[str],
    held: Collection[EntityKey],
    agent_modes: Mapping[EntityKey, bool] | None,
    notices: list[Notice],
) -> list[tuple[EntitySpec, bool | None]]:
    """The entities to write, each with its agent mode (``EntityReconciler.ensure``)."""
    todo: list[tuple[EntitySpec, bool | None]] = []
    for key, spec in _by_key(desired).items():
        if key in held:
            continue
        if spec.credentials_name in missing_credentials:
            waiting = f"waiting for credential {spec.credentials_name}"
            notices.append(Notice(Severity.WAITING, spec.entity_name, waiting))
            continue
        todo.append((spec, None if agent_modes is None else agent_modes.get(key, False)))
    return todo


def _by_key(desired: Sequence[EntitySpec]) -> dict[EntityKey, EntitySpec]:
    """Index the desired entities by their key; the first of a key wins."""
    wanted: dict[EntityKey, EntitySpec] = {}
    for spec in desired:
        wanted.setdefault(spec.key, spec)
    return wanted


def _from_org(org: Organization) -> _Observed:
    return _Observed(
        ORGANIZATION,
        org.name or "",
        org.id,
        org.credentials_name,
        org.credentials_id,
        bool(org.agent_mode),
    )


def _from_repo(repo: Repository) -> _Observed:
    key = f"{repo.owner}/{repo.name}"
    return _Observed(
        REPOSITORY,
        key,
        repo.id,
        repo.credentials_name,
        repo.credentials_id,
        bool(repo.agent_mode),
    )
