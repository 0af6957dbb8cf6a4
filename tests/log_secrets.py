"""A registry of secret values the tests use, and the text of what a test logged.

The unit tests' conftest fails any test whose captured log (setup and call phases) holds a
registered value. Register test-data secrets at import time, generated ones as they appear.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the simulation imports this module without pytest installed
    import pytest

SECRET_VALUES: set[str] = set()
_FORMATTER = logging.Formatter()


def register_secret(*values: str) -> None:
    """Add values that must never appear in a log."""
    SECRET_VALUES.update(v for v in values if v)


def captured_log_text(caplog: pytest.LogCaptureFixture) -> str:
    """Return everything logged during the test's setup and call phases, tracebacks included.

    ``caplog.text`` in a fixture's teardown only holds the teardown phase, so a check written
    after ``yield`` must read the earlier phases explicitly. A record's traceback (``exc_info``)
    and stack (``stack_info``) reach the log as much as its message does.
    """
    records = [r for phase in ("setup", "call") for r in caplog.get_records(phase)]
    return "\n".join(_logged_text(r) for r in records)


def _logged_text(record: logging.LogRecord) -> str:
    parts = [record.getMessage()]
    if record.exc_info and not record.exc_text:
        record.exc_text = _FORMATTER.formatException(record.exc_info)
    parts += [text for text in (record.exc_text, record.stack_info) if text]
    return "\n".join(parts)
