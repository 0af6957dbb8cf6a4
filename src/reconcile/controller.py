"""GARM's controller URLs, the first step of the chain: where runners and GitHub reach GARM.

Owns the URLs GARM hands out (metadata, callback, webhook, agent), derived from GARM's external
base URL, and their update when GARM has others. Returns GARM's version as the controller
reports it, for the charm to show, and its controller id. Knows GARM through the client; must
not import ops.
"""

from __future__ import annotations

import dataclasses
import logging

from garm import GarmClient

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
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


@dataclasses.dataclass(frozen=True)
class Controller:
    """GARM's controller as it reports itself: its version and id ("" when unknown).

    The id is made at GARM's first-run and kept in its database: another id means another
    database, and GARM tags its runners' servers with it (``garm-controller-id``).
    """

    version: str = ""
    id: str = ""


def sync_controller(client: GarmClient, base_url: str) -> Controller:
    """Set GARM's controller URLs where they differ; return GARM's version and controller id.

    Raises:
        GarmApiError: GARM failed to answer or refused the update (the pass ends).
    """
    urls = controller_urls(base_url)
    current = client.get_controller()
    wanted = dataclasses.asdict(urls)
    # No line when nothing changes: under Juju each log line is a juju-log process.
    if any(getattr(current, key) != value for key, value in wanted.items()):
        logger.info("Setting GARM controller URLs to base %s", urls.metadata_url)
        client.update_controller(**wanted)
    return Controller(current.version or "", current.controller_id or "")
