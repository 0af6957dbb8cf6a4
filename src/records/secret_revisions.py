"""Reading a secret the charm owns with one secret-get: is the revision tracked the latest?

An owner tracks a revision of its secret like a consumer (Juju 3.3.1 and later), ``secret-set``
takes effect when the hook ends, and ops reads the tracked revision with the secret itself. So
a plain read may be one revision behind the leader's last write, and ``peek`` costs a second
``secret-get`` in every hook. The leader keeps, in the ``garm-peers`` app databag, a keyed
digest of what it last wrote to each secret; a read whose content matches is the latest, and
only one that does not is moved to the latest (``refresh``, once). Knows Juju only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence

import ops

from records.leadership import PEER_RELATION
from relations.databag import write_changed


def keyed_digest(key: bytes, text: str) -> str:
    """HMAC-SHA-256 of ``text`` under ``key``: no guess can be tested without the key."""
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def peer_app_data(model: ops.Model) -> ops.RelationDataContent | None:
    """The ``garm-peers`` app databag; None without the peer relation (metadata lacking it)."""
    relations = model.relations.get(PEER_RELATION)
    return relations[0].data[model.app] if relations else None


class LatestRevisions:
    """What the leader last wrote to each of a list of owned secrets: keyed digests in garm-peers.

    Juju commits a ``secret-set`` when the hook ends and a unit goes on reading the revision it
    tracks until it refreshes, so a read cannot know it has the latest revision by itself. The
    digests are keyed with the charm's own secret: a secret may hold passwords, which an
    unkeyed digest would let anyone who reads the databag try guesses against.
    """

    def __init__(self, model: ops.Model, key: str, field: str) -> None:
        """Read the digests kept under ``field``; none without a key or a peer relation."""
        self._key = key.encode()
        self._field = field
        self._data = peer_app_data(model)
        raw = self._data.get(self._field, "") if self._data is not None and key else ""
        self._digests = raw.split(",") if raw else []

    def holds(self, index: int, content: Mapping[str, str]) -> bool:
        """Whether ``content`` is what the leader last wrote to the secret number ``index``."""
        return index < len(self._digests) and self.digest(content) == self._digests[index]

    def digest(self, content: Mapping[str, str]) -> str:
        """The keyed digest of one secret's content."""
        return keyed_digest(self._key, json.dumps(dict(content), sort_keys=True))[:32]

    def record(
        self, stored: Sequence[Mapping[str, str]], beside: Mapping[str, str] | None = None
    ) -> None:
        """Leader: keep the digests of what is now stored (nothing written when unchanged).

        ``beside``: other fields of the databag to write in the same ``relation-set``.
        """
        fields = dict(beside or {})
        if self._key:
            fields[self._field] = ",".join(map(self.digest, stored))
        if self._data is not None and fields:
            write_changed(self._data, fields)
