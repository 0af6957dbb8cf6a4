"""Configurator secrets, read once per revision: the ledger of what the charm has read.

A consumer's ``secret-get`` answers with the revision the consumer tracks, and that moves only
when the charm refreshes it, which it does in the ``secret-changed`` hook Juju sends for a new
revision. So a configurator secret's content, once read, stays its content until such a hook,
and a hook that needs no content need not read it. The charm keeps a ledger in the
``garm-peers`` app databag (:data:`LEDGER_KEY`): per secret it has read, a digest of what it
read, never the content. A password's digest is keyed with the charm's own secret, so that a
weak password cannot be guessed from it; an App key's is the SHA-256 of its text
(``desired_state.pem_digest``: an RSA key is too random to be guessed), with its public key's
digest. A later pass reads the secret again only for content it needs:

- an OpenStack password comes from the provider record GARM was given, matched by its digest
  (``secret-get`` only when the record lacks it);
- an App key is read only when GARM must be sent it (``AppKey.pem``): to create its credential
  or to take a rotation.

A secret id new in the relation data is read once; the ``secret-changed`` hook hands in the
content it refreshed to; an entry whose secret no relation names any more is dropped. Only a
key that passes the PKCS#1 check is remembered, so one that failed is read and refused again.
Knows Juju; must not import the GARM client.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import cast

import ops

from records.secret_revisions import keyed_digest, peer_app_data
from relations.databag import write_changed
from vocabulary.desired_state import AppKey, pem_digest
from vocabulary.github_key import app_key_problem

logger = logging.getLogger(__name__)

LEDGER_KEY = "configurator-secrets"


def secret_key(uri: str) -> str:
    """The secret's own id, however the URI spells it (``secret:ID``, ``secret://MODEL/ID``)."""
    return uri.rsplit("/", 1)[-1].removeprefix("secret:")


class ConfiguratorSecrets:
    """Reads the configurator secrets a pass needs, each at most once and only when needed."""

    def __init__(
        self,
        model: ops.Model,
        *,
        digest_key: str,
        known_passwords: Iterable[str] = (),
        refreshed: Mapping[str, str] | None = None,
    ) -> None:
        """Read the ledger.

        Args:
            model: the charm's model (the peer databag, the secrets).
            digest_key: the charm's own secret value that keys a password's digest.
            known_passwords: the passwords GARM was given (the provider record's).
            refreshed: secret contents (``value``) this hook refreshed to, by secret id.
        """
        self._model = model
        self._digest_key = digest_key.encode()
        self._known = {self._password_digest(p): p for p in known_passwords}
        self._refreshed = {secret_key(uri): v for uri, v in (refreshed or {}).items()}
        data = peer_app_data(model)
        self._ledger = _decode(data.get(LEDGER_KEY, "") if data is not None else "")
        self._used: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def password(self, uri: str) -> str | None:
        """The password a secret holds: from what GARM was given when the ledger vouches."""
        key = secret_key(uri)
        remembered = self._ledger.get(key)
        if key not in self._refreshed and remembered and remembered[0] in self._known:
            self._used[key] = remembered
            return self._known[remembered[0]]
        value = self._read(uri)
        if value is not None:
            self._used[key] = [self._password_digest(value)]
        return value

    def app_key(self, uri: str) -> AppKey | None:
        """A GitHub App key: from the ledger when it vouches (its text read on demand)."""
        key = secret_key(uri)
        remembered = self._ledger.get(key)
        if key not in self._refreshed and remembered and len(remembered) == 2:
            self._used[key] = remembered
            return AppKey(remembered[0], remembered[1], checked=True, load=self._on_demand(uri))
        pem = self._read(uri)
        if pem is None:
            return None
        found = AppKey.of(pem)
        if not app_key_problem(pem):
            self._used[key] = [found.digest, found.public_digest]
        return found

    def save(self) -> None:
        """Leader: keep what this pass read or vouched for (nothing written when unchanged)."""
        data = peer_app_data(self._model)
        if data is not None:
            write_changed(data, self.ledger())

    def ledger(self) -> dict[str, str]:
        """The ledger's field as ``garm-peers`` should hold it after this pass, or nothing.

        For a caller that writes it with other fields of the databag, in one ``relation-set``.
        """
        data = peer_app_data(self._model)
        if data is None or (not self._used and LEDGER_KEY not in data):
            return {}
        # An empty ledger leaves the databag (ops deletes a key set to "").
        return {LEDGER_KEY: json.dumps(self._used, sort_keys=True) if self._used else ""}

    def _password_digest(self, value: str) -> str:
        return keyed_digest(self._digest_key, value)

    def _on_demand(self, uri: str) -> Callable[[], str | None]:
        cache: list[str | None] = []

        def load() -> str | None:
            # The reconcilers may ask from several threads; the secret is read once.
            with self._lock:
                if not cache:
                    cache.append(self._read(uri))
                    _check_unchanged(uri, cache[0], self._ledger.get(secret_key(uri)))
                return cache[0]

        return load

    def _read(self, uri: str) -> str | None:
        key = secret_key(uri)
        if key in self._refreshed:
            return self._refreshed[key]
        try:
            # The revision Juju tracks for the charm: it moves in the secret-changed hook only.
            content = self._model.get_secret(id=uri).get_content()
        except ops.SecretNotFoundError:
            logger.warning("configurator secret %s not found or not granted to garm", uri)
            return None
        except ops.ModelError as exc:
            logger.warning("cannot read configurator secret %s (%s)", uri, type(exc).__name__)
            return None
        value = content.get("value")
        if value is None:
            logger.warning("configurator secret %s has no 'value' key", uri)
        return value


def _check_unchanged(uri: str, pem: str | None, remembered: list[str] | None) -> None:
    if pem is not None and remembered and pem_digest(pem) != remembered[0]:
        # Only a refresh moves the tracked revision; say so if Juju ever disagrees.
        logger.warning("configurator secret %s differs from the revision read before", uri)


def _decode(raw: str) -> dict[str, list[str]]:
    """The ledger as stored; anything unreadable reads as not remembered (read again)."""
    try:
        parsed: object = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    if not isinstance(parsed, dict):
        return {}
    ledger: dict[str, list[str]] = {}
    for key, entry in cast(dict[object, object], parsed).items():
        if not isinstance(key, str) or not isinstance(entry, list):
            continue
        digests = [d for d in cast(list[object], entry) if isinstance(d, str)]
        if 1 <= len(digests) == len(cast(list[object], entry)) <= 2:
            ledger[key] = digests
    return ledger
