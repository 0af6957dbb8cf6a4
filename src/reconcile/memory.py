"""What the GARM side remembers between hooks, and its encoding as databag fields.

A pass learns things the next one needs and GARM cannot tell it (:class:`Memory`):

- ``sent-credentials``: per credential the charm manages, the fingerprint (SHA-256 of the App
  ids and key, ``CredentialSpec.fingerprint``) of what it last sent, never the key. GARM never
  returns a private key, so a key rotated under the same credential name (a new revision of
  the configurator's secret) can only be noticed this way.
- ``runner-faults``: per live scale set, the last provider fault seen on its runners while none
  has come up (:class:`RememberedFault`). GARM shows a fault for about five seconds before it
  retries with a new runner.
- ``incumbents``: which configurator holds each scale-set name, entity and GitHub App
  credential in GARM (with a digest of that App's public key, never the key), so that the next
  parse gives a held name to its holder whatever the relation order.
- ``stalled-scalesets``: per scale set GARM stopped scaling, the last recovery step, when it
  was taken and since when GARM sat on the demand (``scalesets.stall.Recovery``); kept while
  it is short of runners.
- ``github-scalesets``: per scale-set name, the GitHub ids GARM registered for it, with its
  endpoint and runner group (``scalesets.reclaim.Registration``): GARM's own record of them is
  lost with its database, GitHub's is not (ADR 0016).
- ``failing-since``: when each lasting failure was first seen (``escalation``).
- ``garm-controller``: GARM's controller id as last read; another one means another database.
- ``replaced-controllers``: the controller ids of replaced databases whose runner machines may
  remain in the cloud, with when each was replaced (``leftovers``).

Owns the memory's types and their encoding as string fields (:func:`encode`, :func:`decode`);
where the fields are kept is the charm's (``peer_record``). The chain reads a ``Memory`` and
returns the next one. Must not import ops.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from reconcile.scalesets.reclaim import Registration
from reconcile.scalesets.stall import Recovery, Step
from vocabulary.desired_state import DEFAULT_GITHUB_ENDPOINT, EntityKey, Incumbents, entity_key

logger = logging.getLogger(__name__)

SENT_CREDENTIALS_KEY = "sent-credentials"
RUNNER_FAULTS_KEY = "runner-faults"
INCUMBENTS_KEY = "incumbents"
STALLS_KEY = "stalled-scalesets"
REGISTERED_KEY = "github-scalesets"
FAILING_KEY = "failing-since"
CONTROLLER_KEY = "garm-controller"
REPLACED_KEY = "replaced-controllers"


@dataclass(frozen=True)
class RememberedFault:
    """The last fault seen on a scale set's runners, kept until one comes up.

    Attributes:
        fault: the shown part of the fault.
        since: the scale set's ``updated_at`` when the fault was seen; a later change of the
            scale set (new image, say) forgets the fault.
    """

    fault: str
    since: str


@dataclass(frozen=True)
class Memory:
    """What the GARM side learns in a pass and needs in the next: the charm keeps it.

    Attributes:
        sent: fingerprint of the App each managed credential was last sent with; None when
            the charm keeps no such memory (then a rotated key goes unnoticed).
        faults: the last provider fault per live scale set whose runners have not come up.
        incumbents: which configurator holds each scale-set name and entity in GARM.
        stalls: what was done about each scale set GARM stopped scaling, while it is short.
        registered: the GitHub scale sets GARM registered, per scale-set name.
        failing: since when each lasting failure (a notice's ``subject: text``) has been seen.
        controller: GARM's controller id as the last pass read it ("" when never read).
        replaced: controller ids of replaced databases still named, with when replaced.
    """

    sent: dict[str, str] | None = None
    faults: dict[str, RememberedFault] = field(default_factory=dict[str, RememberedFault])
    incumbents: Incumbents = field(default_factory=Incumbents)
    stalls: dict[str, Recovery] = field(default_factory=dict[str, Recovery])
    registered: dict[str, Registration] = field(default_factory=dict[str, Registration])
    failing: dict[str, datetime] = field(default_factory=dict[str, datetime])
    controller: str = ""
    replaced: dict[str, datetime] = field(default_factory=dict[str, datetime])


def decode(fields: Mapping[str, str]) -> Memory:
    """Read the memory from its fields; an unreadable field reads as empty.

    Every managed credential is then sent again once, and a fault shows again when next seen,
    rather than a rotation being missed.
    """
    raw_sent = _object(fields, SENT_CREDENTIALS_KEY)
    sent = {k: v for k, v in raw_sent.items() if isinstance(v, str)}
    faults: dict[str, RememberedFault] = {}
    for name, entry in _object(fields, RUNNER_FAULTS_KEY).items():
        if isinstance(entry, list):
            parts = cast(list[object], entry)
            if len(parts) == 2 and all(isinstance(f, str) for f in parts):
                faults[name] = RememberedFault(str(parts[0]), str(parts[1]))
    stalls = _stalls(_object(fields, STALLS_KEY))
    return Memory(
        sent,
        faults,
        _incumbents(_object(fields, INCUMBENTS_KEY)),
        stalls,
        _registered(_object(fields, REGISTERED_KEY)),
        _times(_object(fields, FAILING_KEY)),
        fields.get(CONTROLLER_KEY, ""),
        _times(_object(fields, REPLACED_KEY)),
    )


def encode(memory: Memory, present: Collection[str]) -> dict[str, str]:
    """The fields to keep for ``memory``, given the fields already ``present``.

    An empty field is written only over one that is there: no empty record to start.
    """
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
    registered = {
        name: [r.endpoint, r.runner_group, list(r.ids)]
        for name, r in sorted(memory.registered.items())
    }
    wanted[REGISTERED_KEY] = json.dumps(registered, separators=(",", ":"))
    failing = {key: at.isoformat() for key, at in sorted(memory.failing.items())}
    wanted[FAILING_KEY] = json.dumps(failing)
    replaced = {cid: at.isoformat() for cid, at in sorted(memory.replaced.items())}
    wanted[REPLACED_KEY] = json.dumps(replaced)
    if memory.controller:
        wanted[CONTROLLER_KEY] = memory.controller
    held = memory.incumbents
    if held.scalesets or held.entities or held.credentials:
        record: dict[str, object] = {
            "scalesets": dict(sorted(held.scalesets.items())),
            "entities": sorted(_entity_entry(key, app) for key, app in held.entities.items()),
        }
        if held.credentials:
            record["credentials"] = sorted(
                [name, app, digest] for name, (app, digest) in held.credentials.items()
            )
        wanted[INCUMBENTS_KEY] = json.dumps(record)
    elif INCUMBENTS_KEY in present:
        wanted[INCUMBENTS_KEY] = "{}"
    return {k: v for k, v in wanted.items() if k in present or v != "{}"}


def _incumbents(raw: dict[str, object]) -> Incumbents:
    scalesets = raw.get("scalesets")
    entities = raw.get("entities")
    held_scalesets: dict[str, str] = {}
    if isinstance(scalesets, dict):
        for name, app in cast(dict[object, object], scalesets).items():
            if isinstance(name, str) and isinstance(app, str):
                held_scalesets[name] = app
    held_entities = {
        entity_key(kind, name, *endpoint): app for kind, name, app, *endpoint in _entries(entities)
    }
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


def _registered(raw: dict[str, object]) -> dict[str, Registration]:
    """The registrations per name; an unreadable entry is left out (its name is not reclaimed)."""
    registered: dict[str, Registration] = {}
    for name, entry in raw.items():
        if not isinstance(entry, list):
            continue
        parts = cast(list[object], entry)
        if len(parts) != 3 or not isinstance(parts[0], str) or not isinstance(parts[1], str):
            continue
        raw_ids = parts[2]
        if not isinstance(raw_ids, list):
            continue
        ids = tuple(i for i in cast(list[object], raw_ids) if isinstance(i, int))
        registered[name] = Registration(parts[0], parts[1], ids)
    return registered


def _times(raw: dict[str, object]) -> dict[str, datetime]:
    """Times by key (`failing-since`, `replaced-controllers`); an unreadable one is left out."""
    times: dict[str, datetime] = {}
    for key, at in raw.items():
        if isinstance(at, str):
            try:
                times[key] = datetime.fromisoformat(at)
            except ValueError:
                continue
    return times


def _entity_entry(key: EntityKey, app: str) -> list[str]:
    # github.com's entities keep the three-field entry earlier charms wrote and read.
    entry = [key.kind, key.name, app]
    return entry if key.endpoint == DEFAULT_GITHUB_ENDPOINT else [*entry, key.endpoint]


def _entries(raw: object) -> list[list[str]]:
    """The entries of a JSON list of three- or four-string lists; anything else is left out."""
    entries: list[list[str]] = []
    if isinstance(raw, list):
        for entry in cast(list[object], raw):
            if isinstance(entry, list):
                fields = cast(list[object], entry)
                if len(fields) in (3, 4) and all(isinstance(f, str) for f in fields):
                    entries.append([str(f) for f in fields])
    return entries


def _triples(raw: object) -> list[tuple[str, str, str]]:
    """The entries of a JSON list of three-string lists; anything else is left out."""
    return [(e[0], e[1], e[2]) for e in _entries(raw) if len(e) == 3]


def _object(fields: Mapping[str, str], key: str) -> dict[str, object]:
    raw = fields.get(key, "")
    if not raw:
        return {}
    try:
        parsed: object = json.loads(raw)
    except ValueError:
        logger.warning("The remembered %s is not JSON; starting it afresh", key)
        return {}
    if not isinstance(parsed, dict):
        return {}
    return {str(k): v for k, v in cast(dict[object, object], parsed).items()}
