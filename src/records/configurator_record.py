"""What each garm-configurator relation last said, kept by the unit between hooks (ADR 0019).

Under Juju every hook tool is a process, and reading a relation costs two of them
(``relation-list``, then ``relation-get`` per unit). So a pass does not read every configurator
relation: it assembles the whole desired state from the unit's record of what each relation
last said, and reads from Juju only the relations that may have changed:

- the hook's own relation (created, joined, changed, departed), and the relations whose data
  names the secret of a ``secret-changed`` hook;
- a rotation: the ``ROTATION`` relations read longest ago, every hook, so a relation whose data
  changed without its event (a hook lost with a pod) is seen within ⌈N/``ROTATION``⌉ hooks;
  relations the record lacks (a new pod, a refresh, an entry that does not parse) come first.

Relation ids Juju no longer lists leave the record, and a unit that is not the leader reads no
relation, so it drops its record (``forget``): a unit elected again reads every relation anew.
Until every listed relation has been read
once (``ConfiguratorView.unread``), the record cannot stand for the whole desired state: the
caller waits and asks for the next pass. The record is ops' ``StoredState``, beside the charm:
ops commits it only when the hook succeeds, and it goes with the pod. Each entry carries the
digest of the data it holds; one that does not match is dropped and read again. Knows ops;
hands on detached ``UnitData``; must not import the GARM client.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any, cast

import ops

from records.relation_reads import sparse
from relations.configurator_contract import CONFIGURATOR_RELATION_NAME
from vocabulary.desired_state import UnitData

logger = logging.getLogger(__name__)

# Relations re-read every hook besides the hook's own; at 20 a hook's reads stay near 40 tools.
ROTATION = 20
# The entry layout; a record written in another layout is dropped and read again.
LAYOUT = 1
# How a databag value names a Juju secret (a secret-changed hook's owners name its id).
_SECRET_PREFIX = "secret:"  # noqa: S105 - a URI scheme, not a secret


@dataclasses.dataclass(frozen=True)
class ConfiguratorView:
    """The configurator relations as the record holds them after this hook's reads.

    Attributes:
        relation_ids: every relation Juju lists, in id order.
        apps: the remote application of each relation the record holds.
        units: the remote unit databags the record holds, by relation id then unit name.
        unread: relations Juju lists that the record has never read: the view is partial.
        read: how many relations this hook read from Juju.
    """

    relation_ids: tuple[int, ...]
    apps: Mapping[int, str]
    units: tuple[UnitData, ...]
    unread: int = 0
    read: int = 0

    @property
    def complete(self) -> bool:
        """Whether every listed relation is in the record: the view is the whole fleet."""
        return not self.unread


class ConfiguratorRecord(ops.Object):
    """The unit's record of the configurator relations, and the reads of one hook."""

    _stored = ops.StoredState()

    def __init__(self, charm: ops.CharmBase, endpoint: str = CONFIGURATOR_RELATION_NAME) -> None:
        """Take over the endpoint's relation reads; mark what this hook's event may change.

        Construct it before the charm observes its own events: its observers then run first.
        """
        super().__init__(charm, "configurator-record")
        self._endpoint = endpoint
        self._model = charm.model
        self._relations = sparse(charm.model, endpoint)
        self._stale: set[int] = set()
        self._stale_secrets: set[str] = set()
        self._stored.set_default(layout=LAYOUT, hook=0, entries={})
        on = charm.on[endpoint]
        for event in (on.relation_created, on.relation_joined, on.relation_changed):
            charm.framework.observe(event, self._on_relation_event)
        charm.framework.observe(on.relation_departed, self._on_relation_event)
        charm.framework.observe(charm.on.secret_changed, self._on_secret_changed)

    def _on_relation_event(self, event: ops.RelationEvent) -> None:
        self._stale.add(event.relation.id)

    def _on_secret_changed(self, event: ops.SecretChangedEvent) -> None:
        if event.secret.id:
            self._stale_secrets.add(_secret_key(event.secret.id))

    def forget(self) -> None:
        """Drop the record: a unit that is not the leader reads no relation, so it would age.

        A unit that becomes the leader again then reads every relation anew.
        """
        if self._stored.entries:
            self._stored.entries = {}

    def read(self, *, rotate: bool = True) -> ConfiguratorView:
        """Read what may have changed, keep it, and return every relation as the record has it.

        Args:
            rotate: whether this hook also re-reads the ``ROTATION`` relations read longest
                ago (an action answers from the record and reads only what it lacks).
        """
        entries = self._load()
        listed = self._relations.relation_ids(self._endpoint)
        for gone in set(entries) - set(listed):
            del entries[gone]
        hook = cast(int, self._stored.hook) + 1
        due = self._due(entries, listed, rotate)
        for relation_id in due:
            entries[relation_id] = self._read_relation(relation_id, hook)
        self._save(entries, hook)
        units = tuple(
            UnitData(rid, unit, data)
            for rid in listed
            if rid in entries
            for unit, data in sorted(entries[rid]["units"].items())
        )
        apps = {rid: cast(str, entries[rid]["app"]) for rid in listed if rid in entries}
        unread = sum(1 for rid in listed if rid not in entries)
        return ConfiguratorView(listed, apps, units, unread, len(due))

    def _due(
        self, entries: Mapping[int, dict[str, Any]], listed: Iterable[int], rotate: bool
    ) -> list[int]:
        """The relations this hook reads: the event's, a secret's owners, then the rotation."""
        listed = tuple(listed)
        owners = {
            rid for rid, entry in entries.items() if _names_secret(entry, self._stale_secrets)
        }
        due = [rid for rid in listed if rid in self._stale or rid in owners]
        # Never read come first (-1), then the longest ago; relation id breaks ties.
        oldest = sorted(
            (rid for rid in listed if rid not in due),
            key=lambda rid: (entries[rid]["read"] if rid in entries else -1, rid),
        )
        missing = [rid for rid in oldest if rid not in entries]
        rotation = oldest[:ROTATION] if rotate else missing
        return sorted([*due, *rotation])

    def _read_relation(self, relation_id: int, hook: int) -> dict[str, Any]:
        # Asked for by id, ops always builds the relation (inactive if Juju no longer lists it).
        relation = cast(ops.Relation, self._model.get_relation(self._endpoint, relation_id))
        units = {unit.name: dict(relation.data[unit]) for unit in relation.units}
        app = relation.app.name
        return {"app": app, "units": units, "read": hook, "digest": _digest(app, units)}

    def _load(self) -> dict[int, dict[str, Any]]:
        """The record as stored; an entry that does not parse or match its digest is dropped."""
        if self._stored.layout != LAYOUT:
            logger.info("configurator record of another layout dropped; relations read again")
            return {}
        entries: dict[int, dict[str, Any]] = {}
        for key, text in cast(Mapping[str, str], self._stored.entries).items():
            entry = _parse_entry(text)
            if entry is None:
                logger.warning("configurator record of relation %s unreadable; read again", key)
                continue
            entries[int(key)] = entry
        return entries

    def _save(self, entries: Mapping[int, dict[str, Any]], hook: int) -> None:
        stored = cast(dict[str, str], self._stored.entries)
        texts = {str(rid): json.dumps(entry, sort_keys=True) for rid, entry in entries.items()}
        for key in set(stored) - set(texts):
            del stored[key]
        for key, text in texts.items():
            if stored.get(key) != text:
                stored[key] = text
        self._stored.layout = LAYOUT
        self._stored.hook = hook


def _digest(app: str, units: Mapping[str, Mapping[str, str]]) -> str:
    return hashlib.sha256(json.dumps([app, units], sort_keys=True).encode()).hexdigest()


def _parse_entry(text: str) -> dict[str, Any] | None:
    try:
        entry = json.loads(text)
        app, units, read, digest = entry["app"], entry["units"], entry["read"], entry["digest"]
    except (ValueError, TypeError, KeyError):
        return None
    shaped = isinstance(app, str) and isinstance(units, dict) and isinstance(read, int)
    if not shaped or digest != _digest(app, cast(dict[str, dict[str, str]], units)):
        return None
    return cast(dict[str, Any], entry)


def _secret_key(uri: str) -> str:
    """A secret's unique id, whichever form names it (``secret:ID``, ``secret://MODEL/ID``)."""
    return uri.rsplit("/", 1)[-1].removeprefix(_SECRET_PREFIX)


def _names_secret(entry: Mapping[str, Any], secrets: set[str]) -> bool:
    if not secrets:
        return False
    units = cast(Mapping[str, Mapping[str, str]], entry["units"])
    return any(
        value.startswith(_SECRET_PREFIX) and _secret_key(value) in secrets
        for data in units.values()
        for value in data.values()
    )
