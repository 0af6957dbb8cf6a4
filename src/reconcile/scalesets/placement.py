"""Where a scale set lives (provider and entity), and which live name a spec's generation has.

GARM cannot move a scale set to another provider or entity, so a spec whose configurator now
names another provider (its leader unit was removed and the new leader publishes its own) or
another organisation or repository is changed by replacement, like a label change: the live
scale set of the label name is retired and drained, and the replacement is created where the
spec says, under a name that also hashes the placement (two live scale sets cannot share a
name). Owns that rule, kept without memory: it is re-derived from GARM's listing every pass,
and the notice of a name taken elsewhere. Pure: must not import ops; makes no GARM call.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping

from garm import ScaleSet
from reconcile.endpoints import endpoint_of
from reconcile.scalesets.names import LABEL_HASH_LENGTH, name_base, target_scaleset_name
from vocabulary.desired_state import DEFAULT_GITHUB_ENDPOINT, ScalesetSpec, entity_key
from vocabulary.notices import Notice, Severity

logger = logging.getLogger(__name__)


def placed_as_specified(live: ScaleSet, spec: ScalesetSpec) -> bool:
    """Tell whether a live scale set has the spec's provider and entity.

    Neither can change on a live scale set, so a live one elsewhere is never updated as if it
    were this spec's.
    """
    provider_ok = live.provider_name is None or live.provider_name == spec.provider_name
    return provider_ok and same_entity(live, spec)


def same_entity(live: ScaleSet, spec: ScalesetSpec) -> bool:
    """Tell whether a live scale set belongs to the spec's organisation or repository."""
    # GARM names a repository ``owner/name``, as configurators do; names are matched by key.
    name = live.org_name if spec.entity_type == "organization" else live.repo_name
    if name is None:
        return True
    return entity_key(spec.entity_type, name, endpoint_of(live.endpoint)) == spec.entity_key


def placed_scaleset_name(spec: ScalesetSpec) -> str:
    """The live name of a generation that moved: the hash covers labels and placement."""
    material = "\n".join(
        [
            ",".join(sorted(spec.labels)),
            spec.provider_name,
            # github.com's hash is the one it always was: no live name moves on an upgrade.
            *spec.entity_key[:2],
            *([spec.endpoint] if spec.endpoint != DEFAULT_GITHUB_ENDPOINT else []),
        ]
    )
    digest = hashlib.sha256(material.encode("utf-8")).hexdigest()[:LABEL_HASH_LENGTH]
    return f"{name_base(spec.name)}-{digest}"


def resolve_target(spec: ScalesetSpec, observed: Mapping[str, ScaleSet]) -> str:
    """Return the live name the spec's current generation has, or gets when created.

    The label name (``target_scaleset_name``) while it is free or lives where the spec says;
    the placed name once the label name is taken by a scale set elsewhere, and for as long as
    the placed generation lives (so deleting the old one never brings the label name back).
    """
    label_name = target_scaleset_name(spec.name, spec.labels)
    placed_name = placed_scaleset_name(spec)
    label_live = observed.get(label_name)
    if label_live is not None and placed_as_specified(label_live, spec):
        return label_name
    if label_live is None and placed_name not in observed:
        return label_name
    return placed_name


def name_taken_notice(live: ScaleSet, spec: ScalesetSpec) -> Notice:
    """A scale set made by hand under the charm's own name, elsewhere: never the charm's."""
    logger.warning(
        "Scaleset name %r is taken by a scale set on provider %r of %s, but %r asks for"
        " provider %r and %s %r; it is not the charm's to update or delete",
        live.name,
        live.provider_name,
        live.org_name or live.repo_name,
        spec.name,
        spec.provider_name,
        spec.entity_type,
        spec.entity_name,
    )
    return Notice(
        Severity.BLOCKED, spec.name, f"name {live.name} is taken on another provider or entity"
    )
