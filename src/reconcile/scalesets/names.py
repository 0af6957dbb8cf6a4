"""The names of a logical scale set's generations in GARM, and the first-wins rule for specs.

Owns how a live name is made from a logical name and its labels (a label hash, the whole at
most 64 characters), how the generations of one logical scale set are recognised, and
``dedupe_specs``. Pure: must not import ops or the GARM client.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Sequence

from vocabulary.desired_state import ScalesetSpec

logger = logging.getLogger(__name__)

LABEL_HASH_LENGTH = 8
MAX_SCALESET_NAME_LENGTH = 64

# Room left for the operator's part of the name: the hash and its dash are never truncated.
_NAME_BASE_LIMIT = MAX_SCALESET_NAME_LENGTH - LABEL_HASH_LENGTH - 1
# A truncated base keeps this many characters of the logical name, then "-" and a name hash.
_TRUNCATED_PREFIX_LENGTH = _NAME_BASE_LIMIT - LABEL_HASH_LENGTH - 1


def target_scaleset_name(logical: str, labels: Sequence[str]) -> str:
    """Return the live GARM name of the generation that carries these labels.

    Args:
        logical: the operator-facing scale set name.
        labels: the runner labels; order is irrelevant, duplicates count.

    Returns:
        ``<base>-<first 8 hex of sha256 of the sorted, comma-joined labels>``, at most 64
        characters.
    """
    digest = _sha256_hex(",".join(sorted(labels)))[:LABEL_HASH_LENGTH]
    return f"{name_base(logical)}-{digest}"


def dedupe_specs(specs: Iterable[ScalesetSpec], warn: bool = True) -> list[ScalesetSpec]:
    """Keep the first spec of each logical name, in order.

    Args:
        specs: the desired specs.
        warn: log a warning for a later duplicate that differs from the kept spec.

    Returns:
        The specs with later duplicates dropped.
    """
    kept: dict[str, ScalesetSpec] = {}
    for spec in specs:
        first = kept.setdefault(spec.name, spec)
        if warn and first is not spec and first != spec:
            logger.warning(
                "Scaleset %r is described more than once with different settings; a logical "
                "name must identify exactly one scaleset, keeping the first",
                spec.name,
            )
    return list(kept.values())


class Generations:
    """The hash-suffixed live names GARM holds, by the name base they were made from.

    A generation of a logical scale set is named ``<name_base(logical)>-<label hash>``; the
    bare logical name (a pre-hash scale set) is no generation. Built once a pass, so finding
    one logical scale set's generations does not scan every live name.
    """

    def __init__(self, names: Iterable[str]) -> None:
        """Index ``names`` (GARM's live scale-set names)."""
        self._by_base: dict[str, list[str]] = {}
        for name in names:
            base, dash, digest = name.rpartition("-")
            if dash and _is_label_hash(digest):
                self._by_base.setdefault(base, []).append(name)

    def of(self, logical: str) -> list[str]:
        """Every live generation name of the logical scale set ``logical``."""
        return list(self._by_base.get(name_base(logical), ()))

    def family(self, logical: str, target: str) -> list[str]:
        """The target name and every live generation name of ``logical``, sorted."""
        return sorted({*self.of(logical), target})


def logical_of(live_name: str) -> str:
    """Return the operator-facing part of a live name: without its label hash when it has one."""
    base, dash, digest = live_name.rpartition("-")
    if dash and _is_label_hash(digest):
        return base
    return live_name


def _is_label_hash(text: str) -> bool:
    return len(text) == LABEL_HASH_LENGTH and all(c in "0123456789abcdef" for c in text)


def _sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def name_base(logical: str) -> str:
    """Return the part of a live name before the label hash (at most 55 characters)."""
    if len(logical) <= _NAME_BASE_LIMIT:
        return logical
    # Hashing the whole name keeps long names that share a prefix apart.
    digest = _sha256_hex(logical)[:LABEL_HASH_LENGTH]
    return f"{logical[:_TRUNCATED_PREFIX_LENGTH]}-{digest}"
