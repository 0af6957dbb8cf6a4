"""What the charm remembers of GARM between hooks, in the ``garm-peers`` application databag.

What a pass learns and the next one needs (``reconcile.chain.Memory``):

- ``sent-credentials``: per credential the charm manages, the fingerprint (SHA-256 of the App
  ids and key, ``CredentialSpec.fingerprint``) of what it last sent, never the key. GARM never
  returns a private key, so a key rotated under the same credential name (a new revision of
  the configurator's secret) can only be noticed this way.
- ``runner-faults``: per live scale set, the last provider fault seen on its runners while none
  has come up. GARM shows a fault for about five seconds before it retries with a new runner.
- ``incumbents``: which configurator holds each scale-set name, entity and GitHub App
  credential in GARM (with a digest of that App's public key, never the key), so that the next
  parse gives a held name to its holder whatever the relation order.
- ``stalled-scalesets``: per scale set GARM stopped scaling, the last recovery step, when it
  was taken and since when GARM sat on the demand; kept while it is short of runners.

The databag survives a pod replacement and a leader change; only the leader, which runs GARM,
writes it, and only what changed. Knows Juju; must not import the GARM client.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import cast

import ops

from databag import write_changed
from desired_state import Incumbents, entity_key
from leadership import PEER_RELATION
from reconcile.chain import Memory
from reconcile.scalesets.faults import RememberedFault
from reconcile.scalesets.stall import Recovery, Step

logger = logging.getLogger(__name__)

SENT_CREDENTIALS_KEY = "sent-credentials"
RUNNER_FAULTS_KEY = "runner-faults"
INCUMBENTS_KEY = "incumbents"
STALLS_KEY = "stalled-scalesets"


def load(model: ops.Model) -> Memory:
    """Return what the last pass left; no credential memory without a peer relation.

    An unreadable entry reads as empty: every managed credential is then sent again once, and
    a fault shows again when next seen, rather than a rotation being missed.
    """
    relation = model.get_relation(PEER_RELATION)
    if relation is None:
        return Memory()
    data = relation.data[model.app]
    sent = {k: v for k, v in _object(data, SENT_CREDENTIALS_KEY).items() if isinstance(v, str)}
    faults: dict[str, RememberedFault] = {}
    for name, entry in _object(data, RUNNER_FAULTS_KEY).items():
        if isinstance(entry, list):
            fields = cast(list[object], entry)
            if len(fields) == 2 and all(isinstance(f, str) for f in fields):
                faults[name] = RememberedFault(str(fields[0]), str(fields[1]))
    stalls = _stalls(_object(data, STALLS_KEY))
    return Memory(sent, faults, _incumbents(_object(data, INCUMBENTS_KEY)), stalls)


def save(model: ops.Model, memory: Memory) -> None:
    """Leader: write what changed (nothing in a converged hook, no empty record to start)."""
    relation = model.get_relation(PEER_RELATION)
    if relation is None:
        return
    data = relation.data[model.app]
    wanted: dict[str, str] = {}
    if memory.sent is not None:
        wanted[SENT_CREDENTIALS_KEY] = json.dumps(dict(sorted(memory.sent.items())))
    faults = {name: [f.fault, f.since] for name, f in sorted(memory.faults.items())}
    wanted[RUNNER_FAULTS_KEY] = json.dumps(faults)
    stalls = {
        name: [r.step.value, r.at.isoformat(), r.since.isoformat()]
        for name, r in sorted(memory.stalls.items())
    }
    wanted[STALLS_KEY] = json.dumps(stalls)
    held = memory.incumbents
    if held.scalesets or held.entities or held.credentials:
        record: dict[str, object] = {
            "scalesets": dict(sorted(held.scalesets.items())),
            "entities": sorted([kind, name, app] for (kind, name), app in held.entities.items()),
        }
        if held.credentials:
            record["credentials"] = sorted(
                [name, app, digest] for name, (app, digest) in held.credentials.items()
            )
        wanted[INCUMBENTS_KEY] = json.dumps(record)
    elif INCUMBENTS_KEY in data:
        wanted[INCUMBENTS_KEY] = "{}"
    write_changed(data, {k: v for k, v in wanted.items() if k in data or v != "{}"})


def _incumbents(raw: dict[str, object]) -> Incumbents:
    scalesets = raw.get("scalesets")
    entities = raw.get("entities")
    held_scalesets: dict[str, str] = {}
    if isinstance(scalesets, dict):
        for name, app in cast(dict[object, object], scalesets).items():
            if isinstance(name, str) and isinstance(app, str):
                held_scalesets[name] = app
    held_entities = {entity_key(kind, name): app for kind, name, app in _triples(entities)}
    held_credentials = {a: (b, c) for a, b, c in _triples(raw.get("credentials"))}
    return Incumbents(held_scalesets, held_entities, held_credentials)


def _stalls(raw: dict[str, object]) -> dict[str, Recovery]:
    """The recovery step per scale set; an unreadable entry is left out (its stall starts over)."""
    stalls: dict[str, Recovery] = {}
    for name, entry in raw.items():
        for step, at, since in _triples([entry]):
            try:
                when, first = datetime.fromisoformat(at), datetime.fromisoformat(since)
                stalls[name] = Recovery(Step(step), when, first)
            except ValueError:
                continue
    return stalls


def _triples(raw: object) -> list[tuple[str, str, str]]:
    """The entries of a JSON list of three-string lists; anything else is left out."""
    triples: list[tuple[str, str, str]] = []
    if isinstance(raw, list):
        for entry in cast(list[object], raw):
            if isinstance(entry, list):
                fields = cast(list[object], entry)
                if len(fields) == 3 and all(isinstance(f, str) for f in fields):
                    triples.append((str(fields[0]), str(fields[1]), str(fields[2])))
    return triples


def _object(data: ops.RelationDataContent, key: str) -> dict[str, object]:
    raw = data.get(key, "")
    if not raw:
        return {}
    try:
        parsed: object = json.loads(raw)
    except ValueError:
        logger.warning("The %s entry %s is not JSON; starting it afresh", PEER_RELATION, key)
        return {}
    if not isinstance(parsed, dict):
        return {}
    return {str(k): v for k, v in cast(dict[object, object], parsed).items()}
