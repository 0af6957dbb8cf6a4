"""What the unit keeps of GARM's idle worker starts between hooks (issue 56).

Before a pass disables or deletes a scale set it waits until GARM has started the scale sets'
workers (``reconcile.scalesets.worker_starts``); when GARM lost a worker at its own start, its
lookups stop short and the wait ends after ``IDLE`` seconds of none. Such a worker stays lost
for that GARM process's life, so the pass hands on where it found GARM idle
(``reconcile.IdleStarts``: GARM's process start and the lookups count), and the next pass of
the same process, its lookups unmoved, goes on at once instead of waiting again: one wait per
start of GARM, not one per hook. Each hook is a new process of the charm, so the unit keeps it
in its own ``StoredState``: GARM runs beside this unit, and a new pod runs a new GARM, which
the reconciler tells by its start anyway. Written only when it changes. Knows ops; GARM only
through ``reconcile``'s face.
"""

from __future__ import annotations

from typing import cast

import ops

from reconcile import IdleStarts


class WorkerIdle(ops.Object):
    """Where an earlier pass found GARM's worker starts idle, kept in the unit's state."""

    _stored = ops.StoredState()

    def __init__(self, charm: ops.CharmBase) -> None:
        """Read what the unit kept (nothing on a new pod)."""
        super().__init__(charm, "worker-idle")
        # GARM's process start and its lookups, or nothing.
        self._stored.set_default(idle=[])

    def read(self) -> IdleStarts | None:
        """What an earlier pass found, for this pass's reconciler."""
        kept = list(cast(list[float], self._stored.idle))
        return IdleStarts(kept[0], kept[1]) if len(kept) == 2 else None

    def keep(self, idle: IdleStarts | None) -> None:
        """Keep what this pass found for the next (None: nothing)."""
        kept = [idle.garm_started, idle.lookups] if idle is not None else []
        if list(cast(list[float], self._stored.idle)) != kept:
            self._stored.idle = kept
