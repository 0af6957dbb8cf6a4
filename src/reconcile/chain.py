"""The reconcile chain: GitHub credentials, entities, the charmed template, scale sets.

Owns the order of one pass in GARM: objects are created in dependency order (credential,
entity, template, scale set) and deleted in the reverse order in the same pass, so GARM never
refuses a delete because of a dependent; and the notices the pass leaves for the status. Makes
no Juju call: it reads the frozen ``DesiredState`` and must not import ops.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from desired_state import DesiredState
from garm import GarmClient, ScaleSet
from notices import Notice, Severity
from reconcile.charmed_template import apply_charmed_template
from reconcile.credentials import CredentialReconciler
from reconcile.entities import EntityReconciler
from reconcile.scalesets.faults import fault_notices, runner_faults
from reconcile.scalesets.progress import progress_notices
from reconcile.scalesets.reconciler import ScalesetReconciler
from telemetry import tracer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChainResult:
    """What one run of the chain leaves.

    Attributes:
        live: the scale sets in GARM after the pass (nameless ones included).
        notices: what each reconciler held back, the changeovers under way and the
            configurators that have published nothing yet.
        sent: the credential fingerprints GARM holds after the pass (None: not tracked).
    """

    live: list[ScaleSet]
    notices: list[Notice]
    sent: dict[str, str] | None = None


def run_chain(
    client: GarmClient, state: DesiredState, sent: Mapping[str, str] | None = None
) -> ChainResult:
    """Bring GARM's credentials, entities, charmed template and scale sets to ``state``.

    Args:
        client: a logged-in GARM client.
        state: the desired state of this pass.
        sent: the credential fingerprints recorded after the last pass, None when untracked.

    Returns:
        The live scale sets and the notices of the pass.

    Raises:
        CharmedTemplateError: the charmed template could not be applied; no scale set was
            touched.
        GarmApiError: GARM is unreachable, refused the token, or answered a listing wrongly.
    """
    held = state.held
    spans = tracer()
    with spans.start_as_current_span("reconcile.credentials"):
        credentials = CredentialReconciler(client, sent)
        credentials.ensure(state.credentials, held=held.credentials)
    with spans.start_as_current_span("reconcile.entities"):
        entities = EntityReconciler(client, credentials.listed)
        entities.ensure(
            state.entities, missing_credentials=credentials.missing, held=held.entities
        )
    with spans.start_as_current_span("reconcile.template"):
        template_id = apply_charmed_template(client, state.debug_ssh)
    specs = [dataclasses.replace(s, template_id=template_id) for s in state.scalesets]
    with spans.start_as_current_span("reconcile.scalesets"):
        result = ScalesetReconciler(client).reconcile(
            specs, prune=state.prune, held=held.scalesets, held_apps=held.apps
        )
    with spans.start_as_current_span("reconcile.runner_faults"):
        # One listing for every scale set: a runner the cloud refuses shows nowhere else.
        faults = runner_faults(result.live, client.list_instances()) if result.live else []
    if state.prune:
        with spans.start_as_current_span("reconcile.deletions"):
            in_use = entities.prune(state.entities, result.live, held=held.entities)
            credentials.prune(state.credentials, in_use, held=held.credentials)
    notices = [
        *credentials.notices,
        *entities.notices,
        *result.notices,
        *progress_notices(result.progress),
        *fault_notices(faults),
        *(
            Notice(Severity.WAITING, app, "waiting for relation data")
            for app in state.unpublished_apps
        ),
    ]
    # One line per pass, not one per object: under Juju every log line is a juju-log process.
    logger.debug(
        "Reconciled %d credentials, %d organisations and repositories and %d scale sets;"
        " %d held back or under way",
        len(state.credentials),
        len(state.entities),
        len(specs),
        len(notices),
    )
    return ChainResult(result.live, notices, credentials.sent)
