"""Maintain GARM's charmed runner template, ``github_linux_charmed``.

The charmed template is a copy of GARM's system template ``github_linux`` with, when a
debug-ssh relation offers a tmate server, the tmate settings inserted right after the shebang.
It is kept even without debug-ssh so that scale sets can always reference it. It is updated in
place, so its id, which every scale set uses, never changes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from garm import (
    CreateTemplateParams,
    GarmClient,
    Template,
    from_base64,
    to_base64,
)
from reconcile.containment import contain
from vocabulary.runner_template import prepend_after_shebang, render_tmate_snippet
from vocabulary.tmate_relay import DebugSshConnection

logger = logging.getLogger(__name__)

GARM_BASE_TEMPLATE_NAME = "github_linux"
GARM_CHARMED_TEMPLATE_NAME = "github_linux_charmed"
CHARMED_TEMPLATE_DESCRIPTION = "Charmed GitHub Linux template managed by the GARM charm"


class CharmedTemplateError(Exception):
    """The charmed template could not be read, built or written; scale sets must wait."""


def charmed_template_body(base: bytes, connections: Sequence[DebugSshConnection]) -> bytes:
    """Build the charmed body from the base body and the debug-ssh connections.

    Args:
        base: the body of ``github_linux``.
        connections: the usable tmate servers; only the first by ``(host, port)`` is used.

    Returns:
        The base body with the tmate snippet after its shebang, or the base body unchanged
        when there is no connection.

    Raises:
        CharmedTemplateError: the base body is not UTF-8 text, or a connection value contains
            a line break.
    """
    if not connections:
        return base
    first = min(connections, key=lambda c: (c.host, c.port))
    try:
        snippet = render_tmate_snippet(
            first.host, first.port, first.rsa_fingerprint, first.ed25519_fingerprint
        )
    except ValueError as exc:
        # charm_state already drops such connections; never build a template from one.
        raise CharmedTemplateError("Debug-ssh connection values contain line breaks") from exc
    try:
        script = base.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CharmedTemplateError(
            f"Base template '{GARM_BASE_TEMPLATE_NAME}' is not UTF-8 text"
        ) from exc
    return prepend_after_shebang(script, snippet).encode("utf-8")


def apply_charmed_template(client: GarmClient, connections: Sequence[DebugSshConnection]) -> int:
    """Create or update the charmed template and return its id.

    Args:
        client: an authenticated GARM client.
        connections: the usable debug-ssh connections (may be empty).

    Returns:
        The id of ``github_linux_charmed``, to be used as every scale set's template.

    Raises:
        CharmedTemplateError: a template is missing, has no id or body, or GARM refused or
            failed a read or write of a template body.
        GarmApiError: listing the templates failed, or a pass-ending failure
            (``reconcile.containment``).
    """
    templates = client.list_templates()
    charmed = _find(templates, GARM_CHARMED_TEMPLATE_NAME)
    charmed_id: int | None = None
    if charmed is not None:
        if not charmed.id:
            raise CharmedTemplateError(
                f"Charmed template '{GARM_CHARMED_TEMPLATE_NAME}' has no ID"
            )
        charmed_id = charmed.id
    body = charmed_template_body(_base_body(client, templates), connections)
    if charmed_id is None:
        return _create(client, body, len(connections))
    return _update(client, charmed_id, body, len(connections))


def _find(templates: Sequence[Template], name: str) -> Template | None:
    return next((t for t in templates if t.name == name), None)


def _base_body(client: GarmClient, templates: Sequence[Template]) -> bytes:
    base = _find(templates, GARM_BASE_TEMPLATE_NAME)
    if base is None:
        raise CharmedTemplateError(f"Base template '{GARM_BASE_TEMPLATE_NAME}' not found in GARM")
    if not base.id:
        raise CharmedTemplateError(f"Base template '{GARM_BASE_TEMPLATE_NAME}' has no ID")
    with contain() as refused:
        encoded = client.get_template(base.id).data or ""
    if refused.error is not None:
        raise CharmedTemplateError("Failed to fetch base template data") from refused.error
    try:
        body = from_base64(encoded)
    except ValueError as exc:
        raise CharmedTemplateError("Failed to fetch base template data") from exc
    if not body:
        raise CharmedTemplateError(f"Base template '{GARM_BASE_TEMPLATE_NAME}' has no body")
    return body


def _current_body(client: GarmClient, template_id: int) -> bytes | None:
    """Return the charmed template's body, or None when it cannot be read (then rewrite it)."""
    with contain() as refused:
        encoded = client.get_template(template_id).data or ""
    if refused.error is not None:
        logger.warning(
            "Cannot read charmed template (id=%s), rewriting it: %s", template_id, refused.error
        )
        return None
    try:
        return from_base64(encoded)
    except ValueError as exc:
        logger.warning("Cannot read charmed template (id=%s), rewriting it: %s", template_id, exc)
        return None


def _update(client: GarmClient, template_id: int, body: bytes, count: int) -> int:
    if _current_body(client, template_id) == body:
        # No line when nothing changes: under Juju each log line is a juju-log process.
        return template_id
    logger.info(
        "Updating charmed template %s (id=%s) for %d debug-ssh connection(s)",
        GARM_CHARMED_TEMPLATE_NAME,
        template_id,
        count,
    )
    with contain() as refused:
        client.update_template(template_id, to_base64(body))
    if refused.error is not None:
        raise CharmedTemplateError(
            f"Failed to update charmed template (id={template_id})"
        ) from refused.error
    return template_id


def _create(client: GarmClient, body: bytes, count: int) -> int:
    params = CreateTemplateParams(
        name=GARM_CHARMED_TEMPLATE_NAME,
        description=CHARMED_TEMPLATE_DESCRIPTION,
        forge_type="github",
        os_type="linux",
        data=to_base64(body),
    )
    with contain() as refused:
        return _created_id(client.create_template(params), count)
    raise CharmedTemplateError(
        f"Failed to create charmed template '{GARM_CHARMED_TEMPLATE_NAME}'"
    ) from refused.error


def _created_id(created: Template, count: int) -> int:
    if not created.id:
        raise CharmedTemplateError(
            f"Created charmed template '{GARM_CHARMED_TEMPLATE_NAME}' has no ID"
        )
    logger.info(
        "Created charmed template %s (id=%s) for %d debug-ssh connection(s)",
        GARM_CHARMED_TEMPLATE_NAME,
        created.id,
        count,
    )
    return created.id
