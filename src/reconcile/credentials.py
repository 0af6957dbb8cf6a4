"""Keep GARM's GitHub App credentials equal to what the configurators publish.

The charm owns a credential when its description is the marker
:data:`MANAGED_CREDENTIAL_DESCRIPTION`. A credential of a desired name whose description is
empty or missing is taken over (its description is set on update); any other description means
someone else created it and the charm never touches it. A credential is created on its spec's
endpoint (github.com's built-in one, or a GitHub Enterprise Server's that
``reconcile.endpoints`` keeps); it waits while that endpoint is missing, and GARM cannot move
a credential to another endpoint (a GHES credential's name carries its endpoint instead).

GARM never returns private keys, so a rotated key under the same name is told apart by the
fingerprint of what was last sent (``sent``, kept by the charm): a managed credential whose
fingerprint differs, or was never recorded, is updated with the configurator's App.

A credential GARM refuses (a key it cannot parse, say) is reported as a notice naming the
configurator and the relation key at fault, never the value, and the others go on.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence

from garm import (
    CreateCredentialParams,
    Credential,
    GarmApiError,
    GarmClient,
    GithubApp,
    UpdateCredentialParams,
    describe_failure,
    to_base64,
)
from reconcile.containment import contain
from reconcile.endpoints import endpoint_of
from reconcile.writes import Writes
from vocabulary.desired_state import (
    KEY_UNREADABLE,
    MANAGED_CREDENTIAL_DESCRIPTION,
    CredentialSpec,
    app_fingerprint,
)
from vocabulary.notices import Notice, Severity
from vocabulary.security_events import deleted

logger = logging.getLogger(__name__)

GITHUB_APP_AUTH_TYPE = "app"
# The steps' words when the pass's budget cuts them (``reconcile.writes``).
ENSURE_STEP = "creating or updating GitHub credentials"
DELETE_STEP = "deleting GitHub credentials"
# The relation keys a refused credential is blamed on: the key when GARM says so, else the ids.
KEY_FIELD = "github_private_key_secret_uri"
ID_FIELDS = "github_app_id/github_installation_id"


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


class KeyUnreadableError(Exception):
    """The App key GARM must be sent could not be read this pass (its secret's reader says why)."""


def _github_app(spec: CredentialSpec) -> GithubApp:
    pem = spec.key.pem()
    if pem is None:
        raise KeyUnreadableError(spec.name)
    # The key passed the PKCS#1 check, so it is ASCII: encoding it cannot replace anything.
    return GithubApp(
        app_id=spec.app_id, installation_id=spec.installation_id, private_key_bytes=to_base64(pem)
    )


class CredentialReconciler:
    """Create, update and delete GARM credentials so they match what the configurators publish.

    GARM is listed once, when the reconciler is made. Creation and update (:meth:`ensure`) come
    first in a pass; deletion (:meth:`prune`) comes last, after the organisations and
    repositories that used a credential are gone, because GARM refuses to delete a credential
    an entity still uses.

    Attributes:
        listed: GARM's credentials as listed when the reconciler was made.
        missing: names of desired credentials that are not in GARM after :meth:`ensure`.
        notices: credentials held back this pass, for the status.
        sent: fingerprint of what GARM holds per credential the charm sent, None when the
            charm keeps no such memory (then a rotated key is not noticed).
    """

    def __init__(
        self,
        client: GarmClient,
        sent: Mapping[str, str] | None = None,
        writes: Writes | None = None,
    ) -> None:
        """List GARM's credentials.

        Args:
            client: an authenticated GARM client.
            sent: the fingerprints recorded after earlier passes, or None.
            writes: the pass's writes (pool and budget); None: one at a time, no budget.

        Raises:
            GarmApiError: the listing failed.
        """
        self.client = client
        self.writes = writes or Writes(size=1)
        self.listed: list[Credential] = client.list_credentials()
        self.missing: set[str] = set()
        self.notices: list[Notice] = []
        self.sent: dict[str, str] | None = None if sent is None else dict(sent)
        self._deleted: set[str] = set()

    def endpoints_in_use(self, desired: Sequence[CredentialSpec]) -> set[str]:
        """The endpoints that credentials GARM still holds (or is to hold) are on."""
        left = {endpoint_of(c.endpoint) for c in self.listed if c.name not in self._deleted}
        return left | {spec.endpoint for spec in desired}

    def ensure(
        self,
        desired: Sequence[CredentialSpec],
        held: Collection[str] = (),
        missing_endpoints: Collection[str] = (),
    ) -> None:
        """Create the desired credentials GARM lacks and update the ones that drifted.

        A refused create or update is logged and noted; the other credentials go on.

        Args:
            desired: the credentials the configurators publish (the first of a name wins).
            held: names whose configurator input is invalid: left exactly as they are.
            missing_endpoints: endpoints GARM does not hold: their credentials wait.

        Raises:
            GarmConnectionError: GARM is unreachable.
            GarmUnauthorizedError: GARM rejected the token.
            GarmProtocolError: GARM answered in a shape the charm cannot read.
        """
        observed = {c.name: c for c in self.listed if c.name}
        todo: list[CredentialSpec] = []
        for name, spec in _by_name(desired).items():
            if name in held:
                continue
            if name not in observed and spec.endpoint in missing_endpoints:
                self.missing.add(name)
                waiting = f"waiting for endpoint {spec.endpoint}"
                self.notices.append(Notice(Severity.WAITING, spec.source or name, waiting))
                continue
            todo.append(spec)
        started = self.writes.each(
            ENSURE_STEP,
            todo,
            lambda spec, notices: self._ensure(spec, observed, notices),
            self.notices,
        )
        # A credential the budget left for the next pass is not in GARM for its entities yet.
        self.missing |= {spec.name for spec, ran in zip(todo, started, strict=True) if not ran}

    def _ensure(
        self, spec: CredentialSpec, observed: Mapping[str, Credential], notices: list[Notice]
    ) -> bool:
        current = observed.get(spec.name)
        try:
            with contain() as refused:
                if current is None:
                    _create(self.client, spec)
                    self._record(spec)
                elif is_claimable(current) and _update_if_drifted(
                    self.client, spec, current, rotated=self._rotated(spec)
                ):
                    self._record(spec)
        except KeyUnreadableError:
            if current is None:
                self.missing.add(spec.name)
            notices.append(Notice(Severity.BLOCKED, spec.source or spec.name, KEY_UNREADABLE))
            return True
        if refused.error is not None:
            self._refused(spec, refused.error, created=current is None, notices=notices)
        if current is not None and not is_claimable(current):
            logger.warning(
                "Credential name %s is taken by a credential the charm does not manage"
                " (description %r); leaving it untouched",
                spec.name,
                current.description,
            )
        return True

    def _rotated(self, spec: CredentialSpec) -> bool:
        if self.sent is None:
            return False
        recorded = self.sent.get(spec.name)
        if recorded == spec.fingerprint:
            return False
        if recorded is not None and _is_earlier_fingerprint(spec, recorded):
            self._record(spec)  # GARM holds this key: only the memory's form moves on
            return False
        return True

    def _record(self, spec: CredentialSpec) -> None:
        if self.sent is not None:
            self.sent[spec.name] = spec.fingerprint

    def _refused(
        self, spec: CredentialSpec, exc: GarmApiError, *, created: bool, notices: list[Notice]
    ) -> None:
        # GARM names the key when it can parse the request; a bare 500 comes from the key too.
        key_at_fault = "private_key" in exc.details or (exc.status or 500) >= 500
        field_at_fault = KEY_FIELD if key_at_fault else ID_FIELDS
        logger.warning(
            "GARM refused GitHub credential %s of %s (%s); check %s: %s",
            spec.name,
            spec.source or "its configurator",
            exc.status,
            field_at_fault,
            exc.error,
        )
        if created:
            self.missing.add(spec.name)
        # Creating a credential makes GARM call nobody: a refusal, a 500 included (GARM's
        # answer to a damaged PKCS#1 key), is about the input and needs the operator.
        text = f"GARM refused the GitHub App ({field_at_fault})"
        notices.append(Notice(Severity.BLOCKED, spec.source or spec.name, text))

    def prune(
        self,
        desired: Sequence[CredentialSpec],
        in_use: Collection[str],
        held: Collection[str] = (),
    ) -> None:
        """Delete the managed credentials nobody desires and no entity uses any more.

        Args:
            desired: the credentials the configurators publish.
            in_use: names of the credentials that organisations or repositories left in GARM
                still use; those are kept until a later pass, so GARM never refuses a delete.
            held: names whose configurator input is invalid: never deleted.

        Raises:
            GarmConnectionError: GARM became unreachable (no further delete is tried).
        """
        wanted = _by_name(desired)
        doomed: list[tuple[int, str]] = []
        for current in self.listed:
            name = current.name
            if not name or name in wanted or name in held:
                continue
            if current.id is None or not is_managed(current):
                continue
            if name in in_use:
                logger.info(
                    "Keeping GitHub credential %s (id=%s) while an organisation or repository"
                    " still uses it",
                    name,
                    current.id,
                )
                continue
            doomed.append((current.id, name))
        gone = self.writes.each(
            DELETE_STEP, doomed, lambda item, _: _delete(self.client, item[0], item[1])
        )
        for (_, name), deleted_now in zip(doomed, gone, strict=True):
            if deleted_now:
                self._deleted.add(name)
                if self.sent is not None:
                    self.sent.pop(name, None)
        if self.sent is not None:
            # A credential that is gone from GARM (deleted by hand, say) is sent again in full.
            listed = {c.name for c in self.listed}
            self.sent = {n: f for n, f in self.sent.items() if n in listed or n in wanted}


def _by_name(desired: Sequence[CredentialSpec]) -> dict[str, CredentialSpec]:
    wanted: dict[str, CredentialSpec] = {}
    for spec in desired:
        wanted.setdefault(spec.name, spec)
    return wanted


def _create(client: GarmClient, spec: CredentialSpec) -> None:
    params = CreateCredentialParams(
        name=spec.name,
        description=spec.description,
        endpoint=spec.endpoint,
        auth_type=GITHUB_APP_AUTH_TYPE,
        app=_github_app(spec),
    )
    created = client.create_credential(params)
    logger.info("Created GitHub credential %s (id=%s)", spec.name, created.id)


def _update_if_drifted(
    client: GarmClient, spec: CredentialSpec, current: Credential, *, rotated: bool
) -> bool:
    """Update a credential whose description drifted or whose App changed.

    Returns:
        Whether GARM holds the spec's App now (False only when it could not be updated).
    """
    described = not spec.description or current.description == spec.description
    if described and not rotated:
        return True
    if current.id is None:
        logger.warning("GitHub credential %s has no id in GARM; cannot update it", spec.name)
        return False
    params = UpdateCredentialParams(description=spec.description, app=_github_app(spec))
    client.update_credential(current.id, params)
    why = "its App key or ids changed" if rotated else "its description drifted"
    logger.info("Updated GitHub credential %s (id=%s): %s", spec.name, current.id, why)
    return True


def _delete(client: GarmClient, credential_id: int, name: str) -> bool:
    logger.info("Deleting GitHub credential %s (id=%s): no longer desired", name, credential_id)
    with contain() as refused:
        client.delete_credential(credential_id)
    if refused.error is not None:
        logger.warning(
            "Cannot delete GitHub credential %s (id=%s): %s; will retry",
            name,
            credential_id,
            describe_failure(refused.error),
        )
        return False
    deleted("github-credentials", name, credential_id)
    return True


def _is_earlier_fingerprint(spec: CredentialSpec, recorded: str) -> bool:
    """Whether ``recorded`` is ``spec``'s fingerprint as releases up to bd0c85d kept it.

    They digested the key's text where ``CredentialSpec.fingerprint`` digests its digest, so a
    refresh from one would read every App as rotated and send it to GARM again. Telling costs
    one read of the key, once per credential: the caller then records today's fingerprint.
    """
    pem = spec.key.pem()
    return pem is not None and app_fingerprint(spec.app_id, spec.installation_id, pem) == recorded
