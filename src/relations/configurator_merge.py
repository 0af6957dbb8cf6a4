"""Merging the configurators: who owns a name, and what a refused configurator holds.

Owns what one configurator (one relation) asks for before the merge (``Contribution``) and the
merge itself: a scale-set name or an entity belongs to the configurator whose live scale sets
already hold it (``Incumbents``), and a name nobody holds yet to the first configurator, in
relation-id order, to claim it; a provider belongs to the configurator whose units publish it,
and a scale set may name only its own configurator's; a GitHub App (its credential) belongs to
the configurator whose key GARM was last sent, and another may share it only with the same key;
a configurator with bad input or a conflicting claim contributes nothing this pass while what
it described is ``Held``. Must not import ops or the GARM client.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from relations.configurator_contract import (
    PRIVATE_KEY_FIELD,
    entity_target,
    has_contract_data,
    lenient_endpoint,
    lenient_ids,
    single_line,
)
from vocabulary.desired_state import (
    DEFAULT_GITHUB_ENDPOINT,
    ConfiguratorInputs,
    CredentialSpec,
    EndpointSpec,
    EntityKey,
    EntitySpec,
    Held,
    Incumbents,
    InputProblem,
    ProviderConfig,
    ScalesetSpec,
    UnitData,
    app_of_provider,
    credential_name,
    entity_key,
)
from vocabulary.github_endpoint import BASE_URL_FIELD, CA_BUNDLE_FIELD, ca_certificates

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
        self.entity_owner: dict[EntityKey, tuple[str, str]] = {}
        self.provider_owner: dict[str, str] = {}
        # Credential name to its holder and the digest of the holder's App key.
        self.credential_owner: dict[str, tuple[str, str]] = {}
        # Endpoint name to the first configurator that described it and its CA bundle.
        self.endpoint_owner: dict[str, EndpointSpec] = {}

    def seat_incumbents(self, contributions: Sequence[Contribution], held: Incumbents) -> None:
        """Give each name to the configurator that holds it in GARM, if it still claims it.

        Called before :meth:`add`: the incumbent keeps its name even when a configurator with
        a lower relation id reaches for it. Each provider goes to the configurator whose unit
        publishes it, whatever the relation order.
        """
        self.provider_owner = {p.unit_name: c.app for c in contributions for p in c.providers}
        for c in contributions:
            for name in c.credential_names:
                holder = held.credentials.get(name)
                if holder is None or holder[0] != c.app:
                    continue
                # The holder's key now (a rotation is its own to make), else the one GARM has.
                spec = next((s for s in c.credentials.values() if s.name == name), None)
                self.credential_owner[name] = (c.app, spec.key_digest if spec else holder[1])
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
        conflicts = self._foreign_providers(c) + self._foreign_apps(c) + self._other_ca(c)
        for name in sorted(c.names):
            owner = self.scaleset_owner.setdefault(name, c.app)
            if owner != c.app:
                conflicts.append(_conflict(c.app, f"scale set {name}", owner))
        for key, credential in sorted(c.entity_credentials.items()):
            owner, bound = self.entity_owner.setdefault(key, (c.app, credential))
            if owner != c.app and credential and bound and credential != bound:
                conflicts.append(_conflict(c.app, f"{key[0]} {key[1]}", owner))
        return conflicts

    def _foreign_providers(self, c: Contribution) -> list[InputProblem]:
        """A scale set runs on its own configurator's provider, never on another's.

        Another configurator's provider is its OpenStack project: a scale set there would run
        this configurator's scripts with that project's credentials. A provider is the
        configurator's own when one of its units publishes it, or when its name is one of its
        units' and no other configurator publishes it (a unit's provider can be missing for a
        pass, while its leader changes, without the scale set being refused).
        """
        problems: list[InputProblem] = []
        for name in sorted({s.spec.provider_name for s in c.scalesets.values()}):
            holder = self.provider_owner.get(name) or app_of_provider(name)
            if holder == c.app:
                continue
            if name in self.provider_owner:
                problems.append(_conflict(c.app, f"provider {name}", holder))
                continue
            logger.warning(
                "refusing provider %s from %s: none of its units publish it", name, c.app
            )
            problems.append(
                InputProblem(c.app, f"provider {name} is not published by {c.app}", blocked=True)
            )
        return problems

    def _foreign_apps(self, c: Contribution) -> list[InputProblem]:
        """An App held by another configurator is shared only by one that holds the same key."""
        problems: list[InputProblem] = []
        for spec in sorted(c.credentials.values(), key=lambda s: s.name):
            holder, digest = self.credential_owner.setdefault(spec.name, (c.app, spec.key_digest))
            if holder == c.app or digest == spec.key_digest:
                continue
            logger.warning(
                "refusing GitHub App %s from %s: it belongs to %s, whose key differs",
                spec.app_id,
                c.app,
                holder,
            )
            reason = (
                f"GitHub App {spec.app_id} belongs to {holder}; "
                f"the key in {PRIVATE_KEY_FIELD} differs"
            )
            problems.append(InputProblem(c.app, reason, blocked=True))
        return problems

    def _other_ca(self, c: Contribution) -> list[InputProblem]:
        """Configurators on one GitHub Enterprise Server must give GARM the same CA bundle.

        GARM keeps one bundle per endpoint: the first configurator (relation-id order) to
        describe the server sets it, and one that gives another bundle is refused.
        """
        problems: list[InputProblem] = []
        for name, spec in sorted(c.endpoints.items()):
            first = self.endpoint_owner.setdefault(name, spec)
            if first.certificates != spec.certificates:
                logger.warning(
                    "refusing endpoint %s from %s: its CA bundle differs from %s's",
                    name,
                    c.app,
                    first.source,
                )
                reason = f"{CA_BUNDLE_FIELD} for {name} differs from {first.source}'s"
                problems.append(InputProblem(c.app, reason, blocked=True))
        return problems

    def result(self) -> ConfiguratorInputs:
        """Return what the accepted configurators ask for and what the refused ones hold."""
        credentials: dict[str, CredentialSpec] = {}
        entities: dict[EntityKey, EntitySpec] = {}
        scalesets: list[ScalesetSpec] = []
        shared_held: set[str] = set()
        endpoints: dict[str, EndpointSpec] = {}
        for c in self.accepted:
            for name, endpoint in c.endpoints.items():
                endpoints.setdefault(name, endpoint)
            for spec in c.credentials.values():
                # Only the holder's data is ever written to its credential; one that shares it
                # uses it as GARM has it, and while the holder is held, so is the credential.
                if self.credential_owner[spec.name][0] == c.app:
                    credentials[spec.name] = spec
                else:
                    shared_held.add(spec.name)
            for key, entity in c.entities.items():
                entities.setdefault(key, entity)
            scalesets += [candidate.spec for candidate in c.scalesets.values()]
        return ConfiguratorInputs(
            providers=tuple(self.providers),
            credentials=tuple(credentials.values()),
            entities=tuple(entities.values()),
            scalesets=tuple(scalesets),
            problems=tuple(self.problems),
            held=self._held(set(credentials), set(entities), shared_held - set(credentials)),
            # A base URL that does not parse hides which organisation and App are meant.
            identity_unknown=any(
                (c.unnamed and not c.names) or c.endpoint_unreadable for c in self.refused
            ),
            endpoints=tuple(endpoints.values()),
        )

    def _held(
        self,
        desired_credentials: set[str],
        desired_entities: set[EntityKey],
        shared: set[str],
    ) -> Held:
        credentials = set(shared)
        entities: set[EntityKey] = set()
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
    logger.warning("refusing %s from %s: it belongs to %s", what, app, owner)
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
    entities: dict[EntityKey, EntitySpec] = field(default_factory=dict[EntityKey, EntitySpec])
    scalesets: dict[str, Candidate] = field(default_factory=dict[str, Candidate])
    problems: list[InputProblem] = field(default_factory=list[InputProblem])
    names: set[str] = field(default_factory=set[str])
    entity_credentials: dict[EntityKey, str] = field(default_factory=dict[EntityKey, str])
    credential_names: set[str] = field(default_factory=set[str])
    unnamed: bool = False
    endpoints: dict[str, EndpointSpec] = field(default_factory=dict[str, EndpointSpec])
    endpoint_unreadable: bool = False

    def endpoint_disagreement(self, name: str, bundle: str) -> str:
        """Why a unit's GitHub Enterprise Server differs from an earlier unit's ("" if not).

        Units of one configurator name one server with one bundle; while they disagree (a
        change rolling through them) the configurator is held rather than half moved. A unit
        that names no server is not compared: it may publish no GitHub data at all.
        """
        if name == DEFAULT_GITHUB_ENDPOINT or not self.endpoints:
            return ""
        earlier = self.endpoints.get(name)
        if earlier is None:
            return f"{BASE_URL_FIELD} differs between the units of {self.app}"
        if earlier.certificates != ca_certificates(bundle):
            return f"{CA_BUNDLE_FIELD} differs between the units of {self.app}"
        return ""

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
        endpoint = lenient_endpoint(data)
        if endpoint is None:
            self.endpoint_unreadable = True
            endpoint = DEFAULT_GITHUB_ENDPOINT
        if ids is not None:
            self.credential_names.add(credential_name(*ids, endpoint))
        if target is not None:
            key = entity_key(*target, endpoint)
            credential = credential_name(*ids, endpoint) if ids else ""
            self.entity_credentials.setdefault(key, credential)
