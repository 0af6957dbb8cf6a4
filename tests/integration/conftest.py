"""Fixtures of the integration tests and the check that they can run at all.

The suite needs a reachable Juju controller (with a Kubernetes cloud), ``GARM_CHARM_FILE`` (the
packed charm) and ``GARM_IMAGE`` (the workload image). When any of them is missing, every test
is skipped with one reason naming what is missing, and nothing is deployed; with
``GARM_REQUIRE_INTEGRATION`` set (the CI workflow sets it) every test fails instead
(:mod:`tests.integration.prerequisites`).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Generator, Iterator
from pathlib import Path

import jubilant
import pytest

from tests.integration import helpers
from tests.integration.prerequisites import controller_problem, give_up, input_problems

STUB_DIR = Path(__file__).parent / "charms" / "configurator-stub"
PACK_TIMEOUT = 30 * 60


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "postgresql: deploys postgresql-k8s (deselect with -m 'not postgresql')"
    )


@functools.cache
def missing_prerequisites() -> str:
    """Return one line naming everything that keeps the suite from running, or ""."""
    problems = [p for p in (controller_problem(), *input_problems(os.environ)) if p]
    return "; ".join(problems)


@pytest.fixture(scope="session", autouse=True)
def integration_prerequisites() -> None:
    """Skip (or fail, where required) every test, with one reason, when the suite cannot run."""
    reason = missing_prerequisites()
    if reason:
        give_up(reason, os.environ)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Point every prerequisite skip at this file, so ``-ra`` folds them into one line."""
    report: pytest.TestReport = yield
    reason = missing_prerequisites()
    longrepr = report.longrepr
    if reason and report.skipped and isinstance(longrepr, tuple) and reason in longrepr[2]:
        line = missing_prerequisites.__wrapped__.__code__.co_firstlineno
        report.longrepr = (__file__, line, longrepr[2])
    return report


@pytest.fixture(scope="session")
def garm_charm(integration_prerequisites: None) -> Path:
    return Path(os.environ["GARM_CHARM_FILE"]).resolve()


@pytest.fixture(scope="session")
def garm_image(integration_prerequisites: None) -> str:
    return os.environ["GARM_IMAGE"]


@pytest.fixture(scope="session")
def stub_charm(integration_prerequisites: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packed configurator/debug-ssh stub charm.

    ``CONFIGURATOR_STUB_CHARM_FILE`` may name an already packed file; otherwise the stub is
    packed with ``charmcraft pack``, and the tests that need it are skipped without charmcraft.
    """
    prepacked = os.environ.get("CONFIGURATOR_STUB_CHARM_FILE", "")
    if prepacked:
        return Path(prepacked).resolve()
    if shutil.which("charmcraft") is None:
        give_up("the configurator stub charm needs `charmcraft` on PATH to be packed", os.environ)
    out = tmp_path_factory.mktemp("configurator-stub")
    subprocess.run(
        ["charmcraft", "pack", "--project-dir", str(STUB_DIR)],
        cwd=out,
        check=True,
        timeout=PACK_TIMEOUT,
    )
    packed = sorted(out.glob("*.charm"))
    assert packed, "charmcraft pack produced no .charm file"
    return packed[0]


@pytest.fixture(scope="module")
def juju(integration_prerequisites: None) -> Iterator[jubilant.Juju]:
    """A fresh model per test module, destroyed afterwards."""
    with jubilant.temp_model() as model:
        model.wait_timeout = helpers.DEPLOY_TIMEOUT
        yield model


@pytest.fixture(scope="module")
def garm(juju: jubilant.Juju, garm_charm: Path, garm_image: str) -> str:
    """Deploy garm alone in the module's model; return the application name."""
    helpers.deploy_garm(juju, garm_charm, garm_image)
    return helpers.APP


@pytest.fixture(scope="module")
def admin(juju: jubilant.Juju, garm: str) -> helpers.AdminCredentials:
    """The admin credentials returned by the ``get-credentials`` action."""
    return helpers.get_admin_credentials(juju)
