"""Removal cleanup through the real charm (``ops.testing``) against the emulator.

The stories real GARM cannot run in the suite's time (a job that ends after the block, see
``tests/conformance/test_removal.py``) and the charm-side rules: only on application removal,
only on the leader, not with ``cleanup-on-remove=false``, and no regular reconcile while the
application goes away.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from ops import testing

from charm import GarmCharm
from garm import CreateCredentialParams, GarmClient, GithubApp
from reconcile import teardown
from tests.charm_driver import CharmDriver, base_state, configurator
from tests.garm_emulator import GarmEmulator
from tests.rsa_keys import pkcs1_pem
from tests.unit.test_charm import deploy
from vocabulary.desired_state import MANAGED_CREDENTIAL_DESCRIPTION


@pytest.fixture
def driver(garm: GarmEmulator, tmp_path: Path) -> Iterator[CharmDriver]:
    """A deployed charm with one configurator and its idle runner.

    The teardown waits on the emulator's simulated clock and measures its bound on it too, so
    a loaded machine cannot make it give up early: ten minutes of GARM time, polled every 30 s.
    """
    charm = CharmDriver(garm, base_state(tmp_path))
    deploy(charm)
    charm.add_configurator(configurator("cfg-1", relation_id=1, org="org-1"))
    for _ in range(2):  # one tick creates the runner, the next one boots it
        garm.advance(timedelta(seconds=30))
    assert [r["runner_status"] for r in garm.instances()] == ["idle"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(GarmCharm, "teardown_timeout", 600.0)
        patch.setattr(GarmCharm, "teardown_poll_interval", 30.0)
        patch.setattr(teardown, "_wait", lambda s: garm.advance(timedelta(seconds=s)))
        patch.setattr(teardown, "_monotonic", lambda: garm.now.timestamp())
        yield charm


def _removing(driver: CharmDriver, **changes: object) -> None:
    driver.state = dataclasses.replace(driver.state, planned_units=0, **changes)  # type: ignore[arg-type]


def _everything(garm: GarmEmulator) -> tuple[int, int, int, int]:
    return (
        len(garm.scalesets()),
        len(garm.instances()),
        len(garm.organizations()),
        len(garm.credentials()),
    )


def test_second_run_after_the_job_ends_finishes(driver: CharmDriver, garm: GarmEmulator):
    (runner,) = garm.instances()
    garm.mark_busy(runner["name"])
    _removing(driver)

    with pytest.raises(testing.errors.UncaughtCharmError) as failed:
        driver.run(driver.ctx.on.stop())
    assert isinstance(failed.value.__cause__, teardown.TeardownBlockedError)
    assert _everything(garm) == (1, 1, 1, 1)

    garm.finish_job(runner["name"])
    driver.run(driver.ctx.on.stop())
    assert _everything(garm) == (0, 0, 0, 0)
    assert [t["name"] for t in garm.templates() if t["name"].endswith("_charmed")] == []


def test_opt_out_keeps_garm_state(driver: CharmDriver, garm: GarmEmulator):
    _removing(driver, config={"cleanup-on-remove": False})
    before = _everything(garm)
    driver.run(driver.ctx.on.stop())
    assert _everything(garm) == before == (1, 1, 1, 1)


@pytest.mark.parametrize("leader,planned", [(True, 1), (False, 0)])
def test_stop_without_application_removal_touches_nothing(
    driver: CharmDriver, garm: GarmEmulator, leader: bool, planned: int
):
    # A pod restart or scale-down (units left), or a non-leader: GARM keeps everything.
    driver.state = dataclasses.replace(driver.state, leader=leader, planned_units=planned)
    driver.run(driver.ctx.on.stop())
    assert _everything(garm) == (1, 1, 1, 1)


def test_no_reconcile_while_the_application_is_removed(driver: CharmDriver, garm: GarmEmulator):
    # Juju breaks every relation before stop: that must not sweep or replan GARM.
    _removing(driver)
    (relation,) = [r for r in driver.state.relations if r.endpoint == "garm-configurator"]
    replans = driver.replans
    driver.remove_relation(relation)
    assert _everything(garm) == (1, 1, 1, 1)
    assert driver.replans == replans


def test_what_the_charm_did_not_create_is_left(
    driver: CharmDriver, garm: GarmEmulator, tmp_path: Path
):
    admin = next(s for s in driver.state.secrets if s.label == "garm-admin-credentials")
    content = admin.latest_content or admin.tracked_content
    key = base64.b64encode(pkcs1_pem().encode()).decode()
    with GarmClient(garm.url) as client:
        client.login(content["username"], content["password"])
        client.create_credential(
            CreateCredentialParams(
                name="someone-elses",
                description="hand made",
                endpoint="github.com",
                app=GithubApp(app_id=7, installation_id=8, private_key_bytes=key),
            )
        )
        client.create_organization("their-org", "someone-elses", "b2" * 32)
    _removing(driver)

    driver.run(driver.ctx.on.stop())

    assert garm.scalesets() == []
    assert [o["name"] for o in garm.organizations()] == ["their-org"]
    assert [(c["name"], c["description"]) for c in garm.credentials()] == [
        ("someone-elses", "hand made")
    ]
    assert MANAGED_CREDENTIAL_DESCRIPTION not in {c["description"] for c in garm.credentials()}
