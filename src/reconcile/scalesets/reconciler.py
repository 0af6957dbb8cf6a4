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

This module owns the pass itself (what is claimed, created and updated); the parts it drives
live apart: the names (``names``), the custom templates (``custom_templates``), the
label-change retirement (``retirement``), the orphan sweep (``sweep``), the wait for GARM's
workers before either writes (``worker_starts``) and the guarded runner removal (``runners``).
Must not import ops.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from garm import (
    CreateScaleSetParams,
    GarmClient,
    ScaleSet,
)
from reconcile.endpoints import endpoint_of
from reconcile.scalesets.custom_templates import CustomTemplates
from reconcile.scalesets.names import Generations, dedupe_specs
from reconcile.scalesets.params import create_params, needs_update, update_params
from reconcile.scalesets.placement import (
    name_taken_notice,
    placed_as_specified,
    resolve_target,
)
from reconcile.scalesets.reclaim import Reclaim, reclaiming
from reconcile.scalesets.retirement import Retirement, ScalesetProgress
from reconcile.scalesets.runners import RunnerRemover
from reconcile.scalesets.sweep import OrphanSweep
from reconcile.scalesets.worker_starts import IdleStarts, WorkerGate
from reconcile.writes import Writes
from vocabulary.desired_state import EntityKey, ScalesetSpec, app_of_provider, entity_key
from vocabulary.notices import Notice, Severity

logger = logging.getLogger(__name__)

ENTITY_KINDS = ("organization", "repository")
# The steps' words when the pass's budget cuts them (``reconcile.writes``).
RECONCILE_STEP = "creating or updating scale sets"


def _utc_now() -> datetime:
    return datetime.now(UTC)


class EntityStep(Protocol):
    """The entity step running beside this pass (``reconcile.entities``)."""

    def created(self, key: EntityKey) -> str | None:
        """Wait for the entity's object of this pass; the id it registered, if any."""
        ...

    def settled(self) -> None:
        """Wait for every entity object of this pass; raise its pass-ending failure."""
        ...

    def start(self) -> None:
        """Let the entity objects go to GARM (once this pass has read what it needs)."""
        ...


@dataclass(frozen=True)
class ReconcileResult:
    """The outcome of a complete pass.

    Attributes:
        progress: predecessor generations still retiring.
        live: scale sets that exist in GARM after the pass.
        notices: specs held back this pass and orphans still draining, for the status.
        wanted: the live names the desired specs want this pass (their active generation).
        absent: those of ``wanted`` GARM did not hold at the pass's start.
        unsettled: names GARM holds under a GitHub id older than the charm's, not cleared up.
        idle: what the next pass is to know of GARM's idle worker starts (``worker_starts``).
    """

    progress: list[ScalesetProgress]
    live: list[ScaleSet]
    notices: list[Notice] = field(default_factory=list[Notice])
    wanted: frozenset[str] = frozenset()
    absent: frozenset[str] = frozenset()
    unsettled: frozenset[str] = frozenset()
    idle: IdleStarts | None = None


class ScalesetReconciler:
    """Reconcile GARM's scale sets against the desired specs."""

    def __init__(
        self,
        client: GarmClient,
        clock: Callable[[], datetime] = _utc_now,
        writes: Writes | None = None,
        reclaim: Reclaim | None = None,
        entities: EntityStep | None = None,
        idle: IdleStarts | None = None,
    ) -> None:
        """Create the reconciler.

        Args:
            client: an authenticated GARM client.
            clock: returns the current time (timezone-aware); used for the drain deadline and
                runner staleness.
            writes: the pass's writes (pool and budget); None: one object at a time, no budget.
            reclaim: clears the charm's own stale scale sets from GitHub when GARM's create
                is refused for one (``reclaim``); None: no GitHub scale set is reclaimed.
            entities: the entity step still running beside this pass: a spec waits for its
                entity's object, and the deletions for the whole step; None: it is done.
            idle: what an earlier pass found GARM's worker starts idle at (``worker_starts``).
        """
        self._client = client
        self._clock = clock
        self._writes = writes or Writes(size=1)
        self._reclaim = reclaim
        self._entities = entities
        self._idle = idle

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
            desired: the desired specs (the first of each logical name wins). None is held:
                the configurator merge leaves a held configurator's specs out of the desired
                state (``relations.configurator_merge``, where its tests pin it).
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
            GarmUnauthorizedError: GARM rejected the token (the pass stops at once).
            GarmProtocolError: GARM answered in a shape the charm cannot read (same).
            GarmApiError: a pass-start listing failed.
        """
        return _Pass(
            self._client, self._clock, self._writes, self._reclaim, self._entities, self._idle
        ).run(dedupe_specs(desired), prune, held, held_apps)


@dataclass
class _Pass:
    """State of one reconcile pass; nothing survives it."""

    client: GarmClient
    clock: Callable[[], datetime]
    writes: Writes
    reclaim: Reclaim | None
    entities: EntityStep | None
    idle: IdleStarts | None
    created: list[ScaleSet] = field(default_factory=list[ScaleSet])
    notices: list[Notice] = field(default_factory=list[Notice])
    _entity_ids: dict[str, dict[EntityKey, str]] = field(
        default_factory=dict[str, dict[EntityKey, str]]
    )

    def __post_init__(self) -> None:
        self.templates = CustomTemplates(self.client)
        runners = RunnerRemover(self.client, self.clock)
        # One disable in GARM at a time, however many objects the pool runs (``sweep``), and
        # none before GARM has started the scale sets' workers (``worker_starts``).
        disabling = threading.Lock()
        self.gate = WorkerGate(self.client, self.writes, idle=self.idle)
        self.retirement = Retirement(
            self.client, self.clock, runners, self.templates, disabling, self.gate
        )
        self.sweep = OrphanSweep(self.client, runners, disabling=disabling, gate=self.gate)

    def run(
        self,
        specs: list[ScalesetSpec],
        prune: bool,
        held: Collection[str],
        held_apps: Collection[str],
    ) -> ReconcileResult:
        providers = {p.name for p in self.client.list_providers() if p.name}
        listing = self.client.list_scalesets()
        self.gate.expect(listing, providers)
        observed = _observe(listing)
        if self._templates_needed(specs, observed):
            self.templates.load(self.client.list_templates())
        # A scale set on a held configurator's provider is that configurator's, whatever its
        # name: no other spec retires or drains it as one of its own generations.
        on_held = {
            name
            for name, live in observed.items()
            if app_of_provider(live.provider_name or "") in held_apps
        }
        generations = Generations(observed)
        families = {
            spec.name: [
                name
                for name in generations.family(spec.name, resolve_target(spec, observed))
                if name not in on_held
            ]
            for spec in specs
        }
        # Claimed before any gate runs, so a gated spec still protects its generations, and a
        # held name protects every generation of its pattern.
        claimed = {name for family in families.values() for name in family}
        for logical in held:
            claimed.update(generations.of(logical))
        claimed |= on_held

        # Asked once before the objects go out concurrently, so no two ask it.
        for kind in sorted({spec.entity_type for spec in specs} & set(ENTITY_KINDS)):
            self._ids_of(kind)

        def one(spec: ScalesetSpec, notices: list[Notice]) -> list[ScalesetProgress]:
            def attempt(mine: list[Notice]) -> list[ScalesetProgress]:
                return self._reconcile_one(spec, providers, observed, families[spec.name], mine)

            live_name = resolve_target(spec, observed)
            return reclaiming(spec, live_name, attempt, self.reclaim, notices) or []

        ready = _entity_done(self.entities)  # and the entity step starts now
        results = self.writes.each(RECONCILE_STEP, specs, one, self.notices, ready=ready)
        progress = [entry for result in results for entry in result or ()]
        # Deletions follow every create of the pass, the entities' included.
        if self.entities is not None:
            self.entities.settled()

        unclaimed = sorted(set(observed) - claimed)
        if unclaimed and not prune:
            logger.warning(
                "Not sweeping %d unclaimed scale set(s) while configurator data is invalid",
                len(unclaimed),
            )
            unclaimed = []

        # One disable at a time; each orphan deleted once GARM settled after its own (``sweep``).
        self.sweep.run(self.writes, [observed[name] for name in unclaimed], self.templates.delete)

        # The raw listing keeps nameless scale sets: they exist and hold on to their provider.
        deleted = self.retirement.deleted_ids | self.sweep.deleted_ids
        live = [s for s in listing if s.id is None or s.id not in deleted]
        wanted = frozenset(resolve_target(spec, observed) for spec in specs)
        return ReconcileResult(
            progress,
            live + self.created,
            self.notices + self.sweep.notices,
            wanted,
            wanted - observed.keys(),
            frozenset(self.reclaim.unsettled if self.reclaim else ()),
            self.gate.idle,
        )

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
        notices: list[Notice],
    ) -> list[ScalesetProgress]:
        active = resolve_target(spec, observed)
        try:
            params = create_params(spec, active)
        except Exception as exc:  # a bad spec must not stop the other specs
            logger.error(
                "Scaleset %r cannot be built from its description and will not self-heal: %s",
                spec.name,
                exc,
            )
            notices.append(
                Notice(Severity.BLOCKED, spec.name, "cannot be built from its description")
            )
            return []
        if spec.provider_name not in providers:
            logger.warning(
                "Provider %r of scaleset %r is not registered in GARM yet; will retry",
                spec.provider_name,
                spec.name,
            )
            notices.append(
                Notice(Severity.WAITING, spec.name, f"waiting for provider {spec.provider_name}")
            )
            return []
        entity_id = self._entity_id(spec)
        if entity_id is None:
            notices.append(
                Notice(
                    Severity.WAITING,
                    spec.name,
                    f"waiting for {spec.entity_type} {spec.entity_name}",
                )
            )
            return []
        if active in observed and not placed_as_specified(observed[active], spec):
            # Only a scale set made by hand under the charm's own name can be here.
            notices.append(name_taken_notice(observed[active], spec))
            return []
        template_id = self.templates.ensure(spec, active)
        desired_extra = dict(params.extra_specs or {})
        if active in observed:
            if self.reclaim is not None:
                self.reclaim.outdated(spec, observed[active], notices)
            self._maybe_update(observed[active], spec, desired_extra, template_id)
        else:
            ensured = template_id or spec.template_id or None
            self._create(spec, entity_id, params.model_copy(update={"template_id": ensured}))
        if not spec.runner_config.has_config():
            self.templates.delete(active)
        return self.retirement.retire_replaced(spec, active, observed, family)

    def _entity_id(self, spec: ScalesetSpec) -> str | None:
        if spec.entity_type not in ENTITY_KINDS:
            logger.warning(
                "Scaleset %r has unknown entity type %r; skipped", spec.name, spec.entity_type
            )
            return None
        entity_id = self._ids_of(spec.entity_type).get(spec.entity_key)
        if entity_id is None and self.entities is not None:
            entity_id = self.entities.created(spec.entity_key)
        if entity_id is None:
            logger.warning(
                "The %s %r of scaleset %r is not registered in GARM yet; will retry",
                spec.entity_type,
                spec.entity_name,
                spec.name,
            )
        return entity_id

    def _ids_of(self, kind: str) -> dict[EntityKey, str]:
        # One listing per kind and pass answers every scale set: asking per name would cost a
        # call for each organisation or repository in every hook.
        if kind not in self._entity_ids:
            if kind == "organization":
                listed = [
                    (o.name, endpoint_of(o.endpoint), o.id)
                    for o in self.client.list_organizations()
                ]
            else:
                listed = [
                    (f"{r.owner}/{r.name}", endpoint_of(r.endpoint), r.id)
                    for r in self.client.list_repositories()
                    if r.owner and r.name
                ]
            self._entity_ids[kind] = {
                entity_key(kind, name, endpoint): id_
                for name, endpoint, id_ in listed
                if name and id_
            }
        return self._entity_ids[kind]

    def _create(self, spec: ScalesetSpec, entity_id: str, params: CreateScaleSetParams) -> None:
        # One line once GARM answers (a failed create is logged where it is contained).
        if spec.entity_type == "organization":
            created = self.client.create_org_scaleset(entity_id, params)
        else:
            created = self.client.create_repo_scaleset(entity_id, params)
        logger.info("Created scaleset %r (id=%s) for %r", params.name, created.id, spec.name)
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
        if not needs_update(observed, spec, desired_extra, template_id):
            return
        if observed.id is None:
            logger.warning("Cannot update scaleset %r: GARM lists it without an id", observed.name)
            return
        logger.info("Updating scaleset %r (id=%s)", observed.name, observed.id)
        self.client.update_scaleset(
            observed.id, update_params(observed, spec, desired_extra, template_id)
        )


def _entity_done(entities: EntityStep | None) -> Callable[[ScalesetSpec], object] | None:
    """Start the entity step; a spec's object starts once its entity's object is done.

    Started only now, after the pass's reads, so that GARM sees them before the entities'
    writes in every pass (one organisation's calls come in the same order every time).
    """
    if entities is None:
        return None
    entities.start()
    return lambda spec: entities.created(spec.entity_key)


def _observe(listing: Iterable[ScaleSet]) -> dict[str, ScaleSet]:
    observed: dict[str, ScaleSet] = {}
    for scaleset in listing:
        if not scaleset.name:
            logger.warning("Ignoring scaleset id=%s: GARM lists it without a name", scaleset.id)
            continue
        observed[scaleset.name] = scaleset
    return observed


def _sorted_tags(scaleset: ScaleSet) -> list[str]:
    return sorted(tag.name for tag in scaleset.tags or [] if tag.name)
