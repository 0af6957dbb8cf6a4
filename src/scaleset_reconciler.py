"""Bring GARM's scale sets to the desired set, one label-hash generation at a time.

Each logical scale set lives in GARM under a name that ends with a hash of its labels. Labels
cannot change on a live scale set (GitHub registers them), so a label change creates a new
generation next to the old one; the old one is disabled once the new one is enabled, drains
its runners and is then deleted with its template. Every other field is updated in place.
Scale sets whose name no desired spec claims are swept as orphans.

No state is kept between passes: every pass re-derives generations from GARM's listings, and
every failed write is simply retried on the next pass. A spec that cannot go forward (its
provider or entity is not in GARM yet, GARM refuses it) is reported as a notice and the pass
goes on with the others; only an outage or a rejected token stops the pass. This module knows
nothing about Juju.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import logging
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from desired_state import ScalesetSpec, app_of_provider
from garm_api import (
    CreateScaleSetParams,
    CreateTemplateParams,
    GarmApiError,
    GarmClient,
    GarmConnectionError,
    GarmNotFoundError,
    GarmUnauthorizedError,
    Instance,
    ScaleSet,
    Template,
    UpdateScaleSetParams,
)
from notices import Notice, Severity, refusal
from runner_template import build_template_data, effective_extra_specs

logger = logging.getLogger(__name__)

LABEL_HASH_LENGTH = 8
MAX_SCALESET_NAME_LENGTH = 64
MAX_JOB_RUNTIME = timedelta(days=5)
DRAIN_DEADLINE = MAX_JOB_RUNTIME + timedelta(hours=1)
RUNNER_STATUS_ACTIVE = "active"
JOB_STATUSES_HOLDING_RUNNER = frozenset({"queued", "in_progress"})
DELETABLE_RUNNER_STATUSES = frozenset(
    {"running", "error", "pending_delete", "pending_force_delete"}
)
PENDING_DELETE_STATUSES = frozenset({"pending_delete", "pending_force_delete"})
PENDING_FORCE_DELETE_STATUS = "pending_force_delete"
GARM_BASE_TEMPLATE_NAME = "github_linux"
# The runner group GARM records for a scale set created without one.
DEFAULT_RUNNER_GROUP = "Default"
CUSTOM_TEMPLATE_PREFIX = f"{GARM_BASE_TEMPLATE_NAME}-"

# Room left for the operator's part of the name: the hash and its dash are never truncated.
_NAME_BASE_LIMIT = MAX_SCALESET_NAME_LENGTH - LABEL_HASH_LENGTH - 1
# A truncated base keeps this many characters of the logical name, then "-" and a name hash.
_TRUNCATED_PREFIX_LENGTH = _NAME_BASE_LIMIT - LABEL_HASH_LENGTH - 1


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _name_base(logical: str) -> str:
    """Return the part of a live name before the label hash (at most 55 characters)."""
    if len(logical) <= _NAME_BASE_LIMIT:
        return logical
    # Hashing the whole name keeps long names that share a prefix apart.
    digest = _sha256_hex(logical)[:LABEL_HASH_LENGTH]
    return f"{logical[:_TRUNCATED_PREFIX_LENGTH]}-{digest}"


def target_scaleset_name(logical: str, labels: Sequence[str]) -> str:
    """Return the live GARM name of the generation that carries these labels.

    Args:
        logical: the operator-facing scale set name.
        labels: the runner labels; order is irrelevant, duplicates count.

    Returns:
        ``<base>-<first 8 hex of sha256 of the sorted, comma-joined labels>``, at most 64
        characters.
    """
    digest = _sha256_hex(",".join(sorted(labels)))[:LABEL_HASH_LENGTH]
    return f"{_name_base(logical)}-{digest}"


def family_pattern(logical: str) -> re.Pattern[str]:
    """Return the pattern matching every live generation name of a logical scale set.

    Only hash-suffixed names match; the bare logical name (a pre-hash scale set) does not.
    """
    return re.compile(rf"^{re.escape(_name_base(logical))}-[0-9a-f]{{{LABEL_HASH_LENGTH}}}$")


def custom_template_name(live_name: str) -> str:
    """Return the name of the per-scale-set runner template of a live generation."""
    return f"{CUSTOM_TEMPLATE_PREFIX}{live_name}"


class Handover(enum.Enum):
    """How far the hand-over from a predecessor generation to its replacement got."""

    PENDING = "pending"  # replacement not live yet; the predecessor stays enabled
    FAILED = "failed"  # GARM refused to disable the predecessor
    DONE = "done"  # predecessor disabled; it drains, then gets deleted


@dataclass(frozen=True)
class ScalesetProgress:
    """One predecessor generation that is still on its way out.

    Attributes:
        logical_name: the logical scale set name.
        retiring_name: live name of the predecessor.
        replacement_name: live name of the current generation.
        remaining_runners: runners the predecessor still lists (0 for PENDING and FAILED).
        handover: the hand-over stage.
    """

    logical_name: str
    retiring_name: str
    replacement_name: str
    remaining_runners: int
    handover: Handover = Handover.DONE


@dataclass(frozen=True)
class ReconcileResult:
    """The outcome of a complete pass.

    Attributes:
        progress: predecessor generations still retiring.
        live: scale sets that exist in GARM after the pass.
        notices: specs held back this pass and orphans still draining, for the status.
    """

    progress: list[ScalesetProgress]
    live: list[ScaleSet]
    notices: list[Notice] = field(default_factory=list[Notice])


def dedupe_specs(specs: Iterable[ScalesetSpec], warn: bool = True) -> list[ScalesetSpec]:
    """Keep the first spec of each logical name, in order.

    Args:
        specs: the desired specs.
        warn: log a warning for a later duplicate that differs from the kept spec.

    Returns:
        The specs with later duplicates dropped.
    """
    kept: dict[str, ScalesetSpec] = {}
    for spec in specs:
        first = kept.setdefault(spec.name, spec)
        if warn and first is not spec and first != spec:
            logger.warning(
                "Scaleset %r is described more than once with different settings; a logical "
                "name must identify exactly one scaleset, keeping the first",
                spec.name,
            )
    return list(kept.values())


def _family(logical: str, target: str, names: Iterable[str]) -> list[str]:
    pattern = family_pattern(logical)
    return sorted({name for name in names if pattern.match(name)} | {target})


def _placed_as_specified(live: ScaleSet, spec: ScalesetSpec) -> bool:
    """Tell whether a live scale set of the spec's name has the spec's provider and entity.

    Neither can change on a live scale set, so a live one elsewhere is never updated as if it
    were this spec's.
    """
    provider_ok = live.provider_name is None or live.provider_name == spec.provider_name
    return provider_ok and _same_entity(live, spec)


def _misplaced_notice(live: ScaleSet, spec: ScalesetSpec) -> Notice:
    logger.warning(
        "Scaleset %r lives on provider %r of %s, but %r asks for provider %r and %s %r; "
        "GARM cannot move a scale set, delete it in GARM to have it recreated",
        live.name,
        live.provider_name,
        live.org_name or live.repo_name,
        spec.name,
        spec.provider_name,
        spec.entity_type,
        spec.entity_name,
    )
    return Notice(
        Severity.BLOCKED, spec.name, "lives on another provider or entity; delete it in GARM"
    )


def _same_entity(live: ScaleSet, spec: ScalesetSpec) -> bool:
    # A scale set that moved to another organisation is a new scale set: the old one is an
    # orphan. GARM matches entity names without regard to case, and may name a repository
    # with or without its owner.
    if spec.entity_type == "organization":
        return live.org_name is None or live.org_name.lower() == spec.entity_name.lower()
    if live.repo_name is None:
        return True
    wanted = spec.entity_name.lower()
    return live.repo_name.lower() in (wanted, wanted.rpartition("/")[2])


def _logical_of(live_name: str) -> str:
    """The operator-facing part of a live name: without its label hash when it has one."""
    base, dash, digest = live_name.rpartition("-")
    if dash and len(digest) == LABEL_HASH_LENGTH and all(c in "0123456789abcdef" for c in digest):
        return base
    return live_name


def _as_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _known_time(moment: datetime | None) -> datetime | None:
    """Return the timestamp in UTC, or None when GARM does not know it.

    Go never omits a ``time.Time``: an unset one arrives as year 1 and must read as unknown,
    never as "older than any deadline".
    """
    if moment is None or moment.year <= 1:
        return None
    return _as_utc(moment)


def _sorted_tags(scaleset: ScaleSet) -> list[str]:
    return sorted(tag.name for tag in scaleset.tags or [] if tag.name)


def _b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _create_params(spec: ScalesetSpec, live_name: str) -> CreateScaleSetParams:
    """Build the create body; ``template_id`` is filled in once the template is ensured."""
    extra = effective_extra_specs(spec.pre_install_scripts, spec.runner_config)
    params = CreateScaleSetParams(
        name=live_name,
        provider_name=spec.provider_name,
        image=spec.image,
        flavor=spec.flavor,
        os_type=spec.os_type or "linux",
        os_arch=spec.os_arch,
        max_runners=spec.max_runners,
        min_idle_runners=spec.min_idle_runners,
        enabled=True,
        labels=sorted(spec.labels),
        extra_specs=extra or None,
    )
    # The field's wire name has dashes, so it is set by field name after construction.
    return params.model_copy(update={"github_runner_group": spec.runner_group or None})


def _needs_update(
    observed: ScaleSet, spec: ScalesetSpec, desired_extra: Mapping[str, Any], template_id: int
) -> bool:
    """Tell whether a live scale set differs from its spec, reading omitted fields as zero."""
    observed_extra: Mapping[str, Any] = observed.extra_specs or {}
    return (
        (observed.image or "") != spec.image
        or (observed.flavor or "") != spec.flavor
        or (observed.max_runners or 0) != spec.max_runners
        or (observed.min_idle_runners or 0) != spec.min_idle_runners
        or observed.enabled is not True
        or _runner_group(observed.github_runner_group) != _runner_group(spec.runner_group)
        or observed_extra.get("pre_install_scripts", {})
        != desired_extra.get("pre_install_scripts", {})
        or bool(observed_extra.get("disable_updates"))
        != bool(desired_extra.get("disable_updates"))
        or _template_changes(observed, template_id)
    )


def _template_changes(observed: ScaleSet, template_id: int) -> bool:
    # 0 leaves the template to GARM, which picks its system template itself and refuses 0 as
    # an id: only a named template is ever compared or sent.
    return bool(template_id) and observed.template_id != template_id


def _runner_group(name: str | None) -> str:
    """Return the runner group GARM uses for ``name``: no group at all means GitHub's default."""
    return name or DEFAULT_RUNNER_GROUP


def _update_params(
    observed: ScaleSet, spec: ScalesetSpec, desired_extra: dict[str, Any], template_id: int
) -> UpdateScaleSetParams:
    """Build the update body; explicit empty values clear what ``None`` cannot."""
    extra_specs: dict[str, Any] | None = desired_extra or ({} if observed.extra_specs else None)
    # GARM ignores an empty group on update, so going back to no group means naming "Default";
    # an unchanged group is not sent, which keeps GARM from asking GitHub about it again.
    wanted_group = _runner_group(spec.runner_group)
    group_changed = _runner_group(observed.github_runner_group) != wanted_group
    send_template = _template_changes(observed, template_id)
    return UpdateScaleSetParams(
        enabled=True,
        image=spec.image,
        flavor=spec.flavor,
        max_runners=spec.max_runners,
        min_idle_runners=spec.min_idle_runners,
        runner_group=wanted_group if group_changed else None,
        extra_specs=extra_specs,
        template_id=template_id if send_template else None,
    )


class ScalesetReconciler:
    """Reconcile GARM's scale sets against the desired specs."""

    def __init__(self, client: GarmClient, clock: Callable[[], datetime] = _utc_now) -> None:
        """Create the reconciler.

        Args:
            client: an authenticated GARM client.
            clock: returns the current time (timezone-aware); used for the drain deadline and
                runner staleness.
        """
        self._client = client
        self._clock = clock

    def reconcile(
        self,
        desired: Sequence[ScalesetSpec],
        *,
        prune: bool = True,
        held: Collection[str] = (),
        held_apps: Collection[str] = (),
    ) -> ReconcileResult:
        """Run one pass: create, update and retire per spec, then sweep orphans.

        Args:
            desired: the desired specs (the first of each logical name wins).
            prune: sweep scale sets no spec claims. False while some configurator input is
                invalid and it cannot be told what that input described.
            held: logical names whose configurator input is invalid this pass: their live
                generations are left exactly as they are (no update, no retirement, no sweep).
            held_apps: configurator applications whose input is invalid: every scale set on
                one of their providers is left as it is too, whatever its name.

        Returns:
            What is still retiring and which scale sets exist after the pass.

        Raises:
            GarmConnectionError: GARM became unreachable (the pass stops at once).
            GarmUnauthorizedError: GARM rejected the token (the pass stops before the sweep).
            GarmApiError: a pass-start listing failed.
        """
        return _Pass(self._client, self._clock).run(dedupe_specs(desired), prune, held, held_apps)


@dataclass
class _Pass:
    """State of one reconcile pass; nothing survives it."""

    client: GarmClient
    clock: Callable[[], datetime]
    templates: dict[str, Template] = field(default_factory=dict[str, Template])
    created: list[ScaleSet] = field(default_factory=list[ScaleSet])
    deleted_ids: set[int] = field(default_factory=set[int])
    notices: list[Notice] = field(default_factory=list[Notice])
    _bytes_cache: dict[int, bytes] = field(default_factory=dict[int, bytes])
    _org_ids: dict[str, str | None] = field(default_factory=dict[str, str | None])
    _repo_ids: dict[str, str] | None = None

    def run(
        self,
        specs: list[ScalesetSpec],
        prune: bool,
        held: Collection[str],
        held_apps: Collection[str],
    ) -> ReconcileResult:
        providers = {p.name for p in self.client.list_providers() if p.name}
        listing = self.client.list_scalesets()
        observed = self._observe(listing)
        if self._templates_needed(specs, observed):
            self.templates = {t.name: t for t in self.client.list_templates() if t.name}
        specs = [spec for spec in specs if spec.name not in held]
        families = {
            spec.name: _family(spec.name, target_scaleset_name(spec.name, spec.labels), observed)
            for spec in specs
        }
        # Claimed before any gate runs, so a gated spec still protects its generations, and a
        # held name protects every generation of its pattern.
        claimed = {name for family in families.values() for name in family}
        for logical in held:
            pattern = family_pattern(logical)
            claimed |= {name for name in observed if pattern.match(name)}
        claimed |= {
            name
            for name, live in observed.items()
            if app_of_provider(live.provider_name or "") in held_apps
        }

        progress: list[ScalesetProgress] = []
        for spec in specs:
            try:
                progress += self._reconcile_one(spec, providers, observed, families[spec.name])
            except (GarmConnectionError, GarmUnauthorizedError):
                raise
            except GarmApiError as exc:
                logger.warning("GARM refused scaleset %r; will retry: %s", spec.name, exc)
                self.notices.append(refusal(spec.name, exc.status))

        unclaimed = sorted(set(observed) - claimed)
        if unclaimed and not prune:
            logger.warning(
                "Not sweeping %d unclaimed scale set(s) while configurator data is invalid",
                len(unclaimed),
            )
            unclaimed = []
        for name in unclaimed:
            if self._delete_orphaned(observed[name]):
                self._delete_custom_template(name)

        # The raw listing keeps nameless scale sets: they exist and hold on to their provider.
        live = [s for s in listing if s.id is None or s.id not in self.deleted_ids]
        return ReconcileResult(progress, live + self.created, self.notices)

    @staticmethod
    def _observe(listing: Iterable[ScaleSet]) -> dict[str, ScaleSet]:
        observed: dict[str, ScaleSet] = {}
        for scaleset in listing:
            if not scaleset.name:
                logger.warning(
                    "Ignoring scaleset id=%s: GARM lists it without a name", scaleset.id
                )
                continue
            observed[scaleset.name] = scaleset
        return observed

    @staticmethod
    def _templates_needed(specs: Iterable[ScalesetSpec], observed: Mapping[str, ScaleSet]) -> bool:
        return any(spec.runner_config.has_config() for spec in specs) or any(
            s.template_id for s in observed.values()
        )

    # --- per spec ----------------------------------------------------------------------------

    def _reconcile_one(
        self,
        spec: ScalesetSpec,
        providers: set[str],
        observed: Mapping[str, ScaleSet],
        family: Sequence[str],
    ) -> list[ScalesetProgress]:
        active = target_scaleset_name(spec.name, spec.labels)
        try:
            params = _create_params(spec, active)
        except Exception as exc:  # a bad spec must not stop the other specs
            logger.error(
                "Scaleset %r cannot be built from its description and will not self-heal: %s",
                spec.name,
                exc,
            )
            self.notices.append(
                Notice(Severity.BLOCKED, spec.name, "cannot be built from its description")
            )
            return []
        if spec.provider_name not in providers:
            logger.warning(
                "Provider %r of scaleset %r is not registered in GARM yet; will retry",
                spec.provider_name,
                spec.name,
            )
            self.notices.append(
                Notice(Severity.WAITING, spec.name, f"waiting for provider {spec.provider_name}")
            )
            return []
        entity_id = self._entity_id(spec)
        if entity_id is None:
            self.notices.append(
                Notice(
                    Severity.WAITING,
                    spec.name,
                    f"waiting for {spec.entity_type} {spec.entity_name}",
                )
            )
            return []
        if active in observed and not _placed_as_specified(observed[active], spec):
            self.notices.append(_misplaced_notice(observed[active], spec))
            return []
        template_id = self._ensure_template(spec, active)
        desired_extra = dict(params.extra_specs or {})
        if active in observed:
            self._maybe_update(observed[active], spec, desired_extra, template_id)
        else:
            ensured = template_id or spec.template_id or None
            self._create(spec, entity_id, params.model_copy(update={"template_id": ensured}))
        if not spec.runner_config.has_config():
            self._delete_custom_template(active)
        return self._retire_replaced(spec, active, observed, family)

    def _entity_id(self, spec: ScalesetSpec) -> str | None:
        if spec.entity_type == "organization":
            entity_id = self._organization_id(spec.entity_name)
        elif spec.entity_type == "repository":
            entity_id = self._repository_ids().get(spec.entity_name)
        else:
            logger.warning(
                "Scaleset %r has unknown entity type %r; skipped", spec.name, spec.entity_type
            )
            return None
        if entity_id is None:
            logger.warning(
                "The %s %r of scaleset %r is not registered in GARM yet; will retry",
                spec.entity_type,
                spec.entity_name,
                spec.name,
            )
        return entity_id

    def _organization_id(self, name: str) -> str | None:
        # Many scale sets share an organisation: ask GARM once per name and pass.
        if name not in self._org_ids:
            self._org_ids[name] = next(
                (o.id for o in self.client.list_organizations(name=name) if o.name == name),
                None,
            )
        return self._org_ids[name]

    def _repository_ids(self) -> dict[str, str]:
        if self._repo_ids is None:
            self._repo_ids = {
                f"{repo.owner}/{repo.name}": repo.id
                for repo in self.client.list_repositories()
                if repo.owner and repo.name and repo.id
            }
        return self._repo_ids

    def _create(self, spec: ScalesetSpec, entity_id: str, params: CreateScaleSetParams) -> None:
        logger.info("Creating scaleset %r for %r", params.name, spec.name)
        if spec.entity_type == "organization":
            created = self.client.create_org_scaleset(entity_id, params)
        else:
            created = self.client.create_repo_scaleset(entity_id, params)
        logger.info("Created scaleset %r (id=%s)", params.name, created.id)
        self.created.append(created)

    def _maybe_update(
        self,
        observed: ScaleSet,
        spec: ScalesetSpec,
        desired_extra: dict[str, Any],
        template_id: int,
    ) -> None:
        tags = _sorted_tags(observed)
        if tags != sorted(spec.labels):
            logger.warning(
                "Scaleset %r carries labels %s but %r wants %s; labels are immutable in GitHub, "
                "delete the scaleset in GARM to have it recreated",
                observed.name,
                tags,
                spec.name,
                sorted(spec.labels),
            )
        if not _needs_update(observed, spec, desired_extra, template_id):
            logger.debug("Scaleset %r is up to date", observed.name)
            return
        if observed.id is None:
            logger.warning("Cannot update scaleset %r: GARM lists it without an id", observed.name)
            return
        logger.info("Updating scaleset %r (id=%s)", observed.name, observed.id)
        self.client.update_scaleset(
            observed.id, _update_params(observed, spec, desired_extra, template_id)
        )

    # --- templates ---------------------------------------------------------------------------

    def _ensure_template(self, spec: ScalesetSpec, live_name: str) -> int:
        """Create or refresh the per-scale-set template and return the id the scale set uses."""
        cfg = spec.runner_config
        if not cfg.has_config():
            return spec.template_id or 0
        name = custom_template_name(live_name)
        custom = self.templates.get(name)
        base = self._base_template(spec)
        base_bytes = self._template_bytes(base) if base is not None else None
        if base_bytes is None:
            if custom is not None:
                logger.warning(
                    "No readable base template for %r; keeping its template %r", live_name, name
                )
                return custom.id or 0
            logger.warning("No readable base template for %r; using GARM's default", live_name)
            return 0
        data = build_template_data(base_bytes, cfg)
        if custom is not None:
            return self._refresh_template(custom, data)
        logger.info("Creating template %r", name)
        created = self.client.create_template(
            CreateTemplateParams(
                name=name,
                description=f"Runner template for scaleset {live_name}",
                forge_type="github",
                os_type="linux",
                data=_b64encode(data),
            )
        )
        logger.info("Created template %r (id=%s)", name, created.id)
        self.templates[name] = created
        if created.id is not None:
            self._bytes_cache[created.id] = data
        return created.id or 0

    def _base_template(self, spec: ScalesetSpec) -> Template | None:
        if spec.template_id:
            for template in self.templates.values():
                if template.id == spec.template_id:
                    return template
        return self.templates.get(GARM_BASE_TEMPLATE_NAME)

    def _refresh_template(self, custom: Template, data: bytes) -> int:
        if custom.id is None:
            logger.warning("Template %r is listed without an id; cannot use it", custom.name)
            return 0
        if self._template_bytes(custom) != data:
            logger.info("Updating template %r (id=%s)", custom.name, custom.id)
            self.client.update_template(custom.id, _b64encode(data))
            self._bytes_cache[custom.id] = data
        else:
            logger.debug("Template %r is up to date", custom.name)
        return custom.id

    def _template_bytes(self, template: Template) -> bytes | None:
        """Return a template's body, fetching it when the listing left it out.

        Returns None when the body cannot be decoded or the template has no id to fetch by.
        """
        if template.id is not None and template.id in self._bytes_cache:
            return self._bytes_cache[template.id]
        encoded = template.data
        if not encoded and template.id is not None:
            encoded = self.client.get_template(template.id).data
        elif not encoded:
            return None
        try:
            body = base64.b64decode(encoded or "", validate=True)
        except (binascii.Error, ValueError):
            logger.warning("Template %r has a body that is not valid base64", template.name)
            return None
        if template.id is not None:
            self._bytes_cache[template.id] = body
        return body

    def _delete_custom_template(self, live_name: str) -> None:
        name = custom_template_name(live_name)
        template = self.templates.get(name)
        if template is None:
            return
        if template.id is None:
            logger.warning("Cannot delete template %r: GARM lists it without an id", name)
            return
        logger.info("Deleting template %r (id=%s)", name, template.id)
        try:
            self.client.delete_template(template.id)
        except GarmApiError as exc:
            logger.warning("Failed to delete template %r; will retry: %s", name, exc)
            return
        del self.templates[name]

    # --- retirement of predecessor generations -----------------------------------------------

    def _retire_replaced(
        self,
        spec: ScalesetSpec,
        active: str,
        observed: Mapping[str, ScaleSet],
        family: Sequence[str],
    ) -> list[ScalesetProgress]:
        # Pre-pass observation: the pass that creates or re-enables the replacement never
        # disables a predecessor.
        replacement_live = active in observed and observed[active].enabled is True
        progress: list[ScalesetProgress] = []
        for name in sorted(family):
            if name == active or name not in observed:
                continue
            if not replacement_live:
                progress.append(ScalesetProgress(spec.name, name, active, 0, Handover.PENDING))
                continue
            entry = self._advance_retirement(spec.name, observed[name], active)
            if entry is not None:
                progress.append(entry)
        return progress

    def _advance_retirement(
        self, logical: str, old: ScaleSet, active: str
    ) -> ScalesetProgress | None:
        name = old.name or ""
        if old.enabled:
            if not self._retire(old):
                return ScalesetProgress(logical, name, active, 0, Handover.FAILED)
            return ScalesetProgress(logical, name, active, self._remaining_runners(old))
        remaining = self._remaining_runners(old)
        if remaining > 0:
            if old.id is None or not self._drain_deadline_passed(old):
                return ScalesetProgress(logical, name, active, remaining)
            logger.warning(
                "Scaleset %r still has %d runners past the drain deadline of %s; removing them",
                name,
                remaining,
                DRAIN_DEADLINE,
            )
            if self._remove_runners(old.id, name, past_deadline=True):
                return ScalesetProgress(logical, name, active, remaining)
            remaining = 0
        if not self._delete_drained(old):
            return ScalesetProgress(logical, name, active, remaining)
        return None

    def _retire(self, old: ScaleSet) -> bool:
        if old.id is None:
            logger.warning("Cannot retire scaleset %r: GARM lists it without an id", old.name)
            return False
        logger.info("Retiring scaleset %r (id=%s): disabling it", old.name, old.id)
        try:
            self.client.update_scaleset(
                old.id, UpdateScaleSetParams(enabled=False, min_idle_runners=0, max_runners=0)
            )
            return True
        except GarmConnectionError:
            raise
        except GarmApiError as exc:
            logger.warning(
                "GARM refused to zero scaleset %r; disabling it without max_runners: %s",
                old.name,
                exc,
            )
        try:
            self.client.update_scaleset(
                old.id, UpdateScaleSetParams(enabled=False, min_idle_runners=0)
            )
            return True
        except GarmConnectionError:
            raise
        except GarmApiError as exc:
            logger.warning("Failed to disable scaleset %r; will retry: %s", old.name, exc)
            return False

    def _remaining_runners(self, old: ScaleSet) -> int:
        if old.id is None:
            return 0
        try:
            return len(self.client.list_scaleset_instances(old.id))
        except GarmConnectionError:
            raise
        except GarmApiError as exc:
            # An unknown count must never read as drained.
            logger.warning("Cannot list the runners of scaleset %r: %s", old.name, exc)
            return 1

    def _drain_deadline_passed(self, old: ScaleSet) -> bool:
        # A disabled predecessor is never rewritten, so updated_at is when it was disabled.
        disabled_at = _known_time(old.updated_at)
        if disabled_at is None:
            return False
        return self.clock() - disabled_at > DRAIN_DEADLINE

    def _delete_drained(self, old: ScaleSet) -> bool:
        if old.id is None:
            return True
        logger.info("Deleting drained scaleset %r (id=%s)", old.name, old.id)
        try:
            self.client.delete_scaleset(old.id)
        except GarmConnectionError:
            raise
        except GarmApiError as exc:
            logger.warning("Failed to delete scaleset %r; will retry: %s", old.name, exc)
            return False
        self.deleted_ids.add(old.id)
        self._delete_custom_template(old.name or "")
        return True

    # --- orphan sweep ------------------------------------------------------------------------

    def _delete_orphaned(self, scaleset: ScaleSet) -> bool:
        logger.info(
            "Scaleset %r (id=%s) is not claimed by any spec; removing it",
            scaleset.name,
            scaleset.id,
        )
        if scaleset.id is None:
            logger.warning("Cannot remove scaleset %r: GARM lists it without an id", scaleset.name)
            return False
        name = scaleset.name or ""
        subject = _logical_of(name)
        if not self._disable(scaleset.id, name):
            self.notices.append(Notice(Severity.WAITING, subject, "removal deferred"))
            return False
        remaining = self._remove_runners(scaleset.id, name)
        if remaining:
            phase = draining_phase(remaining if remaining > 0 else None)
            text = f"{phase} (no longer configured)"
            self.notices.append(Notice(Severity.PROGRESS, subject, text))
            return False
        try:
            self.client.delete_scaleset(scaleset.id)
        except GarmConnectionError:
            raise
        except GarmApiError as exc:
            logger.warning("Failed to delete scaleset %r; will retry: %s", name, exc)
            self.notices.append(Notice(Severity.PROGRESS, subject, "awaiting deletion"))
            return False
        logger.info("Deleted scaleset %r (id=%s)", name, scaleset.id)
        self.deleted_ids.add(scaleset.id)
        return True

    def _disable(self, scaleset_id: int, name: str) -> bool:
        try:
            self.client.update_scaleset(
                scaleset_id, UpdateScaleSetParams(enabled=False, min_idle_runners=0)
            )
        except GarmConnectionError:
            raise
        except GarmApiError as exc:
            logger.warning(
                "Failed to disable scaleset %r; deleting it is deferred because GARM refuses to "
                "delete an enabled scaleset: %s",
                name,
                exc,
            )
            return False
        return True

    # --- guarded runner removal --------------------------------------------------------------

    def _remove_runners(self, scaleset_id: int, name: str, past_deadline: bool = False) -> int:
        """Remove the runners that hold no job; return how many were listed (-1: unknown).

        Runners deleted in this pass still count until a later listing drops them, so only 0
        means the scale set is empty.
        """
        try:
            instances = self.client.list_scaleset_instances(scaleset_id)
        except GarmConnectionError:
            raise
        except GarmApiError as exc:
            logger.warning("Cannot list the runners of scaleset %r; will retry: %s", name, exc)
            return -1
        refused_level = logging.ERROR if past_deadline else logging.INFO
        for instance in instances:
            if not instance.name:
                logger.warning("Skipping a runner of scaleset %r that has no name", name)
                continue
            status = (instance.status or "").lower()
            if status not in DELETABLE_RUNNER_STATUSES:
                logger.log(
                    refused_level,
                    "Leaving runner %r of scaleset %r in place: status %r cannot be deleted",
                    instance.name,
                    name,
                    status,
                )
                continue
            if self._is_running_job(instance):
                logger.info(
                    "Leaving runner %r of scaleset %r in place: it is running a job",
                    instance.name,
                    name,
                )
                continue
            self._delete_runner(instance.name, instance, name, refused_level)
        return len(instances)

    def _is_stale(self, moment: datetime | None) -> bool:
        # An unknown age never reads as expired.
        known = _known_time(moment)
        if known is None:
            return False
        return self.clock() - known > MAX_JOB_RUNTIME

    def _is_running_job(self, instance: Instance) -> bool:
        runner_status = (instance.runner_status or "").lower()
        if runner_status == RUNNER_STATUS_ACTIVE and not self._is_stale(instance.updated_at):
            return True
        job = instance.job
        return (
            job is not None
            and (job.status or "").lower() in JOB_STATUSES_HOLDING_RUNNER
            and not self._is_stale(job.updated_at)
        )

    @staticmethod
    def _is_delete_stuck(instance: Instance) -> bool:
        status = (instance.status or "").lower()
        if status not in PENDING_DELETE_STATUSES:
            return False
        return status == PENDING_FORCE_DELETE_STATUS or bool(instance.provider_fault)

    def _delete_runner(
        self, runner: str, instance: Instance, scaleset_name: str, refused_level: int
    ) -> None:
        force = self._is_delete_stuck(instance)
        logger.info("Removing runner %r of scaleset %r (force=%s)", runner, scaleset_name, force)
        if self._try_delete_runner(runner, force, refused_level, bypass_github=False):
            return
        logger.warning(
            "GitHub rejected deregistering runner %r; removing it from GARM anyway, it may "
            "stay registered in GitHub",
            runner,
        )
        self._try_delete_runner(runner, force, refused_level, bypass_github=True)

    def _try_delete_runner(
        self, runner: str, force: bool, refused_level: int, *, bypass_github: bool
    ) -> bool:
        """Ask GARM to remove a runner; False only when GitHub refused and no bypass was asked."""
        try:
            self.client.delete_instance(
                runner, force_remove=force, bypass_github_unauthorized=bypass_github
            )
        except GarmNotFoundError:
            logger.info("Runner %r is already gone", runner)
        except GarmApiError as exc:
            if isinstance(exc, GarmUnauthorizedError) and not bypass_github:
                return False
            # Past the deadline a refusal is an error; an outage stays a warning.
            outage = isinstance(exc, GarmConnectionError)
            logger.log(
                logging.WARNING if outage else max(refused_level, logging.WARNING),
                "Failed to remove runner %r; will retry: %s",
                runner,
                exc,
            )
        return True


# --- scaleset-status action (read-only) ------------------------------------------------------

STATUS_TABLE_COLUMNS = ("LOGICAL", "SCALESET", "ENABLED", "PHASE", "RUNNERS", "PROVIDER")
ORPHAN_LOGICAL = "-"


@dataclass(frozen=True)
class StatusRow:
    """One live generation as the ``scaleset-status`` action shows it."""

    logical: str
    scaleset: str
    enabled: bool
    phase: str
    runners: int | None
    provider: str

    def cells(self) -> tuple[str, ...]:
        """Return the row's table cells, in column order."""
        return (
            self.logical,
            self.scaleset,
            "true" if self.enabled else "false",
            self.phase,
            "?" if self.runners is None else str(self.runners),
            self.provider or "-",
        )


def draining_phase(runners: int | None) -> str:
    """Return the phase text of a disabled predecessor with this many runners left."""
    if runners is None:
        return "draining ? runners"
    if runners == 0:
        return "awaiting deletion"
    return f"draining {runners} runner{'' if runners == 1 else 's'}"


def _row_phase(
    scaleset: ScaleSet, target: str, observed: Mapping[str, ScaleSet], runners: int | None
) -> str:
    enabled = scaleset.enabled is True
    if scaleset.name == target:
        return "active" if enabled else "re-enabling"
    target_live = target in observed and observed[target].enabled is True
    if not target_live:
        return "creating replacement"
    if enabled:
        return "retiring predecessor"
    return draining_phase(runners)


def scaleset_status_rows(
    desired: Sequence[ScalesetSpec],
    scalesets: Sequence[ScaleSet],
    runner_counts: Mapping[str, int | None],
) -> list[StatusRow]:
    """Compute the rows of the ``scaleset-status`` table; makes no GARM call.

    Args:
        desired: the desired specs (the first of each logical name wins).
        scalesets: GARM's scale set listing.
        runner_counts: runners listed per live name; a missing or None count shows as unknown.

    Returns:
        One row per named live scale set: claimed generations sorted by logical then live name,
        then orphans sorted by live name.
    """
    observed = {s.name: s for s in scalesets if s.name}
    owner: dict[str, tuple[str, str]] = {}
    for spec in dedupe_specs(desired, warn=False):
        target = target_scaleset_name(spec.name, spec.labels)
        for name in _family(spec.name, target, observed):
            owner.setdefault(name, (spec.name, target))
    claimed: list[StatusRow] = []
    orphans: list[StatusRow] = []
    for name in sorted(observed):
        scaleset = observed[name]
        runners = runner_counts.get(name)
        enabled = scaleset.enabled is True
        provider = scaleset.provider_name or ""
        if name not in owner:
            orphans.append(StatusRow(ORPHAN_LOGICAL, name, enabled, "orphaned", runners, provider))
            continue
        logical, target = owner[name]
        phase = _row_phase(scaleset, target, observed, runners)
        claimed.append(StatusRow(logical, name, enabled, phase, runners, provider))
    claimed.sort(key=lambda row: (row.logical, row.scaleset))
    return claimed + orphans


def format_scaleset_table(rows: Sequence[StatusRow]) -> str:
    """Render rows as a fixed-width text table with a header line.

    Args:
        rows: the rows to show.

    Returns:
        The table, one line per row, columns separated by at least two spaces.
    """
    lines = [STATUS_TABLE_COLUMNS, *(row.cells() for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(STATUS_TABLE_COLUMNS))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )
