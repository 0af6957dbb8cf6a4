"""Fixtures every pytest suite of the project shares."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from relations.cos_logging import SecurityEventPusher
from tests.log_secrets import SECRET_VALUES, captured_log_text
from vocabulary.security_events import LOGGER_NAME


@pytest.fixture(autouse=True)
def _no_secret_in_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fail any test whose captured log holds a secret value the suite knows about."""
    caplog.set_level(logging.DEBUG)
    yield
    text = captured_log_text(caplog)
    leaked = sorted(v for v in SECRET_VALUES if v in text)
    assert not leaked, f"{len(leaked)} secret value(s) reached the log"


@pytest.fixture(autouse=True)
def _no_loki_push_after_the_test() -> Iterator[None]:
    """Detach the Loki pusher a charm run attached: it would push the next test's events."""
    yield
    events = logging.getLogger(LOGGER_NAME)
    for handler in [h for h in events.handlers if isinstance(h, SecurityEventPusher)]:
        events.removeHandler(handler)
