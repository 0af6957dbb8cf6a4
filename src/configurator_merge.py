"""Merging the configurators: who owns a name, and what a refused configurator holds.

Owns what one configurator (one relation) asks for before the merge (``Contribution``) and the
merge itself: a scale-set name or an entity belongs to the configurator whose live scale sets
already hold it (``Incumbents``), and a name nobody holds yet to the first configurator, in
relation-id order, to claim it; a configurator with bad input or a conflicting claim
contributes nothing this pass while what it described is ``Held``. Must not import ops or the
GARM client.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from configurator_contract import (
    entity_target,
    has_contract_data,
    lenient_ids,
    single_line,
)
from desired_state import (
    ConfiguratorInputs,
    CredentialSpec,
    EntitySpec,
    Held,
    Incumbents,
    InputProblem,
    ProviderConfig,
    ScalesetSpec,
    UnitData,
    credential_name,
)

logger = logging.getLogger(__name__)


class Merge:
    """Merges the configurators in relation-id order: the first to claim a name owns it.

    A configurator with bad input (or one that claims what an earlier one owns) contributes no
    credential, entity or scale set this pass; what it described is held as it is, except
    what belongs to another configurator.
    """

    def __init__(self) -> None:
        """Start with no configurator and no claimed name."""
        self.accepted: list[Contribution] = []
        self.refused: list[Contribution] = []
        self.problems: list[InputProblem] = []
        self.providers: list[ProviderConfig] = []
        self.scaleset_owner: dict[str, str] = {}
        self.entity_owner: dict[tuple[str, str], tuple[str, str]] = {}

    def seat_incumbents(self, contributions: Sequence[Contribution], held: Incumbents) -> None:
        """Give each name to the configurator that holds it in GARM, if it still claims it.

        Called before :meth:`add`: the incumbent keeps its name even when a configurator with
        a lower relation id reaches for it.
        """
        for c in contributions:
            for name in c.names:
                if held.scalesets.get(name) == c.app:
                    self.scaleset_owner[name] = c.app
            for key, credential in c.entity_credentials.items():
                if held.entities.get(key) == c.app:
                    self.entity_owner[key] = (c.app, credential)

    def add(self, c: Contribution) -> None:
        """Take the next configurator: refused when it has problems or claims an owned name."""
        self.providers += c.providers
        for problem in self._conflicts(c):
            c.problems.append(problem)
        self.problems += c.problems
        (self.refused if c.problems else self.accepted).append(c)

    def _conflicts(self, c: Contribution) -> list[InputProblem]:
        conflicts: list[InputProblem] = []
        for name in sorted(c.names):
            owner = self.scaleset_owner.setdefault(name, c.app)
            if owner != c.app:
                conflicts.append(_conflict(c.app, f"scale set {name}", owner))
        for key, credential in sorted(c.entity_credentials.items()):
            owner, bound = self.entity_owner.setdefault(key, (c.app, credential))
            if owner != c.app and credential and bound and credential != bound:
                conflicts.append(_conflict(c.app, f"{key[0]} {key[1]}", owner))
        return conflicts

    def result(self) -> ConfiguratorInputs:
        """Return what the accepted configurators ask for and what the refused ones hold."""
        credentials: dict[str, CredentialSpec] = {}
        entities: dict[tuple[str, str], EntitySpec] = {}
        scalesets: list[ScalesetSpec] = []
        for c in self.accepted:
            for spec in c.credentials.values():
                credentials.setdefault(spec.name, spec)
            for key, entity in c.entities.items():
                entities.setdefault(key, entity)
            scalesets += [candidate.spec for candidate in c.scalesets.values()]
        return ConfiguratorInputs(
            providers=tuple(self.providers),
            credentials=tuple(credentials.values()),
            entities=tuple(entities.values()),
            scalesets=tuple(scalesets),
            problems=tuple(self.problems),
            held=self._held(set(credentials), set(entities)),
            identity_unknown=any(c.unnamed and not c.names for c in self.refused),
        )

    def _held(self, desired_credentials: set[str], desired_entities: set[tuple[str, str]]) -> Held:
        credentials: set[str] = set()
        entities: set[tuple[str, str]] = set()
        scalesets: set[str] = set()
        for c in self.refused:
            credentials |= c.credential_names - desired_credentials
            entities |= {
                key
                for key in c.entity_credentials
                if key not in desired_entities and self.entity_owner.get(key, (c.app,))[0] == c.app
            }
            scalesets |= {n for n in c.names if self.scaleset_owner.get(n) == c.app}
        apps = frozenset(c.app for c in self.refused)
        return Held(frozenset(credentials), frozenset(entities), frozenset(scalesets), apps)


def _conflict(app: str, what: str, owner: str) -> InputProblem:
    logger.warning(
        "refusing %s from %s: it belongs to %s, which claimed it first", what, app, owner
    )
    return InputProblem(source=app, reason=f"{what} belongs to {owner}", blocked=True)


@dataclass
class Candidate:
    """A scale set one unit of a configurator describes, and whether that unit has the provider."""

    spec: ScalesetSpec
    from_provider_unit: bool


@dataclass
class Contribution:
    """What one configurator (one relation) asks for this pass, before relations are merged.

    The identities are read leniently from every unit, even one whose data is invalid, so that
    what a configurator with bad input described can be held as it is.
    """

    app: str
    providers: list[ProviderConfig] = field(default_factory=list[ProviderConfig])
    credentials: dict[tuple[int, int], CredentialSpec] = field(
        default_factory=dict[tuple[int, int], CredentialSpec]
    )
    entities: dict[tuple[str, str], EntitySpec] = field(
        default_factory=dict[tuple[str, str], EntitySpec]
    )
    scalesets: dict[str, Candidate] = field(default_factory=dict[str, Candidate])
    problems: list[InputProblem] = field(default_factory=list[InputProblem])
    names: set[str] = field(default_factory=set[str])
    entity_credentials: dict[tuple[str, str], str] = field(
        default_factory=dict[tuple[str, str], str]
    )
    credential_names: set[str] = field(default_factory=set[str])
    unnamed: bool = False

    def identify(self, unit: UnitData) -> None:
        """Record the names this unit's data points at, readable or not."""
        data = unit.data
        name = single_line(data, "name")
        if name:
            self.names.add(name)
        elif has_contract_data(data):
            self.unnamed = True
        ids = lenient_ids(data)
        target = (
            entity_target(data) if single_line(data, "org") or single_line(data, "repo") else None
        )
        if ids is not None:
            self.credential_names.add(credential_name(*ids))
        if target is not None:
            self.entity_credentials.setdefault(target, credential_name(*ids) if ids else "")
