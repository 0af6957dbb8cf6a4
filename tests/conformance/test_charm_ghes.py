"""A GitHub Enterprise Server configurator beside a github.com one, through the real charm.

The GHES is a second GitHub stand-in behind a TLS front with a CA of its own
(``tests.real_garm.tls_front``), answering under ``/api/v3/`` as GHES does.

Both backends: ``canonical`` on github.com and on the GHES are two organisations, with Apps of
the same ids; a converged hook writes nothing; the CA rotates (only the endpoint is written); a
malformed ``github_base_url`` holds the configurator (the status names the key, nothing of it is
deleted); and the GHES configurator leaving takes its organisation, credential and endpoint out
of GARM while the github.com one is untouched. The GHES configurator describes no scale set
there: see the real-GARM test below for why.

Real GARM only (the emulator calls no GitHub): a runner of the GHES organisation comes up
beside a github.com one, with GARM trusting the GHES only through the CA the charm gave it. GARM
v0.2.1-afda4e76 uses an endpoint's CA for the REST API only; its Actions service client
(``util/github/scalesets/client.go``, a plain ``http.Client``) trusts the process's CA store,
which the charm gives the same bundles (``endpoint_trust``, ``SSL_CERT_DIR``). The stand-in
answers as the GHES at the front's URL, so every Actions call crosses TLS too. With another CA,
TLS stops GARM's first call and the scale set is refused.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import ops
import pytest
from ops import testing

from tests.charm_driver import CharmDriver, configurator
from tests.conformance.conftest import REAL, Garm, hook_until
from tests.github_standin import GitHubStandin
from tests.real_garm.github_apps import register_configured_apps
from tests.real_garm.harness import RealGarm
from tests.real_garm.tls_front import TlsFront, make_certificates
from tests.simulate_backends import is_idle
from vocabulary.github_endpoint import ca_certificates, endpoint_name

COM, GHES = "cfg-com", "cfg-ghes"


@dataclass
class Ghes:
    """The GHES stand-in as an operator sees it: its URL and the CA that signed it."""

    url: str
    ca: str
    name: str
    standin: GitHubStandin

    def reached(self, route: str) -> bool:
        """Whether GARM's call of ``route`` reached the GHES and was answered 2xx."""
        return any(r.route == route and r.status < 300 for r in self.standin.requests)


@pytest.fixture
def ghes(charm_garm: Garm, backend: str, tmp_path: Path) -> Iterator[Ghes]:
    standin = GitHubStandin().start()
    port = urlsplit(standin.base_url).port
    assert port is not None
    directory = tmp_path / "ghes-front"
    directory.mkdir()
    front = TlsFront(directory, lambda: port).start()
    # What the GHES hands out (the Actions service, message queues) points at itself.
    standin.serve_as(front.base_url)
    if backend == REAL:
        register_configured_apps(charm_garm.proxy, standin)  # pyright: ignore[reportAttributeAccessIssue]
    name = endpoint_name(front.base_url)
    assert name is not None
    try:
        yield Ghes(front.base_url, front.ca_file.read_text(), name, standin)
    finally:
        front.stop()
        standin.stop()


def endpoint(garm: Garm, name: str) -> dict[str, Any] | None:
    return next((e for e in garm.endpoints() if e["name"] == name), None)


def certificates(found: dict[str, Any]) -> tuple[bytes, ...]:
    return ca_certificates(base64.b64decode(found.get("ca_cert_bundle", "")).decode())


def orgs(garm: Garm) -> dict[tuple[str, str], str]:
    """(organisation, endpoint) to its credentials' name."""
    return {
        (o["name"], o["endpoint"]["name"]): o["credentials_name"] for o in garm.organizations()
    }


def scaleset_of(garm: Garm, app: str) -> dict[str, Any]:
    (found,) = [s for s in garm.scalesets() if s["name"].startswith(f"{app}-runners-")]
    return found


def idle(garm: Garm, app: str) -> bool:
    found = [s for s in garm.scalesets() if s["name"].startswith(f"{app}-runners-")]
    return bool(found) and any(is_idle(r) for r in garm.instances(found[0]["name"]))


def relation(driver: CharmDriver, relation_id: int) -> testing.Relation:
    found = driver.state.get_relation(relation_id)
    assert isinstance(found, testing.Relation)
    return found


def test_a_ghes_configurator_beside_a_github_com_one(
    driver: CharmDriver, charm_garm: Garm, ghes: Ghes, tmp_path: Path
) -> None:
    garm = charm_garm
    driver.add_configurator(configurator(COM, relation_id=1))
    on_ghes = {"name": "", "github_base_url": ghes.url, "github_ca_bundle": ghes.ca}
    state = driver.add_configurator(configurator(GHES, relation_id=2, extra=on_ghes))
    assert state.unit_status == ops.ActiveStatus()
    made = endpoint(garm, ghes.name)
    assert made is not None
    assert (made["base_url"], made["api_base_url"], made["upload_base_url"]) == (
        ghes.url,
        f"{ghes.url}/api/v3/",
        f"{ghes.url}/api/uploads/",
    )
    assert made["description"] == "Managed by garm"
    assert certificates(made) == ca_certificates(ghes.ca)
    # The same App ids and organisation name on two GitHubs: two credentials, two organisations.
    ghes_credential = f"app-101-202-{ghes.name}"
    creds = {c["name"]: c["endpoint"]["name"] for c in garm.credentials()}
    assert creds == {"app-101-202": "github.com", ghes_credential: ghes.name}
    assert orgs(garm) == {
        ("canonical", "github.com"): "app-101-202",
        ("canonical", ghes.name): ghes_credential,
    }
    com_scaleset = scaleset_of(garm, COM)
    # Converged: a hook writes nothing.
    garm.clear_requests()
    driver.run(driver.ctx.on.update_status())
    assert garm.writes() == []

    # The CA rotates: the new CA joins the bundle; only the endpoint is written.
    other_ca, _, _ = make_certificates(tmp_path)
    rotated = other_ca.read_text() + ghes.ca
    garm.clear_requests()
    driver.change_relation(relation(driver, 2), github_ca_bundle=rotated)
    assert [(w.method, w.path) for w in garm.writes()] == [
        ("PUT", f"/github/endpoints/{ghes.name}")
    ]
    after = endpoint(garm, ghes.name)
    assert after is not None and certificates(after) == ca_certificates(rotated)

    # A malformed URL holds the configurator: named in the status, nothing deleted.
    garm.clear_requests()
    state = driver.change_relation(relation(driver, 2), github_base_url="http://" + ghes.name)
    assert "github_base_url must be an https:// URL" in state.unit_status.message
    assert garm.writes() == []
    assert endpoint(garm, ghes.name) is not None and len(orgs(garm)) == 2
    driver.change_relation(relation(driver, 2), github_base_url=ghes.url)

    # The last GHES configurator leaves: its organisation, credential and endpoint go.
    driver.remove_relation(relation(driver, 2))
    driver.run(driver.ctx.on.update_status())
    assert endpoint(garm, ghes.name) is None
    assert orgs(garm) == {("canonical", "github.com"): "app-101-202"}
    assert [c["name"] for c in garm.credentials()] == ["app-101-202"]
    assert [(s["id"], s["name"]) for s in garm.scalesets()] == [
        (com_scaleset["id"], com_scaleset["name"])
    ]


# Real GARM only: the emulator calls no GitHub.
@pytest.mark.parametrize("backend", [REAL], indirect=True)
def test_real_garm_runs_a_ghes_runner_through_the_charms_ca_only(
    runner_driver: CharmDriver, charm_garm: Garm, ghes: Ghes
) -> None:
    assert isinstance(charm_garm, RealGarm)
    driver, garm = runner_driver, charm_garm
    driver.add_configurator(configurator(COM, relation_id=1))
    on_ghes = {"github_base_url": ghes.url, "github_ca_bundle": ghes.ca}
    driver.add_configurator(configurator(GHES, relation_id=2, extra=on_ghes))

    def both_idle(_state: testing.State) -> bool:
        return idle(garm, COM) and idle(garm, GHES)

    state = hook_until(driver, garm, "an idle runner on each GitHub", both_idle)
    assert state.unit_status == ops.ActiveStatus()
    # Every call of the scale set's life reached the GHES, through the front only.
    for route in ("installation_token", "runner_registration", "create_scale_set"):
        assert ghes.reached(route), route
    assert ghes.reached("generate_jit_config")
    # GARM's process trusts the GHES's CA and nothing else that the charm gave it.
    assert garm.trusted_ca_bundles() == [ghes.ca.strip()]
    assert "x509" not in garm.log_tail(200)
    com_runners = {r["name"] for r in garm.instances(scaleset_of(garm, COM)["name"])}

    # The GHES configurator leaves: its runner drains through the Actions service (still
    # trusted), then its scale set, organisation, credential and endpoint go, and GARM's
    # process trusts the CA no more.
    driver.remove_relation(relation(driver, 2))

    def ghes_gone(_state: testing.State) -> bool:
        return endpoint(garm, ghes.name) is None and garm.trusted_ca_bundles() == []

    state = hook_until(driver, garm, "the GHES endpoint gone", ghes_gone)
    assert state.unit_status == ops.ActiveStatus()
    assert ghes.reached("delete_scale_set")
    assert orgs(garm) == {("canonical", "github.com"): "app-101-202"}
    assert [c["name"] for c in garm.credentials()] == ["app-101-202"]
    assert [s["name"] for s in garm.scalesets()] == [scaleset_of(garm, COM)["name"]]
    assert com_runners <= {r["name"] for r in garm.instances(scaleset_of(garm, COM)["name"])}


@pytest.mark.parametrize("backend", [REAL], indirect=True)
def test_real_garm_with_another_ca_reaches_nothing_of_the_ghes(
    driver: CharmDriver, charm_garm: Garm, ghes: Ghes, tmp_path: Path
) -> None:
    assert isinstance(charm_garm, RealGarm)
    other_ca = make_certificates(tmp_path)[0].read_text()
    on_ghes = {"github_base_url": ghes.url, "github_ca_bundle": other_ca}
    driver.add_configurator(configurator(GHES, relation_id=2, extra=on_ghes))

    def scaleset_refused(state: testing.State) -> bool:
        return "GARM failed on it (500); will retry" in state.unit_status.message

    state = hook_until(driver, charm_garm, "the GHES scale set refused", scaleset_refused)
    assert state.unit_status.message == f"{GHES}-runners: GARM failed on it (500); will retry"
    assert not ghes.reached("installation_token")
    assert not ghes.reached("registration_token")
    assert ghes.standin.requests == []
    assert "x509: certificate signed by unknown authority" in charm_garm.log_tail(50)
