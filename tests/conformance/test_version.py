"""GARM's version as the charm reads it for ``juju status`` (the workload version)."""

from __future__ import annotations

import re

from garm import GarmClient
from tests.real_garm.pin import read_pin

# What GARM's build stamps: the release tag and the first 8 hex digits of the commit.
VERSION_FORM = re.compile(r"v\d+\.\d+\.\d+-[0-9a-f]{8}")


def test_controller_reports_the_pinned_garm_version(client: GarmClient):
    version = client.get_controller().version
    assert version is not None
    assert VERSION_FORM.fullmatch(version)
    assert version == read_pin().version
