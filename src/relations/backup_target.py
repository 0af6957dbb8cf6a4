"""GARM's volume offered to Kubernetes backups: the ``k8s-backup-target`` relation.

Canonical's Velero charms (``velero-operator``, through a backup integrator) consume the
``k8s_backup_target`` interface: the application describes what of its model a backup holds,
and the backup charm schedules and runs it. The charm offers the ``garm-data`` volume, where
GARM keeps its SQLite database (its persistent volume claim and volume), selected by the
application's label in the model's namespace. GARM's configuration is rebuilt from relations at
every start and needs no backup; with PostgreSQL, the database charm's own backups apply
(``docs/how-to/backup-and-restore.md``). What the charm does after a restore: ADR 0016.

Uses ``charmlibs-interfaces-k8s-backup-target``: its provider writes the specification on the
leader when the relation is created, at leadership and at upgrade. Knows Juju, not GARM.
"""

from __future__ import annotations

import ops
from charmlibs.interfaces.k8s_backup_target import K8sBackupTargetProvider, K8sBackupTargetSpec

RELATION = "k8s-backup-target"
# Juju labels the pods and volume claims of a Kubernetes application with its name.
APP_LABEL = "app.kubernetes.io/name"
RESOURCES = ("persistentvolumeclaims", "persistentvolumes")


def spec(app: str, model: str) -> K8sBackupTargetSpec:
    """What a backup of this application holds: GARM's volume and its claim."""
    return K8sBackupTargetSpec(
        include_namespaces=[model],
        include_resources=list(RESOURCES),
        label_selector={APP_LABEL: app},
    )


def offer(charm: ops.CharmBase) -> K8sBackupTargetProvider:
    """Publish the specification on the relation (the library's own events)."""
    return K8sBackupTargetProvider(
        charm, relation_name=RELATION, spec=spec(charm.app.name, charm.model.name)
    )
