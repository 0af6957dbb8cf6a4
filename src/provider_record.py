"""The provider record: which OpenStack providers GARM must load, kept in a Juju secret.

GARM reads its provider map once, at process start. If the charm restarted GARM without the
provider of a configurator that just left, that configurator's scale set could never have its
runners deleted. So the record keeps a departed configurator's provider until no live scale set
names it any more, and the charm publishes the record, not just the current relations.

Lifecycle per hook (leader): read, merge what relations publish (relation data wins), publish,
reconcile, trim what neither a relation nor a live scale set names, save. A record that is
missing (not one that is unreadable: that stops the hook) is first rebuilt from the providers
GARM runs with, its last known good copy.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import fields
from typing import Protocol

import ops

from desired_state import ProviderConfig

logger = logging.getLogger(__name__)

PROVIDER_RECORD_LABEL = "garm-providers"
_RECORD_KEY = "providers"
# What a stored entry must hold: every field of a provider.
_PROVIDER_FIELDS = tuple(f.name for f in fields(ProviderConfig))


class ProviderRecordError(Exception):
    """The record exists but cannot be read or trusted."""


class LiveScaleset(Protocol):
    """What the trim needs to know about a scale set that still exists in GARM."""

    @property
    def name(self) -> str | None:
        """Live name of the scale set."""
        ...

    @property
    def provider_name(self) -> str | None:
        """Provider the scale set's runners are created by."""
        ...


def canonical_json(providers: Iterable[ProviderConfig]) -> str:
    """Return the one canonical string for a provider set (record value and workload env)."""
    ordered = sorted(providers, key=lambda p: p.unit_name)
    return json.dumps([p.as_dict() for p in ordered], sort_keys=True, separators=(",", ":"))


def parse_record(text: str) -> tuple[ProviderConfig, ...]:
    """Parse a stored record.

    Raises:
        ProviderRecordError: the text is not a list of complete provider objects.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ProviderRecordError("provider record is not valid JSON") from exc
    if not isinstance(data, list):
        raise ProviderRecordError("provider record is not a list")
    entries: list[object] = data  # pyright: ignore[reportUnknownVariableType]
    providers = [_provider_from(entry) for entry in entries]
    return tuple(providers)


def _provider_from(entry: object) -> ProviderConfig:
    if not isinstance(entry, dict):
        raise ProviderRecordError("provider record holds a non-object entry")
    stored: dict[object, object] = entry  # pyright: ignore[reportUnknownVariableType]
    values = {key: stored.get(key) for key in _PROVIDER_FIELDS}
    strings = {key: value for key, value in values.items() if isinstance(value, str) and value}
    if len(strings) != len(_PROVIDER_FIELDS):
        raise ProviderRecordError("provider record holds an incomplete entry")
    return ProviderConfig(**strings)


def rebuild_missing(planned: str) -> tuple[ProviderConfig, ...]:
    """Return the providers GARM runs with, to stand in for a record that is missing.

    Only a missing record is rebuilt; an existing one is the charm's own account. Without this,
    a configurator that publishes no provider right now (its first phase) would have GARM
    restarted without the provider its live scale set still names.

    Args:
        planned: the provider list of the current Pebble plan (empty when there is no plan).

    Returns:
        The plan's providers; none when the plan has none or its list cannot be read.
    """
    if not planned:
        return ()
    try:
        providers = parse_record(planned)
    except ProviderRecordError as exc:
        logger.warning(
            "The provider record is missing and the plan's provider list cannot be read (%s):"
            " nothing rebuilt",
            exc,
        )
        return ()
    if providers:
        logger.warning(
            "The provider record is missing: rebuilt from the %d provider(s) GARM runs with: %s",
            len(providers),
            ", ".join(p.unit_name for p in providers),
        )
    return providers


def merge(
    record: Sequence[ProviderConfig], published: Sequence[ProviderConfig]
) -> tuple[ProviderConfig, ...]:
    """Add the relation providers to the record; a relation entry replaces a stored one."""
    merged = {p.unit_name: p for p in record}
    merged.update({p.unit_name: p for p in published})
    return tuple(merged[name] for name in sorted(merged))


def trim(
    merged: Sequence[ProviderConfig],
    published: Sequence[ProviderConfig],
    live: Sequence[LiveScaleset] | None,
) -> tuple[ProviderConfig, ...]:
    """Drop providers that no relation publishes and no live scale set names.

    Args:
        merged: the providers published to GARM in this hook.
        published: the providers relations publish now.
        live: the scale sets left in GARM after the pass, or None when the pass did not
            complete; then nothing is trimmed, because an unknown observation cannot prove
            a provider unused.

    Returns:
        The providers to keep.
    """
    if live is None:
        return tuple(merged)
    nameless = sorted(s.name or "?" for s in live if not s.provider_name)
    if nameless:
        logger.warning(
            "Scale set(s) without a provider in GARM, ignored when trimming providers: %s",
            ", ".join(nameless),
        )
    needed = {p.unit_name for p in published} | {s.provider_name for s in live if s.provider_name}
    kept = tuple(p for p in merged if p.unit_name in needed)
    for dropped in sorted({p.unit_name for p in merged} - needed):
        logger.info("Provider %s is no longer needed; it leaves GARM at the next restart", dropped)
    return kept


def load_record(model: ops.Model) -> tuple[str | None, tuple[ProviderConfig, ...]]:
    """Read the record; return its raw canonical text (None when absent) and its providers.

    Raises:
        ProviderRecordError: the record exists but is unreadable or malformed.
    """
    try:
        content = model.get_secret(label=PROVIDER_RECORD_LABEL).peek_content()
    except ops.SecretNotFoundError:
        return None, ()
    except ops.ModelError as exc:
        raise ProviderRecordError("provider record cannot be read") from exc
    text = content.get(_RECORD_KEY)
    if text is None:
        raise ProviderRecordError("provider record has no providers key")
    return text, parse_record(text)


def save_record(
    app: ops.Application,
    model: ops.Model,
    stored: str | None,
    providers: Sequence[ProviderConfig],
) -> str:
    """Write the record if its canonical text changed, and drop an obsolete revision.

    Returns:
        The canonical text now stored.
    """
    text = canonical_json(providers)
    if text == stored:
        return text
    if stored is None:
        app.add_secret(
            {_RECORD_KEY: text},
            label=PROVIDER_RECORD_LABEL,
            description="OpenStack providers GARM must keep loaded",
        )
        logger.info("Created the provider record with %d provider(s)", len(providers))
        return text
    secret = model.get_secret(label=PROVIDER_RECORD_LABEL)
    current = secret.get_info().revision
    secret.set_content({_RECORD_KEY: text})
    logger.info("Updated the provider record: %d provider(s)", len(providers))
    _remove_obsolete_revision(secret, current - 1)
    return text


def _remove_obsolete_revision(secret: ops.Secret, revision: int) -> None:
    """Remove the revision before the one just replaced.

    Juju commits ``secret-set`` when the hook ends, so the revision just replaced is still the
    latest during this hook and cannot be removed yet; Juju announces it with a
    ``secret-remove`` event once nothing tracks it, and the charm removes it then. Here the
    charm only clears the one before it, in case that event was missed.
    """
    if revision < 1:
        return
    try:
        # The owner moves its own view to the newest revision, so the old one is unused.
        secret.get_content(refresh=True)
        secret.remove_revision(revision)
    except ops.ModelError:
        # Housekeeping only: a revision left behind costs storage, not correctness.
        logger.debug("Could not remove provider record revision %d", revision)
