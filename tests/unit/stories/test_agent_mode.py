"""Agent mode and the shell through the real charm (ops.testing), GARM played by the emulator.

The workload container holds what the image ships under /opt/garm-agent (a manifest and
stand-in binaries, ``tests.charm_driver.write_agent_tools``); the tests change those files as
an image would, and read what the charm pulled (``CharmDriver.pulls``), what GARM stores and
what the status says.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import ops
import pytest
from ops import testing

from garm import GarmClient
from tests.charm_driver import (
    AGENT_VERSION,
    CharmDriver,
    admin_credentials,
    agent_binary,
    base_state,
    configurator,
    write_agent_tools,
)
from tests.garm_emulator import GarmEmulator

MANIFEST = "/opt/garm-agent/manifest.json"
AMD64 = "/opt/garm-agent/linux/amd64/garm-agent"
ARM64 = "/opt/garm-agent/linux/arm64/garm-agent"
TOOLS = "/tools/garm-agent"
HELD = "; agent mode held"


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    return write_agent_tools(tmp_path / "garm-agent")


@pytest.fixture
def driver(garm: GarmEmulator, tmp_path: Path, agent_dir: Path) -> CharmDriver:
    data = tmp_path / "data"
    data.mkdir()
    return CharmDriver(garm, base_state(data, agent_dir=agent_dir))


def deploy(driver: CharmDriver) -> None:
    driver.run(driver.ctx.on.install())
    driver.run(driver.ctx.on.leader_elected())
    driver.run(driver.ctx.on.pebble_ready(driver.state.get_container("garm")))


def stored_tools(driver: CharmDriver, garm: GarmEmulator) -> dict[str, tuple[str, str]]:
    """What GARM stores, read through its API as the admin: arch -> (sha256, version)."""
    admin = admin_credentials(driver.state)
    assert admin is not None
    with GarmClient(garm.url) as client:
        client.login(*admin)
        listed = client.list_tools()
    return {t.os_arch or "": (t.sha256sum or "", t.version or "") for t in listed}


def agent_pulls(driver: CharmDriver) -> list[str]:
    """What the last hook pulled from the image's garm-agent directory."""
    return [path for path in driver.pulls if path.startswith("/opt/garm-agent/")]


def uploads(garm: GarmEmulator) -> list[str]:
    return [r.path for r in garm.writes() if r.path == TOOLS]


def org_agent_mode(garm: GarmEmulator, name: str) -> bool:
    (org,) = [o for o in garm.organizations() if o["name"] == name]
    return bool(org.get("agent_mode"))


def ingress(url: str) -> testing.Relation:
    return testing.Relation(
        "ingress", id=40, remote_app_data={"ingress": json.dumps({"url": url})}
    )


def relate(driver: CharmDriver, relation: testing.Relation) -> testing.State:
    driver.state = dataclasses.replace(driver.state, relations={*driver.state.relations, relation})
    return driver.run(driver.ctx.on.relation_changed(relation))


def digest(arch: str, version: str = AGENT_VERSION) -> str:
    return hashlib.sha256(agent_binary(arch, version)).hexdigest()


def test_the_image_binaries_reach_garm_once_and_a_converged_hook_reads_none(
    driver: CharmDriver, garm: GarmEmulator
):
    deploy(driver)
    out = driver.add_configurator(configurator("cfg-a", relation_id=1))
    assert out.unit_status == ops.ActiveStatus()
    assert stored_tools(driver, garm) == {
        "amd64": (digest("amd64"), AGENT_VERSION),
        "arm64": (digest("arm64"), AGENT_VERSION),
    }
    assert org_agent_mode(garm, "canonical")
    garm.clear_requests()
    for _ in range(2):
        out = driver.run(driver.ctx.on.update_status())
        assert out.unit_status == ops.ActiveStatus()
        # The manifest and one listing; no binary, no write to GARM or to Juju.
        assert agent_pulls(driver) == [MANIFEST]
        assert garm.writes() == []
        assert driver.juju_writes() == {}


def test_a_new_image_uploads_only_the_binary_that_changed(
    driver: CharmDriver, garm: GarmEmulator, agent_dir: Path
):
    deploy(driver)
    driver.add_configurator(configurator("cfg-a", relation_id=1))
    manifest = json.loads((agent_dir / "manifest.json").read_text(encoding="utf-8"))
    rebuilt = b"garm-agent rebuilt for arm64\n"
    (agent_dir / "linux" / "arm64" / "garm-agent").write_bytes(rebuilt)
    for tool in manifest["tools"]:
        if tool["os_arch"] == "arm64":
            tool["sha256"] = hashlib.sha256(rebuilt).hexdigest()
    (agent_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    garm.clear_requests()

    out = driver.run(driver.ctx.on.upgrade_charm())

    assert out.unit_status == ops.ActiveStatus()
    assert agent_pulls(driver) == [MANIFEST, ARM64]
    assert uploads(garm) == [TOOLS]
    assert stored_tools(driver, garm)["arm64"] == (
        hashlib.sha256(rebuilt).hexdigest(),
        AGENT_VERSION,
    )
    assert stored_tools(driver, garm)["amd64"] == (digest("amd64"), AGENT_VERSION)


def test_a_missing_manifest_holds_agent_mode_only_and_says_where(
    driver: CharmDriver, garm: GarmEmulator, agent_dir: Path
):
    (agent_dir / "manifest.json").unlink()
    deploy(driver)
    out = driver.add_configurator(configurator("cfg-a", relation_id=1))
    assert out.unit_status == ops.BlockedStatus(
        f"garm-agent: no manifest at {MANIFEST} in the workload image{HELD}"
    )
    # The rest of the chain went on; nothing was read or uploaded, agent mode stays off.
    assert [s["name"] for s in garm.scalesets()] == ["cfg-a-runners-18515357"]
    assert agent_pulls(driver) == [MANIFEST]
    assert stored_tools(driver, garm) == {}
    assert not org_agent_mode(garm, "canonical")


def test_a_malformed_manifest_names_its_path_and_field(
    driver: CharmDriver, garm: GarmEmulator, agent_dir: Path
):
    manifest = json.loads((agent_dir / "manifest.json").read_text(encoding="utf-8"))
    manifest["tools"][1]["sha256"] = "not-a-digest"
    (agent_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    deploy(driver)
    out = driver.add_configurator(configurator("cfg-a", relation_id=1))
    assert out.unit_status == ops.BlockedStatus(
        f"garm-agent: {MANIFEST} is malformed (tools[1].sha256){HELD}"
    )
    assert [s["name"] for s in garm.scalesets()] == ["cfg-a-runners-18515357"]
    assert stored_tools(driver, garm) == {}


def test_a_binary_that_does_not_match_its_checksum_is_never_uploaded(
    driver: CharmDriver, garm: GarmEmulator, agent_dir: Path
):
    (agent_dir / "linux" / "arm64" / "garm-agent").write_bytes(b"corrupted in the image")
    deploy(driver)
    out = driver.add_configurator(configurator("cfg-a", relation_id=1))
    assert out.unit_status == ops.BlockedStatus(
        "garm-agent: cannot read the arm64 binary, agent mode held"
    )
    assert stored_tools(driver, garm) == {"amd64": (digest("amd64"), AGENT_VERSION)}
    assert [s["name"] for s in garm.scalesets()] == ["cfg-a-runners-18515357"]
    # Held: the organisation keeps the mode it was created with.
    assert not org_agent_mode(garm, "canonical")


def test_a_refused_upload_holds_agent_mode_and_the_rest_goes_on(
    driver: CharmDriver, garm: GarmEmulator
):
    # GARM refuses every upload until the fault is cleared.
    garm.fail_next("POST", TOOLS, status=400, count=100, details="refused by test")
    deploy(driver)
    out = driver.add_configurator(configurator("cfg-a", relation_id=1))
    assert out.unit_status == ops.BlockedStatus(
        "garm-agent: GARM refused the amd64 binary (400); "
        "garm-agent: GARM refused the arm64 binary (400)"
    )
    assert [s["name"] for s in garm.scalesets()] == ["cfg-a-runners-18515357"]
    assert not org_agent_mode(garm, "canonical")
    # The next pass uploads what was refused, and agent mode follows.
    garm.clear_faults()
    out = driver.run(driver.ctx.on.update_status())
    assert out.unit_status == ops.ActiveStatus()
    assert set(stored_tools(driver, garm)) == {"amd64", "arm64"}
    assert org_agent_mode(garm, "canonical")


SHELL = {"enable_shell": "true"}


def test_a_shell_without_a_tls_ingress_is_withheld_and_blocked_naming_the_scale_set(
    driver: CharmDriver, garm: GarmEmulator
):
    deploy(driver)
    driver.add_configurator(configurator("cfg-b", relation_id=2, org="org-b", app_id="102"))
    out = driver.add_configurator(configurator("cfg-a", relation_id=1, extra=SHELL))
    assert out.unit_status == ops.BlockedStatus(
        "cfg-a-runners: the shell needs a TLS ingress (https)"
    )
    shells = {s["name"].rsplit("-", 1)[0]: s["enable_shell"] for s in garm.scalesets()}
    assert shells == {"cfg-a-runners": False, "cfg-b-runners": False}
    # A plain-HTTP ingress is no better than none.
    out = relate(driver, ingress("http://garm.example.com"))
    assert out.unit_status == ops.BlockedStatus(
        "cfg-a-runners: the shell needs a TLS ingress (https)"
    )


def test_a_shell_behind_a_tls_ingress_is_asked_of_garm(driver: CharmDriver, garm: GarmEmulator):
    deploy(driver)
    relate(driver, ingress("https://garm.example.com"))
    driver.add_configurator(configurator("cfg-b", relation_id=2, org="org-b", app_id="102"))
    out = driver.add_configurator(configurator("cfg-a", relation_id=1, extra=SHELL))
    assert out.unit_status == ops.ActiveStatus()
    shells = {s["name"].rsplit("-", 1)[0]: s["enable_shell"] for s in garm.scalesets()}
    assert shells == {"cfg-a-runners": True, "cfg-b-runners": False}
    # Turned off again by the configurator: GARM's scale set follows.
    out = driver.change_relation(
        next(r for r in driver.state.relations if r.id == 1), enable_shell="false"
    )
    assert out.unit_status == ops.ActiveStatus()
    shells = {s["name"].rsplit("-", 1)[0]: s["enable_shell"] for s in garm.scalesets()}
    assert shells == {"cfg-a-runners": False, "cfg-b-runners": False}


def test_a_bad_enable_shell_holds_that_configurator_naming_the_key(
    driver: CharmDriver, garm: GarmEmulator
):
    deploy(driver)
    driver.add_configurator(configurator("cfg-b", relation_id=2, org="org-b", app_id="102"))
    out = driver.add_configurator(
        configurator("cfg-a", relation_id=1, extra={"enable_shell": "yes"})
    )
    assert out.unit_status == ops.ActiveStatus(
        "invalid data from cfg-a/0 (invalid keys: enable_shell)"
    )
    assert [s["name"].rsplit("-", 1)[0] for s in garm.scalesets()] == ["cfg-b-runners"]
