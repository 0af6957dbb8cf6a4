"""The charmed template (spec 13.3) against the emulator through the real client."""

from __future__ import annotations

import base64
import logging

import pytest

from garm import GarmApiError, GarmClient, GarmConnectionError
from reconcile.charmed_template import CharmedTemplateError, apply_charmed_template
from tests.garm_emulator import (
    SYSTEM_TEMPLATE_BODY,
    SYSTEM_TEMPLATE_ID,
    GarmEmulator,
)
from vocabulary.desired_state import DebugSshConnection

CHARMED = "github_linux_charmed"
FIRST = DebugSshConnection("a.tmate.example", 22, "SHA256:rsa-a", "SHA256:ed-a")
SECOND = DebugSshConnection("a.tmate.example", 2222, "SHA256:rsa-a2", "SHA256:ed-a2")
THIRD = DebugSshConnection("b.tmate.example", 22, "SHA256:rsa-b", "SHA256:ed-b")


def _expected_with(conn: DebugSshConnection) -> bytes:
    shebang, _, rest = SYSTEM_TEMPLATE_BODY.partition(b"\n")
    snippet = (
        "mkdir -p $(dirname /home/runner/actions-runner/.env)\n"
        'cat >> /home/runner/actions-runner/.env << "EOF"\n'
        f"TMATE_SERVER_HOST={conn.host}\n"
        f"TMATE_SERVER_PORT={conn.port}\n"
        f"TMATE_SERVER_RSA_FINGERPRINT={conn.rsa_fingerprint}\n"
        f"TMATE_SERVER_ED25519_FINGERPRINT={conn.ed25519_fingerprint}\n"
        "EOF\n"
    )
    return shebang + b"\n" + snippet.encode() + rest


def _charmed_id(emulator: GarmEmulator) -> int:
    found = emulator.template_by_name(CHARMED)
    assert found is not None
    return found["id"]


def test_created_from_base_without_debug_ssh(
    ready_emulator: GarmEmulator, client: GarmClient, caplog: pytest.LogCaptureFixture
) -> None:
    template_id = apply_charmed_template(client, [])

    assert template_id == _charmed_id(ready_emulator)
    assert template_id != SYSTEM_TEMPLATE_ID
    assert ready_emulator.template_body(CHARMED) == SYSTEM_TEMPLATE_BODY
    (post,) = ready_emulator.writes()
    assert (post.method, post.path) == ("POST", "/templates")
    assert post.body == {
        "name": CHARMED,
        "description": "Charmed GitHub Linux template managed by the GARM charm",
        "forge_type": "github",
        "os_type": "linux",
        "data": base64.b64encode(SYSTEM_TEMPLATE_BODY).decode(),
    }
    assert any(r.levelno == logging.INFO and CHARMED in r.getMessage() for r in caplog.records)


def test_created_with_first_connection_after_shebang(
    ready_emulator: GarmEmulator, client: GarmClient
) -> None:
    template_id = apply_charmed_template(client, [THIRD, SECOND, FIRST])

    assert template_id == _charmed_id(ready_emulator)
    body = ready_emulator.template_body(CHARMED)
    assert body == _expected_with(FIRST)
    assert body is not None
    assert body.startswith(b"#!/bin/bash\nmkdir -p ")
    assert b"b.tmate.example" not in body
    assert b"2222" not in body


def test_no_write_when_unchanged(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    first_id = apply_charmed_template(client, [FIRST, THIRD])
    ready_emulator.clear_requests()

    assert apply_charmed_template(client, [THIRD, FIRST]) == first_id

    assert ready_emulator.writes() == []


def test_no_write_when_unchanged_without_debug_ssh(
    ready_emulator: GarmEmulator, client: GarmClient
) -> None:
    first_id = apply_charmed_template(client, [])
    ready_emulator.clear_requests()
    assert apply_charmed_template(client, []) == first_id
    assert ready_emulator.writes() == []


def test_updated_in_place_when_connections_change(
    ready_emulator: GarmEmulator, client: GarmClient, caplog: pytest.LogCaptureFixture
) -> None:
    template_id = apply_charmed_template(client, [])
    ready_emulator.clear_requests()

    assert apply_charmed_template(client, [THIRD]) == template_id
    assert ready_emulator.template_body(CHARMED) == _expected_with(THIRD)
    (put,) = ready_emulator.writes()
    assert (put.method, put.path) == ("PUT", f"/templates/{template_id}")
    assert put.body == {"data": base64.b64encode(_expected_with(THIRD)).decode()}
    assert any(
        r.levelno == logging.INFO and "1 debug-ssh" in r.getMessage() for r in caplog.records
    )

    assert apply_charmed_template(client, [THIRD, FIRST]) == template_id
    assert ready_emulator.template_body(CHARMED) == _expected_with(FIRST)

    assert apply_charmed_template(client, []) == template_id
    assert ready_emulator.template_body(CHARMED) == SYSTEM_TEMPLATE_BODY
    # GARM's four system templates and one charmed template, however often it changed.
    assert [t["name"] for t in ready_emulator.templates()] == [
        "github_windows",
        "github_linux",
        "gitea_linux",
        "gitea_windows",
        CHARMED,
    ]


def test_existing_body_unreadable_is_rewritten(
    ready_emulator: GarmEmulator, client: GarmClient, caplog: pytest.LogCaptureFixture
) -> None:
    template_id = apply_charmed_template(client, [FIRST])
    ready_emulator.clear_requests()
    ready_emulator.fail_next("GET", f"/templates/{template_id}", 500)

    assert apply_charmed_template(client, [FIRST]) == template_id

    assert [(w.method, w.path) for w in ready_emulator.writes()] == [
        ("PUT", f"/templates/{template_id}")
    ]
    assert any(r.levelno == logging.WARNING for r in caplog.records)


def test_listing_failure_propagates_as_api_error(
    ready_emulator: GarmEmulator, client: GarmClient
) -> None:
    ready_emulator.fail_next("GET", "/templates", 500)
    with pytest.raises(GarmApiError):
        apply_charmed_template(client, [])


def _set_template_id(emulator: GarmEmulator, name: str, new_id: int) -> None:
    with emulator.state.lock:
        row = next(t for t in emulator.state.templates.values() if t.name == name)
        row.id = new_id


def test_charmed_template_without_id(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    ready_emulator.add_template(CHARMED, b"#!/bin/bash\n")
    _set_template_id(ready_emulator, CHARMED, 0)
    with pytest.raises(CharmedTemplateError) as err:
        apply_charmed_template(client, [])
    assert str(err.value) == "Charmed template 'github_linux_charmed' has no ID"


def test_base_template_missing(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    with ready_emulator.state.lock:
        del ready_emulator.state.templates[SYSTEM_TEMPLATE_ID]
    with pytest.raises(CharmedTemplateError) as err:
        apply_charmed_template(client, [])
    assert str(err.value) == "Base template 'github_linux' not found in GARM"
    assert ready_emulator.writes() == []


def test_base_template_without_id(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    _set_template_id(ready_emulator, "github_linux", 0)
    with pytest.raises(CharmedTemplateError) as err:
        apply_charmed_template(client, [])
    assert str(err.value) == "Base template 'github_linux' has no ID"


def test_base_template_fetch_failure(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    ready_emulator.fail_next("GET", f"/templates/{SYSTEM_TEMPLATE_ID}", 500)
    with pytest.raises(CharmedTemplateError) as err:
        apply_charmed_template(client, [])
    assert str(err.value) == "Failed to fetch base template data"
    assert ready_emulator.writes() == []


def test_base_template_fetch_dropped_ends_the_pass(
    ready_emulator: GarmEmulator, client: GarmClient
) -> None:
    # An outage is about GARM, not the template: it ends the pass (ADR 0009).
    ready_emulator.drop_next("GET", f"/templates/{SYSTEM_TEMPLATE_ID}")
    with pytest.raises(GarmConnectionError):
        apply_charmed_template(client, [])
    assert ready_emulator.writes() == []


def test_base_template_without_body(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    with ready_emulator.state.lock:
        ready_emulator.state.templates[SYSTEM_TEMPLATE_ID].data = b""
    with pytest.raises(CharmedTemplateError) as err:
        apply_charmed_template(client, [])
    assert str(err.value) == "Base template 'github_linux' has no body"


def test_update_failure(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    template_id = apply_charmed_template(client, [])
    ready_emulator.fail_next("PUT", r"/templates/\d+", 500)
    with pytest.raises(CharmedTemplateError) as err:
        apply_charmed_template(client, [FIRST])
    assert str(err.value) == f"Failed to update charmed template (id={template_id})"
    assert ready_emulator.template_body(CHARMED) == SYSTEM_TEMPLATE_BODY


def test_create_failure(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    ready_emulator.fail_next("POST", "/templates", 409)
    with pytest.raises(CharmedTemplateError) as err:
        apply_charmed_template(client, [])
    assert str(err.value) == "Failed to create charmed template 'github_linux_charmed'"
    assert ready_emulator.template_by_name(CHARMED) is None


def test_created_template_without_id(ready_emulator: GarmEmulator, client: GarmClient) -> None:
    with ready_emulator.state.lock:
        # The next template row gets id 0, which GARM would report as no id.
        ready_emulator.state._ids["template"] = -1
    with pytest.raises(CharmedTemplateError) as err:
        apply_charmed_template(client, [])
    assert str(err.value) == "Created charmed template 'github_linux_charmed' has no ID"


def test_connection_with_line_break_is_refused(
    ready_emulator: GarmEmulator, client: GarmClient
) -> None:
    bad = DebugSshConnection("a.example", 22, "SHA256:x\nEVIL=1", "SHA256:y")
    with pytest.raises(CharmedTemplateError):
        apply_charmed_template(client, [bad])
    assert ready_emulator.writes() == []
