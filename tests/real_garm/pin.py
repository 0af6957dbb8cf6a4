"""The GARM the project is pinned to, read from the one place that holds it: ``rockcraft.yaml``.

The rock builds GARM from ``parts.garm.source-commit`` and stamps it with the version in the
rock's ``version`` (``v`` prefixed), which is what ``garm --version`` prints. The real-GARM
tests check that the binary they run reports that version, so what the tests prove is what
the image ships.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROCKCRAFT_YAML = Path(__file__).resolve().parents[2] / "rockcraft.yaml"
GARM_PART = "garm"
PROVIDER_PART = "garm-provider-openstack"


@dataclass(frozen=True)
class GarmPin:
    """What the rock pins.

    Attributes:
        commit: the cloudbase/garm commit the rock builds.
        version: what that GARM prints for ``garm --version`` (``v0.2.1-afda4e76``).
        provider_commit: the cloudbase/garm-provider-openstack commit the rock builds.
    """

    commit: str
    version: str
    provider_commit: str


def load_rockcraft(path: Path = ROCKCRAFT_YAML) -> dict[str, Any]:
    """Return ``rockcraft.yaml`` parsed."""
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def read_pin(path: Path = ROCKCRAFT_YAML) -> GarmPin:
    """Read the GARM pin from ``rockcraft.yaml``."""
    rock = load_rockcraft(path)
    parts = rock["parts"]
    return GarmPin(
        commit=str(parts[GARM_PART]["source-commit"]),
        version=f"v{rock['version']}",
        provider_commit=str(parts[PROVIDER_PART]["source-commit"]),
    )
