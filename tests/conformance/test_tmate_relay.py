"""The tmate relay as GARM holds it, on each backend: the option turned on updates in place.

A configurator whose runners reach out only through ``runner_http_proxy`` and a tmate server
over debug-ssh; then the operator turns ``use-runner-proxy-for-tmate`` on. What GARM received
is read through the recording proxy, what it holds through its own API. The rest of the story
(the option off again, proxy and server changes, refusals) is in
``tests/unit/stories/test_tmate_relay.py``.
"""

from __future__ import annotations

import base64
import dataclasses

from ops import testing

from garm import GarmClient
from tests.charm_driver import CharmDriver, configurator
from tests.conformance.conftest import Garm
from tests.real_garm.proxy import LOGIN_PATH
from vocabulary import runner_template as rt
from vocabulary.tmate_relay import RELAY_SCRIPT_NAME, DebugSshConnection, TmateRelay

PROXY = "http://squid.internal:3128"
TMATE = {
    "host": "tmate.example.com",
    "port": "10022",
    "rsa_fingerprint": "SHA256:rsa",
    "ed25519_fingerprint": "SHA256:ed",
}
SERVER = DebugSshConnection("tmate.example.com", 10022, "SHA256:rsa", "SHA256:ed")


def test_the_template_in_garm_carries_the_relay_once_the_option_is_on(
    driver: CharmDriver, charm_garm: Garm
):
    driver.add_configurator(
        configurator(
            "cfg-1",
            relation_id=1,
            org="org-1",
            extra={"min_idle_runner": "0", "runner_http_proxy": PROXY},
        )
    )
    debug_ssh = testing.Relation("debug-ssh", id=50, remote_units_data={0: TMATE})
    driver.state = dataclasses.replace(
        driver.state, relations={*driver.state.relations, debug_ssh}
    )
    driver.run(driver.ctx.on.relation_joined(debug_ssh, remote_unit=0))
    (before,) = charm_garm.scalesets()
    assert "TMATE_SERVER_HOST=tmate.example.com\n" in template_body(charm_garm, before)

    charm_garm.clear_requests()
    driver.state = dataclasses.replace(driver.state, config={"use-runner-proxy-for-tmate": True})
    driver.run(driver.ctx.on.config_changed())

    # In place: the scale set's own template, then the scale set's extra specs.
    assert [(c.method, c.path, c.status) for c in charm_garm.writes()] == [
        ("PUT", f"/templates/{before['template_id']}", 200),
        ("PUT", f"/scalesets/{before['id']}", 200),
    ]
    (after,) = charm_garm.scalesets()
    assert (after["name"], after["id"], after["template_id"]) == (
        before["name"],
        before["id"],
        before["template_id"],
    )
    body = template_body(charm_garm, after)
    assert "TMATE_SERVER_HOST=127.0.0.1\nTMATE_SERVER_PORT=3129\n" in body
    assert "TMATE_SERVER_HOST=tmate.example.com" not in body
    scripts = after["extra_specs"]["pre_install_scripts"]
    assert sorted(scripts) == ["00-aproxy", RELAY_SCRIPT_NAME]
    relay = rt.render_tmate_relay_script(TmateRelay.through(PROXY, SERVER))
    assert base64.b64decode(scripts[RELAY_SCRIPT_NAME]).decode() == relay

    charm_garm.clear_requests()
    driver.run(driver.ctx.on.update_status())
    assert [(c.method, c.path) for c in charm_garm.requests if c.method != "GET"] == [
        ("POST", LOGIN_PATH)
    ]
    assert driver.juju_writes() == {}


def template_body(garm: Garm, scaleset: dict[str, object]) -> str:
    """The body of the template a scale set runs with, as GARM answers for it."""
    assert garm.admin is not None
    with GarmClient(garm.url) as client:
        client.login(*garm.admin)
        data = client.get_template(int(str(scaleset["template_id"]))).data or ""
    return base64.b64decode(data).decode()
