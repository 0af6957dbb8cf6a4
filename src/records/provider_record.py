"""The provider record: which OpenStack providers GARM must load, kept in a Juju secret.

GARM reads its provider map once, at process start. If the charm restarted GARM without the
provider of a configurator that just left, that configurator's scale set could never have its
runners deleted. So the record keeps a departed configurator's provider until no live scale set
names it any more, and the charm publishes the record, not just the current relations.

Lifecycle per hook (leader): read, merge what relations publish (relation data wins), admit
what fits the limits (``juju_limits``; past them GARM keeps the providers it has), publish,
reconcile, trim what neither a relation nor a live scale set names, save. The record is laid
out over one or more secrets whose every value fits the oldest Juju's limits (ADR 0013). A
record that is missing (not one that is unreadable: that stops the hook) is first rebuilt from
the providers GARM runs with, its last known good copy.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Protocol

import ops

from records import juju_limits
from records.secret_revisions import LatestRevisions
from vocabulary.desired_state import ProviderConfig

logger = logging.getLogger(__name__)

PROVIDER_RECORD_LABEL = "garm-providers"
_RECORD_KEY = "providers"
# In the garm-peers app databag: the keyed digest of each record secret the leader last wrote.
DIGESTS_KEY = "provider-record-digests"
# In the first secret of a record over several: how many secrets it has.
_COUNT_KEY = "secrets"
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


def record_layout(providers: Iterable[ProviderConfig]) -> tuple[dict[str, str], ...]:
    """Lay the providers out as Juju accepts them: the content of each record secret, in order.

    Each value is a JSON list of whole providers of about ``juju_limits.SECRET_VALUE_BYTES``
    (keys ``providers``, ``providers-2``, ...; a larger provider alone in its value), at most
    ``juju_limits.SECRET_CONTENT_BYTES`` of values per secret, so that every secret fits the
    oldest Juju's limits (ADR 0013). The first secret keeps the label and key of the one-value
    record of earlier charms and, when there are more, says how many (key ``secrets``).
    """
    ordered = sorted(providers, key=lambda p: p.unit_name)
    entries = [_entry_json(p) for p in ordered]
    # Two bytes of each value are the list's brackets.
    groups = juju_limits.pack(entries, juju_limits.SECRET_VALUE_BYTES - 2)
    values = ["[" + ",".join(group) + "]" for group in groups]
    secrets = juju_limits.pack(values, juju_limits.SECRET_CONTENT_BYTES, separator=0)
    layout = [{_value_key(i): value for i, value in enumerate(group)} for group in secrets]
    if len(layout) > 1:
        layout[0][_COUNT_KEY] = str(len(layout))
    return tuple(layout)


def _entry_json(provider: ProviderConfig) -> str:
    return json.dumps(provider.as_dict(), sort_keys=True, separators=(",", ":"))


def _value_key(index: int) -> str:
    return _RECORD_KEY if index == 0 else f"{_RECORD_KEY}-{index + 1}"


def record_label(index: int) -> str:
    """The label of the record's secret number ``index`` (0: ``garm-providers``)."""
    return PROVIDER_RECORD_LABEL if index == 0 else f"{PROVIDER_RECORD_LABEL}-{index + 1}"


TOO_LARGE = "over {limit:,} bytes each, Juju's limit on one secret value before 3.6.9"
PAST_ENVIRONMENT = "the list would pass {limit:,} bytes, Linux's limit on GARM's environment"


@dataclass(frozen=True)
class Admission:
    """The providers GARM may be given, and those left out because they would pass a limit.

    Attributes:
        providers: the providers to record and publish, sorted by unit name.
        left_out: the unit names of the providers left out, sorted.
        reason: which limit they met, naming it (empty when none is left out).
    """

    providers: tuple[ProviderConfig, ...]
    left_out: tuple[str, ...] = ()
    reason: str = ""

    def notice(self) -> str:
        """The status fragment naming the limit and the counts; empty when none is left out."""
        if not self.left_out:
            return ""
        return (
            f"{len(self.left_out)} provider(s) left out of GARM ({self.reason}), first"
            f" {self.left_out[0]}; {len(self.providers)} kept"
        )


def admit(record: Sequence[ProviderConfig], merged: Sequence[ProviderConfig]) -> Admission:
    """Keep the merged providers within the limits; past them, keep what GARM already has.

    A provider too large for one secret value is never admitted. When the whole list passes
    ``juju_limits.PROVIDERS_ENV_BYTES``, the recorded providers come first (as their relations
    publish them now, or as recorded if only that fits), then the others by name while the list
    fits: nothing recorded is lost, GARM keeps running, and the rest wait in their relations.
    """
    fitting = [p for p in merged if _fits_a_value(p)]
    reason = TOO_LARGE.format(limit=juju_limits.SECRET_VALUE_MAX_BYTES)
    if _env_size(fitting) > juju_limits.PROVIDERS_ENV_BYTES:
        reason = PAST_ENVIRONMENT.format(limit=juju_limits.PROVIDERS_ENV_BYTES)
        fitting = _fill(record, fitting)
    kept = {p.unit_name for p in fitting}
    left_out = tuple(sorted(p.unit_name for p in merged if p.unit_name not in kept))
    if not left_out:
        return Admission(tuple(merged))
    logger.warning("%d provider(s) left out (%s): %s", len(left_out), reason, ", ".join(left_out))
    return Admission(tuple(sorted(fitting, key=lambda p: p.unit_name)), left_out, reason)


def _fill(
    record: Sequence[ProviderConfig], candidates: Sequence[ProviderConfig]
) -> list[ProviderConfig]:
    """The recorded providers first, then the others by name, while the list fits GARM's env."""
    stored = {p.unit_name: p for p in record}
    ordered = sorted(candidates, key=lambda p: (p.unit_name not in stored, p.unit_name))
    kept: list[ProviderConfig] = []
    # The canonical list is "[" + entries joined by "," + "]": one byte, then each entry's own
    # bytes and one more.
    used = 1
    for provider in ordered:
        for choice in (provider, stored.get(provider.unit_name)):
            size = 0 if choice is None else juju_limits.utf8_size(_entry_json(choice)) + 1
            if choice is not None and used + size <= juju_limits.PROVIDERS_ENV_BYTES:
                kept.append(choice)
                used += size
                break
    return kept


def _fits_a_value(provider: ProviderConfig) -> bool:
    return juju_limits.utf8_size(_entry_json(provider)) + 2 <= juju_limits.SECRET_VALUE_MAX_BYTES


def _env_size(providers: Sequence[ProviderConfig]) -> int:
    return juju_limits.utf8_size(canonical_json(providers))


Stored = tuple[dict[str, str], ...]


def load_record(
    model: ops.Model, digest_key: str = ""
) -> tuple[Stored | None, tuple[ProviderConfig, ...]]:
    """Read the record; return each secret's content (None when absent) and the providers.

    The first secret says how many there are (none said: one, as earlier charms wrote it).
    Each secret is read with one secret-get when the revision this unit tracks is the latest
    the leader wrote (its keyed digest in ``garm-peers`` says so), else moved to the latest.

    Args:
        model: the charm's model.
        digest_key: keys the digests kept in ``garm-peers`` (the charm's own secret value).

    Raises:
        ProviderRecordError: the record exists but is unreadable or malformed.
    """
    latest = LatestRevisions(model, digest_key, DIGESTS_KEY)
    first = _read_secret(model, 0, latest)
    if first is None:
        return None, ()
    if _RECORD_KEY not in first:
        raise ProviderRecordError("provider record has no providers key")
    try:
        count = int(first.get(_COUNT_KEY, "1"))
    except ValueError as exc:
        raise ProviderRecordError("provider record has an unreadable secret count") from exc
    contents = [first]
    for index in range(1, count):
        content = _read_secret(model, index, latest)
        if content is None:
            raise ProviderRecordError(f"provider record misses its secret {index + 1}")
        contents.append(content)
    providers = [p for content in contents for p in _parse_values(content)]
    return tuple(contents), tuple(providers)


def _read_secret(model: ops.Model, index: int, latest: LatestRevisions) -> dict[str, str] | None:
    try:
        # ops reads the revision this unit tracks with the secret: an owner tracks one too.
        secret = model.get_secret(label=record_label(index))
        content = secret.get_content()
        if not latest.holds(index, content):
            content = secret.get_content(refresh=True)
        return content
    except ops.SecretNotFoundError:
        return None
    except ops.ModelError as exc:
        raise ProviderRecordError("provider record cannot be read") from exc


def _parse_values(content: dict[str, str]) -> list[ProviderConfig]:
    found: list[ProviderConfig] = []
    for index in range(len(content) - (_COUNT_KEY in content)):
        text = content.get(_value_key(index))
        if text is None:
            raise ProviderRecordError("provider record misses a value")
        found.extend(parse_record(text))
    return found


def save_record(
    app: ops.Application,
    model: ops.Model,
    stored: Stored | None,
    providers: Sequence[ProviderConfig],
    digest_key: str = "",
    peer_fields: Mapping[str, str] | None = None,
) -> Stored:
    """Write the record's secrets whose content changed; remove those no longer needed.

    The digests of what is stored go to ``garm-peers`` (written only when they change), so the
    next hook reads each secret once (:func:`load_record`); ``peer_fields``, other fields of
    that databag, go with them in one ``relation-set``.

    Returns:
        The content of each record secret now stored.
    """
    wanted = record_layout(providers)
    LatestRevisions(model, digest_key, DIGESTS_KEY).record(wanted, peer_fields)
    before = stored or ()
    if wanted == before:
        return wanted
    for index, content in enumerate(wanted):
        old = before[index] if index < len(before) else None
        if content != old:
            _write(app, model, index, content, exists=old is not None)
    for index in range(len(wanted), len(before)):
        _remove(model, index)
    logger.info(
        "Saved the provider record: %d provider(s) in %d secret(s)", len(providers), len(wanted)
    )
    return wanted


def _write(
    app: ops.Application, model: ops.Model, index: int, content: dict[str, str], *, exists: bool
) -> None:
    label = record_label(index)
    if not exists and index > 0:
        # A secret left by a longer record whose removal failed: reuse it.
        try:
            model.get_secret(label=label)
            exists = True
        except ops.SecretNotFoundError:
            pass
    if not exists:
        app.add_secret(
            content, label=label, description="OpenStack providers GARM must keep loaded"
        )
        return
    # The revision it replaces is removed in the secret-remove hook Juju sends once nothing
    # tracks it (the next hook's read moves this unit's own view on, ``load_record``).
    model.get_secret(label=label).set_content(content)


def _remove(model: ops.Model, index: int) -> None:
    try:
        model.get_secret(label=record_label(index)).remove_all_revisions()
    except ops.ModelError:
        # Unread anyway: the first secret says how many are read.
        logger.debug("Could not remove provider record secret %d", index)
