"""GARM's controller URLs, derived from the external base URL."""

from __future__ import annotations

import pytest

from reconcile.controller import ControllerUrls, controller_urls

FALLBACK = "http://garm.test-model.svc.cluster.local:8080"


def test_controller_urls_from_base():
    assert controller_urls("https://garm.example.com/prefix") == ControllerUrls(
        metadata_url="https://garm.example.com/prefix/api/v1/metadata",
        callback_url="https://garm.example.com/prefix/api/v1/callbacks",
        webhook_url="https://garm.example.com/prefix/webhooks",
        agent_url="https://garm.example.com/prefix/agent",
    )


@pytest.mark.parametrize("base", [FALLBACK, "https://garm.example.com", "http://h/p"])
def test_controller_urls_ignore_trailing_slash(base: str):
    assert controller_urls(base + "/") == controller_urls(base)
    assert controller_urls(base).agent_url == f"{base}/agent"


def test_controller_urls_are_frozen():
    urls = controller_urls(FALLBACK)
    with pytest.raises(AttributeError):
        urls.metadata_url = "x"  # type: ignore[misc]
