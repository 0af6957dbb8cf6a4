"""Desired state of the charm, parsed once from relation data into frozen objects.

Everything the reconcilers work on is defined here. This module knows about Juju (it reads
relation databags and secrets) but nothing about GARM's API.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Protocol, cast

import jsonschema
import ops

logger = logging.getLogger(__name__)

RUNNER_OPTION_DATABAG_KEYS = (
    "dockerhub_mirror",
    "runner_http_proxy",
    "aproxy_exclude_addresses",
    "aproxy_redirect_ports",
    "otel_collector_endpoint",
    "pre_job_script",
)

_PORT_TOKEN = re.compile(r"^\d{1,5}(-\d{1,5})?$")
_MAX_PORT = 65535


@dataclass(frozen=True)
class RunnerConfig:
    """Per-scale-set runner options, re-sanitised from untrusted relation data.

    Every field is a string; an empty string means the option is unset.
    """

    dockerhub_mirror: str = ""
    # A proxy URL may carry credentials and a script may embed tokens: keep both out of repr.
    runner_http_proxy: str = field(default="", repr=False)
    aproxy_exclude_addresses: str = ""
    aproxy_redirect_ports: str = ""
    otel_collector_endpoint: str = ""
    pre_job_script: str = field(default="", repr=False)

    @classmethod
    def from_databag(cls, data: Mapping[str, str]) -> RunnerConfig:
        """Build the options from a configurator unit databag, dropping unsafe values.

        Args:
            data: the remote unit databag.

        Returns:
            The sanitised options.
        """
        raw = {key: (data.get(key) or "").strip() for key in RUNNER_OPTION_DATABAG_KEYS}
        return cls(
            dockerhub_mirror=_strip_newlines(raw["dockerhub_mirror"]),
            runner_http_proxy=_strip_newlines(raw["runner_http_proxy"]),
            aproxy_exclude_addresses=_ipv4_networks(raw["aproxy_exclude_addresses"]),
            aproxy_redirect_ports=_port_ranges(raw["aproxy_redirect_ports"]),
            otel_collector_endpoint=_strip_newlines(raw["otel_collector_endpoint"]),
            pre_job_script=raw["pre_job_script"],
        )

    def has_config(self) -> bool:
        """Tell whether any option is set, which means the scale set needs its own template."""
        return any(getattr(self, key) for key in RUNNER_OPTION_DATABAG_KEYS)


def _strip_newlines(value: str) -> str:
    return value.replace("\r", "").replace("\n", "")


def _port_ranges(value: str) -> str:
    kept: list[str] = []
    for token in (t.strip() for t in value.split(",")):
        if not _PORT_TOKEN.match(token):
            continue
        first, _, last = token.partition("-")
        low, high = int(first), int(last or first)
        if 1 <= low <= high <= _MAX_PORT:
            kept.append(token)
    return ",".join(kept)


def _ipv4_networks(value: str) -> str:
    kept: list[str] = []
    for token in (t.strip() for t in value.split(",")):
        try:
            network = ipaddress.ip_network(token, strict=False)
        except ValueError:
            continue
        if network.version == 4:
            kept.append(token)
    return ",".join(kept)


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
class CredentialSpec:
    """A GitHub App credential the charm keeps in GARM."""

    name: str
    endpoint: str
    app_id: int
    installation_id: int
    private_key: str = field(repr=False)
    description: str
    source: str = ""  # the configurator application that publishes it, for the status


@dataclass(frozen=True)
class EntitySpec:
    """An organisation or repository registered in GARM with one credential."""

    entity_type: str  # "organization" or "repository"
    entity_name: str  # org name, or "owner/repo"
    credentials_name: str
    source: str = ""  # the configurator application that publishes it, for the status


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


@dataclass(frozen=True)
class DebugSshConnection:
    """A tmate server published over the debug-ssh relation."""

    host: str
    port: int
    rsa_fingerprint: str
    ed25519_fingerprint: str


# --- Relation contract (spec section 7) --------------------------------------------------------

CONFIGURATOR_RELATION_NAME = "garm-configurator"
DEBUG_SSH_RELATION_NAME = "debug-ssh"
DEFAULT_GITHUB_ENDPOINT = "github.com"
MANAGED_CREDENTIAL_DESCRIPTION = "Managed by garm"
SCHEMA_PATH = Path(__file__).parent / "interfaces" / "garm_configurator_v0.schema.json"

SCALESET_DATABAG_KEYS = (
    "name",
    "provider_name",
    "image_id",
    "flavor",
    "os_arch",
    "min_idle_runner",
    "max_runner",
    "labels",
    "runner_group",
    "pre_install_scripts",
    "org",
    "repo",
)
PROVIDER_DATABAG_KEYS = (
    "openstack_auth_url",
    "openstack_username",
    "openstack_password_secret_uri",
    "openstack_password",
    "openstack_project_name",
    "openstack_user_domain_name",
    "openstack_project_domain_name",
    "openstack_region_name",
    "openstack_network",
)
GITHUB_DATABAG_KEYS = ("github_app_id", "github_installation_id", "github_private_key_secret_uri")
CONTRACT_KEYS = (
    SCALESET_DATABAG_KEYS
    + RUNNER_OPTION_DATABAG_KEYS
    + PROVIDER_DATABAG_KEYS
    + GITHUB_DATABAG_KEYS
)
DEBUG_SSH_KEYS = ("host", "port", "rsa_fingerprint", "ed25519_fingerprint")

PROVIDER_NAME_PATTERN = re.compile(r"[a-z][a-z0-9-]*-[0-9]+")
# Ids and counts must fit GARM's 64-bit integers; only ASCII digits (str.isdigit accepts more).
_DECIMAL = re.compile(r"[0-9]{1,18}")

# (databag key, name used in the warning) for the fields a scale set cannot do without.
_SCALESET_REQUIRED = (
    ("provider_name", "provider_name"),
    ("image_id", "image"),
    ("flavor", "flavor"),
    ("os_arch", "os_arch"),
    ("max_runner", "max_runner"),
)

SecretReader = Callable[[str], str | None]


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
        source: the remote unit name that published the data.
        reason: a short description, for example ``max_runner is not an integer``.
    """

    source: str
    reason: str
    blocked: bool = False


@dataclass(frozen=True)
class Held:
    """Names of GARM objects a configurator with bad input described: left exactly as they are.

    Attributes:
        credentials: credential names (``app-<id>-<installation>``).
        entities: ``(type, name)`` of organisations and repositories.
        scalesets: logical scale set names.
        apps: the configurator applications themselves: every scale set on one of their
            providers is theirs, whatever it is called now.
    """

    credentials: frozenset[str] = frozenset()
    entities: frozenset[tuple[str, str]] = frozenset()
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


def credential_name(app_id: int, installation_id: int) -> str:
    """Return the GARM credential name the charm uses for one GitHub App installation."""
    return f"app-{app_id}-{installation_id}"


def app_of_provider(provider_name: str) -> str:
    """Return the configurator application a provider name was derived from."""
    return provider_name.rpartition("-")[0]


def provider_name_for_unit(unit_name: str) -> str | None:
    """Derive the provider name from a configurator unit name.

    Args:
        unit_name: Juju unit name such as ``garm-configurator/0``.

    Returns:
        The name with ``/`` replaced by ``-``, or None when the result is not a safe provider
        name (it ends up in file paths inside the workload).
    """
    name = unit_name.replace("/", "-")
    return name if PROVIDER_NAME_PATTERN.fullmatch(name) else None


def has_contract_data(data: Mapping[str, str]) -> bool:
    """Tell whether a databag sets any key of the relation contract (spec 7.1)."""
    return any(data.get(key) for key in CONTRACT_KEYS)


def unpublished_relation_ids(
    relation_ids: Sequence[int], units: Sequence[UnitData]
) -> tuple[int, ...]:
    """Return the relations none of whose remote units set a contract key.

    Reconciling such a relation would read "nothing desired" and delete live objects, so the
    caller skips the GARM chain while any of these exist. A relation without units counts as
    unpublished.

    Args:
        relation_ids: ids of all garm-configurator relations.
        units: the remote unit databags of those relations.

    Returns:
        The unpublished relation ids, sorted.
    """
    published = {unit.relation_id for unit in units if has_contract_data(unit.data)}
    return tuple(sorted(rid for rid in set(relation_ids) if rid not in published))


class _SchemaError(Protocol):
    @property
    def absolute_path(self) -> Sequence[str | int]: ...


class _SchemaValidator(Protocol):
    def iter_errors(self, instance: object) -> Iterator[_SchemaError]: ...


@cache
def load_schema() -> Mapping[str, object]:
    """Return the garm_configurator_v0 JSON Schema shipped in ``src/interfaces``."""
    return cast(Mapping[str, object], json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


@cache
def _validator() -> _SchemaValidator:
    return cast(_SchemaValidator, jsonschema.Draft202012Validator(load_schema()))


def schema_failures(data: Mapping[str, str]) -> tuple[str, ...]:
    """Validate one unit databag against the relation schema.

    Args:
        data: the unit databag.

    Returns:
        The sorted names of the keys that fail the schema (``<databag>`` for a failure of the
        whole mapping); empty when the databag is valid. Error messages are not returned because
        they quote the offending values.
    """
    keys = {
        str(error.absolute_path[0]) if error.absolute_path else "<databag>"
        for error in _validator().iter_errors(dict(data))
    }
    return tuple(sorted(keys))


def parse_configurator_units(
    units: Sequence[UnitData], read_secret: SecretReader
) -> ConfiguratorInputs:
    """Parse the garm-configurator unit databags into desired state (spec 7.3-7.6).

    A unit whose databag fails the JSON schema contributes nothing this pass: no provider,
    credential, entity or scale set. Other bad input (missing fields, bad numbers, unreadable
    secrets) skips only what depends on it. Every skip is logged as a warning and reported in
    ``problems``; no value is ever logged. Any problem turns pruning off for the pass
    (``CharmState.prune``), so what a skipped unit described before is held, not deleted; its
    provider stays because the provider record keeps earlier entries (the caller's job).

    Scale set specs carry ``template_id=0``; the caller fills in the charmed template id once
    that template exists in GARM.

    Args:
        units: remote unit databags, sorted by relation id then unit name.
        read_secret: returns the ``value`` of a configurator secret by URI, or None when it
            cannot be read (the reader logs why).

    Returns:
        The parsed providers, credentials, entities, scale set specs and problems.
    """
    parser = _ConfiguratorParser(read_secret)
    for unit in units:
        parser.add_unit(unit)
    return parser.result()


def _text(data: Mapping[str, str], key: str) -> str:
    return (data.get(key) or "").strip()


def _entity_target(data: Mapping[str, str]) -> tuple[str, str] | None:
    if org := _text(data, "org"):
        return ("organization", org)
    if repo := _text(data, "repo"):
        return ("repository", repo)
    return None


def _pre_install_scripts(raw: str) -> tuple[dict[str, str], bool]:
    """Parse the pre-install scripts; the flag tells whether the input was acceptable."""
    if not raw.strip():
        return {}, True
    try:
        parsed: object = json.loads(raw)
    except ValueError:
        return {}, False
    if not isinstance(parsed, dict):
        return {}, False
    items = cast(dict[object, object], parsed).items()
    scripts = {k: v for k, v in items if isinstance(k, str) and isinstance(v, str)}
    return scripts, len(scripts) == len(items)


@dataclass
class _Candidate:
    spec: ScalesetSpec
    from_provider_unit: bool


@dataclass
class _Contribution:
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
    scalesets: dict[str, _Candidate] = field(default_factory=dict[str, _Candidate])
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
        name = _single_line(data, "name")
        if name:
            self.names.add(name)
        elif has_contract_data(data):
            self.unnamed = True
        ids = _lenient_ids(data)
        target = (
            _entity_target(data)
            if _single_line(data, "org") or _single_line(data, "repo")
            else None
        )
        if ids is not None:
            self.credential_names.add(credential_name(*ids))
        if target is not None:
            self.entity_credentials.setdefault(target, credential_name(*ids) if ids else "")


class _ConfiguratorParser:
    """Accumulates the parse of one pass per configurator, then merges the configurators."""

    def __init__(self, read_secret: SecretReader) -> None:
        self._read_secret = read_secret
        self._secret_cache: dict[str, str | None] = {}
        self._contributions: dict[int, _Contribution] = {}

    def result(self) -> ConfiguratorInputs:
        merged = _Merge()
        for relation_id in sorted(self._contributions):
            merged.add(self._contributions[relation_id])
        return merged.result()

    def add_unit(self, unit: UnitData) -> None:
        contribution = self._contributions.setdefault(
            unit.relation_id, _Contribution(app=unit.unit_name.partition("/")[0])
        )
        contribution.identify(unit)
        failed = schema_failures(unit.data)
        if failed:
            # Nothing of the unit is used: half-parsing data that breaks the contract could
            # publish a spec built from the wrong fields.
            logger.warning(
                "ignoring garm-configurator data of %s this pass; keys failing the contract: %s",
                unit.unit_name,
                ", ".join(failed),
            )
            self._problem(contribution, unit, "invalid keys: " + ", ".join(failed))
            return
        self._add_provider(contribution, unit)
        ids = self._github_ids(contribution, unit)
        if ids is not None:
            self._add_credential(contribution, unit, ids)
            self._add_entity(contribution, unit, ids)
        self._add_scaleset(contribution, unit)

    @staticmethod
    def _problem(contribution: _Contribution, unit: UnitData, reason: str) -> None:
        contribution.problems.append(InputProblem(source=unit.unit_name, reason=reason))

    def _secret(self, uri: str) -> str | None:
        if uri not in self._secret_cache:
            self._secret_cache[uri] = self._read_secret(uri)
        return self._secret_cache[uri]

    def _add_provider(self, c: _Contribution, unit: UnitData) -> None:
        data = unit.data
        if not _text(data, "openstack_auth_url"):
            return
        unit_name = provider_name_for_unit(unit.unit_name)
        if unit_name is None:
            logger.warning(
                "not registering a provider for %r: the unit name is not a safe provider name",
                unit.unit_name,
            )
            self._problem(c, unit, "unit name is not a valid provider name")
            return
        # Legacy configurators publish the password in plaintext; it wins when present.
        password = data.get("openstack_password") or ""
        if not password.strip():
            uri = _text(data, "openstack_password_secret_uri")
            password = (self._secret(uri) or "") if uri else ""
        provider = ProviderConfig(
            unit_name=unit_name,
            network=_text(data, "openstack_network"),
            auth_url=_text(data, "openstack_auth_url"),
            username=_text(data, "openstack_username"),
            password=password,
            project_name=_text(data, "openstack_project_name"),
            user_domain_name=_text(data, "openstack_user_domain_name"),
            project_domain_name=_text(data, "openstack_project_domain_name"),
            region_name=_text(data, "openstack_region_name"),
        )
        missing = [key for key, value in provider.as_dict().items() if not value.strip()]
        if missing:
            logger.warning(
                "no provider from %s this pass; missing or unreadable: %s",
                unit.unit_name,
                ", ".join(missing),
            )
            self._problem(c, unit, "provider fields missing: " + ", ".join(missing))
            return
        c.providers.append(provider)

    def _github_ids(self, c: _Contribution, unit: UnitData) -> tuple[int, int] | None:
        app_raw = _text(unit.data, "github_app_id")
        installation_raw = _text(unit.data, "github_installation_id")
        missing = [key for key in GITHUB_DATABAG_KEYS if not _text(unit.data, key)]
        if missing and len(missing) < len(GITHUB_DATABAG_KEYS):
            # Half an App would silently drop the credential and let it be deleted.
            logger.warning(
                "skipping the GitHub credential and entity of %s: missing %s",
                unit.unit_name,
                ", ".join(missing),
            )
            self._problem(c, unit, "GitHub App fields incomplete: missing " + ", ".join(missing))
            return None
        if missing:
            return None
        if not (_DECIMAL.fullmatch(app_raw) and _DECIMAL.fullmatch(installation_raw)):
            # The schema keeps these single-line, so quoting them cannot forge log lines.
            logger.warning(
                "skipping the GitHub credential and entity of %s: github_app_id %r and "
                "github_installation_id %r must be non-negative integers",
                unit.unit_name,
                app_raw,
                installation_raw,
            )
            self._problem(c, unit, "github_app_id or github_installation_id is not an integer")
            return None
        return int(app_raw), int(installation_raw)

    def _add_credential(self, c: _Contribution, unit: UnitData, ids: tuple[int, int]) -> None:
        uri = _text(unit.data, "github_private_key_secret_uri")
        if not uri or ids in c.credentials:
            return
        name = credential_name(*ids)
        private_key = self._secret(uri)
        if private_key is None:
            logger.warning(
                "skipping credential %s from %s: private key secret %s is unreadable",
                name,
                unit.unit_name,
                uri,
            )
            self._problem(c, unit, "GitHub private key secret is unreadable")
            return
        if not private_key.strip():
            logger.warning(
                "skipping credential %s from %s: the private key of app id %d is empty",
                name,
                unit.unit_name,
                ids[0],
            )
            self._problem(c, unit, "GitHub private key is empty")
            return
        key_problem = pkcs1_key_problem(private_key)
        if key_problem:
            logger.warning(
                "skipping credential %s from %s: %s (github_private_key_secret_uri)",
                name,
                unit.unit_name,
                key_problem,
            )
            self._problem(c, unit, key_problem)
            return
        c.credentials[ids] = CredentialSpec(
            name=name,
            endpoint=DEFAULT_GITHUB_ENDPOINT,
            app_id=ids[0],
            installation_id=ids[1],
            private_key=private_key,
            description=MANAGED_CREDENTIAL_DESCRIPTION,
            source=c.app,
        )

    def _add_entity(self, c: _Contribution, unit: UnitData, ids: tuple[int, int]) -> None:
        target = _entity_target(unit.data)
        if target is None:
            return
        wanted = credential_name(*ids)
        existing = c.entities.get(target)
        if existing is None:
            c.entities[target] = EntitySpec(target[0], target[1], wanted, source=c.app)
        elif existing.credentials_name != wanted:
            logger.warning(
                "%s %s is already bound to credential %s; ignoring credential %s from %s",
                target[0],
                target[1],
                existing.credentials_name,
                wanted,
                unit.unit_name,
            )

    def _add_scaleset(self, c: _Contribution, unit: UnitData) -> None:
        spec = self._scaleset_spec(c, unit)
        if spec is None:
            return
        from_provider_unit = bool(_text(unit.data, "openstack_auth_url"))
        current = c.scalesets.get(spec.name)
        # Every unit of a configurator publishes the same logical scale set; the unit that
        # published the provider wins because only its provider is registered in GARM.
        if current is None or (from_provider_unit and not current.from_provider_unit):
            c.scalesets[spec.name] = _Candidate(spec, from_provider_unit)

    def _scaleset_spec(self, c: _Contribution, unit: UnitData) -> ScalesetSpec | None:
        data = unit.data
        name = _text(data, "name")
        if not name:
            return None
        target = _entity_target(data)
        if target is None:
            logger.warning(
                "skipping scale set %s from %s: neither org nor repo is set", name, unit.unit_name
            )
            self._problem(c, unit, "neither org nor repo is set")
            return None
        missing = [label for key, label in _SCALESET_REQUIRED if not _text(data, key)]
        if missing:
            logger.warning(
                "skipping scale set %s from %s: missing %s",
                name,
                unit.unit_name,
                ", ".join(missing),
            )
            self._problem(c, unit, "scale set fields missing: " + ", ".join(missing))
            return None
        counts = self._counts(c, unit, name)
        if counts is None:
            return None
        return ScalesetSpec(
            name=name,
            provider_name=_text(data, "provider_name"),
            image=_text(data, "image_id"),
            flavor=_text(data, "flavor"),
            os_arch=_text(data, "os_arch"),
            min_idle_runners=counts[0],
            max_runners=counts[1],
            entity_type=target[0],
            entity_name=target[1],
            labels=tuple(
                label for label in (t.strip() for t in _text(data, "labels").split(",")) if label
            ),
            runner_group=_text(data, "runner_group"),
            pre_install_scripts=self._scripts(c, unit, name),
            runner_config=RunnerConfig.from_databag(data),
            source=c.app,
        )

    def _counts(self, c: _Contribution, unit: UnitData, name: str) -> tuple[int, int] | None:
        raw = {
            "min_idle_runner": _text(unit.data, "min_idle_runner") or "0",
            "max_runner": _text(unit.data, "max_runner"),
        }
        bad = [key for key, value in raw.items() if not _DECIMAL.fullmatch(value)]
        if bad:
            logger.warning(
                "skipping scale set %s from %s: %s must be a non-negative integer",
                name,
                unit.unit_name,
                " and ".join(bad),
            )
            self._problem(c, unit, " and ".join(bad) + " is not an integer")
            return None
        min_idle, max_runners = int(raw["min_idle_runner"]), int(raw["max_runner"])
        # GARM refuses both, and only after registering the scale set with GitHub.
        reason = ""
        if max_runners == 0:
            reason = "max_runner must be at least 1"
        elif min_idle > max_runners:
            reason = "min_idle_runner is above max_runner"
        if reason:
            logger.warning("skipping scale set %s from %s: %s", name, unit.unit_name, reason)
            self._problem(c, unit, reason)
            return None
        return min_idle, max_runners

    def _scripts(self, c: _Contribution, unit: UnitData, name: str) -> dict[str, str]:
        scripts, acceptable = _pre_install_scripts(unit.data.get("pre_install_scripts") or "")
        if not acceptable:
            logger.warning(
                "scale set %s from %s: pre_install_scripts is not a JSON object of strings; "
                "using %d of its scripts",
                name,
                unit.unit_name,
                len(scripts),
            )
            self._problem(c, unit, "pre_install_scripts is not a JSON object of strings")
        return scripts


class _Merge:
    """Merges the configurators in relation-id order: the first to claim a name owns it.

    A configurator with bad input (or one that claims what an earlier one owns) contributes no
    credential, entity or scale set this pass; what it described is held as it is, except
    what belongs to another configurator.
    """

    def __init__(self) -> None:
        self.accepted: list[_Contribution] = []
        self.refused: list[_Contribution] = []
        self.problems: list[InputProblem] = []
        self.providers: list[ProviderConfig] = []
        self.scaleset_owner: dict[str, str] = {}
        self.entity_owner: dict[tuple[str, str], tuple[str, str]] = {}

    def add(self, c: _Contribution) -> None:
        self.providers += c.providers
        for problem in self._conflicts(c):
            c.problems.append(problem)
        self.problems += c.problems
        (self.refused if c.problems else self.accepted).append(c)

    def _conflicts(self, c: _Contribution) -> list[InputProblem]:
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


def _single_line(data: Mapping[str, str], key: str) -> str:
    """The stripped value of ``key`` when it is one printable line, else ``""``."""
    value = _text(data, key)
    return value if value.isprintable() else ""


def _lenient_ids(data: Mapping[str, str]) -> tuple[int, int] | None:
    app_raw = _text(data, "github_app_id")
    installation_raw = _text(data, "github_installation_id")
    if _DECIMAL.fullmatch(app_raw) and _DECIMAL.fullmatch(installation_raw):
        return int(app_raw), int(installation_raw)
    return None


PKCS1_HEADER = "-----BEGIN RSA PRIVATE KEY-----"
PKCS1_FOOTER = "-----END RSA PRIVATE KEY-----"
PKCS8_HEADER = "-----BEGIN PRIVATE KEY-----"


def pkcs1_key_problem(key: str) -> str:
    """Tell what is wrong with a GitHub App key for GARM, without ever quoting it.

    GARM takes only an RSA key in PKCS#1 PEM, the form GitHub hands out: a PKCS#8 key makes it
    fail with a server error, anything else is refused. The charm does not convert keys.

    Args:
        key: the private key text.

    Returns:
        ``""`` when the key is PKCS#1 PEM with a DER sequence inside, else the reason.
    """
    text = key.strip()
    if text.startswith(PKCS8_HEADER):
        return (
            "GitHub private key is PKCS#8 (BEGIN PRIVATE KEY); GARM needs PKCS#1 "
            "(BEGIN RSA PRIVATE KEY), e.g. from openssl rsa -traditional"
        )
    if not (text.startswith(PKCS1_HEADER) and text.endswith(PKCS1_FOOTER)):
        return "GitHub private key is not a PEM RSA private key"
    body = "".join(text[len(PKCS1_HEADER) : -len(PKCS1_FOOTER)].split())
    try:
        der = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return "GitHub private key is not valid PEM"
    # A DER-encoded RSAPrivateKey is a SEQUENCE.
    if len(der) < 64 or der[0] != 0x30:
        return "GitHub private key is not valid PEM"
    return ""


# --- debug-ssh (spec 15.1) -------------------------------------------------------------------


def parse_debug_ssh(units: Sequence[UnitData]) -> tuple[DebugSshConnection, ...]:
    """Parse the tmate servers published over debug-ssh, sorted by ``(host, port)``.

    Incomplete units are skipped as not ready; a value with a line break is rejected as a
    possible injection; a port outside 1..65535 is rejected. Each skip is a warning.

    Args:
        units: remote unit databags of the debug-ssh relations.

    Returns:
        The usable connections.
    """
    return _debug_ssh(units)[0]


def _debug_ssh(
    units: Sequence[UnitData],
) -> tuple[tuple[DebugSshConnection, ...], tuple[InputProblem, ...]]:
    connections: list[DebugSshConnection] = []
    problems: list[InputProblem] = []
    for unit in units:
        values = {key: unit.data.get(key) or "" for key in DEBUG_SSH_KEYS}
        missing = [key for key, value in values.items() if not value.strip()]
        if missing:
            logger.warning(
                "debug-ssh unit %s not ready: %s unset", unit.unit_name, ", ".join(missing)
            )
            continue
        injected = [key for key, value in values.items() if "\n" in value or "\r" in value]
        if injected:
            logger.warning(
                "debug-ssh data of %s rejected: possible injection (line break in %s)",
                unit.unit_name,
                ", ".join(injected),
            )
            problems.append(InputProblem(unit.unit_name, "line break in debug-ssh data"))
            continue
        port = values["port"].strip()
        if not (_DECIMAL.fullmatch(port) and 1 <= int(port) <= _MAX_PORT):
            logger.warning(
                "debug-ssh data of %s rejected: port is not in 1..65535", unit.unit_name
            )
            problems.append(InputProblem(unit.unit_name, "debug-ssh port is not in 1..65535"))
            continue
        connections.append(
            DebugSshConnection(
                host=values["host"].strip(),
                port=int(port),
                rsa_fingerprint=values["rsa_fingerprint"].strip(),
                ed25519_fingerprint=values["ed25519_fingerprint"].strip(),
            )
        )
    connections.sort(key=lambda c: (c.host, c.port))
    return tuple(connections), tuple(problems)


def describe_problems(problems: Sequence[InputProblem]) -> str:
    """Summarise input problems in a short status fragment.

    Args:
        problems: the problems of this pass.

    Returns:
        ``invalid data from <source> (<reason>)``, followed by ``; +N more`` when there are
        others; an empty string when there are none.
    """
    if not problems:
        return ""
    # A configurator refused for a conflict comes first: only its operator can settle it.
    first = min(problems, key=lambda p: not p.blocked)
    if first.blocked:
        text = f"{first.source}: {first.reason}"
    else:
        text = f"invalid data from {first.source} ({first.reason})"
    if len(problems) > 1:
        text += f"; +{len(problems) - 1} more"
    return text


# --- Juju adapter ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CharmState:
    """The desired state read from Juju in one pass.

    Attributes:
        providers: providers published by configurator units this pass (spec 7.3).
        credentials: GitHub App credentials (spec 7.4).
        entities: organisations and repositories (spec 7.5).
        scalesets: scale set specs with ``template_id=0`` (spec 7.6).
        debug_ssh: usable tmate servers, sorted by ``(host, port)`` (spec 15.1).
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
    """

    providers: tuple[ProviderConfig, ...]
    credentials: tuple[CredentialSpec, ...]
    entities: tuple[EntitySpec, ...]
    scalesets: tuple[ScalesetSpec, ...]
    debug_ssh: tuple[DebugSshConnection, ...]
    configurator_relation_count: int
    unpublished_relation_ids: tuple[int, ...]
    problems: tuple[InputProblem, ...]
    held: Held = Held()
    unpublished_apps: tuple[str, ...] = ()
    prune: bool = True

    @property
    def blocked(self) -> bool:
        """Whether some configurator is refused in a way only its operator can settle."""
        return any(p.blocked for p in self.problems)

    @classmethod
    def from_charm(cls, charm: ops.CharmBase) -> CharmState:
        """Read the configurator and debug-ssh relations and their secrets.

        Args:
            charm: the charm whose model is read.

        Returns:
            The parsed state.
        """
        relations = sorted(charm.model.relations[CONFIGURATOR_RELATION_NAME], key=lambda r: r.id)
        units = _relation_units(relations)
        parsed = parse_configurator_units(units, _juju_secret_reader(charm.model))
        debug_relations = sorted(
            charm.model.relations[DEBUG_SSH_RELATION_NAME], key=lambda r: r.id
        )
        connections, debug_problems = _debug_ssh(_relation_units(debug_relations))
        unpublished = unpublished_relation_ids([r.id for r in relations], units)
        return cls(
            providers=parsed.providers,
            credentials=parsed.credentials,
            entities=parsed.entities,
            scalesets=parsed.scalesets,
            debug_ssh=connections,
            configurator_relation_count=len(relations),
            unpublished_relation_ids=unpublished,
            unpublished_apps=tuple(r.app.name for r in relations if r.id in unpublished),
            problems=parsed.problems + debug_problems,
            held=parsed.held,
            prune=not parsed.identity_unknown and not unpublished,
        )


def _relation_units(relations: Sequence[ops.Relation]) -> list[UnitData]:
    """Detach the remote unit databags, in relation id then unit name order."""
    units: list[UnitData] = []
    for relation in relations:
        for unit in sorted(relation.units, key=lambda u: u.name):
            units.append(UnitData(relation.id, unit.name, dict(relation.data[unit])))
    return units


def _juju_secret_reader(model: ops.Model) -> SecretReader:
    def read(uri: str) -> str | None:
        try:
            content = model.get_secret(id=uri).get_content(refresh=True)
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

    return read
