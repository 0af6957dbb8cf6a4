"""The desired state of one pass, as frozen objects detached from Juju and GARM.

Owns ``DesiredState`` and the specs in it that the reconcilers work on (providers, credentials,
entities, scale sets; the debug-ssh servers are ``tmate_relay``'s), what a configurator's input
is worth this pass (``InputProblem``, ``Held``, ``ConfiguratorInputs``) and the names the charm
derives from them.
Must not import ops or the GARM client: the parser fills these objects from relation data,
the reconcilers read them.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from vocabulary.github_endpoint import (
    DEFAULT_GITHUB_ENDPOINT,
    api_base_url,
    ca_certificates,
    root_url,
    upload_base_url,
)
from vocabulary.github_key import public_key_digest
from vocabulary.runner_options import RunnerConfig
from vocabulary.tmate_relay import DebugSshConnection, TmateRelay

# GARM credentials with this description are the charm's; any other is left alone.
MANAGED_CREDENTIAL_DESCRIPTION = "Managed by garm"

# Reads a configurator secret's ``value`` by URI; None when it cannot be read.
SecretReader = Callable[[str], str | None]


def app_fingerprint(app_id: int, installation_id: int, key: str) -> str:
    """SHA-256 of an App's ids and its key (as ``key`` gives it: its digest, or its text)."""
    return hashlib.sha256(
        f"{app_id}\n{installation_id}\n{key}".encode("utf-8", "replace")
    ).hexdigest()


def pem_digest(pem: str) -> str:
    """The SHA-256 of a GitHub App key's text: tells a changed key apart without keeping it.

    An RSA private key is far too random for its digest to give anything away.
    """
    return hashlib.sha256(pem.encode("utf-8", "replace")).hexdigest()


@dataclass(frozen=True)
class AppKey:
    """A GitHub App private key as a pass knows it: its digests always, its text on demand.

    A key the charm has read before, at the secret revision it still tracks, is not read
    again until GARM must be sent it (a credential to create, or a rotation to take):
    ``pem()`` reads it then (``configurator_secrets``).

    Attributes:
        digest: :func:`pem_digest` of the key's text.
        public_digest: the digest of its public key (``github_key.public_key_digest``).
        checked: whether the key passed the PKCS#1 check when it was first read.
        load: returns the key's text, None when it cannot be read (the reader logs why).
    """

    digest: str
    public_digest: str
    checked: bool = False
    load: Callable[[], str | None] = field(default=lambda: None, repr=False, compare=False)

    @classmethod
    def of(cls, pem: str) -> AppKey:
        """A key whose text is in hand (read this pass, not yet checked)."""
        return cls(pem_digest(pem), public_key_digest(pem), load=lambda: pem)

    def pem(self) -> str | None:
        """The key's text; None when it cannot be read."""
        return self.load()


# What the status says of a GitHub App key whose secret cannot be read.
KEY_UNREADABLE = "GitHub private key secret is unreadable"

# Reads a configurator's GitHub App key by secret URI; None when it cannot be read.
KeyReader = Callable[[str], AppKey | None]


@dataclass(frozen=True)
class ProviderConfig:
    """One OpenStack provider, named after the configurator unit that published it.

    The field set is exactly the entrypoint's ``PROVIDER_REQUIRED_FIELDS``.
    """

    unit_name: str
    network: str
    auth_url: str
    username: str
    password: str = field(repr=False)
    project_name: str
    user_domain_name: str
    project_domain_name: str
    region_name: str

    def as_dict(self) -> dict[str, str]:
        """Return the provider as the plain mapping published to the workload."""
        return {
            "unit_name": self.unit_name,
            "network": self.network,
            "auth_url": self.auth_url,
            "username": self.username,
            "password": self.password,
            "project_name": self.project_name,
            "user_domain_name": self.user_domain_name,
            "project_domain_name": self.project_domain_name,
            "region_name": self.region_name,
        }


@dataclass(frozen=True)
class EndpointSpec:
    """A GitHub Enterprise Server endpoint the charm keeps in GARM (never github.com's).

    Attributes:
        name: the endpoint's name in GARM, derived from the base URL
            (:func:`github_endpoint.endpoint_name`).
        base_url: the server's root URL as the configurator gave it.
        ca_bundle: PEM certificates GARM trusts for it; ``""`` for the system's.
        source: the configurator application that publishes it, for the status.
    """

    name: str
    base_url: str
    ca_bundle: str = ""
    source: str = ""

    @property
    def urls(self) -> tuple[str, str, str]:
        """The base, API and upload URLs GARM is given."""
        return root_url(self.base_url), api_base_url(self.base_url), upload_base_url(self.base_url)

    @functools.cached_property
    def certificates(self) -> tuple[bytes, ...]:
        """The bundle's certificates in the form compared with GARM's (DER, each once)."""
        return ca_certificates(self.ca_bundle)


@dataclass(frozen=True)
class CredentialSpec:
    """A GitHub App credential the charm keeps in GARM."""

    name: str
    endpoint: str
    app_id: int
    installation_id: int
    key: AppKey
    description: str
    source: str = ""  # the configurator application that publishes it, for the status

    @property
    def fingerprint(self) -> str:
        """A digest of the App ids and key: tells a rotated key apart without keeping it."""
        return app_fingerprint(self.app_id, self.installation_id, self.key.digest)

    @property
    def key_digest(self) -> str:
        """A digest of the App's public key: tells whether two configurators hold one key."""
        return self.key.public_digest


class EntityKey(NamedTuple):
    """An organisation or repository as GitHub tells one apart: kind, folded name, endpoint.

    GitHub compares organisation and repository names without regard to letter case, and so
    does GARM's duplicate check (it refuses ``Org-B`` beside ``org-b``), so every match of an
    entity (the merge, ownership, placement, the reconcilers) is made on this key, while the
    name itself keeps the case a configurator gave it. ``canonical`` on github.com and
    ``canonical`` on a GitHub Enterprise Server are two organisations (GARM keeps both).
    """

    kind: str
    name: str
    endpoint: str = DEFAULT_GITHUB_ENDPOINT


def entity_key(kind: str, name: str, endpoint: str = DEFAULT_GITHUB_ENDPOINT) -> EntityKey:
    """The key of an organisation or repository (``owner/repo``): names case-folded."""
    return EntityKey(kind, name.lower(), (endpoint or DEFAULT_GITHUB_ENDPOINT).lower())


@dataclass(frozen=True)
class EntitySpec:
    """An organisation or repository registered in GARM with one credential."""

    entity_type: str  # "organization" or "repository"
    entity_name: str  # org name, or "owner/repo"
    credentials_name: str
    source: str = ""  # the configurator application that publishes it, for the status
    endpoint: str = DEFAULT_GITHUB_ENDPOINT  # GARM's name of its GitHub

    @property
    def key(self) -> EntityKey:
        """The entity as GitHub tells it apart (:func:`entity_key`)."""
        return entity_key(self.entity_type, self.entity_name, self.endpoint)


@dataclass(frozen=True)
class ScalesetSpec:
    """One logical scale set as a configurator describes it.

    ``name`` is the logical name; the live name in GARM adds a hash of the labels.
    """

    name: str
    provider_name: str
    image: str
    flavor: str
    os_arch: str
    min_idle_runners: int
    max_runners: int
    entity_type: str
    entity_name: str
    labels: tuple[str, ...] = ()
    runner_group: str = ""
    pre_install_scripts: Mapping[str, str] = field(default_factory=dict[str, str])
    os_type: str = "linux"
    template_id: int = 0
    runner_config: RunnerConfig = field(default_factory=RunnerConfig)
    source: str = ""  # the configurator application that publishes it, for the status
    enable_shell: bool = False  # GARM's remote shell on its runners (needs the agent and TLS)
    endpoint: str = DEFAULT_GITHUB_ENDPOINT  # GARM's name of the entity's GitHub
    tmate_relay: TmateRelay | None = None  # runners reach tmate through their proxy

    @property
    def entity_key(self) -> EntityKey:
        """The scale set's organisation or repository as GitHub tells it apart."""
        return entity_key(self.entity_type, self.entity_name, self.endpoint)


@dataclass(frozen=True)
class UnitData:
    """One remote unit databag, detached from Juju.

    Attributes:
        relation_id: id of the relation the unit is seen through.
        unit_name: Juju unit name, for example ``garm-configurator/0``.
        data: the unit databag; every value is a string.
    """

    relation_id: int
    unit_name: str
    data: Mapping[str, str] = field(repr=False)


@dataclass(frozen=True)
class InputProblem:
    """Bad relation input, kept to tell the operator what is wrong.

    Never holds a value from the databag, only where it came from and what is wrong with it.

    Attributes:
        source: the remote unit name that published the data (the application name for a
            conflict or a wait).
        reason: a short description, for example ``max_runner is not an integer``.
        blocked: only the configurator's operator can settle it (a conflict).
        waiting: not bad data but a normal step of the configurator (it has no image yet);
            ``reason`` is then the whole status fragment.
    """

    source: str
    reason: str
    blocked: bool = False
    waiting: bool = False


@dataclass(frozen=True)
class Held:
    """Names of GARM objects a configurator with bad input described: left exactly as they are.

    Attributes:
        credentials: credential names (``app-<id>-<installation>``).
        entities: keys of organisations and repositories (:class:`EntityKey`).
        scalesets: logical scale set names.
        apps: the configurator applications themselves: every scale set on one of their
            providers is theirs, whatever it is called now.
    """

    credentials: frozenset[str] = frozenset()
    entities: frozenset[EntityKey] = frozenset()
    scalesets: frozenset[str] = frozenset()
    apps: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ConfiguratorInputs:
    """Everything parsed from the garm-configurator unit databags in one pass.

    Attributes:
        held: what configurators with bad input described, to be left as it is.
        identity_unknown: some configurator with bad input cannot be told what it described
            (its scale set name is unreadable), so nothing may be deleted this pass.
    """

    providers: tuple[ProviderConfig, ...] = ()
    credentials: tuple[CredentialSpec, ...] = ()
    entities: tuple[EntitySpec, ...] = ()
    scalesets: tuple[ScalesetSpec, ...] = ()
    problems: tuple[InputProblem, ...] = ()
    held: Held = Held()
    identity_unknown: bool = False
    endpoints: tuple[EndpointSpec, ...] = ()


def credential_name(
    app_id: int, installation_id: int, endpoint: str = DEFAULT_GITHUB_ENDPOINT
) -> str:
    """Return the GARM credential name the charm uses for one GitHub App installation.

    A GitHub Enterprise Server numbers its Apps on its own, so its App 1 is not github.com's:
    the name then ends in the endpoint's. github.com's names stay as they always were.
    """
    if endpoint == DEFAULT_GITHUB_ENDPOINT:
        return f"app-{app_id}-{installation_id}"
    return f"app-{app_id}-{installation_id}-{endpoint}"


def app_of_provider(provider_name: str) -> str:
    """Return the configurator application a provider name was derived from."""
    return provider_name.rpartition("-")[0]


@dataclass(frozen=True)
class Incumbents:
    """Who holds what in GARM: the configurator application whose provider runs it.

    A name held here belongs to that configurator whatever the relation order, so one
    configurator's typo can never take another's running scale set, organisation or App.

    Attributes:
        scalesets: logical scale set name to configurator application.
        entities: the key of an organisation or repository to configurator application.
        credentials: GARM credential name to the configurator application whose App key GARM
            was last sent, with the digest of that key's public key (``key_digest``).
    """

    scalesets: Mapping[str, str] = field(default_factory=dict[str, str])
    entities: Mapping[EntityKey, str] = field(default_factory=dict[EntityKey, str])
    credentials: Mapping[str, tuple[str, str]] = field(default_factory=dict[str, tuple[str, str]])


@dataclass(frozen=True)
class AgentTool:
    """One garm-agent binary the workload image ships, as the image's manifest describes it.

    Attributes:
        os_type: GARM's OS name (``linux``).
        os_arch: GARM's architecture name (``amd64``, ``arm64``), as scale sets name it.
        version: the agent's version, sent to GARM with the binary.
        sha256: hex SHA-256 of the binary; GARM lists the same digest for what it stores.
        path: where the binary lies in the workload container.
    """

    os_type: str
    os_arch: str
    version: str
    sha256: str
    path: str


@dataclass(frozen=True)
class AgentTools:
    """The garm-agent binaries the image ships.

    ``problem`` is set when the manifest is missing or unreadable: then no tool is known, agent
    mode is held where it is (entities keep their current mode) and the status names it; the
    rest of the chain goes on.
    """

    tools: tuple[AgentTool, ...] = ()
    problem: str = ""


class AgentToolUnreadable(Exception):  # noqa: N818 (the shared interface's name)
    """A shipped garm-agent binary could not be read, or does not match its manifest digest."""


# Reads one shipped binary (the charm reads it from the workload container); raises
# ``AgentToolUnreadable``. Called only for a tool GARM does not hold yet.
ToolReader = Callable[[AgentTool], bytes]


@dataclass(frozen=True)
class DesiredState:
    """What one pass wants of GARM, read once from the relations and secrets.

    Attributes:
        providers: providers published by configurator units this pass.
        credentials: GitHub App credentials, one per App installation.
        entities: organisations and repositories.
        scalesets: scale set specs with ``template_id=0`` (the charmed template's id is known
            only once that template exists in GARM).
        debug_ssh: usable tmate servers, sorted by ``(host, port)``.
        configurator_relation_count: number of garm-configurator relations.
        unpublished_relation_ids: configurator relations none of whose units set a contract key;
            nothing can be known of what they described, so nothing is deleted meanwhile.
        unpublished_apps: the application names of those relations, for the status.
        problems: bad input found this pass, for the status message.
        held: what configurators with bad input described: left exactly as it is (no create,
            update or delete) until their data is fixed; the other configurators go on.
        prune: whether GARM objects no configurator describes may be deleted this pass.
            False while a configurator has published nothing, or has bad input that does not
            tell what it described.
        agent_tools: the garm-agent binaries the image ships (for agent mode).
        external_url: the base URL GARM is reached on from outside (ingress, else in-cluster),
            for its controller URLs; empty leaves GARM's controller as it is.
        endpoints: the GitHub Enterprise Server endpoints the credentials are on.
    """

    providers: tuple[ProviderConfig, ...]
    credentials: tuple[CredentialSpec, ...]
    entities: tuple[EntitySpec, ...]
    scalesets: tuple[ScalesetSpec, ...]
    debug_ssh: tuple[DebugSshConnection, ...]
    configurator_relation_count: int
    unpublished_relation_ids: tuple[int, ...]
    problems: tuple[InputProblem, ...]
    held: Held = field(default_factory=Held)
    unpublished_apps: tuple[str, ...] = ()
    prune: bool = True
    agent_tools: AgentTools = field(default_factory=AgentTools)
    external_url: str = ""
    endpoints: tuple[EndpointSpec, ...] = ()

    @property
    def blocked(self) -> bool:
        """Whether some configurator is refused in a way only its operator can settle."""
        return any(p.blocked for p in self.problems)
