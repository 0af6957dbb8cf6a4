"""What this unit last told Juju about itself: its opened ports, workload version and status.

Juju keeps all three for the unit, and only the unit's own charm changes them; so a pass tells
Juju only what differs from what this unit last told it, and a converged pass runs none of
``opened-ports``, ``application-version-set`` and ``status-set``
(docs/reference/reconcile-cost.md). The application's status is the leader's to set: another
unit may have set it while this one was not the leader, so it is forgotten whenever this unit
is elected. The
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
        self._stored.set_default(ports=None, version=None, status=None, app_status=None)
        charm.framework.observe(charm.on.leader_elected, self._on_leader_elected)

    def _on_leader_elected(self, _: ops.LeaderElectedEvent) -> None:
        self._stored.app_status = None

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
        return self._changed("status", status)

    def app_status_changed(self, status: ops.StatusBase) -> bool:
        """Leader: whether ``status`` differs from the app status it last set; now it has."""
        return self._changed("app_status", status)

    def _changed(self, field: str, status: ops.StatusBase) -> bool:
        shown = f"{status.name}: {status.message}"
        if getattr(self._stored, field) == shown:
            return False
        setattr(self._stored, field, shown)
        return True
