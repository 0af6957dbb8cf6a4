"""The CA bundles GARM's process trusts: those of the GitHub Enterprise Server endpoints.

GARM (``afda4e76``) uses an endpoint's CA bundle for the GitHub REST API but not for the
Actions service its scale sets talk to: that client trusts only the process's CA store. So the
charm also hands every endpoint's bundle to GARM's process, through its service environment
(the entrypoint writes them where ``SSL_CERT_DIR`` points GARM); a change restarts GARM.

Like a departing configurator's provider, a departing configurator's bundle stays while GARM
still holds the charm's endpoint: its scale set drains through the Actions service first, and
the endpoint goes last. Before a pass, the bundles are what the relations publish plus what
GARM runs with for endpoints no relation names; after it, what the relations publish plus the
bundles of the endpoints GARM still holds. Owns their service variable (written and read
back). ADR 0014. Pure: no ops, no GARM client.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence

from container_scripts.garm_entrypoint import (
    GARM_GITHUB_CA_BUNDLES,
    EntrypointError,
    joined_variable,
    parse_ca_bundles,
    split_variable,
)
from vocabulary.desired_state import EndpointSpec
from vocabulary.github_endpoint import ca_certificates

logger = logging.getLogger(__name__)


def before_pass(planned: Mapping[str, str], endpoints: Sequence[EndpointSpec]) -> dict[str, str]:
    """The bundles to run GARM with while the pass runs.

    Args:
        planned: the bundles GARM runs with (:func:`from_environment` of the plan's), by name.
        endpoints: the endpoints the configurators publish now.

    Returns:
        The published bundles, and the planned ones of endpoints no configurator names.
    """
    return _published_over(planned, endpoints)


def after_pass(
    applied: Mapping[str, str], endpoints: Sequence[EndpointSpec], held: Mapping[str, str]
) -> dict[str, str] | None:
    """The bundles to run GARM with once the pass is over, when they differ from ``applied``.

    Args:
        applied: the bundles GARM was run with in this pass (:func:`before_pass`).
        endpoints: the endpoints the configurators publish now.
        held: the bundles of the charm's endpoints GARM holds after the pass, by name.

    Returns:
        The new bundles; None when GARM trusts the same certificates already (a bundle GARM
        re-encoded is the same bundle, so no restart follows from its form).
    """
    wanted = _published_over(held, endpoints)
    return None if _certificates(wanted) == _certificates(applied) else wanted


def to_environment(bundles: Mapping[str, str]) -> dict[str, str]:
    """The service variables that give GARM's process ``bundles`` (none: no variable)."""
    if not bundles:
        return {}
    text = json.dumps(dict(sorted(bundles.items())), separators=(",", ":"))
    return split_variable(GARM_GITHUB_CA_BUNDLES, text)


def from_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """The bundles a service environment (a plan's) gives GARM's process, by endpoint name."""
    try:
        return parse_ca_bundles(joined_variable(environment, GARM_GITHUB_CA_BUNDLES))
    except EntrypointError as exc:
        logger.warning("The plan's CA bundles cannot be read (%s): none kept", exc)
        return {}


def published(endpoints: Sequence[EndpointSpec]) -> dict[str, str]:
    """The bundles the configurators publish, by lower-case endpoint name."""
    return {spec.name.lower(): spec.ca_bundle for spec in endpoints if spec.ca_bundle}


def _published_over(
    others: Mapping[str, str], endpoints: Sequence[EndpointSpec]
) -> dict[str, str]:
    """The published bundles, and those of ``others`` for endpoints no configurator names."""
    named = {spec.name.lower() for spec in endpoints}
    kept = {name: bundle for name, bundle in others.items() if name.lower() not in named}
    return dict(sorted({**kept, **published(endpoints)}.items()))


def _certificates(bundles: Mapping[str, str]) -> dict[str, frozenset[bytes]]:
    return {name.lower(): frozenset(ca_certificates(text)) for name, text in bundles.items()}
