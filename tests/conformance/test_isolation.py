"""One configurator's bad input or refused object never touches or stalls another.

Each test deploys the charm with two configurators on each GARM backend, lets them converge,
then changes only one configurator's data. What GARM received (the recording proxy) and holds
(its listings) shows that the other configurator goes on as usual and that nothing of the bad
one is updated or deleted; the status names the configurator and the key.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import ops
import pytest
from ops import testing

from tests.charm_driver import CharmDriver, Configurator, configurator
from tests.conformance.conftest import Garm
from tests.log_secrets import SECRET_VALUES, captured_log_text, register_secret
from tests.rsa_keys import pkcs8_pem

# A PKCS#1 armour around DER that is a sequence but not an RSA key: it passes the charm's shape
# check, and GARM itself refuses it (with a 500, as it does any damaged PKCS#1 key).
BROKEN_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    + base64.b64encode(bytes([0x30, 0x82, 0x01, 0x00]) + bytes(range(96))).decode()
    + "\n-----END RSA PRIVATE KEY-----\n"
)
register_secret(BROKEN_KEY)


def quiet(app: str, relation_id: int, number: int, **extra: str) -> Configurator:
    """A configurator with its own App, organisation and scale set, and no idle runner."""
    return configurator(
        app,
        relation_id=relation_id,
        org=f"org-{number}",
        app_id=str(3000 + number),
        installation_id=str(4000 + number),
        extra={"min_idle_runner": "0", **extra},
    )


def snapshot(garm: Garm) -> dict[str, Any]:
    """GARM's objects as listed, without the fields GARM moves on its own."""
    volatile = {"updated_at", "desired_runner_count", "state", "extended_state", "status_messages"}
    return {
        "credentials": sorted(c["name"] for c in garm.credentials()),
        "organizations": sorted(o["name"] for o in garm.organizations()),
        "scalesets": sorted(
            ({k: v for k, v in s.items() if k not in volatile} for s in garm.scalesets()),
            key=lambda s: s["name"],
        ),
    }


def writes_to(garm: Garm) -> list[tuple[str, str]]:
    return [(c.method, c.path) for c in garm.writes()]


def assert_no_secret_logged(caplog: pytest.LogCaptureFixture) -> None:
    text = captured_log_text(caplog)
    assert not [v for v in SECRET_VALUES if v in text]


BAD_INPUTS = {
    "non-numeric-count": ({"max_runner": "four"}, "max_runner is not an integer"),
    "zero-max": ({"max_runner": "0"}, "max_runner must be at least 1"),
    "min-above-max": ({"min_idle_runner": "5", "max_runner": "2"}, "min_idle_runner"),
    "newline-in-labels": ({"labels": "linux\nx64"}, "invalid keys: labels"),
    "malformed-scripts": ({"pre_install_scripts": "{not json"}, "pre_install_scripts"),
    "partial-app": ({"github_installation_id": ""}, "github_installation_id"),
    "other-org": ({"org": "org-1", "github_app_id": "3999"}, "organization org-1 belongs to"),
    "same-name": ({"name": "cfg-a-runners"}, "scale set cfg-a-runners belongs to cfg-a"),
}


@pytest.mark.parametrize("bad", sorted(BAD_INPUTS))
def test_bad_input_of_one_configurator_touches_nothing(
    driver: CharmDriver, charm_garm: Garm, caplog: pytest.LogCaptureFixture, bad: str
):
    good = quiet("cfg-a", 1, 1)
    other = quiet("cfg-b", 2, 2)
    driver.add_configurator(good)
    driver.add_configurator(other)
    driver.run(driver.ctx.on.update_status())
    before = snapshot(charm_garm)
    assert len(before["scalesets"]) == 2

    data, key = BAD_INPUTS[bad]
    charm_garm.clear_requests()
    out = driver.change_relation(other.relation, **data)

    assert writes_to(charm_garm) == []
    assert snapshot(charm_garm) == before
    assert "cfg-b" in out.unit_status.message
    assert key in out.unit_status.message
    assert_no_secret_logged(caplog)

    # The good configurator still gets its changes while the other is held.
    charm_garm.clear_requests()
    out = driver.change_relation(good.relation, image_id="ubuntu-26.04")
    (update,) = [(m, p) for m, p in writes_to(charm_garm) if m == "PUT"]
    assert update[1].startswith("/scalesets/")
    images = {s["name"].split("-runners")[0]: s["image"] for s in charm_garm.scalesets()}
    assert images == {"cfg-a": "ubuntu-26.04", "cfg-b": "ubuntu-24.04"}


def test_pkcs8_key_is_caught_before_garm(
    driver: CharmDriver, charm_garm: Garm, caplog: pytest.LogCaptureFixture
):
    other = quiet("cfg-b", 2, 2)
    driver.add_configurator(quiet("cfg-a", 1, 1))
    driver.add_configurator(other)
    before = snapshot(charm_garm)
    key_secret = other.secrets[1]
    content = {"value": pkcs8_pem(0)}
    rotated = dataclasses.replace(key_secret, tracked_content=content, latest_content=content)
    driver.state = dataclasses.replace(
        driver.state,
        secrets={*(s for s in driver.state.secrets if s.id != key_secret.id), rotated},
    )
    charm_garm.clear_requests()
    out = driver.run(driver.ctx.on.secret_changed(rotated))
    assert writes_to(charm_garm) == []
    assert snapshot(charm_garm) == before
    assert "cfg-b/0" in out.unit_status.message
    assert "PKCS#8" in out.unit_status.message
    assert_no_secret_logged(caplog)


def test_refused_credentials_block_one_configurator_and_the_other_goes_on(
    driver: CharmDriver, charm_garm: Garm, caplog: pytest.LogCaptureFixture
):
    bad = quiet("cfg-a", 1, 1)
    broken = testing.Secret(tracked_content={"value": BROKEN_KEY})
    bad_relation = dataclasses.replace(
        bad.relation,
        remote_units_data={
            0: {**bad.relation.remote_units_data[0], "github_private_key_secret_uri": broken.id}
        },
    )
    bad = Configurator(relation=bad_relation, secrets=[bad.secrets[0], broken])
    good = quiet("cfg-b", 2, 2)
    driver.add_configurator(bad)
    out = driver.add_configurator(good)

    assert out.unit_status == ops.BlockedStatus(
        "cfg-a: GARM refused the GitHub App (github_private_key_secret_uri); "
        "cfg-a-runners: waiting for organization org-1; +1 more"
    )
    assert [c["name"] for c in charm_garm.credentials()] == ["app-3002-4002"]
    assert [s["name"].split("-runners")[0] for s in charm_garm.scalesets()] == ["cfg-b"]
    # cfg-a's organisation was not even tried: its credential is not in GARM.
    posts = [c.path for c in charm_garm.requests if c.method == "POST"]
    assert posts.count("/organizations") == 1

    # The other configurator changes labels: replaced, drained and deleted as usual.
    driver.change_relation(good.relation, labels="linux,x64,noble")
    driver.run(driver.ctx.on.update_status())
    out = driver.run(driver.ctx.on.update_status())
    (live,) = charm_garm.scalesets()
    assert live["name"].startswith("cfg-b-runners-")
    assert sorted(t["name"] for t in live["tags"]) == ["linux", "noble", "x64"]
    assert out.unit_status.name == "blocked"

    # And it leaves: swept with its organisation and credential, provider trimmed.
    driver.remove_relation(good.relation)
    assert charm_garm.scalesets() == []
    assert charm_garm.credentials() == []
    assert_no_secret_logged(caplog)
