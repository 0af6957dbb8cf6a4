"""Per-scale-set runner templates: ``github_linux-<live name>`` for a scale set with options.

Owns the custom template of a scale set whose configurator sets runner options: built from the
charmed template (or GARM's ``github_linux``) with ``runner_template``, created, refreshed when
its body differs, and deleted with its scale set or when the options go. A scale set with a
tmate relay gets its template from ``github_linux`` with the relay's tmate address where the
charmed template has the server's. Knows GARM through the client; must not import ops.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from garm import (
    CreateTemplateParams,
    GarmClient,
    Template,
    from_base64,
    to_base64,
)
from reconcile.charmed_template import GARM_BASE_TEMPLATE_NAME
from reconcile.containment import contain
from vocabulary.desired_state import ScalesetSpec
from vocabulary.runner_template import build_template_data

logger = logging.getLogger(__name__)

CUSTOM_TEMPLATE_PREFIX = f"{GARM_BASE_TEMPLATE_NAME}-"


def custom_template_name(live_name: str) -> str:
    """Return the name of the per-scale-set runner template of a live generation."""
    return f"{CUSTOM_TEMPLATE_PREFIX}{live_name}"


class CustomTemplates:
    """The custom templates of one pass, listed once and kept current as they are written."""

    def __init__(self, client: GarmClient) -> None:
        """Start with no listing: nothing is asked of GARM until ``load``."""
        self._client = client
        self.templates: dict[str, Template] = {}
        self._bytes_cache: dict[int, bytes] = {}

    def load(self, listing: Iterable[Template]) -> None:
        """Take GARM's template listing (named templates only)."""
        self.templates = {t.name: t for t in listing if t.name}

    def ensure(self, spec: ScalesetSpec, live_name: str) -> int:
        """Create or refresh the per-scale-set template and return the id the scale set uses."""
        cfg = spec.runner_config
        if not cfg.has_config():
            return spec.template_id or 0
        name = custom_template_name(live_name)
        custom = self.templates.get(name)
        base = self._base_template(spec)
        base_bytes = self._template_bytes(base) if base is not None else None
        if base_bytes is None:
            if custom is not None:
                logger.warning(
                    "No readable base template for %r; keeping its template %r", live_name, name
                )
                return custom.id or 0
            logger.warning("No readable base template for %r; using GARM's default", live_name)
            return 0
        relayed = spec.tmate_relay.relayed if spec.tmate_relay is not None else None
        data = build_template_data(base_bytes, cfg, relayed)
        if custom is not None:
            return self._refresh(custom, data)
        logger.info("Creating template %r", name)
        created = self._client.create_template(
            CreateTemplateParams(
                name=name,
                description=f"Runner template for scaleset {live_name}",
                forge_type="github",
                os_type="linux",
                data=to_base64(data),
            )
        )
        logger.info("Created template %r (id=%s)", name, created.id)
        self.templates[name] = created
        if created.id is not None:
            self._bytes_cache[created.id] = data
        return created.id or 0

    def _base_template(self, spec: ScalesetSpec) -> Template | None:
        # A relayed scale set's runners are told of the relay, not of the server the charmed
        # template names: its template starts from GARM's own.
        if spec.template_id and spec.tmate_relay is None:
            for template in self.templates.values():
                if template.id == spec.template_id:
                    return template
        return self.templates.get(GARM_BASE_TEMPLATE_NAME)

    def _refresh(self, custom: Template, data: bytes) -> int:
        if custom.id is None:
            logger.warning("Template %r is listed without an id; cannot use it", custom.name)
            return 0
        if self._template_bytes(custom) != data:
            logger.info("Updating template %r (id=%s)", custom.name, custom.id)
            self._client.update_template(custom.id, to_base64(data))
            self._bytes_cache[custom.id] = data
        else:
            logger.debug("Template %r is up to date", custom.name)
        return custom.id

    def _template_bytes(self, template: Template) -> bytes | None:
        """Return a template's body, fetching it when the listing left it out.

        Returns None when the body cannot be decoded or the template has no id to fetch by.
        """
        if template.id is not None and template.id in self._bytes_cache:
            return self._bytes_cache[template.id]
        encoded = template.data
        if not encoded and template.id is not None:
            encoded = self._client.get_template(template.id).data
        elif not encoded:
            return None
        try:
            body = from_base64(encoded or "")
        except ValueError:
            logger.warning("Template %r has a body that is not valid base64", template.name)
            return None
        if template.id is not None:
            self._bytes_cache[template.id] = body
        return body

    def delete(self, live_name: str) -> None:
        """Delete the custom template of a live generation, if it has one; retried next pass."""
        name = custom_template_name(live_name)
        template = self.templates.get(name)
        if template is None:
            return
        if template.id is None:
            logger.warning("Cannot delete template %r: GARM lists it without an id", name)
            return
        logger.info("Deleting template %r (id=%s)", name, template.id)
        with contain() as refused:
            self._client.delete_template(template.id)
        if refused.error is not None:
            logger.warning("Failed to delete template %r; will retry: %s", name, refused.error)
            return
        del self.templates[name]
