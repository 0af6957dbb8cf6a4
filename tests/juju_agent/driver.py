"""The charm driver's surface over the packed charm: a story told with ``ops.testing`` runs here.

Owns the translation between :class:`tests.charm_driver.CharmDriver`'s vocabulary and the unit
agent's: :class:`PackedDriver` takes the same ``testing.State`` and ``ctx.on`` events a story
gives the ``ops.testing`` driver, and runs each event as Juju would, as a hook of the packed
charm (:class:`tests.juju_agent.agent.UnitAgent`) in the pod
(:mod:`tests.juju_agent.pod`):

- before the hook, what the deployment around the unit holds (leadership, config, the remote
  applications' and units' databags, the configurators' secrets and their new revisions) is
  written into the model file; the unit's own databags and secrets stay what its hooks wrote;
- the event becomes the hook's dispatch path and Juju's variables (relation, remote unit,
  departing unit, secret, workload, notice, check, storage, action);
- after it, the State is read back: the unit's databags, its secrets, statuses, opened ports and
  workload version from the model, and the ``garm`` container's plan and services from the real
  Pebble, so the story's checks (``planned_env``, ``admin_credentials``, ...) read what the
  packed charm did. A hook that keeps failing after the agent's retries fails the story (the
  unit would be in error); a failed run it retried left nothing behind.

The charm's continuation (a Pebble custom notice, ADR 0015) is delivered as Juju delivers it:
``pebble-custom-notice`` with the notice's id, type and key, once per new occurrence. Not served:
the Pebble pulls of a hook (:attr:`CharmDriver.pulls` stays empty: a real Pebble logs none).

:func:`open_packed_backend` is the story's real backend (:mod:`tests.simulate_backends`) in the
pod: the GitHub stand-in, GARM under the charm's own Pebble plan behind the recording proxy on
8080, the ingress pointing there, the image's garm-agent the stand-in agent.
"""

from __future__ import annotations

import collections
import dataclasses
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ops
from ops import testing

from charm_pass import continuation
from tests.charm_driver import CharmDriver, Configurator, base_state
from tests.github_standin import GitHubStandin
from tests.juju_agent.agent import (
    APP,
    STORAGE_LOCATION,
    UNIT,
    UnitAgent,
    config_defaults,
    unit_network_settings,
)
from tests.juju_agent.pod import PackedGarm, Pod, scratch
from tests.real_garm.github_apps import register_configured_apps
from tests.simulate_backends import (
    CHARM_CLOCK_SHIFT,
    Backend,
    RealStoryGarm,
    ingress_relation,
    ship_agent_standin,
    tls_front,
)
from workload import pebble_layer


def dispatch_of(event: Any) -> tuple[str, dict[str, str]]:
    """The dispatch path and Juju's hook variables for an ``ops.testing`` event."""
    if event.action is not None:
        return f"actions/{event.action.name}", {}
    env = _relation_env(event)
    if event.secret is not None:
        env["JUJU_SECRET_ID"] = event.secret.id
        env["JUJU_SECRET_LABEL"] = event.secret.label or ""
        if event.secret_revision is not None:
            env["JUJU_SECRET_REVISION"] = str(event.secret_revision)
    if event.container is not None:
        env["JUJU_WORKLOAD_NAME"] = event.container.name
    if event.notice is not None:
        env["JUJU_NOTICE_ID"] = event.notice.id
        env["JUJU_NOTICE_TYPE"] = str(event.notice.type.value)
        env["JUJU_NOTICE_KEY"] = event.notice.key
    if event.check_info is not None:
        env["JUJU_PEBBLE_CHECK_NAME"] = event.check_info.name
    if event.storage is not None:
        env["JUJU_STORAGE_ID"] = f"{event.storage.name}/{event.storage.index}"
    return f"hooks/{event.path.replace('_', '-')}", env


def _relation_env(event: Any) -> dict[str, str]:
    """Juju's relation, remote and departing variables of a relation event (else none)."""
    relation = event.relation
    if relation is None:
        return {}
    remote = APP if isinstance(relation, testing.PeerRelation) else relation.remote_app_name
    env = {
        "JUJU_RELATION": relation.endpoint,
        "JUJU_RELATION_ID": f"{relation.endpoint}:{relation.id}",
        "JUJU_REMOTE_APP": remote,
    }
    if event.relation_remote_unit_id is not None:
        env["JUJU_REMOTE_UNIT"] = f"{remote}/{event.relation_remote_unit_id}"
    if event.relation_departed_unit_id is not None:
        env["JUJU_DEPARTING_UNIT"] = f"{remote}/{event.relation_departed_unit_id}"
    return env


def model_databags(relation: Any) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A relation of the State as the model keeps it: remote app, unit and app databags.

    Every unit's databag holds the address settings Juju writes there
    (:func:`~tests.juju_agent.agent.unit_network_settings`) where the State gives none.
    """
    if isinstance(relation, testing.PeerRelation):
        units = {f"{APP}/{n}": dict(d) for n, d in relation.peers_data.items()}
        apps = {APP: dict(relation.local_app_data)}
        remote = APP
    else:
        remote = relation.remote_app_name
        units = {f"{remote}/{n}": dict(d) for n, d in relation.remote_units_data.items()}
        apps = {remote: dict(relation.remote_app_data), APP: dict(relation.local_app_data)}
    units[UNIT] = dict(relation.local_unit_data)
    units = {name: {**unit_network_settings(name), **bag} for name, bag in units.items()}
    return remote, units, apps


def _status(status: dict[str, str]) -> ops.StatusBase:
    if status["status"] == "unknown":
        return ops.UnknownStatus()
    return ops.StatusBase.from_name(status["status"], status["message"])


class PackedDriver(CharmDriver):
    """Runs a story's events as hooks of the packed charm under the unit-agent stand-in."""

    def __init__(self, garm: PackedGarm, state: testing.State, agent: UnitAgent, pod: Pod) -> None:
        """Drive ``agent``'s packed charm in ``pod``, whose GARM is ``garm``, from ``state``."""
        super().__init__(garm, state)
        self.agent = agent
        self.pod = pod
        self.hooks: list[Any] = []
        self._delivered: dict[str, int] = {}

    @property
    def tool_calls(self) -> collections.Counter[str]:
        """The hook tools the last hook ran as processes, by name."""
        return collections.Counter(self.hooks[-1].tools if self.hooks else {})

    def run(self, event: Any) -> testing.State:
        """Run ``event`` as a hook of the packed charm and read the State it left."""
        self._write_model()
        dispatch_path, context = dispatch_of(event)
        hook = self.agent.dispatch(dispatch_path, context)
        self.hooks.append(hook)
        hook.check()
        # What Juju sends next: secret-remove for each revision the hook left obsolete.
        for removal in self.agent.deliver_secret_removals():
            self.hooks.append(removal)
            removal.check()
        self._read_model()
        self.after_hook()
        return self.state

    def run_action(self, name: str, **params: str) -> dict[str, Any]:
        """Run an action as ``juju run`` does; its ``action-set`` results, or raise its failure."""
        self._write_model()
        hook, record = self.agent.action(name, params)
        self.hooks.append(hook)
        hook.check()
        if record["failed"] is not None:
            raise AssertionError(f"action {name} failed: {record['failed']}")
        return dict(record["results"])

    def add_configurator(self, cfg: Configurator) -> testing.State:
        """Integrate a configurator as Juju does: relation-created, -joined, -changed."""
        self.state = dataclasses.replace(
            self.state,
            relations={*self.state.relations, cfg.relation},
            secrets={*self.state.secrets, *cfg.secrets},
        )
        self.run(self.ctx.on.relation_created(cfg.relation))
        return super().add_configurator(cfg)

    def restart_pod(self) -> list[Any]:
        """The pod deleted and made again (the agent's :meth:`UnitAgent.restart_pod`).

        The new Pebble numbers its notices afresh, so none counts as delivered.

        Raises:
            HookFailedError: a hook kept failing (the unit would stay in error).
        """
        self._write_model()
        self._delivered.clear()
        runs = self.agent.restart_pod(self.pod.restart_workload)
        self.hooks.extend(runs)
        for run in runs:
            run.check()
        self._read_model()
        return runs

    def remove_application(self) -> list[Any]:
        """``juju remove-application garm``: Juju 3.6's hooks of a dying unit (the agent's).

        Raises:
            HookFailedError: a hook kept failing (the unit would stay in error).
        """
        self._write_model()
        runs = self.agent.remove_application()
        self.hooks.extend(runs)
        for run in runs:
            run.check()
        return runs

    def summary(self) -> str:
        """The hooks run so far: how many, their time, the hook-tool processes, failed runs."""
        seconds = sum(h.seconds for h in self.hooks)
        tools = sum(sum(h.tools.values()) for h in self.hooks)
        retried = [f"{r.hook} {r.failure()}" for h in self.hooks for r in h.retried]
        return (
            f"Packed charm: {len(self.hooks)} hooks and actions in {seconds:.1f} s "
            f"(longest {max((h.seconds for h in self.hooks), default=0):.1f} s), "
            f"{tools} hook-tool processes; {len(retried)} failed run(s) retried"
            + "".join(f"\n  retried: {r}" for r in retried)
        )

    def deploy_events(self) -> list[Any]:
        """Juju's hooks of a new unit of a sidecar charm, in Juju 3.6's order."""
        on = self.ctx.on
        (peers,) = [r for r in self.state.relations if isinstance(r, testing.PeerRelation)]
        (storage,) = self.state.storages
        container = self.state.get_container(pebble_layer.CONTAINER_NAME)
        return [
            on.storage_attached(storage),
            on.install(),
            on.relation_created(peers),
            on.leader_elected(),
            on.config_changed(),
            on.start(),
            on.pebble_ready(container),
        ]

    @property
    def continuation_asked(self) -> bool:
        """Whether Pebble holds an occurrence of the charm's notice not yet delivered."""
        notice = self._continue_notice()
        return notice is not None and notice.occurrences > self._delivered.get(notice.id, 0)

    def continue_once(self) -> testing.State:
        """Deliver the charm's notice as Juju does: ``pebble-custom-notice`` with its id."""
        found = self._continue_notice()
        assert found is not None, "no continuation notice in Pebble"
        self._delivered[found.id] = found.occurrences
        container = self.state.get_container(pebble_layer.CONTAINER_NAME)
        notice = testing.Notice(found.key, id=found.id)
        return self.run(self.ctx.on.pebble_custom_notice(container, notice))

    def shift_charm_clock(self) -> None:
        """Every later hook's charm reads the time :data:`CHARM_CLOCK_SHIFT` ahead."""
        self.agent.clock_shift = CHARM_CLOCK_SHIFT

    def _continue_notice(self) -> ops.pebble.Notice | None:
        notices = self.pod.client().get_notices(
            types=[ops.pebble.NoticeType.CUSTOM], keys=[continuation.CONTINUE_KEY]
        )
        return notices[-1] if notices else None

    def _write_model(self) -> None:
        state = self.state
        with self.agent.model(write=True) as model:
            model["leader"] = state.leader
            model["config"] = {**config_defaults(self.agent.charm_dir), **dict(state.config)}
            relations = {}
            for relation in state.relations:
                remote, units, apps = model_databags(relation)
                relations[str(relation.id)] = {
                    "endpoint": relation.endpoint,
                    "remote_app": remote,
                    "units": units,
                    "apps": apps,
                }
            model["relations"] = relations
            model["storage"] = {
                f"{s.name}/{s.index}": {"kind": "filesystem", "location": STORAGE_LOCATION}
                for s in state.storages
            }
            for secret in state.secrets:
                if secret.owner is None:
                    _consumed_secret(model["secrets"], secret)

    def _read_model(self) -> None:
        model = self.agent.read()
        relations = set()
        for relation in self.state.relations:
            stored = model["relations"][str(relation.id)]
            relations.add(
                dataclasses.replace(
                    relation,
                    local_unit_data=stored["units"].get(UNIT, {}),
                    local_app_data=stored["apps"].get(APP, {}),
                )
            )
        consumed = {s for s in self.state.secrets if s.owner is None}
        owned = {_owned_secret(key, s) for key, s in model["secrets"].items() if _mine(s)}
        client = self.pod.client()
        container = dataclasses.replace(
            self.state.get_container(pebble_layer.CONTAINER_NAME),
            layers={pebble_layer.LAYER_LABEL: ops.pebble.Layer(client.get_plan().to_dict())},
            service_statuses={s.name: s.current for s in client.get_services()},
        )
        self.state = dataclasses.replace(
            self.state,
            relations=relations,
            secrets={*consumed, *owned},
            unit_status=_status(model["status"]["unit"]),
            app_status=_status(model["status"]["app"]),
            opened_ports={testing.TCPPort(int(p.split("/")[0])) for p in model["ports"]},
            workload_version=model["version"],
            containers={container},
        )


def _mine(secret: dict[str, Any]) -> bool:
    return secret["owner"] in (UNIT, APP)


def _owned_secret(key: str, secret: dict[str, Any]) -> testing.Secret:
    content = secret["revisions"][str(secret["latest"])]
    return testing.Secret(
        tracked_content=content,
        latest_content=content,
        id=key,
        label=secret.get("label"),
        owner="unit" if secret["owner"] == UNIT else "app",
    )


def _consumed_secret(secrets: dict[str, Any], secret: testing.Secret) -> None:
    """A remote application's secret into the model: a new revision where its content moved."""
    latest = dict(secret.latest_content or secret.tracked_content)
    stored = secrets.get(secret.id)
    if stored is None:
        revisions = {"1": dict(secret.tracked_content)}
        if latest != secret.tracked_content:
            revisions["2"] = latest
        secrets[secret.id] = {
            "owner": "remote",
            "label": None,
            "revisions": revisions,
            "latest": len(revisions),
            "consumers": {},
            # The remote application granted it to this one (else secret-get is refused).
            "grants": [{"relation": None, "subject": APP}],
        }
    elif stored["revisions"][str(stored["latest"])] != latest:
        stored["latest"] += 1
        stored["revisions"][str(stored["latest"])] = latest


@contextmanager
def open_packed_backend(*, agent_standin: bool = True) -> Iterator[Backend]:
    """The story's real backend with the packed charm in a pod; everything stopped after."""
    root = scratch()
    try:
        with _packed_backend(root, agent_standin) as backend:
            yield backend
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def _packed_backend(root: Path, agent_standin: bool) -> Iterator[Backend]:
    agent_dir = root / "garm-agent"
    if agent_standin:
        ship_agent_standin(agent_dir)
    else:
        from tests.charm_driver import write_agent_tools

        agent_dir.mkdir()
        write_agent_tools(agent_dir)
    with Pod(root, agent_dir) as pod, GitHubStandin() as github:
        real = PackedGarm(pod, github.endpoint_params())
        register_configured_apps(real.proxy, github)
        front = tls_front(root / "front", real) if agent_standin else None
        story_garm = PackedStoryGarm(real, github, front)
        (root / "data").mkdir()
        state = base_state(
            root / "data", agent_dir=agent_dir, relations={ingress_relation(real.base_url)}
        )
        driver = PackedDriver(real, state, UnitAgent(root / "unit"), pod)
        story_garm.driver = driver
        description = (
            f"the packed charm ({driver.agent.charm_dir}) under the Juju unit-agent stand-in, "
            f"hook tools as processes; real GARM run by the real Pebble from the charm's plan, "
            f"behind the recording proxy on {real.base_url}; the GitHub stand-in, the stand-in "
            "provider"
        )
        try:
            yield Backend(story_garm, driver, description)
        finally:
            real.stop()
            if front is not None:
                front.stop()


class PackedStoryGarm(RealStoryGarm):
    """Real GARM of the pod: the charm's clock moves in the packed charm's process."""

    driver: PackedDriver | None = None

    def shift_charm_clock(self) -> None:
        """Every later hook runs with the charm's clock :data:`CHARM_CLOCK_SHIFT` ahead."""
        assert self.driver is not None
        self.driver.shift_charm_clock()
