"""The ``k8s-backup-target`` relation through the real charm in ``ops.testing``.

What a Velero backup charm reads: the leader offers GARM's volume (claim and volume of this
application in its model's namespace); a non-leader writes nothing.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ops import testing

from tests.charm_driver import base_state
from workload import pebble_layer


def offline(tmp_path: Path, *, leader: bool) -> testing.State:
    """A unit whose Pebble is not reachable: no GARM is asked anything."""
    state = base_state(tmp_path, leader=leader)
    container = dataclasses.replace(
        state.get_container(pebble_layer.CONTAINER_NAME), can_connect=False
    )
    return dataclasses.replace(state, containers={container})


def _charm():
    from charm import GarmCharm

    return GarmCharm


def relate_velero(tmp_path: Path, *, leader: bool) -> tuple[testing.State, dict[str, str]]:
    """Relate a Velero integrator; the state before and the charm's application data after."""
    relation = testing.Relation("k8s-backup-target", remote_app_name="velero-integrator")
    ctx = testing.Context(_charm())
    state = offline(tmp_path, leader=leader)
    state = dataclasses.replace(state, relations={*state.relations, relation})
    out = ctx.run(ctx.on.relation_created(relation), state)
    return state, dict(out.get_relation(relation.id).local_app_data)


def test_leader_offers_garm_volume_to_the_backup_charm(tmp_path: Path):
    state, published = relate_velero(tmp_path, leader=True)

    assert json.loads(published["backup_targets"]) == [
        {
            "app": "garm",
            "relation_name": "k8s-backup-target",
            "model": state.model.name,
            "spec": {
                "include_namespaces": [state.model.name],
                "include_resources": ["persistentvolumeclaims", "persistentvolumes"],
                "exclude_namespaces": None,
                "exclude_resources": None,
                "include_cluster_resources": None,
                "label_selector": {"app.kubernetes.io/name": "garm"},
                "ttl": None,
            },
        }
    ]


def test_a_non_leader_offers_nothing(tmp_path: Path):
    _, published = relate_velero(tmp_path, leader=False)

    assert "backup_targets" not in published
