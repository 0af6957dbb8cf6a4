"""What the integration suite needs to run, and whether its absence skips or fails the suite.

The suite needs a reachable Juju controller (with a Kubernetes cloud), ``GARM_CHARM_FILE`` (the
packed charm) and ``GARM_IMAGE`` (the workload image). Where they are missing the suite skips,
with one reason naming what is missing, unless ``GARM_REQUIRE_INTEGRATION`` is set: the CI
workflow sets it, so an empty charm or image there fails the suite instead of skipping green.

Kept apart from the conftest (stdlib and pytest only, no ``jubilant``), so that the unit tests
can check it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

REQUIRE_ENV = "GARM_REQUIRE_INTEGRATION"
CONTROLLER_CHECK_TIMEOUT = 60


def controller_problem() -> str:
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


def input_problems(environ: Mapping[str, str]) -> list[str]:
    """Return what is wrong with the charm and image the suite is given, if anything."""
    problems: list[str] = []
    charm = environ.get("GARM_CHARM_FILE", "")
    if not charm:
        problems.append("GARM_CHARM_FILE is not set (path of the packed garm .charm)")
    elif not Path(charm).is_file():
        problems.append(f"GARM_CHARM_FILE={charm} is not a file")
    if not environ.get("GARM_IMAGE"):
        problems.append("GARM_IMAGE is not set (OCI image reference of the GARM workload)")
    return problems


def give_up(reason: str, environ: Mapping[str, str]) -> None:
    """Skip with ``reason``, or fail with it where the suite is required to run.

    Raises:
        pytest.skip.Exception: the suite may skip here.
        pytest.fail.Exception: ``GARM_REQUIRE_INTEGRATION`` is set.
    """
    if environ.get(REQUIRE_ENV):
        pytest.fail(f"{reason} ({REQUIRE_ENV} is set: the suite must run)", pytrace=False)
    pytest.skip(reason)
