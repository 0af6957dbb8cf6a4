"""What the charm last sent GARM for each credential it manages: a fingerprint, never the key.

GARM never returns a GitHub App's private key, so a key rotated under the same credential name
(a new revision of the configurator's secret) can only be noticed by comparing with what was
sent. The fingerprints (SHA-256 of the App ids and key, ``CredentialSpec.fingerprint``) live in
the ``garm-peers`` application databag under ``sent-credentials``: they survive a pod
replacement and a leader change, and only the leader, which runs GARM, writes them. Knows Juju;
must not import the GARM client.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import cast

import ops

from databag import write_changed
from leadership import PEER_RELATION

logger = logging.getLogger(__name__)

SENT_CREDENTIALS_KEY = "sent-credentials"


def load(model: ops.Model) -> dict[str, str] | None:
    """Return the recorded fingerprints by credential name; None without a peer relation.

    An unreadable record reads as empty: every managed credential is then sent again once,
    which is harmless, rather than a rotation being missed.
    """
    relation = model.get_relation(PEER_RELATION)
    if relation is None:
        return None
    raw = relation.data[model.app].get(SENT_CREDENTIALS_KEY, "")
    if not raw:
        return {}
    try:
        parsed: object = json.loads(raw)
    except ValueError:
        logger.warning("The %s record is not JSON; sending every credential again", PEER_RELATION)
        return {}
    if not isinstance(parsed, dict):
        return {}
    items = cast(dict[object, object], parsed).items()
    return {str(k): v for k, v in items if isinstance(v, str)}


def save(model: ops.Model, sent: Mapping[str, str]) -> None:
    """Leader: write the fingerprints when they changed (no write in a converged hook)."""
    relation = model.get_relation(PEER_RELATION)
    if relation is None:
        return
    data = relation.data[model.app]
    if not sent and SENT_CREDENTIALS_KEY not in data:
        return  # nothing was ever sent: no record to start
    write_changed(data, {SENT_CREDENTIALS_KEY: json.dumps(dict(sorted(sent.items())))})
