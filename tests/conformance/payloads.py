"""Request bodies the conformance tests send to GARM directly, one definition each."""

from __future__ import annotations

from typing import Any

from tests.conformance.conftest import PROVIDER_NAME


def scaleset_body(name: str, **overrides: Any) -> dict[str, Any]:
    """A scale set create body on the loaded provider: disabled, no runner, no labels."""
    return {
        "name": name,
        "provider_name": PROVIDER_NAME,
        "image": "ubuntu-24.04",
        "flavor": "small",
        "os_type": "linux",
        "os_arch": "amd64",
        "max_runners": 2,
        "min_idle_runners": 0,
        "enabled": False,
        **overrides,
    }
