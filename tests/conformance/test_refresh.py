"""A refresh from the previous release (bd0c85d) rewrites nothing in GARM.

That release kept, per GitHub App credential it sent, the SHA-256 of the App ids and the key's
text (``sent-credentials`` in ``garm-peers``); this one keeps the SHA-256 of the ids and the
key's digest, and reads a key's text only when GARM must be sent it. Read as meaning something
else, every App would count as rotated and be sent again at the refresh (one write and one
entity reload in GARM per App). The test converges a deployment, puts its memory back into the
form that release wrote (its fingerprints, and none of the fields it did not have), then runs
``upgrade-charm`` and reads what GARM received.
"""

from __future__ import annotations

import hashlib
import json

import ops

from tests.charm_driver import (
    PRIVATE_KEY_VALUE,
    CharmDriver,
    configurator,
    peer_data,
    with_peer_data,
)
from tests.conformance.conftest import Garm
from tests.conformance.test_charm import refused
from tests.real_garm.proxy import LOGIN_PATH

APPS = {f"cfg-{number}": (str(1000 + number), str(2000 + number)) for number in range(3)}
# Fields of garm-peers that bd0c85d never wrote (git show bd0c85d:src/reconcile/memory.py and
# the modules that keep the others).
LATER_FIELDS = (
    "github-scalesets",
    "failing-since",
    "garm-controller",
    "replaced-controllers",
    "configurator-secrets",
    "provider-record-digests",
)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def fingerprints(key_material: str) -> dict[str, str]:
    """Per App: the fingerprint as ``key_material`` of the key goes into it."""
    return {
        sha256(f"{app_id}\n{installation_id}\n{sha256(PRIVATE_KEY_VALUE)}"): sha256(
            f"{app_id}\n{installation_id}\n{key_material}"
        )
        for app_id, installation_id in APPS.values()
    }


def test_a_refresh_from_the_previous_release_makes_no_write(driver: CharmDriver, charm_garm: Garm):
    for number, (app, (app_id, installation_id)) in enumerate(APPS.items()):
        driver.add_configurator(
            configurator(
                app,
                relation_id=number + 1,
                org=f"org-{number}",
                app_id=app_id,
                installation_id=installation_id,
                extra={"min_idle_runner": "0"},
            )
        )
    driver.run(driver.ctx.on.update_status())
    assert driver.state.unit_status == ops.ActiveStatus()
    sent = json.loads(peer_data(driver.state)["sent-credentials"])
    assert len(sent) == len(APPS)

    # What bd0c85d kept: the key's text in the fingerprint (desired_state.CredentialSpec there).
    earlier = fingerprints(PRIVATE_KEY_VALUE)
    earlier_sent = {name: earlier[fingerprint] for name, fingerprint in sent.items()}
    driver.state = with_peer_data(
        driver.state, drop=LATER_FIELDS, **{"sent-credentials": json.dumps(earlier_sent)}
    )

    charm_garm.clear_requests()
    driver.run(driver.ctx.on.upgrade_charm())
    calls = charm_garm.requests
    assert [(c.method, c.path) for c in calls if c.method != "GET"] == [("POST", LOGIN_PATH)]
    assert refused(calls) == []
    assert driver.state.unit_status == ops.ActiveStatus()
    # The memory now holds this release's fingerprints, so the key is not read again.
    assert json.loads(peer_data(driver.state)["sent-credentials"]) == sent

    charm_garm.clear_requests()
    driver.run(driver.ctx.on.update_status())
    assert [(c.method, c.path) for c in charm_garm.requests if c.method != "GET"] == [
        ("POST", LOGIN_PATH)
    ]


def test_a_rotated_key_is_still_sent_after_a_refresh(driver: CharmDriver, charm_garm: Garm):
    """An earlier fingerprint of another key is a rotation, not the refresh's form."""
    driver.add_configurator(configurator("cfg-0", relation_id=1, extra={"min_idle_runner": "0"}))
    driver.run(driver.ctx.on.update_status())
    (name,) = json.loads(peer_data(driver.state)["sent-credentials"])
    stale = sha256("101\n202\nan older key's text")
    driver.state = with_peer_data(
        driver.state, drop=LATER_FIELDS, **{"sent-credentials": json.dumps({name: stale})}
    )

    charm_garm.clear_requests()
    driver.run(driver.ctx.on.upgrade_charm())
    updates = [(c.method, c.path) for c in charm_garm.requests if c.method == "PUT"]
    assert [method for method, path in updates if path.startswith("/github/credentials/")] == [
        "PUT"
    ]
