"""The suite's secret-in-log check: what it reads of a log, and the values it knows."""

from __future__ import annotations

import logging

import pytest

from garm import GarmClient
from tests.garm_emulator import GarmEmulator
from tests.log_secrets import SECRET_VALUES, captured_log_text
from tests.unit.conftest import ADMIN_PASSWORD, ADMIN_USERNAME

logger = logging.getLogger(__name__)


def test_a_traceback_is_read_with_its_message(caplog: pytest.LogCaptureFixture):
    try:
        raise ValueError("a value only the traceback holds")
    except ValueError:
        logger.warning("a message that names nothing", exc_info=True)
    text = captured_log_text(caplog)
    assert "a message that names nothing" in text
    assert "ValueError: a value only the traceback holds" in text


def test_an_exception_passed_as_exc_info_is_read(caplog: pytest.LogCaptureFixture):
    logger.debug("no traceback here", exc_info=RuntimeError("carried by the exception"))
    assert "RuntimeError: carried by the exception" in captured_log_text(caplog)


def test_a_stack_is_read(caplog: pytest.LogCaptureFixture):
    logger.debug("with its stack", stack_info=True)
    assert "test_a_stack_is_read" in captured_log_text(caplog)


def test_the_session_token_the_emulator_issues_is_a_registered_secret(
    ready_emulator: GarmEmulator,
):
    # Straight to the emulator, no proxy between: the emulator registers what it issues.
    with GarmClient(ready_emulator.url) as client:
        token = client.login(ADMIN_USERNAME, ADMIN_PASSWORD)
    assert token in SECRET_VALUES
