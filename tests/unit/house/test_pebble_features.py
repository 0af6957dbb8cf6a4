"""The Pebble and Juju features the charm uses, and the lowest Juju that has them all.

``charmcraft.yaml``'s ``assumes`` names that Juju. Each feature is listed with the Pebble (or
Juju) that first has it and where that was read; a feature the charm's code uses must be on the
list, and the Juju the charm assumes must bundle a Pebble that has every one.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
SRC = REPO_ROOT / "src"

# Juju version -> the Pebble it bundles. Source: the Ops documentation, "Pebble provided by
# Juju" (canonical/operator, docs/explanation/versions.md, 2026-07). The first Juju 3.6
# releases bundled v1.19.2 (juju/juju pull request 21335 moved 3.6 to v1.26.0), so 3.6 is
# counted here at v1.19.2, its lowest.
PEBBLE_OF_JUJU = {
    (3, 4): (1, 7, 4),
    (3, 5): (1, 10, 2),
    (3, 6): (1, 19, 2),
    (4, 0): (1, 26, 0),
}

# What the charm uses of Pebble: a pattern found in src/, the Pebble that first has it, and
# where that was read.
PEBBLE_FEATURES = {
    "a check's startup field": (
        r'"startup": "(enabled|disabled)"',
        (1, 19, 0),
        "canonical/pebble pull request 560 (commit 6403b826), first tagged v1.19.0",
    ),
    "stop_checks": (
        r"\.stop_checks\(",
        (1, 19, 0),
        "canonical/pebble pull request 560, first tagged v1.19.0",
    ),
    "on-check-failure": (r'"on-check-failure"', (1, 0, 0), "Pebble's layer format since v1.0"),
    "on-success": (r'"on-success"', (1, 0, 0), "Pebble's layer format since v1.0"),
}
# What the charm uses of Juju itself: the pattern, the Juju that first has it, the source.
JUJU_FEATURES = {
    "pebble-check-failed event": (
        r"\.pebble_check_failed\b",
        (3, 6),
        "ops.PebbleCheckFailedEvent: 'Juju 3.6' (Ops documentation, How to manage Pebble "
        "health checks)",
    ),
}


def _assumed_juju() -> tuple[int, int]:
    meta = yaml.safe_load((REPO_ROOT / "charmcraft.yaml").read_text(encoding="utf-8"))
    (juju,) = [a for a in meta["assumes"] if isinstance(a, str) and a.startswith("juju")]
    match = re.fullmatch(r"juju >= (\d+)\.(\d+)(?:\.\d+)?", juju)
    assert match, juju
    return int(match[1]), int(match[2])


def _source() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(SRC.rglob("*.py")))


def test_every_listed_feature_is_used_by_the_charm() -> None:
    source = _source()
    unused = [
        name
        for name, (pattern, *_) in {**PEBBLE_FEATURES, **JUJU_FEATURES}.items()
        if not re.search(pattern, source)
    ]
    assert unused == []


def test_the_charm_calls_no_pebble_method_beyond_the_list() -> None:
    # Calls every Pebble the charm supports has; anything else must join PEBBLE_FEATURES.
    basic = {
        "add_layer",
        "can_connect",
        "exists",
        "get_plan",
        "get_service",
        "pull",
        "push",
        "replan",
        # ops.Container.restart falls back to stop and start where Pebble has no restart action.
        "restart",
        "stop",
    }
    called = set(re.findall(r"container\.([a-z_]+)\(", _source()))
    listed = {"stop_checks"}
    assert called - basic - listed == set()


def _has_everything(juju: tuple[int, int]) -> bool:
    pebble = PEBBLE_OF_JUJU[juju]
    return all(since <= pebble for _, since, _ in PEBBLE_FEATURES.values()) and all(
        since <= juju for _, since, _ in JUJU_FEATURES.values()
    )


def test_the_assumed_juju_is_the_lowest_with_every_feature() -> None:
    juju = _assumed_juju()
    assert _has_everything(juju)
    assert [v for v in PEBBLE_OF_JUJU if v < juju and _has_everything(v)] == []
