"""The reconcile chain: controller URLs, endpoints, credentials, agent tools, entities, scale sets.

Owns the order of one pass in GARM: the controller URLs first (GARM refuses most calls until
it has them), then objects are created in dependency order (GitHub Enterprise Server endpoint,
credential, entity, template, scale set) and deleted in the reverse order in the same pass, so
GARM never refuses a delete because of a dependent; and the notices the pass leaves for the
status. The garm-agent tools go right after the credentials, before the entities: an entity's
agent mode depends on what GARM stores, and deciding it first lets a new entity be created in
the right mode in one write. Makes no Juju call: it reads the frozen ``DesiredState`` and must
not import ops.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from garm import GarmClient, Instance, ScaleSet
from reconcile.agent_tools import sync_agent_tools
from reconcile.charmed_template import apply_charmed_template
from reconcile.controller import Controller, sync_controller
from reconcile.credentials import CredentialReconciler
from reconcile.endpoints import EndpointReconciler, endpoint_of
from reconcile.entities import EntityReconciler, EntityStep
from reconcile.escalation import escalate
from reconcile.leftovers import leftover_notices, replaced_controllers
from reconcile.memory import Memory, RememberedFault
from reconcile.scalesets.faults import carry_faults, fault_notices
from reconcile.scalesets.names import logical_of
from reconcile.scalesets.progress import progress_notices
from reconcile.scalesets.reclaim import GitHubDoors, Reclaim, Registration, record
from reconcile.scalesets.reconciler import ReconcileResult, ScalesetReconciler
from reconcile.scalesets.stall import (
    Recovery,
    StallWatch,
    confirmed,
    shortfalls,
    watch_stalls,
)
from reconcile.scalesets.worker_starts import IdleStarts
from reconcile.writes import Unfinished, Writes
from vocabulary.desired_state import (
    CredentialSpec,
    DesiredState,
    EntityKey,
    Incumbents,
    ToolReader,
    app_of_provider,
    entity_key,
)
from vocabulary.notices import Notice, Severity
from vocabulary.telemetry import traced, tracer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChainResult:
    """What one run of the chain leaves.

    Attributes:
        live: the scale sets in GARM after the pass (nameless ones included).
        notices: what each reconciler held back, the changeovers under way, the runners that
            cannot start and the configurators that have published nothing yet.
        memory: what the next pass needs to know.
        restart_garm: whether a scale set GARM stopped scaling needs GARM restarted.
        version: GARM's version as its controller reports it ("" when unknown or not read).
        endpoint_bundles: the CA bundles (PEM) of the charm's GitHub Enterprise Server
            endpoints GARM holds after the pass, by lower-case name.
        unfinished: the steps the pass's budget cut, in order: the next pass goes on.
        idle: what the next pass is to know of GARM's idle worker starts: GARM's process and
            lookups at which they stopped (``scalesets.worker_starts``); the caller keeps it.
    """

    live: list[ScaleSet]
    notices: list[Notice]
    memory: Memory
    restart_garm: bool = False
    version: str = ""
    endpoint_bundles: dict[str, str] = dataclasses.field(default_factory=dict[str, str])
    unfinished: tuple[Unfinished, ...] = ()
    idle: IdleStarts | None = None


@traced("reconcile.chain")
def run_chain(
    client: GarmClient,
    state: DesiredState,
    memory: Memory | None = None,
    *,
    read_tool: ToolReader | None = None,
    writes: Writes | None = None,
    idle: IdleStarts | None = None,
) -> ChainResult:
    """Bring GARM's controller, credentials, tools, entities, template, scale sets to ``state``.

    Args:
        client: a logged-in GARM client.
        state: the desired state of this pass.
        memory: what the last pass left (None: nothing).
        read_tool: reads a shipped garm-agent binary, called only for one GARM does not
            hold; None when the binaries cannot be read (nothing is uploaded).
        writes: the pass's writes: its pool and budget (None: the default pool, no budget).
        idle: what an earlier pass found GARM's worker starts idle at (``ChainResult.idle``).

    Returns:
        The live scale sets, the notices of the pass and the memory for the next.

    Raises:
        CharmedTemplateError: the charmed template could not be applied; no scale set was
            touched.
        GarmApiError: a listing failed, or a pass-ending failure (``reconcile.containment``).
    """
    memory = memory or Memory()
    writes = writes or Writes()
    held = state.held
    spans = tracer()
    controller = Controller()
    if state.external_url:
        with spans.start_as_current_span("reconcile.controller_urls"):
            controller = sync_controller(client, state.external_url)
    _replaced(memory, fresh=client.first_ran)
    with spans.start_as_current_span("reconcile.endpoints"):
        endpoints = EndpointReconciler(client)
        endpoints.ensure(state.endpoints)
    with spans.start_as_current_span("reconcile.credentials"):
        credentials = CredentialReconciler(client, memory.sent, writes)
        credentials.ensure(
            state.credentials, held=held.credentials, missing_endpoints=endpoints.missing
        )
    with spans.start_as_current_span("reconcile.agent_tools"):
        agent = sync_agent_tools(client, state.agent_tools, read_tool)
    with spans.start_as_current_span("reconcile.entities"):
        entities = EntityReconciler(client, credentials.listed, writes)
        # Beside the scale sets, from their start: a scale set goes once its entity is done.
        entity_step = EntityStep(entities, writes).prepare(
            state.entities,
            missing_credentials=credentials.missing,
            held=held.entities,
            agent_modes=agent.wanted(state.scalesets),
        )
    try:
        with spans.start_as_current_span("reconcile.template"):
            template_id = apply_charmed_template(client, state.debug_ssh)
        specs = [dataclasses.replace(s, template_id=template_id) for s in state.scalesets]
        with spans.start_as_current_span("reconcile.scalesets"):
            reclaim = Reclaim(memory.registered, GitHubDoors(client, state).open)
            result = ScalesetReconciler(
                client, writes=writes, reclaim=reclaim, entities=entity_step, idle=idle
            ).reconcile(specs, prune=state.prune, held=held.scalesets, held_apps=held.apps)
    except BaseException:
        entity_step.settled(quiet=True)  # the first failure is the pass's
        raise
    entity_step.settled()
    lost = _lost(memory.registered, result)
    with spans.start_as_current_span("reconcile.runner_faults"):
        # One listing for every scale set: a runner the cloud refuses shows nowhere else.
        instances = client.list_instances() if result.live else []
        faults = carry_faults(memory.faults, result.live, instances)
    with spans.start_as_current_span("reconcile.stalls"):
        stalls = _watch_stalls(
            client, state, result, instances, faults, memory.stalls, cut=bool(writes.unfinished)
        )
    if state.prune:
        with spans.start_as_current_span("reconcile.deletions"):
            in_use = entities.prune(state.entities, result.live, held=held.entities)
            credentials.prune(state.credentials, in_use, held=held.credentials)
            endpoints.prune(state.endpoints, credentials.endpoints_in_use(state.credentials))
    notices = [
        *lost,
        *endpoints.notices,
        *credentials.notices,
        *agent.notices,
        *entities.notices,
        *result.notices,
        *progress_notices(result.progress),
        *fault_notices(faults),
        *stalls.notices,
        *(
            Notice(Severity.WAITING, app, "waiting for relation data")
            for app in state.unpublished_apps
        ),
    ]
    held_credentials = credential_holders(
        state.credentials, credentials.sent, memory.incumbents.credentials
    )
    now = datetime.now(UTC)
    replaced = replaced_controllers(memory.controller, controller.id, memory.replaced, now)
    notices, failing = escalate([*notices, *leftover_notices(replaced)], memory.failing, now)
    kept = result.wanted | {
        name for name in memory.registered if logical_of(name) in held.scalesets
    }
    return ChainResult(
        result.live,
        notices,
        Memory(
            credentials.sent,
            faults,
            incumbents_of(result.live, held_credentials),
            stalls.recoveries,
            record(memory.registered, result.live, kept, result.unsettled),
            failing,
            controller.id or memory.controller,
            replaced,
        ),
        stalls.restart,
        controller.version,
        endpoints.held_bundles(),
        tuple(writes.unfinished),
        result.idle,
    )


def _replaced(memory: Memory, *, fresh: bool) -> None:
    """Log that GARM's database was replaced while the charm remembers its scale sets."""
    if fresh and memory.registered:
        logger.warning(
            "GARM's database was replaced: GARM needed first-run again while this charm"
            " remembers %d scale set(s) it registered in GitHub; recreating them",
            len(memory.registered),
        )


def _lost(registered: Mapping[str, Registration], result: ReconcileResult) -> list[Notice]:
    """Scale sets GARM registered for the charm but no longer held at the pass's start.

    Only a lost or restored database (or a hand in GARM) makes them: logged, and while any is
    missing, in the status.
    """
    lost = sorted(result.absent & registered.keys())
    if not lost:
        return []
    logger.warning(
        "GARM no longer holds %d scale set(s) this charm registered in GitHub (%s): its"
        " database was lost or restored; recreating them and reclaiming their names in GitHub",
        len(lost),
        ", ".join(lost),
    )
    back = {s.name for s in result.live}
    missing = [name for name in lost if name not in back]
    if not missing:
        return []
    text = f"recovering {len(missing)} scale set(s) GARM's database lost"
    return [Notice(Severity.PROGRESS, "GARM", text)]


def _watch_stalls(
    client: GarmClient,
    state: DesiredState,
    result: ReconcileResult,
    instances: Sequence[Instance],
    faults: Mapping[str, RememberedFault],
    remembered: Mapping[str, Recovery],
    *,
    cut: bool,
) -> StallWatch:
    """The scale sets GARM stopped scaling, among the charm's own that no hold keeps as is.

    A pass its budget cut is still changing scale sets: it restarts no GARM.
    """
    held = state.held
    eligible = {s.name for s in state.scalesets} - set(held.scalesets)
    mine = [s for s in result.live if app_of_provider(s.provider_name or "") not in held.apps]
    now = datetime.now(UTC)
    found = shortfalls(mine, instances, now, eligible=eligible, faulted=faults.keys())
    found, relisted = confirmed(client, found, now)
    return watch_stalls(
        client,
        found,
        remembered,
        instances=instances if relisted is None else relisted,
        changing=bool(result.progress) or cut,
        now=now,
    )


def credential_holders(
    desired: Sequence[CredentialSpec],
    sent: Mapping[str, str] | None,
    before: Mapping[str, tuple[str, str]],
) -> dict[str, tuple[str, str]]:
    """Who holds each credential GARM has: the configurator whose App key GARM was last sent.

    A credential holds the App and key of the spec whose fingerprint was last sent; one not
    written this pass (its holder held) keeps its holder. Without the memory of what was sent,
    nobody is known to hold anything.
    """
    if sent is None:
        return {}
    holders = {name: holder for name, holder in before.items() if name in sent}
    for spec in desired:
        if spec.source and sent.get(spec.name) == spec.fingerprint:
            holders[spec.name] = (spec.source, spec.key_digest)
    return holders


def incumbents_of(
    live: Sequence[ScaleSet], credentials: Mapping[str, tuple[str, str]] | None = None
) -> Incumbents:
    """Who holds each logical scale-set name and entity: the application of its provider.

    A name held by two configurators at once (possible only after an earlier takeover) has no
    incumbent: the relation order decides it, as for a new name. ``credentials`` are the
    credentials' holders (:func:`credential_holders`).
    """
    scalesets: dict[str, set[str]] = {}
    entities: dict[EntityKey, set[str]] = {}
    for scaleset in live:
        app = app_of_provider(scaleset.provider_name or "")
        if not app or not scaleset.name:
            continue
        scalesets.setdefault(logical_of(scaleset.name), set()).add(app)
        endpoint = endpoint_of(scaleset.endpoint)
        owners = (("organization", scaleset.org_name), ("repository", scaleset.repo_name))
        for kind, name in owners:
            if name:
                entities.setdefault(entity_key(kind, name, endpoint), set()).add(app)
    return Incumbents(
        {name: apps.pop() for name, apps in scalesets.items() if len(apps) == 1},
        {key: apps.pop() for key, apps in entities.items() if len(apps) == 1},
        dict(credentials or {}),
    )
