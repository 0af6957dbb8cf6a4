"""Writing our side of a relation: only the keys whose value changes.

Owns the one rule every requirer side here follows (``database``, ``ingress``): a value already
in place is not written again, because rewriting even an identical value fires
relation-changed on the other side. Knows ops' databag type only; must not import charm modules.
"""

from __future__ import annotations

from collections.abc import Mapping

import ops


def write_changed(databag: ops.RelationDataContent, wanted: Mapping[str, str]) -> None:
    """Set each key of ``wanted`` whose value differs from the databag's.

    Args:
        databag: our application or unit databag of a relation.
        wanted: the values it should hold; other keys are left as they are.
    """
    # ops writes the keys that change in one relation-set (one hook tool, however many keys).
    databag.update(wanted)
