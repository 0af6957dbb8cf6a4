"""The tmate relay through the runner proxy, told through the real charm against the emulator.

Two configurators: ``cfg-proxied`` sets ``runner_http_proxy`` (its runners reach out only
through it), ``cfg-direct`` sets none. A tmate server is related over debug-ssh. With
``use-runner-proxy-for-tmate`` on, the proxied scale set gets the relay's pre-install script
after aproxy's and the relay's address in its own template; the direct one keeps the server's
own address. Turning the option off or on, or the proxy or the server changing, updates the
templates and extra specs in place: no scale set is replaced, and a converged hook writes
nothing. The same story's first step runs on real GARM in
``tests/conformance/test_tmate_relay.py``.
"""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path
from typing import Any

import ops
import pytest
from ops import testing

from tests.charm_driver import CharmDriver, base_state, configurator, deployed
from tests.garm_emulator import GarmEmulator
from tests.log_secrets import register_secret
from vocabulary import runner_template as rt
from vocabulary.tmate_relay import RELAY_SCRIPT_NAME, DebugSshConnection, TmateRelay

OPTION = "use-runner-proxy-for-tmate"
PROXY = "http://squid.internal:3128"
PROXY_PASSWORD = "relay-Pa55-\u00e9"
register_secret(PROXY_PASSWORD)
TMATE = {
    "host": "tmate.example.com",
    "port": "10022",
    "rsa_fingerprint": "SHA256:rsa",
    "ed25519_fingerprint": "SHA256:ed",
}
SERVER = DebugSshConnection("tmate.example.com", 10022, "SHA256:rsa", "SHA256:ed")
DIRECT_ENV = "TMATE_SERVER_HOST=tmate.example.com\nTMATE_SERVER_PORT=10022\n"
RELAY_ENV = "TMATE_SERVER_HOST=127.0.0.1\nTMATE_SERVER_PORT=3129\n"
DEBUG_SSH = testing.Relation("debug-ssh", id=50, remote_units_data={0: TMATE})


@pytest.fixture
def driver(garm: GarmEmulator, tmp_path: Path) -> CharmDriver:
    """Both configurators and the tmate server related; the option still off."""
    charm = deployed(garm, base_state(tmp_path))
    proxied = configurator(
        "cfg-proxied", relation_id=1, org="org-p", app_id="11", extra={"runner_http_proxy": PROXY}
    )
    charm.add_configurator(proxied)
    charm.add_configurator(configurator("cfg-direct", relation_id=2, org="org-d", app_id="22"))
    charm.state = dataclasses.replace(charm.state, relations={*charm.state.relations, DEBUG_SSH})
    charm.run(charm.ctx.on.relation_joined(DEBUG_SSH, remote_unit=0))
    assert charm.state.unit_status == ops.ActiveStatus()
    return charm


def set_option(driver: CharmDriver, value: bool) -> testing.State:
    """The operator sets the option: config-changed."""
    driver.state = dataclasses.replace(driver.state, config={OPTION: value})
    return driver.run(driver.ctx.on.config_changed())


def scaleset(garm: GarmEmulator, app: str) -> dict[str, Any]:
    (found,) = [s for s in garm.scalesets() if s["name"].startswith(f"{app}-runners-")]
    return found


def scripts(garm: GarmEmulator, app: str) -> dict[str, str]:
    """The scale set's pre-install scripts in GARM, decoded, in GARM's order."""
    encoded = scaleset(garm, app).get("extra_specs", {}).get("pre_install_scripts", {})
    return {name: base64.b64decode(body).decode() for name, body in encoded.items()}


def template(garm: GarmEmulator, app: str) -> str:
    """The body of the template the scale set runs with."""
    template_id = scaleset(garm, app)["template_id"]
    (found,) = [t for t in garm.templates() if t["id"] == template_id]
    return base64.b64decode(found["data"]).decode()


def identities(garm: GarmEmulator) -> list[tuple[str, int, int]]:
    """Each scale set's name, id and template id: what a replacement would change."""
    return sorted((s["name"], s["id"], s["template_id"]) for s in garm.scalesets())


def assert_relayed(garm: GarmEmulator, proxy: str = PROXY, server: DebugSshConnection = SERVER):
    body = template(garm, "cfg-proxied")
    assert RELAY_ENV in body
    assert f"TMATE_SERVER_HOST={server.host}\n" not in body
    found = scripts(garm, "cfg-proxied")
    assert list(found) == ["00-aproxy", RELAY_SCRIPT_NAME]
    relay = TmateRelay.through(proxy, server)
    assert found[RELAY_SCRIPT_NAME] == rt.render_tmate_relay_script(relay)


def assert_direct(garm: GarmEmulator, server: DebugSshConnection = SERVER):
    for app in ("cfg-proxied", "cfg-direct"):
        body = template(garm, app)
        assert f"TMATE_SERVER_HOST={server.host}\nTMATE_SERVER_PORT={server.port}\n" in body
        assert "TMATE_SERVER_HOST=127.0.0.1" not in body
        assert RELAY_SCRIPT_NAME not in scripts(garm, app)


def assert_converged(driver: CharmDriver, garm: GarmEmulator) -> None:
    garm.clear_requests()
    driver.run(driver.ctx.on.update_status())
    assert garm.writes() == []
    assert driver.juju_writes() == {}


def test_the_option_relays_only_the_scale_set_with_a_proxy(
    driver: CharmDriver, garm: GarmEmulator
):
    assert_direct(garm)
    before = identities(garm)

    out = set_option(driver, True)

    assert out.unit_status == ops.ActiveStatus()
    assert_relayed(garm)
    # Without a proxy nothing would listen on the relay port: the server's own address stays.
    direct = template(garm, "cfg-direct")
    assert DIRECT_ENV in direct
    assert (
        scaleset(garm, "cfg-direct")["template_id"]
        == garm.template_by_name("github_linux_charmed")["id"]
    )
    # Updated in place: the same scale sets, on the same templates.
    assert identities(garm) == before
    assert_converged(driver, garm)

    set_option(driver, False)
    assert_direct(garm)
    assert identities(garm) == before
    assert_converged(driver, garm)


def test_a_proxy_or_server_change_updates_the_relay_in_place(
    driver: CharmDriver, garm: GarmEmulator
):
    set_option(driver, True)
    before = identities(garm)
    proxied = driver.state.get_relation(1)
    assert isinstance(proxied, testing.Relation)

    moved = f"http://relay-user:{PROXY_PASSWORD}@[2001:db8::8]:8080"
    driver.change_relation(proxied, runner_http_proxy=moved)
    assert_relayed(garm, moved)
    assert (
        "proxyport=8080,proxy-authorization-file="
        in scripts(garm, "cfg-proxied")[RELAY_SCRIPT_NAME]
    )

    debug = driver.state.get_relation(DEBUG_SSH.id)
    assert isinstance(debug, testing.Relation)
    driver.change_relation(debug, host="tmate2.example.com", port="2222")
    server = dataclasses.replace(SERVER, host="tmate2.example.com", port=2222)
    assert_relayed(garm, moved, server)
    assert DIRECT_ENV.replace("tmate.example.com", "tmate2.example.com").replace(
        "10022", "2222"
    ) in template(garm, "cfg-direct")
    assert identities(garm) == before
    assert_converged(driver, garm)

    # The tmate server goes: nothing to relay to, and no relay left behind.
    driver.remove_relation(debug)
    assert RELAY_SCRIPT_NAME not in scripts(garm, "cfg-proxied")
    assert "TMATE_SERVER_HOST" not in template(garm, "cfg-proxied")
    assert identities(garm) == before


@pytest.mark.parametrize(
    ("proxy", "reason"),
    [
        ("https://squid.internal:3128", "not an http:// proxy"),
        ("socks5://squid.internal:1080", "not an http:// proxy"),
        ("http://2001:db8::8:3128", "no host and port it can use"),
        ("http://user%3Aname:secret@squid.internal:3128", "credentials HTTP basic"),
    ],
)
def test_a_proxy_the_relay_cannot_use_is_named_and_keeps_the_direct_address(
    driver: CharmDriver, garm: GarmEmulator, proxy: str, reason: str
):
    proxied = driver.state.get_relation(1)
    assert isinstance(proxied, testing.Relation)
    driver.change_relation(proxied, runner_http_proxy=proxy)
    before = identities(garm)

    out = set_option(driver, True)

    message = out.unit_status.message
    assert message.startswith("invalid data from cfg-proxied (runner_http_proxy cannot carry")
    assert reason in message
    assert "secret" not in message and "2001" not in message
    # No half-written relay: the scale set keeps the server's own address and aproxy alone.
    assert_direct(garm)
    assert list(scripts(garm, "cfg-proxied")) == ["00-aproxy"]
    assert identities(garm) == before
    assert_converged(driver, garm)


def test_the_option_reads_no_config_without_a_proxy_or_a_tmate_server(
    garm: GarmEmulator, tmp_path: Path
):
    charm = deployed(garm, base_state(tmp_path))
    charm.add_configurator(configurator("cfg-direct", relation_id=2, org="org-d", app_id="22"))
    charm.state = dataclasses.replace(charm.state, relations={*charm.state.relations, DEBUG_SSH})
    charm.run(charm.ctx.on.relation_joined(DEBUG_SSH, remote_unit=0))
    charm.run(charm.ctx.on.update_status())
    assert charm.tool_calls["config_get"] == 0
