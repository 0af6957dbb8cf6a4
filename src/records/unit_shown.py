"""What this unit last told Juju about itself: its opened ports, workload version and status.

Juju keeps all three for the unit, and only the unit's own charm changes them; so a pass tells
Juju only what differs from what this unit last told it, and a converged pass runs none of
``opened-ports``, ``application-version-set`` and the unit's ``status-set``
(docs/reference/reconcile-cost.md). The application's status is not here: another unit may
have set it since this one was last the leader. The
memory is the unit's own charm state (ops' ``StoredState``, beside the charm): it goes with
the pod, and the next pass then tells Juju again.
"""

from __future__ import annotations

import ops


class UnitShown(ops.Object):
    """The unit's opened ports and workload version, told to Juju only when they change."""

    _stored = ops.StoredState()

    def __init__(self, charm: ops.CharmBase) -> None:
        """Read what this unit last told Juju (nothing yet on a new pod)."""
        super().__init__(charm, "unit-shown")
        self._unit = charm.unit
        self._stored.set_default(ports=None, version=None, status=None)

    @property
    def unit_name(self) -> str:
        """The unit's name, ``garm/0``."""
        return self._unit.name

    def ports(self, *ports: int) -> None:
        """Make the unit's opened TCP ports exactly ``ports``."""
        wanted = ",".join(str(port) for port in sorted(ports))
        if self._stored.ports != wanted:
            self._unit.set_ports(*ports)
            self._stored.ports = wanted

    def workload_version(self, version: str) -> None:
        """Show ``version`` as the unit's workload version (``""`` clears it)."""
        if self._stored.version != version:
            self._unit.set_workload_version(version)
            self._stored.version = version

    def status_changed(self, status: ops.StatusBase) -> bool:
        """Whether ``status`` differs from the unit status this unit last set; now it has."""
        shown = f"{status.name}: {status.message}"
        if self._stored.status == shown:
            return False
        self._stored.status = shown
        return True
