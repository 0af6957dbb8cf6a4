"""The pass's edge: what ``charm.py`` calls between observing an event and reporting it.

The desired state read from Juju once (``charm_state``), the workload published and GARM
brought to it (``garm_sync``), the next pass asked for (``continuation``), the removal, the
actions and the ``Outcome`` a pass reports. Only ``charm.py`` imports it.
"""
