"""The charmed runner template follows the debug-ssh relation (spec 13.3 and 15.1).

Uses the test charm in ``charms/configurator-stub`` deployed as ``debug-ssh-stub``; it
publishes a tmate server on its ``debug-ssh`` endpoint. See ``test_bootstrap.py`` for how to run.
"""

from __future__ import annotations

from pathlib import Path

import jubilant
import pytest

from tests.integration import helpers
from tests.integration.helpers import AdminCredentials

STUB = "debug-ssh-stub"
TMATE = {
    "debug-ssh-host": "tmate.stub.test",
    "debug-ssh-port": "10022",
    "debug-ssh-rsa-fingerprint": "SHA256:stub-rsa-fingerprint",
    "debug-ssh-ed25519-fingerprint": "SHA256:stub-ed25519-fingerprint",
}
GARM_ENDPOINT = f"{helpers.APP}:debug-ssh"
STUB_ENDPOINT = f"{STUB}:debug-ssh"


def expected_snippet() -> list[str]:
    """The lines spec 15.1 inserts after the shebang for the stub's tmate server."""
    env = "/home/runner/actions-runner/.env"
    return [
        f"mkdir -p $(dirname {env})",
        f'cat >> {env} << "EOF"',
        f"TMATE_SERVER_HOST={TMATE['debug-ssh-host']}",
        f"TMATE_SERVER_PORT={TMATE['debug-ssh-port']}",
        f"TMATE_SERVER_RSA_FINGERPRINT={TMATE['debug-ssh-rsa-fingerprint']}",
        f"TMATE_SERVER_ED25519_FINGERPRINT={TMATE['debug-ssh-ed25519-fingerprint']}",
        "EOF",
    ]


@pytest.fixture(scope="module")
def template_ids(juju: jubilant.Juju, admin: AdminCredentials) -> dict[str, int]:
    """Ids of the base and the charmed template before any debug-ssh relation."""
    templates = helpers.templates_by_name(juju, admin)
    assert helpers.BASE_TEMPLATE in templates
    assert helpers.CHARMED_TEMPLATE in templates
    return templates


def _charmed_and_base(
    juju: jubilant.Juju, admin: AdminCredentials, ids: dict[str, int]
) -> tuple[str, str]:
    charmed = helpers.template_body(juju, admin, ids[helpers.CHARMED_TEMPLATE])
    base = helpers.template_body(juju, admin, ids[helpers.BASE_TEMPLATE])
    return charmed, base


def test_without_debug_ssh_the_charmed_template_copies_the_base(
    juju: jubilant.Juju, admin: AdminCredentials, template_ids: dict[str, int]
) -> None:
    charmed, base = _charmed_and_base(juju, admin, template_ids)

    assert base.startswith("#!")
    assert charmed == base


def test_debug_ssh_relation_adds_tmate_after_the_shebang(
    juju: jubilant.Juju, admin: AdminCredentials, template_ids: dict[str, int], stub_charm: Path
) -> None:
    juju.deploy(stub_charm, STUB, config=TMATE)
    juju.wait(lambda s: jubilant.all_active(s, STUB), error=jubilant.any_error)
    juju.integrate(GARM_ENDPOINT, STUB_ENDPOINT)

    def has_tmate() -> bool:
        charmed, _ = _charmed_and_base(juju, admin, template_ids)
        return "TMATE_SERVER_HOST=" in charmed

    helpers.wait_until(has_tmate, "the tmate snippet in the charmed template")
    charmed, base = _charmed_and_base(juju, admin, template_ids)
    charmed_lines = charmed.split("\n")
    base_lines = base.split("\n")
    snippet = expected_snippet()

    assert charmed_lines[0] == base_lines[0]
    assert charmed_lines[1 : 1 + len(snippet)] == snippet
    assert charmed_lines[1 + len(snippet) :] == base_lines[1:]
    # Updated in place: scale sets keep referencing the same template id.
    assert (
        helpers.templates_by_name(juju, admin)[helpers.CHARMED_TEMPLATE]
        == (template_ids[helpers.CHARMED_TEMPLATE])
    )
    assert helpers.app_message(juju.status()) == ("waiting", helpers.WAITING_CONFIGURATOR)


def test_removing_debug_ssh_restores_the_base_template(
    juju: jubilant.Juju, admin: AdminCredentials, template_ids: dict[str, int], stub_charm: Path
) -> None:
    juju.remove_relation(GARM_ENDPOINT, STUB_ENDPOINT)

    def is_plain_copy() -> bool:
        charmed, base = _charmed_and_base(juju, admin, template_ids)
        return charmed == base

    helpers.wait_until(is_plain_copy, "the charmed template to lose the tmate snippet")
    charmed, _ = _charmed_and_base(juju, admin, template_ids)

    assert "TMATE_SERVER_HOST=" not in charmed
    assert (
        helpers.templates_by_name(juju, admin)[helpers.CHARMED_TEMPLATE]
        == (template_ids[helpers.CHARMED_TEMPLATE])
    )
