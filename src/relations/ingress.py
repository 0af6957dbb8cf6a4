"""Requirer side of the traefik ``ingress`` v2 relation and the base URL GARM advertises.

The charm publishes where GARM listens; the ingress provider answers with a public URL. When
there is no usable answer GARM is advertised on its in-cluster service address instead. The
controller URLs GARM hands out derive from that base (``reconcile.controller``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import cast
from urllib.parse import urlsplit

import ops

from relations.databag import write_changed
from workload.pebble_layer import GARM_PORT

__all__ = [
    "INGRESS_RELATION",
    "PodAddress",
    "external_base_url",
    "publish_ingress_request",
]

logger = logging.getLogger(__name__)

INGRESS_RELATION = "ingress"


def _unit_host(charm: ops.CharmBase) -> str:
    unit = charm.unit.name.replace("/", "-")
    return f"{unit}.{charm.app.name}-endpoints.{charm.model.name}.svc.cluster.local"


class PodAddress(ops.Object):
    """What this pod knows of its ingress request: its IP and what it last published.

    Both are the unit's own ``StoredState``, gone with the pod. A pod keeps its address for its
    life, and each read is a ``network-get`` (a process under Juju); and only this unit writes
    its unit databag (only the leader the application's), so a request equal to the one this
    pod last wrote on the same relation is not read back to be compared (two ``relation-get``
    a hook). What the application databag held is forgotten when the unit is elected: another
    leader may have written it since.
    """

    _stored = ops.StoredState()

    def __init__(self, charm: ops.CharmBase) -> None:
        """Remember nothing yet on a new pod."""
        super().__init__(charm, "pod-address")
        self._charm = charm
        self._stored.set_default(ip=None, sent={})
        charm.framework.observe(charm.on.leader_elected, self._on_leader_elected)

    def _on_leader_elected(self, _: ops.LeaderElectedEvent) -> None:
        self._stored.sent = {k: v for k, v in self._sent().items() if k != "app"}

    def ip(self, relation: ops.Relation) -> str | None:
        """The pod's IP as ``relation``'s binding gives it; None while the pod starts."""
        if self._stored.ip is None:
            self._stored.ip = _binding_ip(self._charm, relation)
        return cast("str | None", self._stored.ip)

    def publish(
        self,
        relation: ops.Relation,
        side: str,
        databag: ops.RelationDataContent,
        wanted: dict[str, str],
    ) -> None:
        """Write ``wanted`` to ``databag`` (our ``side``: app or unit) unless this pod did."""
        sent = f"{relation.id}:{json.dumps(wanted, sort_keys=True)}"
        if self._sent().get(side) == sent:
            return
        write_changed(databag, wanted)
        self._stored.sent = {**self._sent(), side: sent}

    def _sent(self) -> dict[str, str]:
        return dict(cast("Mapping[str, str]", self._stored.sent))


def _binding_ip(charm: ops.CharmBase, relation: ops.Relation) -> str | None:
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


def publish_ingress_request(charm: ops.CharmBase, pod: PodAddress) -> None:
    """Publish this application's ingress request on the ``ingress`` relation, if any.

    The leader writes the application data (model, name, port, strip-prefix, redirect-https,
    scheme); every unit writes its own host and pod IP (``null`` when unknown). All values are
    JSON-encoded, as the ingress v2 interface requires. Values already in place are not
    rewritten, and a request this pod already wrote is not read back (``PodAddress``).

    Args:
        charm: the charm whose relation data is written.
        pod: the pod's address and what it last published, as this pod knows them.
    """
    relation = charm.model.get_relation(INGRESS_RELATION)
    if relation is None:
        return
    if charm.unit.is_leader():
        pod.publish(
            relation,
            "app",
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
    host = {"host": json.dumps(_unit_host(charm)), "ip": json.dumps(pod.ip(relation))}
    pod.publish(relation, "unit", relation.data[charm.unit], host)


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
