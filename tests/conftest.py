"""Fixtures every pytest suite of the project shares."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests.log_secrets import SECRET_VALUES, captured_log_text


@pytest.fixture(autouse=True)
def _no_secret_in_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fail any test whose captured log holds a secret value the suite knows about."""
    caplog.set_level(logging.DEBUG)
    yield
    text = captured_log_text(caplog)
    leaked = sorted(v for v in SECRET_VALUES if v in text)
    assert not leaked, f"{len(leaked)} secret value(s) reached the log"
