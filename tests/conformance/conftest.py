"""Fixtures of the conformance tests: each test runs once per GARM backend.

The backend is in the test id (``[emulator]``, ``[real]``). Real GARM is the local part
:data:`tests.local_parts.GARM` (``GARM_BIN``, else the cache path), started through the charm's
entrypoint with the stand-in provider and pointed at the GitHub stand-in; without a binary its
tests skip, all with one reason. A difference between the two backends is an emulator defect.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import ops
import pytest
from ops import testing

from garm import GarmClient
from tests import charm_driver
from tests.charm_driver import CharmDriver, base_state
from tests.conformance.backends import (
    EMULATOR,
    REAL,
    ProxiedEmulator,
    proxied_emulator,
    wait_for,
)
from tests.github_standin import GitHubStandin
from tests.log_secrets import register_secret
from tests.real_garm.github_apps import register_configured_apps
from tests.real_garm.harness import (
    DEFAULT_ADMIN,
    SKIP_REASON,
    UNEXPECTED_EXITS,
    RealGarm,
    garm_binary,
    standalone_environment,
)
from tests.simulate_backends import EmulatorGarm, RealStoryGarm, StoryGarm, ingress_relation

# The provider every standalone backend loads, as the charm would publish it.
PROVIDER_NAME = "garm-configurator-0"
ADMIN_USERNAME, ADMIN_PASSWORD = DEFAULT_ADMIN
register_secret(ADMIN_PASSWORD)
# The key under which a test's report carries the GARM exits seen during it.
GARM_EXIT = "garm-exit"
# The user property naming the garm-agent a test shipped (the real one, else the stand-in).
SHIPPED_AGENT = "shipped-agent"

Garm = ProxiedEmulator | RealGarm


def provider_entry(unit_name: str) -> dict[str, str]:
    """A provider as the charm publishes it in ``GARM_PROVIDERS_JSON``."""
    return {
        "unit_name": unit_name,
        "network": "runner-net",
        "auth_url": "https://keystone.example:5000/v3",
        "username": f"{unit_name}-user",
        "password": f"{unit_name}-openstack-password",
        "project_name": "runners",
        "user_domain_name": "Default",
        "project_domain_name": "Default",
        "region_name": "RegionOne",
    }


@pytest.fixture(autouse=True)
def _garm_exits_reported(request: pytest.FixtureRequest) -> Iterator[None]:
    """Put each GARM exit of the test (GARM was started again, as Pebble would) in its report."""
    seen = len(UNEXPECTED_EXITS)
    yield
    for line in UNEXPECTED_EXITS[seen:]:
        request.node.user_properties.append((GARM_EXIT, line))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Which garm-agent the run shipped, in one line; then the GARM exits of the run.

    Both come from every xdist worker's reports; a test may pass through a GARM exit.
    """
    shipped = {
        value
        for reports in terminalreporter.stats.values()
        for report in reports
        for key, value in getattr(report, "user_properties", ())
        if key == SHIPPED_AGENT
    }
    for line in sorted(shipped):
        terminalreporter.line(line)
    exits = {
        f"{report.nodeid}: {value}"
        for reports in terminalreporter.stats.values()
        for report in reports
        for key, value in getattr(report, "user_properties", ())
        if key == GARM_EXIT
    }
    if exits:
        terminalreporter.section("real GARM exited or hung on its own and was started again")
        for line in sorted(exits):
            terminalreporter.line(line)


@pytest.fixture
def github() -> Iterator[GitHubStandin]:
    """A started GitHub stand-in on 127.0.0.1."""
    standin = GitHubStandin()
    standin.start()
    try:
        yield standin
    finally:
        standin.stop()


@pytest.fixture(params=[EMULATOR, REAL])
def backend(request: pytest.FixtureRequest) -> str:
    """The backend name of this test run; real GARM skips when its binary is missing."""
    if request.param == REAL and garm_binary() is None:
        pytest.skip(SKIP_REASON)
    return request.param


@pytest.fixture
def garm(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Garm]:
    """A started GARM of this run's backend, not initialised, with one provider loaded."""
    if backend == EMULATOR:
        with proxied_emulator([PROVIDER_NAME]) as proxied:
            yield proxied
        return
    yield from real_garm_with_provider(tmp_path, request.getfixturevalue("github"))


def prepared_real_garm(root: Path, github: GitHubStandin, shim: bool = True) -> RealGarm:
    """A RealGarm in ``root`` pointed at ``github``, where the Apps GARM is given exist.

    Only called once the backend did not skip. ``shim=False`` has GARM run the provider
    stand-in without the image's provider shim.
    """
    binary = garm_binary()
    assert binary is not None
    real = RealGarm.prepare(
        root, binary=binary, github_endpoint=github.endpoint_params(), shim=shim
    )
    register_configured_apps(real.proxy, github)
    return real


def real_garm_with_provider(
    tmp_path: Path, github: GitHubStandin, shim: bool = True
) -> Iterator[RealGarm]:
    """A started real GARM with :data:`PROVIDER_NAME` loaded, stopped after."""
    real = prepared_real_garm(tmp_path, github, shim)
    environment = standalone_environment([provider_entry(PROVIDER_NAME)])
    provider = json.loads(environment["GARM_PROVIDERS_JSON"])[0]
    register_secret(provider["password"], environment["GARM_JWT_SECRET"])
    register_secret(environment["GARM_PASSPHRASE"])
    real.start(environment)
    try:
        yield real
    finally:
        real.stop()


@pytest.fixture
def ready_garm(garm: Garm) -> Garm:
    """The backend after first-run as the admin, with its controller URLs set."""
    garm.bootstrap(ADMIN_USERNAME, ADMIN_PASSWORD, urls=True)
    return garm


@pytest.fixture
def client(ready_garm: Garm) -> Iterator[GarmClient]:
    """The charm's GARM client, logged in through the recording proxy."""
    with GarmClient(ready_garm.url) as garm_client:
        garm_client.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        ready_garm.clear_requests()
        yield garm_client


@pytest.fixture
def charm_garm(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Garm]:
    """A GARM with nothing in it, started by the charm's first replan (real) or at once."""
    if backend == EMULATOR:
        with proxied_emulator() as proxied:
            yield proxied
        return
    real = prepared_real_garm(tmp_path, request.getfixturevalue("github"))
    try:
        yield real
    finally:
        real.stop()


def deployed(garm: Garm, state: testing.State) -> CharmDriver:
    """The real charm from ``state``: installed, leader, bootstrapped against ``garm``."""
    return charm_driver.deployed(garm, state, ready_timeout=10.0)


def hook_until(
    driver: CharmDriver, garm: Garm, what: str, done: Callable[[testing.State], bool]
) -> testing.State:
    """Run update-status hooks, GARM working between them, until ``done`` holds (bounded)."""
    seen: list[ops.StatusBase] = []

    def hook() -> testing.State | None:
        state = driver.run(driver.ctx.on.update_status())
        seen.append(state.unit_status)
        return state if done(state) else None

    try:
        return wait_for(garm, what, hook)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the last status was {seen[-1]!r}") from None


@pytest.fixture
def driver(charm_garm: Garm, tmp_path: Path) -> CharmDriver:
    """The real charm, deployed and bootstrapped against this run's GARM."""
    data = tmp_path / "data"
    data.mkdir()
    return deployed(charm_garm, base_state(data))


@pytest.fixture
def runner_driver(charm_garm: Garm, tmp_path: Path) -> CharmDriver:
    """The real charm deployed as Juju deploys it, where GARM's runners can come up.

    Juju always gives the charm its ``garm-peers`` relation (where it remembers runner faults
    and the App keys it sent). An ingress relation whose URL is the recording proxy has the
    charm set loopback controller URLs, so the stand-in provider's runners call back to real
    GARM and go idle (with the in-cluster URL they would stay pending).
    """
    data = tmp_path / "data"
    data.mkdir()
    state = base_state(data, relations={ingress_relation(charm_garm.base_url)})
    return deployed(charm_garm, state)


@pytest.fixture
def story(charm_garm: Garm, request: pytest.FixtureRequest) -> Iterator[StoryGarm]:
    """How jobs reach this backend's runners (the simulation's), the charm's clock put back."""
    if charm_garm.name == EMULATOR:
        yield EmulatorGarm(charm_garm.emulator)  # pyright: ignore[reportAttributeAccessIssue]
        return
    real = RealStoryGarm(charm_garm, request.getfixturevalue("github"))  # pyright: ignore[reportArgumentType]
    try:
        yield real
    finally:
        real.close()
