"""Configurator secrets are read once per revision, through the real charm on the emulator.

A converged hook reads no configurator secret: the ledger in ``garm-peers`` vouches for what
was read before, a password comes from the provider record and an App key is read only when
GARM must be sent it. A new secret id is read once; ``secret-changed`` brings a new revision to
GARM in its own hook; a GARM that lost its credentials (a new database) gets the keys again.
"""

from __future__ import annotations

import json
from pathlib import Path

import ops
import pytest

from records import configurator_secrets
from records.leadership import PEER_RELATION
from tests.charm_driver import (
    PRIVATE_KEY_VALUE,
    CharmDriver,
    base_state,
    configurator,
    deployed,
    planned_env,
    replaced_database,
)
from tests.garm_emulator import GarmEmulator
from tests.log_secrets import register_secret
from tests.rsa_keys import pkcs1_pem

ROTATED_KEY = pkcs1_pem(5)
register_secret(ROTATED_KEY)
NEW_PASSWORD = "rotated-openstack-password-9"
register_secret(NEW_PASSWORD)


@pytest.fixture
def driver(garm: GarmEmulator, tmp_path: Path) -> CharmDriver:
    return deployed(garm, base_state(tmp_path))


def own_secret_reads(driver: CharmDriver) -> int:
    """The secret-gets of a converged hook with no configurator: the charm's own secrets."""
    driver.run(driver.ctx.on.update_status())
    return driver.tool_calls["secret_get"]


def ledger(driver: CharmDriver) -> dict[str, str]:
    peers = driver.state.get_relations(PEER_RELATION)[0]
    return dict(peers.local_app_data)


def test_a_converged_hook_reads_no_configurator_secret(driver: CharmDriver) -> None:
    own = own_secret_reads(driver)
    cfgs = [configurator(f"cfg-{i}", relation_id=1 + i, org=f"org-{i}") for i in range(3)]
    for cfg in cfgs:
        driver.add_configurator(cfg)
    driver.run(driver.ctx.on.update_status())

    assert driver.tool_calls["secret_get"] == own
    assert driver.state.unit_status == ops.ActiveStatus()
    assert driver.juju_writes() == {}
    remembered = ledger(driver)[configurator_secrets.LEDGER_KEY]
    assert PRIVATE_KEY_VALUE not in remembered
    for secret in (s for cfg in cfgs for s in cfg.secrets):
        assert configurator_secrets.secret_key(secret.id) in remembered


def test_a_new_secret_id_is_read_once(driver: CharmDriver) -> None:
    own = own_secret_reads(driver)
    driver.add_configurator(configurator("cfg-a", relation_id=1))
    cfg = configurator("cfg-b", relation_id=2, org="org-b")
    driver.add_configurator(cfg)
    # The relation-joined hook of cfg-b read its two secrets; relation-changed none again: its
    # one more read is the provider record's, moved on to the revision the joined hook wrote.
    assert driver.tool_calls["secret_get"] == own + 1
    driver.run(driver.ctx.on.update_status())
    assert driver.tool_calls["secret_get"] == own


def test_a_rotated_key_reaches_garm_in_its_secret_changed_hook(
    driver: CharmDriver, garm: GarmEmulator
) -> None:
    own = own_secret_reads(driver)
    cfg = configurator("cfg-a", relation_id=1)
    driver.add_configurator(cfg)
    other = configurator("cfg-b", relation_id=2, org="org-b", app_id="102")
    driver.add_configurator(other)
    garm.clear_requests()

    driver.new_secret_revision(cfg.secrets[1], {"value": ROTATED_KEY})

    puts = [r for r in garm.writes() if r.method == "PUT" and "/credentials/" in r.path]
    assert len(puts) == 1
    # The refresh itself is the only configurator secret read: cfg-b's stay unread.
    assert driver.tool_calls["secret_get"] == own + 1
    driver.run(driver.ctx.on.update_status())
    assert driver.tool_calls["secret_get"] == own
    assert garm.writes() == puts


def test_a_rotated_password_reaches_the_plan_in_its_secret_changed_hook(
    driver: CharmDriver,
) -> None:
    cfg = configurator("cfg-a", relation_id=1)
    driver.add_configurator(cfg)
    assert NEW_PASSWORD not in json.dumps(planned_env(driver.state))

    driver.new_secret_revision(cfg.secrets[0], {"value": NEW_PASSWORD})

    assert NEW_PASSWORD in json.dumps(planned_env(driver.state))
    replans = driver.replans
    driver.run(driver.ctx.on.update_status())
    assert driver.replans == replans


def test_a_garm_that_lost_its_credentials_is_sent_the_keys_again(
    driver: CharmDriver, garm: GarmEmulator
) -> None:
    own = own_secret_reads(driver)
    driver.add_configurator(configurator("cfg-a", relation_id=1))
    driver.run(driver.ctx.on.update_status())
    assert driver.tool_calls["secret_get"] == own

    fresh = GarmEmulator()
    fresh.start()
    try:
        # A new database behind the same pod: the charm's memory and ledger are kept.
        fresh.replan(planned_env(driver.state))
        replaced = CharmDriver(fresh, driver.state)
        replaced.run(replaced.ctx.on.update_status())
        assert [c["name"] for c in fresh.credentials()] == ["app-101-202"]
        assert replaced.tool_calls["secret_get"] == own + 1  # the App key, once
        lost = garm.state.controller.controller_id
        assert replaced.state.unit_status == replaced_database(lost)
    finally:
        fresh.stop()
