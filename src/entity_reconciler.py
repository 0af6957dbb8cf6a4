"""Keep GARM's organisations and repositories equal to what the configurators publish.

An entity belongs to the charm when the credential it is bound to carries the charm's marker
description; only such entities are switched to another credential or deleted. Failures to
register or update one entity are logged and retried on the next pass, so one bad entity does
not hold back the others. GARM refuses to delete an entity while scale sets use it, so
deletions converge over passes as the scale sets go away.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from charm_state import EntitySpec
from garm_api import Credential, GarmApiError, GarmClient, Organization, Repository
from github_reconciler import is_managed

logger = logging.getLogger(__name__)

ORGANIZATION = "organization"
REPOSITORY = "repository"


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


def reconcile_entities(
    client: GarmClient, desired: Sequence[EntitySpec], *, prune: bool = True
) -> None:
    """Create, re-bind and delete organisations and repositories so they match ``desired``.

    Args:
        client: an authenticated GARM client.
        desired: the entities the configurators publish.
        prune: delete managed entities nobody desires; False while configurator input is
            invalid.

    Raises:
        GarmApiError: listing credentials, organisations or repositories failed.
    """
    _EntityPass(client).run(desired, prune=prune)


@dataclass
class _Observed:
    """One live entity, whichever its kind."""

    entity_type: str
    key: str
    id: str | None
    credentials_name: str | None
    credentials_id: int | None


class _EntityPass:
    """One reconcile pass over entities, holding what GARM listed at its start."""

    def __init__(self, client: GarmClient) -> None:
        self._client = client
        credentials = client.list_credentials()
        self._creds_by_id = {c.id: c for c in credentials if c.id is not None}
        self._creds_by_name = {c.name: c for c in credentials if c.name}
        self._observed: dict[tuple[str, str], _Observed] = {}
        for org in client.list_organizations():
            if org.name:
                self._observed[(ORGANIZATION, org.name)] = _from_org(org)
        for repo in client.list_repositories():
            if repo.owner and repo.name:
                self._observed[(REPOSITORY, f"{repo.owner}/{repo.name}")] = _from_repo(repo)

    def run(self, desired: Sequence[EntitySpec], *, prune: bool) -> None:
        wanted: set[tuple[str, str]] = set()
        for spec in desired:
            key = (spec.entity_type, spec.entity_name)
            if key in wanted:
                continue
            wanted.add(key)
            self._ensure(spec)
        for key, live in self._observed.items():
            if prune and key not in wanted:
                self._delete_if_managed(live)

    def _ensure(self, spec: EntitySpec) -> None:
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
        live = self._observed.get((spec.entity_type, spec.entity_name))
        try:
            if live is None:
                self._create(spec)
            elif self._needs_credential_update(live, spec):
                self._update(live, spec)
            else:
                logger.debug("%s %s is up to date", spec.entity_type, spec.entity_name)
        except GarmApiError as exc:
            logger.warning(
                "Deferring registration of %s %s; will retry: %s",
                spec.entity_type,
                spec.entity_name,
                exc,
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

    def _create(self, spec: EntitySpec) -> None:
        logger.info(
            "Registering %s %s with credential %s",
            spec.entity_type,
            spec.entity_name,
            spec.credentials_name,
        )
        if spec.entity_type == ORGANIZATION:
            created: Organization | Repository = self._client.create_organization(
                spec.entity_name, spec.credentials_name, new_webhook_secret()
            )
        else:
            owner, name = split_repository(spec.entity_name) or ("", "")
            created = self._client.create_repository(
                owner, name, spec.credentials_name, new_webhook_secret()
            )
        logger.info("Registered %s %s (id=%s)", spec.entity_type, spec.entity_name, created.id)

    def _update(self, live: _Observed, spec: EntitySpec) -> None:
        if not live.id:
            logger.warning(
                "%s %s has no id in GARM; cannot switch its credential",
                spec.entity_type,
                spec.entity_name,
            )
            return
        logger.info(
            "Switching %s %s (id=%s) from credential %s to %s",
            spec.entity_type,
            spec.entity_name,
            live.id,
            live.credentials_name,
            spec.credentials_name,
        )
        if spec.entity_type == ORGANIZATION:
            self._client.update_organization(live.id, spec.credentials_name)
        else:
            self._client.update_repository(live.id, spec.credentials_name)

    def _delete_if_managed(self, live: _Observed) -> None:
        if not live.id:
            return
        credential = self._creds_by_id.get(live.credentials_id or 0)
        if not is_managed(credential):
            logger.debug("Leaving %s %s: not managed by the charm", live.entity_type, live.key)
            return
        logger.info(
            "Deleting %s %s (id=%s): no longer desired", live.entity_type, live.key, live.id
        )
        try:
            if live.entity_type == ORGANIZATION:
                self._client.delete_organization(live.id)
            else:
                self._client.delete_repository(live.id)
        except GarmApiError as exc:
            logger.warning(
                "Cannot delete %s %s (id=%s), scalesets may still reference it; will retry: %s",
                live.entity_type,
                live.key,
                live.id,
                exc,
            )


def _from_org(org: Organization) -> _Observed:
    return _Observed(
        ORGANIZATION, org.name or "", org.id, org.credentials_name, org.credentials_id
    )


def _from_repo(repo: Repository) -> _Observed:
    key = f"{repo.owner}/{repo.name}"
    return _Observed(REPOSITORY, key, repo.id, repo.credentials_name, repo.credentials_id)
