"""Keep GARM's GitHub App credentials equal to what the configurators publish.

The charm owns a credential when its description is the marker
:data:`MANAGED_CREDENTIAL_DESCRIPTION`. A credential of a desired name whose description is
empty or missing is taken over (its description is set on update); any other description means
someone else created it and the charm never touches it. Credentials are attached to GARM's
built-in ``github.com`` endpoint; no endpoint is created or changed.

GARM never returns private keys, so a rotated key under the same name is not detected.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence

from charm_state import DEFAULT_GITHUB_ENDPOINT, MANAGED_CREDENTIAL_DESCRIPTION, CredentialSpec
from garm_api import (
    CreateCredentialParams,
    Credential,
    GarmApiError,
    GarmClient,
    GithubApp,
    UpdateCredentialParams,
)

logger = logging.getLogger(__name__)

GITHUB_APP_AUTH_TYPE = "app"


def is_claimable(credential: Credential) -> bool:
    """Tell whether the charm may update a credential that has a desired name.

    Args:
        credential: the credential as GARM lists it.

    Returns:
        True when the description is the marker, empty or absent.
    """
    return credential.description in (MANAGED_CREDENTIAL_DESCRIPTION, None, "")


def is_managed(credential: Credential | None) -> bool:
    """Tell whether a credential carries the charm's ownership marker exactly.

    Only such credentials (and entities bound to them) are ever deleted.

    Args:
        credential: the credential as GARM lists it, or None.

    Returns:
        True when the description equals :data:`MANAGED_CREDENTIAL_DESCRIPTION`.
    """
    return credential is not None and credential.description == MANAGED_CREDENTIAL_DESCRIPTION


def _github_app(spec: CredentialSpec) -> GithubApp:
    key = base64.b64encode(spec.private_key.encode("utf-8")).decode("ascii")
    return GithubApp(
        app_id=spec.app_id, installation_id=spec.installation_id, private_key_bytes=key
    )


def reconcile_credentials(
    client: GarmClient, desired: Sequence[CredentialSpec], *, prune: bool = True
) -> None:
    """Create, update and delete GARM credentials so they match ``desired``.

    Args:
        client: an authenticated GARM client.
        desired: the credentials the configurators publish (names are unique).
        prune: delete managed credentials nobody desires; False while configurator input is
            invalid (an unreadable key secret must not delete the credential).

    Raises:
        GarmApiError: listing, creating or updating a credential failed. A refused delete
            is only logged, since GARM refuses while an entity still uses the credential and
            the delete succeeds on a later pass.
    """
    observed = {c.name: c for c in client.list_credentials() if c.name}
    wanted: dict[str, CredentialSpec] = {}
    for spec in desired:
        wanted.setdefault(spec.name, spec)

    for name, spec in wanted.items():
        current = observed.get(name)
        if current is None:
            _create(client, spec)
        elif is_claimable(current):
            _update_if_drifted(client, spec, current)
        else:
            logger.warning(
                "Credential name %s is taken by a credential the charm does not manage"
                " (description %r); leaving it untouched",
                name,
                current.description,
            )

    for name, current in observed.items():
        if prune and name not in wanted and current.id is not None and is_managed(current):
            _delete(client, current.id, name)


def _create(client: GarmClient, spec: CredentialSpec) -> None:
    params = CreateCredentialParams(
        name=spec.name,
        description=spec.description,
        endpoint=DEFAULT_GITHUB_ENDPOINT,
        auth_type=GITHUB_APP_AUTH_TYPE,
        app=_github_app(spec),
    )
    created = client.create_credential(params)
    logger.info("Created GitHub credential %s (id=%s)", spec.name, created.id)


def _update_if_drifted(client: GarmClient, spec: CredentialSpec, current: Credential) -> None:
    if not spec.description or current.description == spec.description:
        logger.debug("GitHub credential %s is up to date", spec.name)
        return
    if current.id is None:
        logger.warning("GitHub credential %s has no id in GARM; cannot update it", spec.name)
        return
    params = UpdateCredentialParams(description=spec.description, app=_github_app(spec))
    client.update_credential(current.id, params)
    logger.info("Updated GitHub credential %s (id=%s)", spec.name, current.id)


def _delete(client: GarmClient, credential_id: int, name: str) -> None:
    logger.info("Deleting GitHub credential %s (id=%s): no longer desired", name, credential_id)
    try:
        client.delete_credential(credential_id)
    except GarmApiError as exc:
        logger.warning(
            "Cannot delete GitHub credential %s (id=%s), still referenced; will retry: %s",
            name,
            credential_id,
            exc,
        )
