"""A rotated GitHub App key reaches GARM: the charm remembers a fingerprint, never the key.

The configurator puts the new key in a new revision of the same secret; the URI in its databag
does not change. GARM never returns a key, so the charm compares the fingerprint of what it
last sent (kept in the ``garm-peers`` application databag) with the configurator's current key.
The real charm runs through ``ops.testing`` against the emulator; what GARM was sent is read
from the emulator's request record.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path

import ops
import pytest
from ops import testing

from reconcile.memory import SENT_CREDENTIALS_KEY
from records.leadership import PEER_RELATION
from tests.charm_driver import PRIVATE_KEY_VALUE, CharmDriver, base_state, configurator
from tests.garm_emulator import GarmEmulator
from tests.log_secrets import register_secret
from tests.rsa_keys import pkcs1_pem
from workload import pebble_layer

ROTATED_KEY = pkcs1_pem(3)
register_secret(ROTATED_KEY)
CREDENTIAL = "app-101-202"


@pytest.fixture
def driver(garm: GarmEmulator, tmp_path: Path) -> CharmDriver:
    return CharmDriver(garm, base_state(tmp_path))


def deploy_with_configurator(driver: CharmDriver) -> testing.Secret:
    driver.run(driver.ctx.on.install())
    driver.run(driver.ctx.on.leader_elected())
    driver.run(driver.ctx.on.pebble_ready(driver.state.get_container(pebble_layer.CONTAINER_NAME)))
    cfg = configurator("cfg-a", relation_id=1)
    driver.add_configurator(cfg)
    return cfg.secrets[1]


def stored_key(garm: GarmEmulator) -> str:
    secrets = garm.credential_secrets(CREDENTIAL)
    assert secrets is not None
    stored = secrets["app"]["private_key_bytes"]
    # The emulator keeps what GARM decodes from the wire's base64: the PEM's bytes.
    return stored.decode() if isinstance(stored, bytes) else base64.b64decode(stored).decode()


def credential_puts(garm: GarmEmulator) -> list[dict[str, object]]:
    return [r.body for r in garm.writes() if r.method == "PUT" and "/credentials/" in r.path]


def sent_record(state: testing.State) -> dict[str, str]:
    peers = state.get_relations(PEER_RELATION)[0]
    return json.loads(peers.local_app_data[SENT_CREDENTIALS_KEY])


def rotate(driver: CharmDriver, key_secret: testing.Secret, new_key: str) -> testing.State:
    """The configurator's new secret revision, and the secret-changed hook Juju sends."""
    return driver.new_secret_revision(key_secret, {"value": new_key})


def test_a_rotated_key_is_sent_to_garm_once(driver: CharmDriver, garm: GarmEmulator):
    key_secret = deploy_with_configurator(driver)
    assert stored_key(garm) == PRIVATE_KEY_VALUE
    first = sent_record(driver.state)
    assert list(first) == [CREDENTIAL]
    # The record holds a digest, never the key.
    assert PRIVATE_KEY_VALUE not in json.dumps(first)
    garm.clear_requests()
    out = rotate(driver, key_secret, ROTATED_KEY)
    assert stored_key(garm) == ROTATED_KEY
    [body] = credential_puts(garm)
    assert body["app"]["app_id"] == 101  # pyright: ignore[reportIndexIssue]
    assert sent_record(out)[CREDENTIAL] != first[CREDENTIAL]
    assert out.unit_status == ops.ActiveStatus()
    # Converged again: nothing more is sent.
    garm.clear_requests()
    driver.run(driver.ctx.on.update_status())
    assert garm.writes() == []


def test_an_unchanged_key_is_never_sent_again(driver: CharmDriver, garm: GarmEmulator):
    deploy_with_configurator(driver)
    garm.clear_requests()
    for _ in range(2):
        driver.run(driver.ctx.on.update_status())
    assert garm.writes() == []


def test_the_record_survives_a_pod_replacement(
    driver: CharmDriver, garm: GarmEmulator, tmp_path: Path
):
    key_secret = deploy_with_configurator(driver)
    # A new pod: empty container, no plan; the peer databag and GARM's database remain.
    fresh = base_state(tmp_path)
    driver.state = dataclasses.replace(driver.state, containers=fresh.containers)
    garm.clear_requests()
    driver.run(driver.ctx.on.pebble_ready(driver.state.get_container(pebble_layer.CONTAINER_NAME)))
    assert credential_puts(garm) == []
    rotate(driver, key_secret, ROTATED_KEY)
    assert stored_key(garm) == ROTATED_KEY


def test_a_credential_without_a_record_is_sent_once(driver: CharmDriver, garm: GarmEmulator):
    # An older charm kept no record: the first pass sends the key again, then remembers it.
    key_secret = deploy_with_configurator(driver)
    peers = driver.state.get_relations(PEER_RELATION)[0]
    emptied = dataclasses.replace(peers, local_app_data={})
    driver.state = dataclasses.replace(
        driver.state, relations={emptied, *(r for r in driver.state.relations if r.id != peers.id)}
    )
    garm.clear_requests()
    out = driver.run(driver.ctx.on.update_status())
    assert len(credential_puts(garm)) == 1
    assert CREDENTIAL in sent_record(out)
    garm.clear_requests()
    driver.run(driver.ctx.on.update_status())
    assert garm.writes() == []
    assert key_secret.id


def test_a_refused_rotation_is_retried(driver: CharmDriver, garm: GarmEmulator):
    key_secret = deploy_with_configurator(driver)
    garm.fail_next("PUT", r"/github/credentials/\d+", 500, count=1)
    out = rotate(driver, key_secret, ROTATED_KEY)
    assert stored_key(garm) == PRIVATE_KEY_VALUE
    assert isinstance(out.unit_status, ops.BlockedStatus)
    assert "GARM refused the GitHub App" in out.unit_status.message
    driver.run(driver.ctx.on.update_status())
    assert stored_key(garm) == ROTATED_KEY
