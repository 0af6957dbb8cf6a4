"""The GARM binary the real-GARM tests run is the GARM the rock ships (``rockcraft.yaml``)."""

from __future__ import annotations

import subprocess

import pytest

from tests.real_garm.harness import SKIP_REASON, garm_binary
from tests.real_garm.pin import read_pin

VERSION_TIMEOUT = 10


def test_real_garm_reports_the_pinned_version():
    binary = garm_binary()
    if binary is None:
        pytest.skip(SKIP_REASON)
    done = subprocess.run(
        [str(binary), "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=VERSION_TIMEOUT,
    )
    assert done.stdout.strip() == read_pin().version
