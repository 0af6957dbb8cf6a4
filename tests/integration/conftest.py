"""Fixtures of the integration tests and the check that they can run at all.

The suite needs a reachable Juju controller (with a Kubernetes cloud), ``GARM_CHARM_FILE`` (the
packed charm) and ``GARM_IMAGE`` (the workload image). When any of them is missing, every test
is skipped with one reason naming what is missing; nothing is deployed.
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

STUB_DIR = Path(__file__).parent / "charms" / "configurator-stub"
CONTROLLER_CHECK_TIMEOUT = 60
PACK_TIMEOUT = 30 * 60


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "postgresql: deploys postgresql-k8s (deselect with -m 'not postgresql')"
    )


def _controller_problem() -> str:
    """Return why no Juju controller can be used, or "" when one answers."""
    if shutil.which("juju") is None:
        return "integration tests need a Juju controller: `juju` not found on PATH"
    try:
        subprocess.run(
            ["juju", "show-controller"],
            check=True,
            capture_output=True,
            timeout=CONTROLLER_CHECK_TIMEOUT,
        )
    except subprocess.CalledProcessError:
        return "integration tests need a Juju controller: `juju show-controller` failed"
    except subprocess.TimeoutExpired:
        return (
            "integration tests need a Juju controller: `juju show-controller` did not answer "
            f"within {CONTROLLER_CHECK_TIMEOUT} s"
        )
    return ""


def _input_problems() -> list[str]:
    problems: list[str] = []
    charm = os.environ.get("GARM_CHARM_FILE", "")
    if not charm:
        problems.append("GARM_CHARM_FILE is not set (path of the packed garm .charm)")
    elif not Path(charm).is_file():
        problems.append(f"GARM_CHARM_FILE={charm} is not a file")
    if not os.environ.get("GARM_IMAGE"):
        problems.append("GARM_IMAGE is not set (OCI image reference of the GARM workload)")
    return problems


@functools.cache
def missing_prerequisites() -> str:
    """Return one line naming everything that keeps the suite from running, or ""."""
    problems = [p for p in (_controller_problem(), *_input_problems()) if p]
    return "; ".join(problems)


@pytest.fixture(scope="session", autouse=True)
def integration_prerequisites() -> None:
    """Skip every test, with one shared reason, when the suite cannot run here."""
    reason = missing_prerequisites()
    if reason:
        pytest.skip(reason)


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
        pytest.skip("the configurator stub charm needs `charmcraft` on PATH to be packed")
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
