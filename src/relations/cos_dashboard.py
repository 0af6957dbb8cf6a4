"""Provider side of the ``grafana_dashboard`` interface (relation ``grafana-dashboard``).

The leader publishes one application key, ``dashboards``: a JSON object with ``templates``
(one entry per file of ``grafana_dashboards/`` beside this module, keyed ``file:<stem>``, its
JSON compressed with ``cosl.LZMABase64``) and ``uuid``. The Grafana charm adds the topology
dropdowns and the ``juju_*`` matchers of ``juju_topology`` to every query. ``juju_topology``
leaves the unit out: GARM runs on whichever unit leads, and the dashboard shows the application
across leaders.

``uuid`` is derived from the templates, so an unchanged dashboard writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

import ops
from cosl import DashboardPath40UID, JujuTopology, LZMABase64
from pydantic import BaseModel, ConfigDict

DASHBOARD_RELATION = "grafana-dashboard"
DASHBOARDS_DIR = Path(__file__).with_name("grafana_dashboards")
# Part of each dashboard's uid: where the dashboards sat relative to the charm root when the
# uid was first published. Kept when the files moved, so Grafana keeps the same dashboard.
DASHBOARDS_CHARM_PATH = "src/grafana_dashboards"
_UUID_NAMESPACE = uuid.UUID("6f1b3c1e-2f7a-4d0e-9a51-3c8e0b9d4a10")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DashboardTemplate(_Strict):
    """One dashboard as the Grafana charm reads it."""

    charm: str
    content: str
    juju_topology: dict[str, str]
    inject_dropdowns: bool
    dashboard_alt_uid: str


class DashboardAppData(_Strict):
    """The value of the ``dashboards`` application key."""

    templates: dict[str, DashboardTemplate]
    uuid: str

    def dump(self) -> dict[str, str]:
        """Return the databag: one key, ``dashboards``, JSON-encoded."""
        return {"dashboards": json.dumps(self.model_dump(), sort_keys=True)}


def load_dashboard(path: Path, charm_name: str) -> dict[str, Any]:
    """Read one dashboard and give it the uid and tag the Grafana charm expects."""
    dashboard: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    charm_path = f"{DASHBOARDS_CHARM_PATH}/{path.name}"
    dashboard["uid"] = DashboardPath40UID.generate(charm_name, charm_path)
    tags: list[str] = list(dashboard.get("tags", []))
    if not any(tag.startswith("charm: ") for tag in tags):
        tags.append(f"charm: {charm_name}")
    dashboard["tags"] = tags
    return dashboard


def app_data(
    topology: JujuTopology, charm_name: str, dashboards_dir: Path = DASHBOARDS_DIR
) -> DashboardAppData:
    """Build the ``dashboards`` value from every ``*.json`` file of ``dashboards_dir``."""
    scope = {
        "model": topology.model,
        "model_uuid": topology.model_uuid,
        "application": topology.application,
    }
    templates: dict[str, DashboardTemplate] = {}
    for path in sorted(dashboards_dir.glob("*.json")):
        key = f"file:{path.stem}"
        content = json.dumps(load_dashboard(path, charm_name), sort_keys=True)
        templates[key] = DashboardTemplate(
            charm=charm_name,
            content=LZMABase64.compress(content),
            juju_topology=scope,
            inject_dropdowns=True,
            dashboard_alt_uid=hashlib.shake_256(f"{charm_name}-{key}".encode()).hexdigest(8),
        )
    digest = json.dumps({k: v.model_dump() for k, v in templates.items()}, sort_keys=True)
    return DashboardAppData(templates=templates, uuid=str(uuid.uuid5(_UUID_NAMESPACE, digest)))


def publish(charm: ops.CharmBase, topology: JujuTopology) -> None:
    """On the leader, write the dashboards to every ``grafana-dashboard`` relation."""
    relations = charm.model.relations[DASHBOARD_RELATION]
    if not relations or not charm.unit.is_leader():
        return
    values = app_data(topology, charm.meta.name).dump()
    for relation in relations:
        bag = relation.data[charm.app]
        for key, value in values.items():
            if bag.get(key) != value:
                bag[key] = value
