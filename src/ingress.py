"""Requirer side of the traefik ``ingress`` v2 relation and the URLs GARM advertises.

The charm publishes where GARM listens; the ingress provider answers with a public URL. When
there is no usable answer GARM is advertised on its in-cluster service address instead. The
controller URLs GARM needs (metadata, callback, webhook, agent) all derive from that base.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

import ops

from databag import write_changed
from workload import GARM_PORT

__all__ = [
    "INGRESS_RELATION",
    "ControllerUrls",
    "controller_urls",
    "external_base_url",
    "publish_ingress_request",
]

logger = logging.getLogger(__name__)

INGRESS_RELATION = "ingress"


@dataclass(frozen=True)
class ControllerUrls:
    """The URLs GARM is told to hand out to runners and GitHub.

    Attributes:
        metadata_url: where runners fetch their metadata.
        callback_url: where runners report status.
        webhook_url: where GitHub sends workflow job webhooks.
        agent_url: GARM's agent websocket route.
    """

    metadata_url: str
    callback_url: str
    webhook_url: str
    agent_url: str


def _unit_host(charm: ops.CharmBase) -> str:
    unit = charm.unit.name.replace("/", "-")
    return f"{unit}.{charm.app.name}-endpoints.{charm.model.name}.svc.cluster.local"


def _pod_ip(charm: ops.CharmBase, relation: ops.Relation) -> str | None:
    # Typed as non-optional by ops, yet a binding can be missing while the pod is starting.
    binding = cast("ops.Binding | None", charm.model.get_binding(relation))
    if binding is None:
        return None
    try:
        address = binding.network.bind_address
    except ops.ModelError:
        logger.debug("No network information for the %s binding yet", INGRESS_RELATION)
        return None
    return str(address) if address is not None else None


def publish_ingress_request(charm: ops.CharmBase) -> None:
    """Publish this application's ingress request on the ``ingress`` relation, if any.

    The leader writes the application data (model, name, port, strip-prefix, redirect-https,
    scheme); every unit writes its own host and pod IP (``null`` when unknown). All values are
    JSON-encoded, as the ingress v2 interface requires. Values already in place are not
    rewritten.

    Args:
        charm: the charm whose relation data is written.
    """
    relation = charm.model.get_relation(INGRESS_RELATION)
    if relation is None:
        return
    if charm.unit.is_leader():
        write_changed(
            relation.data[charm.app],
            {
                "model": json.dumps(charm.model.name),
                "name": json.dumps(charm.app.name),
                "port": json.dumps(GARM_PORT),
                "strip-prefix": json.dumps(False),
                "redirect-https": json.dumps(False),
                "scheme": json.dumps("http"),
            },
        )
    write_changed(
        relation.data[charm.unit],
        {"host": json.dumps(_unit_host(charm)), "ip": json.dumps(_pod_ip(charm, relation))},
    )


def _fallback_base_url(charm: ops.CharmBase) -> str:
    return f"http://{charm.app.name}.{charm.model.name}.svc.cluster.local:{GARM_PORT}"


def _url_from_answer(raw: str) -> str | None:
    """Return the ``url`` string of the provider's JSON answer, or None."""
    try:
        answer = json.loads(raw)
    except json.JSONDecodeError:
        return None
    if not isinstance(answer, dict):
        return None
    url = answer.get("url")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return url if isinstance(url, str) else None


def _parse_ingress_url(raw: str) -> str | None:
    """Return the provider's URL without trailing slashes, or None if it is not usable."""
    url = _url_from_answer(raw)
    if url is None:
        return None
    url = url.strip().rstrip("/")
    # Relation data is untrusted and this URL ends up in GARM's config and runner scripts.
    if any(char.isspace() or not char.isprintable() for char in url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return url


def external_base_url(charm: ops.CharmBase) -> str:
    """Return the base URL GARM is reachable on, without a trailing slash.

    This is the URL the ingress provider published in its ``ingress`` application data
    (``{"url": ...}``), or ``http://<app>.<model>.svc.cluster.local:8080`` when there is no
    ingress relation or its answer is absent or invalid.

    Args:
        charm: the charm reading the relation.

    Returns:
        The base URL.
    """
    relation = charm.model.get_relation(INGRESS_RELATION)
    if relation is None:
        return _fallback_base_url(charm)
    raw = relation.data[relation.app].get("ingress", "")
    if not raw:
        logger.debug("Ingress provider has not published a URL yet")
        return _fallback_base_url(charm)
    url = _parse_ingress_url(raw)
    if url is None:
        logger.warning("Ingress provider published an unusable URL; using the in-cluster URL")
        return _fallback_base_url(charm)
    return url


def controller_urls(base_url: str) -> ControllerUrls:
    """Derive GARM's controller URLs from a base URL.

    Args:
        base_url: the external base URL; a trailing slash makes no difference.

    Returns:
        The metadata, callback, webhook and agent URLs.
    """
    base = base_url.rstrip("/")
    return ControllerUrls(
        metadata_url=f"{base}/api/v1/metadata",
        callback_url=f"{base}/api/v1/callbacks",
        webhook_url=f"{base}/webhooks",
        agent_url=f"{base}/agent",
    )
