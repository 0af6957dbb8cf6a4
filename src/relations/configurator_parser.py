"""Parsing the garm-configurator unit databags into the desired state of one pass.

Owns the reading of one unit's databag: provider, GitHub App credential, entity and scale set,
each checked and each skip logged and reported as an ``InputProblem`` (never with a value).
The per-configurator results then go through ``configurator_merge``. Must not import ops or
the GARM client: the secrets come through a ``SecretReader`` the Juju adapter supplies.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence

from relations.configurator_contract import (
    DECIMAL,
    GITHUB_DATABAG_KEYS,
    entity_target,
    provider_name_for_unit,
    schema_failures,
    text,
)
from relations.configurator_merge import Candidate, Contribution, Merge
from vocabulary.desired_state import (
    DEFAULT_GITHUB_ENDPOINT,
    KEY_UNREADABLE,
    MANAGED_CREDENTIAL_DESCRIPTION,
    AppKey,
    ConfiguratorInputs,
    CredentialSpec,
    EndpointSpec,
    EntitySpec,
    Incumbents,
    InputProblem,
    KeyReader,
    ProviderConfig,
    ScalesetSpec,
    SecretReader,
    UnitData,
    credential_name,
    entity_key,
)
from vocabulary.github_endpoint import BASE_URL_FIELD, CA_BUNDLE_FIELD, read_endpoint
from vocabulary.github_key import app_key_problem
from vocabulary.runner_options import RunnerConfig, pre_install_scripts

logger = logging.getLogger(__name__)

# What every secret reads as in a parse that reads none (``read_secret`` None).
UNREAD_SECRET = "(not read)"  # noqa: S105 - a placeholder, not a secret
# Every App key of such a parse: one placeholder, so configurators sharing an App agree.
UNREAD_KEY = AppKey(UNREAD_SECRET, UNREAD_SECRET, checked=True)

# (databag key, name used in the warning) for the fields a scale set cannot do without.
_SCALESET_REQUIRED = (
    ("provider_name", "provider_name"),
    ("image_id", "image"),
    ("flavor", "flavor"),
    ("os_arch", "os_arch"),
    ("max_runner", "max_runner"),
)


def parse_configurator_units(
    units: Sequence[UnitData],
    read_secret: SecretReader | None,
    incumbents: Incumbents | None = None,
    read_key: KeyReader | None = None,
) -> ConfiguratorInputs:
    """Parse the garm-configurator unit databags into this pass's desired state.

    A unit whose databag fails the JSON schema contributes nothing this pass: no provider,
    credential, entity or scale set. Other bad input (missing fields, bad numbers, unreadable
    secrets) skips only what depends on it. Every skip is logged as a warning and reported in
    ``problems``; no value is ever logged. What a configurator with a problem described is
    held, not deleted (``ConfiguratorInputs.held``); its provider stays because the provider
    record keeps earlier entries (the caller's job).

    Scale set specs carry ``template_id=0``; the caller fills in the charmed template id once
    that template exists in GARM.

    Args:
        units: remote unit databags, sorted by relation id then unit name.
        read_secret: returns the ``value`` of a configurator secret by URI, or None when it
            cannot be read (the reader logs why). None reads no secret, for a caller that needs
            only names and scale sets: every secret reads as ``UNREAD_SECRET``, unchecked
            (two configurators sharing an App then read as holding the same key).
        incumbents: who holds which name in GARM; they keep it whatever the relation order.
        read_key: returns a GitHub App key by secret URI (``AppKey``: one the charm checked
            in an earlier pass may not be read now), or None when it cannot be read; by
            default the key is read with ``read_secret``.

    Returns:
        The parsed providers, credentials, entities, scale set specs and problems.
    """
    parser = _ConfiguratorParser(read_secret, read_key)
    for unit in units:
        parser.add_unit(unit)
    return parser.result(incumbents or Incumbents())


class _ConfiguratorParser:
    """Accumulates the parse of one pass per configurator, then merges the configurators."""

    def __init__(self, read_secret: SecretReader | None, read_key: KeyReader | None) -> None:
        self._read_secret = read_secret
        self._read_key = read_key
        self._secret_cache: dict[str, str | None] = {}
        self._contributions: dict[int, Contribution] = {}

    def result(self, incumbents: Incumbents) -> ConfiguratorInputs:
        merged = Merge()
        ordered = [self._contributions[relation_id] for relation_id in sorted(self._contributions)]
        merged.seat_incumbents(ordered, incumbents)
        for contribution in ordered:
            merged.add(contribution)
        return merged.result()

    def add_unit(self, unit: UnitData) -> None:
        contribution = self._contributions.setdefault(
            unit.relation_id, Contribution(app=unit.unit_name.partition("/")[0])
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
            _problem(contribution, unit, "invalid keys: " + ", ".join(failed))
            return
        self._add_provider(contribution, unit)
        endpoint = _endpoint(contribution, unit)
        if endpoint is None:
            return
        ids = self._github_ids(contribution, unit)
        if ids is not None:
            self._add_credential(contribution, unit, ids, endpoint)
            self._add_entity(contribution, unit, credential_name(*ids, endpoint), endpoint)
        self._add_scaleset(contribution, unit, endpoint)

    def _key(self, uri: str) -> AppKey | None:
        if self._read_key is not None:
            return self._read_key(uri)
        pem = self._secret(uri)
        return None if pem is None else AppKey.of(pem)

    def _secret(self, uri: str) -> str | None:
        if self._read_secret is None:
            return UNREAD_SECRET
        if uri not in self._secret_cache:
            self._secret_cache[uri] = self._read_secret(uri)
        return self._secret_cache[uri]

    def _add_provider(self, c: Contribution, unit: UnitData) -> None:
        data = unit.data
        if not text(data, "openstack_auth_url"):
            return
        unit_name = provider_name_for_unit(unit.unit_name)
        if unit_name is None:
            logger.warning(
                "not registering a provider for %r: the unit name is not a safe provider name",
                unit.unit_name,
            )
            _problem(c, unit, "unit name is not a valid provider name")
            return
        # Legacy configurators publish the password in plaintext; it wins when present.
        password = data.get("openstack_password") or ""
        if not password.strip():
            uri = text(data, "openstack_password_secret_uri")
            password = (self._secret(uri) or "") if uri else ""
        provider = ProviderConfig(
            unit_name=unit_name,
            network=text(data, "openstack_network"),
            auth_url=text(data, "openstack_auth_url"),
            username=text(data, "openstack_username"),
            password=password,
            project_name=text(data, "openstack_project_name"),
            user_domain_name=text(data, "openstack_user_domain_name"),
            project_domain_name=text(data, "openstack_project_domain_name"),
            region_name=text(data, "openstack_region_name"),
        )
        missing = [key for key, value in provider.as_dict().items() if not value.strip()]
        if missing:
            logger.warning(
                "no provider from %s this pass; missing or unreadable: %s",
                unit.unit_name,
                ", ".join(missing),
            )
            _problem(c, unit, "provider fields missing: " + ", ".join(missing))
            return
        c.providers.append(provider)

    def _github_ids(self, c: Contribution, unit: UnitData) -> tuple[int, int] | None:
        app_raw = text(unit.data, "github_app_id")
        installation_raw = text(unit.data, "github_installation_id")
        missing = [key for key in GITHUB_DATABAG_KEYS if not text(unit.data, key)]
        if missing and len(missing) < len(GITHUB_DATABAG_KEYS):
            # Half an App would silently drop the credential and let it be deleted.
            logger.warning(
                "skipping the GitHub credential and entity of %s: missing %s",
                unit.unit_name,
                ", ".join(missing),
            )
            _problem(c, unit, "GitHub App fields incomplete: missing " + ", ".join(missing))
            return None
        if missing:
            return None
        if not (DECIMAL.fullmatch(app_raw) and DECIMAL.fullmatch(installation_raw)):
            # The schema keeps these single-line, so quoting them cannot forge log lines.
            logger.warning(
                "skipping the GitHub credential and entity of %s: github_app_id %r and "
                "github_installation_id %r must be non-negative integers",
                unit.unit_name,
                app_raw,
                installation_raw,
            )
            _problem(c, unit, "github_app_id or github_installation_id is not an integer")
            return None
        return int(app_raw), int(installation_raw)

    def _add_credential(
        self, c: Contribution, unit: UnitData, ids: tuple[int, int], endpoint: str
    ) -> None:
        uri = text(unit.data, "github_private_key_secret_uri")
        if not uri or ids in c.credentials:
            return
        name = credential_name(*ids, endpoint)
        if self._read_secret is None:
            c.credentials[ids] = _credential(c, ids, UNREAD_KEY, endpoint)
            return
        key = self._key(uri)
        if key is not None and key.checked:
            c.credentials[ids] = _credential(c, ids, key, endpoint)
            return
        pem = key.pem() if key is not None else None
        problem = KEY_UNREADABLE if pem is None else app_key_problem(pem)
        if key is None or problem:
            # Never the key itself: its URI and what is wrong with it.
            logger.warning(
                "skipping credential %s (app id %d) from %s: %s (github_private_key_secret_uri"
                " %s)",
                name,
                ids[0],
                unit.unit_name,
                problem,
                uri,
            )
            _problem(c, unit, problem)
            return
        c.credentials[ids] = _credential(c, ids, dataclasses.replace(key, checked=True), endpoint)

    def _add_entity(self, c: Contribution, unit: UnitData, wanted: str, endpoint: str) -> None:
        target = entity_target(unit.data)
        if target is None:
            return
        existing = c.entities.get(entity_key(*target, endpoint))
        if existing is None:
            spec = EntitySpec(target[0], target[1], wanted, source=c.app, endpoint=endpoint)
            c.entities[spec.key] = spec
        elif existing.credentials_name != wanted:
            logger.warning(
                "%s %s is already bound to credential %s; ignoring credential %s from %s",
                target[0],
                target[1],
                existing.credentials_name,
                wanted,
                unit.unit_name,
            )

    def _add_scaleset(self, c: Contribution, unit: UnitData, endpoint: str) -> None:
        spec = _scaleset_spec(c, unit, endpoint)
        if spec is None:
            return
        from_provider_unit = bool(text(unit.data, "openstack_auth_url"))
        current = c.scalesets.get(spec.name)
        # Every unit of a configurator publishes the same logical scale set; the unit that
        # published the provider wins because only its provider is registered in GARM.
        if current is None or (from_provider_unit and not current.from_provider_unit):
            c.scalesets[spec.name] = Candidate(spec, from_provider_unit)


def _credential(
    c: Contribution, ids: tuple[int, int], key: AppKey, endpoint: str
) -> CredentialSpec:
    return CredentialSpec(
        name=credential_name(*ids, endpoint),
        endpoint=endpoint,
        app_id=ids[0],
        installation_id=ids[1],
        key=key,
        description=MANAGED_CREDENTIAL_DESCRIPTION,
        source=c.app,
    )


def _endpoint(c: Contribution, unit: UnitData) -> str | None:
    """The GARM endpoint of the unit's entity (its server joins ``c``); None when refused."""
    base_url, bundle = text(unit.data, BASE_URL_FIELD), text(unit.data, CA_BUNDLE_FIELD)
    name, reason = read_endpoint(base_url, bundle)
    reason = reason or c.endpoint_disagreement(name, bundle)
    if reason:
        logger.warning("ignoring the GitHub data of %s: %s", unit.unit_name, reason)
        _problem(c, unit, reason)
        return None
    if name != DEFAULT_GITHUB_ENDPOINT:
        c.endpoints.setdefault(name, EndpointSpec(name, base_url, bundle, source=c.app))
    return name


def _scaleset_spec(c: Contribution, unit: UnitData, endpoint: str) -> ScalesetSpec | None:
    data = unit.data
    name = text(data, "name")
    if not name:
        return None
    target = entity_target(data)
    if target is None:
        logger.warning(
            "skipping scale set %s from %s: neither org nor repo is set", name, unit.unit_name
        )
        _problem(c, unit, "neither org nor repo is set")
        return None
    missing = [label for key, label in _SCALESET_REQUIRED if not text(data, key)]
    if missing == ["image"] and _first_phase(data):
        _wait_for_image(c, name)
        return None
    if missing:
        logger.warning(
            "skipping scale set %s from %s: missing %s",
            name,
            unit.unit_name,
            ", ".join(missing),
        )
        _problem(c, unit, "scale set fields missing: " + ", ".join(missing))
        return None
    counts = _counts(c, unit, name)
    if counts is None:
        return None
    return ScalesetSpec(
        name=name,
        provider_name=text(data, "provider_name"),
        image=text(data, "image_id"),
        flavor=text(data, "flavor"),
        os_arch=text(data, "os_arch"),
        min_idle_runners=counts[0],
        max_runners=counts[1],
        entity_type=target[0],
        entity_name=target[1],
        labels=tuple(
            label for label in (t.strip() for t in text(data, "labels").split(",")) if label
        ),
        runner_group=text(data, "runner_group"),
        pre_install_scripts=_scripts(c, unit, name),
        runner_config=_runner_config(c, unit, name),
        source=c.app,
        # The schema admits only "true", "false" or nothing; older configurators send nothing.
        enable_shell=text(data, "enable_shell") == "true",
        endpoint=endpoint,
    )


def _counts(c: Contribution, unit: UnitData, name: str) -> tuple[int, int] | None:
    raw = {
        "min_idle_runner": text(unit.data, "min_idle_runner") or "0",
        "max_runner": text(unit.data, "max_runner"),
    }
    bad = [key for key, value in raw.items() if not DECIMAL.fullmatch(value)]
    if bad:
        logger.warning(
            "skipping scale set %s from %s: %s must be a non-negative integer",
            name,
            unit.unit_name,
            " and ".join(bad),
        )
        _problem(c, unit, " and ".join(bad) + " is not an integer")
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
        _problem(c, unit, reason)
        return None
    return min_idle, max_runners


def _runner_config(c: Contribution, unit: UnitData, name: str) -> RunnerConfig:
    config, problems = RunnerConfig.from_databag(unit.data)
    for reason in problems:
        logger.warning("scale set %s from %s: %s", name, unit.unit_name, reason)
        _problem(c, unit, reason)
    return config


def _scripts(c: Contribution, unit: UnitData, name: str) -> dict[str, str]:
    scripts, acceptable = pre_install_scripts(unit.data.get("pre_install_scripts") or "")
    if not acceptable:
        logger.warning(
            "scale set %s from %s: pre_install_scripts is not a JSON object of strings; "
            "using %d of its scripts",
            name,
            unit.unit_name,
            len(scripts),
        )
        _problem(c, unit, "pre_install_scripts is not a JSON object of strings")
    return scripts


def _first_phase(data: Mapping[str, str]) -> bool:
    """Tell whether a unit publishes what a configurator publishes before it has an image.

    Until its image builder answers, a configurator publishes its scale set without
    ``image_id`` and has no provider and no GitHub App to publish yet.
    """
    return not text(data, "openstack_auth_url") and not any(
        text(data, key) for key in GITHUB_DATABAG_KEYS
    )


def _wait_for_image(contribution: Contribution, name: str) -> None:
    # The configurator's normal start, not bad data: said once per configurator, and held like
    # bad data so that nothing it ran before is touched while it waits.
    problem = InputProblem(
        source=contribution.app,
        reason=f"{name}: waiting for an image from {contribution.app}",
        waiting=True,
    )
    if problem not in contribution.problems:
        logger.info("scale set %s of %s waits for its image", name, contribution.app)
        contribution.problems.append(problem)


def _problem(contribution: Contribution, unit: UnitData, reason: str) -> None:
    contribution.problems.append(InputProblem(source=unit.unit_name, reason=reason))
