"""The size limits of Juju and Linux that the charm's own writes must fit, and the one packer.

Owns the budgets the charm keeps under (a secret value, a secret's content, one hook-tool
argument, the providers in GARM's environment) and :func:`pack`, which groups whole items
(provider entries, table lines) under a byte budget. The limits themselves, their sources and
where they bite are in ``docs/reference/limits.md``. Knows neither Juju's API nor GARM: the
caller writes the groups.
"""

from __future__ import annotations

from collections.abc import Sequence

# Linux refuses to start a process with one argument or environment string of more than
# 32 pages (MAX_ARG_STRLEN, 128 KiB with its NUL): E2BIG. ops runs every hook tool as a
# process, so an action result (action-set), a log line (juju-log) or a status message
# (status-set) passing it fails the hook.
MAX_ARG_STRLEN = 32 * 4096
# One action result piece: well under MAX_ARG_STRLEN once its ``key=`` is added.
ARG_PIECE_BYTES = 96 * 1024

# Juju before 3.6.9 refuses a secret value over 8 KiB and a secret's content over 64 KiB (and
# 3.4.0 may still refuse a value over 5 KiB: juju/juju#16943, merged 2024-02-19, raised it).
# Juju 3.6.9 and later measure the base64 form against 1,000,000 bytes. Budgets that fit the
# oldest: values of 4 KiB (5,464 bytes in base64), one larger item alone in a value of at most
# 8 KiB (what Juju before 3.6.9 took, so what a record of one value could hold), and at most
# 45 KiB of values per secret (60 KiB in base64).
SECRET_VALUE_BYTES = 4 * 1024
SECRET_VALUE_MAX_BYTES = 8 * 1024
SECRET_CONTENT_BYTES = 45 * 1024

# The providers go to GARM in its service environment. Linux also bounds everything a process
# starts with (arguments and environment together) to a quarter of its stack limit: 2 MiB
# under the usual 8 MiB. Past this many bytes of provider list, no new provider is added.
PROVIDERS_ENV_BYTES = 1_500_000


def utf8_size(text: str) -> int:
    """The bytes ``text`` takes on the wire (what Juju and Linux measure)."""
    return len(text.encode("utf-8"))


def pack(items: Sequence[str], budget: int, separator: int = 1) -> list[list[str]]:
    """Group ``items``, in order, so that each group's bytes stay within ``budget``.

    Args:
        items: the texts to group; the caller bounds their size.
        budget: the most bytes a group may take, separators included; an item larger than
            ``budget`` makes a group of its own.
        separator: the bytes the caller puts between two items of a group.

    Returns:
        The groups, in order; one empty group when there are no items.
    """
    groups: list[list[str]] = [[]]
    used = 0
    for item in items:
        size = utf8_size(item)
        added = size if not groups[-1] else size + separator
        if groups[-1] and used + added > budget:
            groups.append([])
            added = size
            used = 0
        groups[-1].append(item)
        used += added
    return groups
