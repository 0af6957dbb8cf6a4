"""Security events on each GARM backend: the disclosure and the refused admin login.

The charm runs through ``ops.testing``; its security events are read from its log (logger
``garm-charm.security``), and what GARM answered from the recording proxy. The suite-wide
check fails a test whose log holds the admin password.
"""

from __future__ import annotations

import dataclasses

import ops
import pytest
from ops import testing

from garm import GarmClient
from records.secrets_store import ADMIN_CREDENTIALS_LABEL
from tests.charm_driver import CharmDriver
from tests.conformance.conftest import Garm
from tests.log_secrets import register_secret
from tests.real_garm.proxy import LOGIN_PATH
from tests.security_log import security_events as logged
from vocabulary import security_events

WRONG_PASSWORD = "Not-the-admin-password-9"
register_secret(WRONG_PASSWORD)


def test_get_credentials_discloses_the_admin_garm_accepts_and_says_so(
    driver: CharmDriver, charm_garm: Garm, caplog: pytest.LogCaptureFixture
):
    caplog.clear()
    driver.ctx.run(driver.ctx.on.action("get-credentials", id="5"), driver.state)
    results = driver.ctx.action_results or {}

    (event,) = logged(caplog, security_events.SENSITIVE_READ)
    assert event["event"] == f"sensitive_read:garm/0,{ADMIN_CREDENTIALS_LABEL}"
    assert (event["action"], event["action_id"], event["outcome"]) == (
        "get-credentials",
        "5",
        "success",
    )
    # What was disclosed is GARM's admin: GARM takes it.
    with GarmClient(charm_garm.url) as client:
        assert client.login(results["username"], results["password"])


def test_garm_refusing_the_admin_login_is_authn_login_fail(
    driver: CharmDriver, charm_garm: Garm, caplog: pytest.LogCaptureFixture
):
    secret = next(s for s in driver.state.secrets if s.label == ADMIN_CREDENTIALS_LABEL)
    content = {**(secret.latest_content or secret.tracked_content), "password": WRONG_PASSWORD}
    changed = dataclasses.replace(secret, tracked_content=content, latest_content=content)
    others = {s for s in driver.state.secrets if s.label != ADMIN_CREDENTIALS_LABEL}
    driver.state = dataclasses.replace(driver.state, secrets={*others, changed})
    charm_garm.clear_requests()
    caplog.clear()

    out = driver.run(driver.ctx.on.update_status())

    logins = [(c.method, c.status) for c in charm_garm.requests if c.path == LOGIN_PATH]
    assert logins == [("POST", 401)]
    assert out.unit_status == ops.BlockedStatus("GARM rejected the admin credentials")
    (event,) = logged(caplog, security_events.AUTHN_LOGIN_FAIL)
    assert event["event"] == "authn_login_fail:admin"
    assert (event["hook"], event["outcome"]) == ("update-status", "failure")


def test_no_security_event_in_a_converged_hook(
    driver: CharmDriver, caplog: pytest.LogCaptureFixture
):
    caplog.clear()
    out = driver.run(driver.ctx.on.update_status())
    assert isinstance(out, testing.State)
    assert logged(caplog) == []
