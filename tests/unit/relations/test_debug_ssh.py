"""The debug-ssh relation parsed into tmate connections."""

from __future__ import annotations

import pytest

from relations.debug_ssh import parse_debug_ssh
from tests.unit.configurator_data import (
    SSH,
    no_secret_in_logs,  # noqa: F401 - autouse
    unit,
    warnings,
)
from vocabulary.desired_state import (
    DebugSshConnection,
)

# --- debug-ssh (15.1) -------------------------------------------------------------------------


def test_debug_ssh_sorted_by_host_and_port() -> None:
    units = [
        unit({**SSH, "host": "b.example", "port": "22"}, name="tmate/0"),
        unit({**SSH, "host": "a.example", "port": "2222"}, name="tmate/1"),
        unit({**SSH, "host": "a.example", "port": "222"}, name="tmate/2"),
    ]
    assert [(c.host, c.port) for c in parse_debug_ssh(units).connections] == [
        ("a.example", 222),
        ("a.example", 2222),
        ("b.example", 22),
    ]
    assert parse_debug_ssh(units).connections[0] == DebugSshConnection(
        "a.example", 222, "SHA256:rsa", "SHA256:ed"
    )


def test_debug_ssh_incomplete_is_not_ready(caplog: pytest.LogCaptureFixture) -> None:
    data = {**SSH}
    del data["ed25519_fingerprint"]
    assert parse_debug_ssh([unit(data, name="tmate/0")]).connections == ()
    assert any("not ready" in w and "tmate/0" in w for w in warnings(caplog))


def test_debug_ssh_newline_is_rejected(caplog: pytest.LogCaptureFixture) -> None:
    data = {**SSH, "rsa_fingerprint": "SHA256:rsa\nTMATE_SERVER_HOST=evil"}
    assert parse_debug_ssh([unit(data, name="tmate/0")]).connections == ()
    lines = warnings(caplog)
    assert any("rejected: possible injection" in w and "rsa_fingerprint" in w for w in lines)
    assert all("evil" not in w for w in lines)


@pytest.mark.parametrize("port", ["0", "65536", "ssh", "22.5", "-22"])
def test_debug_ssh_bad_port_is_rejected(caplog: pytest.LogCaptureFixture, port: str) -> None:
    assert parse_debug_ssh([unit({**SSH, "port": port}, name="tmate/0")]).connections == ()
    assert any("port" in w and "tmate/0" in w for w in warnings(caplog))


def test_debug_ssh_port_bounds_accepted() -> None:
    units = [unit({**SSH, "port": "1"}), unit({**SSH, "port": "65535"})]
    assert [c.port for c in parse_debug_ssh(units).connections] == [1, 65535]
