"""Drive the real charm through ``ops.testing`` against a GARM: the emulator or the real one.

Only two things are replaced: the URL the charm reaches GARM at, and what a Pebble replan (or
a restart of GARM's service) does to GARM. In a pod, a replan that changes the layer restarts
GARM with the layer's environment; here the driver hands that environment to the backend at the
moment the charm replans or restarts the service, inside the hook, as the pod would: the
emulator loads the environment's providers, the real-GARM harness restarts GARM through the
charm's entrypoint with it.

Every hook meets the limits of a real controller (``tests/juju_model_limits.py``): Juju's
secret sizes for the Juju version the test deploys on, Linux's argument length for the hook
tools that take their data as arguments. The driver also counts, per hook, the hook tools the
charm called (``relation-get``, ``secret-set``, ``juju-log``, ...: each one is a process start
under real Juju), on ``ops.testing``'s model backend: :attr:`CharmDriver.tool_calls`, and the
writes Juju sees among them, :meth:`CharmDriver.juju_writes`; and the files it pulled from the
workload container (:attr:`CharmDriver.pulls`).

The container of :func:`base_state` holds what the image ships for agent mode: a manifest and
small stand-in garm-agent binaries whose digests match it (:func:`write_agent_tools`).

Used by the charm's unit tests, ``tox -e simulate`` and ``tox -e bench``.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol
from unittest import mock

import ops
from ops import testing
from scenario import mocking

from charm import GarmCharm
from charm_pass import continuation
from container_scripts.garm_entrypoint import joined_providers_json
from records.leadership import PEER_RELATION
from tests.juju_model_limits import ModelLimits
from tests.log_secrets import register_secret
from tests.rsa_keys import pkcs1_pem
from workload import agent_image, pebble_layer

CONFIGURATOR = "garm-configurator"
# Juju creates the peer relation with the application, before any integration: the first id.
PEER_RELATION_ID = 0
PASSWORD_SECRET_VALUE = "openstack-pass-\u00e9-1"
PRIVATE_KEY_VALUE = pkcs1_pem()


register_secret(PASSWORD_SECRET_VALUE, PRIVATE_KEY_VALUE)
_NOT_SECRET_KEYS = frozenset({"username", "email", "full-name"})

# The hook tools of ops' model backend (each a process under Juju), as ops.testing mocks them.
HOOK_TOOLS = (
    "relation_get",
    "relation_set",
    "relation_ids",
    "relation_list",
    "relation_remote_app_name",
    "relation_model_get",
    "config_get",
    "is_leader",
    "status_get",
    "status_set",
    "application_version_set",
    "juju_log",
    "network_get",
    "secret_get",
    "secret_info_get",
    "secret_set",
    "secret_add",
    "secret_remove",
    "storage_list",
    "storage_get",
    "planned_units",
    "open_port",
    "close_port",
    "opened_ports",
)
# The hook tools that change what Juju stores: a rewritten relation value fires relation-changed
# on the other side, a secret-set makes a revision, even with the same content.
JUJU_WRITES = ("relation_set", "secret_set", "secret_add")
# ops.testing warns in every hook of a driver that the workload's filesystem will be wiped.
SCENARIO_FILESYSTEM_WARNING = "Container 'garm' has a non-empty filesystem"


def replaced_database(controller_id: str) -> ops.ActiveStatus:
    """Active, naming the runner machines a replaced GARM database left (``leftovers``)."""
    return ops.ActiveStatus(
        "GARM: runner machines of its replaced database may remain:"
        f" garm-controller-id={controller_id}"
    )


def admin_credentials(state: testing.State) -> tuple[str, str] | None:
    """The GARM admin the charm created (its owned secret), once it exists."""
    for secret in state.secrets:
        if secret.label == "garm-admin-credentials":
            content = secret.latest_content or secret.tracked_content
            return content["username"], content["password"]
    return None


def _remember_secret_values(state: testing.State) -> None:
    for secret in state.secrets:
        for content in (secret.tracked_content, secret.latest_content or {}):
            if (secret.label or "").startswith("garm-providers"):
                for value in record_values(content):
                    register_secret(*(entry["password"] for entry in json.loads(value)))
            else:
                register_secret(*(v for k, v in content.items() if k not in _NOT_SECRET_KEYS))


@dataclasses.dataclass
class Configurator:
    """A garm-configurator application as the charm sees it: one relation and its secrets."""

    relation: testing.Relation
    secrets: list[testing.Secret]


def configurator(
    app: str,
    *,
    relation_id: int,
    name: str | None = None,
    org: str = "canonical",
    labels: str = "linux,x64",
    app_id: str = "101",
    installation_id: str = "202",
    units: int = 1,
    extra: Mapping[str, str] | None = None,
    provider: bool = True,
    private_key: str = PRIVATE_KEY_VALUE,
    password_value: str = PASSWORD_SECRET_VALUE,
) -> Configurator:
    """Build a configurator relation whose units publish a complete scale set and provider."""
    password = testing.Secret(tracked_content={"value": password_value})
    key = testing.Secret(tracked_content={"value": private_key})
    units_data: dict[int, dict[str, str]] = {}
    for number in range(units):
        data = {
            "name": name or f"{app}-runners",
            "provider_name": f"{app}-{number}",
            "image_id": "ubuntu-24.04",
            "flavor": "m1.small",
            "os_arch": "amd64",
            "min_idle_runner": "1",
            "max_runner": "4",
            "labels": labels,
            "org": org,
            "github_app_id": app_id,
            "github_installation_id": installation_id,
            "github_private_key_secret_uri": key.id,
        }
        if provider and number == 0:
            data.update(
                {
                    "openstack_auth_url": "https://keystone.example:5000/v3",
                    "openstack_username": f"{app}-user",
                    "openstack_password_secret_uri": password.id,
                    "openstack_project_name": "runners",
                    "openstack_user_domain_name": "Default",
                    "openstack_project_domain_name": "Default",
                    "openstack_region_name": "RegionOne",
                    "openstack_network": "runner-net",
                }
            )
        data.update(extra or {})
        units_data[number] = data
    relation = testing.Relation(
        CONFIGURATOR, remote_app_name=app, id=relation_id, remote_units_data=units_data
    )
    return Configurator(relation=relation, secrets=[password, key])


def production_configurator(number: int, *, relation_id: int | None = None) -> Configurator:
    """Configurator ``number`` as an operator names things in production OpenStack.

    Its provider takes about 390 bytes of provider JSON, its own 32-character password
    included: the size ``docs/reference/limits.md`` measures deployments with.
    """
    app = f"runner-configurator-noble-x64-{number:04d}"
    tenant = f"prod-runners-noble-x64-{number:04d}"
    password_value = hashlib.sha256(f"openstack-{number}".encode()).hexdigest()[:32]
    register_secret(password_value)
    return configurator(
        app,
        relation_id=number + 1 if relation_id is None else relation_id,
        org=f"org-{number}",
        password_value=password_value,
        extra={
            "min_idle_runner": "0",
            "openstack_auth_url": "https://keystone.ps7.example.com:5000/v3",
            "openstack_username": f"{tenant}-user",
            "openstack_project_name": f"{tenant}_project",
            "openstack_user_domain_name": "ps7_users_domain",
            "openstack_project_domain_name": "ps7_projects_domain",
            "openstack_region_name": "prodstack7",
            "openstack_network": f"{tenant}-net",
        },
    )


# What a configurator publishes only once its image builder has answered: the image, its
# OpenStack provider (leader unit) and its GitHub App.
SECOND_PHASE_PREFIXES = ("image_id", "openstack_", "github_")


def first_phase(cfg: Configurator) -> Configurator:
    """The same configurator as it publishes before it has an image (its first phase)."""
    units = {
        number: {k: v for k, v in data.items() if not k.startswith(SECOND_PHASE_PREFIXES)}
        for number, data in cfg.relation.remote_units_data.items()
    }
    relation = dataclasses.replace(cfg.relation, remote_units_data=units)
    return Configurator(relation=relation, secrets=cfg.secrets)


# What the image ships by default: garm-agent for every architecture the rock builds.
AGENT_ARCHES = ("amd64", "arm64")
AGENT_VERSION = "v0.1.0-test"


def agent_binary(os_arch: str, version: str = AGENT_VERSION) -> bytes:
    """The stand-in garm-agent binary for one architecture: a few distinct bytes."""
    return f"garm-agent {version} linux/{os_arch} (test stand-in)\n".encode()


def write_agent_tools(
    directory: Path,
    arches: tuple[str, ...] = AGENT_ARCHES,
    version: str = AGENT_VERSION,
    binaries: Mapping[str, bytes] | None = None,
) -> Path:
    """Lay out ``directory`` as the image's garm-agent directory: binaries and their manifest.

    ``directory`` is mounted at ``agent_image.AGENT_DIR``; the manifest is the rock's format.
    ``binaries`` gives the content of some architectures' binaries (the others get
    :func:`agent_binary`); the manifest holds the digest of what was written.
    """
    tools: list[dict[str, str]] = []
    for arch in arches:
        path = agent_image.binary_path("linux", arch)
        binary = directory / path.removeprefix(f"{agent_image.AGENT_DIR}/")
        binary.parent.mkdir(parents=True, exist_ok=True)
        binary.write_bytes((binaries or {}).get(arch) or agent_binary(arch, version))
        digest = hashlib.sha256(binary.read_bytes()).hexdigest()
        tools.append({"os_type": "linux", "os_arch": arch, "sha256": digest, "path": path})
    manifest = directory / agent_image.MANIFEST_PATH.removeprefix(f"{agent_image.AGENT_DIR}/")
    manifest.write_text(json.dumps({"version": version, "tools": tools}), encoding="utf-8")
    return directory


def base_state(
    data_dir: Path, *, leader: bool = True, agent_dir: Path | None = None, **kwargs: Any
) -> testing.State:
    """Return a fresh deployment as Juju makes one, with the ``garm-peers`` relation.

    The unit leads and its container is reachable, with its storage mounted. Juju gives every
    unit its peer relation from the first hook, so the deployment has it (empty, id
    :data:`PEER_RELATION_ID`) unless ``relations`` already holds one; a test of the moments
    before it exists says so with :func:`without_peer_relation`. The container also holds the
    image's garm-agent directory, from ``agent_dir`` (by default a directory beside
    ``data_dir`` filled by :func:`write_agent_tools`).
    """
    relations = set(kwargs.pop("relations", ()))
    if not any(relation.endpoint == PEER_RELATION for relation in relations):
        relations.add(testing.PeerRelation(PEER_RELATION, id=PEER_RELATION_ID))
    if agent_dir is None:
        agent_dir = data_dir.with_name(f"{data_dir.name}-garm-agent")
        if not agent_dir.exists():
            write_agent_tools(agent_dir)
    container = testing.Container(
        pebble_layer.CONTAINER_NAME,
        can_connect=True,
        mounts={
            "data": testing.Mount(location=pebble_layer.DATA_DIR, source=data_dir),
            "garm-agent": testing.Mount(location=agent_image.AGENT_DIR, source=agent_dir),
        },
    )
    return testing.State(
        leader=leader,
        containers={container},
        storages={testing.Storage("garm-data")},
        relations=relations,
        **kwargs,
    )


def _with_service_status(state: testing.State, status: ops.pebble.ServiceStatus) -> testing.State:
    """``state`` where Pebble shows the GARM service in ``status``."""
    container = state.get_container(pebble_layer.CONTAINER_NAME)
    changed = dataclasses.replace(container, service_statuses={pebble_layer.SERVICE_NAME: status})
    return dataclasses.replace(state, containers={changed})


def peer_data(state: testing.State) -> dict[str, str]:
    """The application's ``garm-peers`` databag: where the charm keeps its memory."""
    (peers,) = state.get_relations(PEER_RELATION)
    return dict(peers.local_app_data)


def with_peer_data(
    state: testing.State, *, drop: Collection[str] = (), **data: str
) -> testing.State:
    """``state`` with fields of the ``garm-peers`` databag rewritten, as time passing would.

    ``drop`` names fields to take out (what an earlier release never wrote).
    """
    (peers,) = state.get_relations(PEER_RELATION)
    kept = {key: value for key, value in peers.local_app_data.items() if key not in drop}
    changed = dataclasses.replace(peers, local_app_data={**kept, **data})
    others = {r for r in state.relations if r.id != peers.id}
    return dataclasses.replace(state, relations={*others, changed})


def without_peer_relation(state: testing.State) -> testing.State:
    """``state`` before Juju has given the unit its ``garm-peers`` relation (install's start)."""
    kept = {relation for relation in state.relations if relation.endpoint != PEER_RELATION}
    return dataclasses.replace(state, relations=kept)


def record_secrets(state: testing.State) -> list[dict[str, str]]:
    """The content of each provider record secret (``garm-providers``, ``-2``, ...), in order."""
    found = {
        s.label: s.latest_content or s.tracked_content
        for s in state.secrets
        if s.label and s.label.startswith("garm-providers")
    }
    return [found[label] for label in sorted(found, key=lambda x: (len(x), x))]


def record_values(content: Mapping[str, str]) -> list[str]:
    """The provider lists of one record secret (``providers``, ``providers-2``, ...)."""
    return [value for key, value in content.items() if key.startswith("providers")]


def recorded_providers(state: testing.State) -> list[str]:
    """The unit names of the providers the record keeps, over all its secrets and values."""
    return [
        entry["unit_name"]
        for content in record_secrets(state)
        for value in record_values(content)
        for entry in json.loads(value)
    ]


def planned_env(state: testing.State) -> dict[str, str]:
    """Return the GARM service environment of the container's plan in ``state``."""
    container = state.get_container(pebble_layer.CONTAINER_NAME)
    service = container.plan.services.get(pebble_layer.SERVICE_NAME)
    if service is None:
        return {}
    return {key: str(value) for key, value in service.environment.items()}


def planned_providers(state: testing.State) -> list[str]:
    """Return the provider names published to GARM in ``state``'s plan."""
    raw = joined_providers_json(planned_env(state)) or "[]"
    return [entry["unit_name"] for entry in json.loads(raw)]


class ToolCounter:
    """Counts hook-tool calls on ``ops.testing``'s model backend while active."""

    def __init__(self) -> None:
        """Start with no call counted."""
        self.calls: collections.Counter[str] = collections.Counter()

    @contextmanager
    def counting(self) -> Iterator[None]:
        """Wrap every hook tool of the mocked backend with a counter."""
        backend_class = mocking._MockModelBackend  # pyright: ignore[reportPrivateUsage]
        originals: dict[str, Callable[..., Any]] = {}
        for name in HOOK_TOOLS:
            original = getattr(backend_class, name, None)
            if original is None:
                continue
            originals[name] = original
            setattr(backend_class, name, self._wrap(name, original))
        try:
            yield
        finally:
            for name, original in originals.items():
                setattr(backend_class, name, original)

    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def counted(backend: Any, *args: Any, **kwargs: Any) -> Any:
            if not (name == "juju_log" and _testing_only(args)):
                self.calls[name] += 1
            return original(backend, *args, **kwargs)

        return counted


def _testing_only(log_args: tuple[Any, ...]) -> bool:
    """Whether a log line is ``ops.testing``'s own, which no hook under Juju writes."""
    message = str(log_args[1]) if len(log_args) > 1 else ""
    return message.startswith(SCENARIO_FILESYSTEM_WARNING)


class PullRecorder:
    """Records the paths the charm pulls from a container (Pebble), its plan reads and notices."""

    def __init__(self) -> None:
        """Start with nothing pulled, read or noticed."""
        self.paths: list[str] = []
        self.plan_reads = 0
        self.notified: list[str] = []

    @contextmanager
    def recording(self) -> Iterator[None]:
        """Wrap the testing Pebble client's ``pull``, ``get_plan`` and ``notify``."""
        client_class = mocking._MockPebbleClient  # pyright: ignore[reportPrivateUsage]
        original_pull, original_plan = client_class.pull, client_class.get_plan
        original_notify = client_class.notify

        def pull(client: Any, path: str, *args: Any, **kwargs: Any) -> Any:
            self.paths.append(path)
            return original_pull(client, path, *args, **kwargs)

        def get_plan(client: Any) -> Any:
            self.plan_reads += 1
            return original_plan(client)

        def notify(client: Any, type: Any, key: str, **kwargs: Any) -> str:
            self.notified.append(key)
            return original_notify(client, type, key, **kwargs)

        client_class.pull = pull  # type: ignore[method-assign]
        client_class.get_plan = get_plan  # type: ignore[method-assign]
        client_class.notify = notify  # type: ignore[method-assign]
        try:
            yield
        finally:
            client_class.pull = original_pull  # type: ignore[method-assign]
            client_class.get_plan = original_plan  # type: ignore[method-assign]
            client_class.notify = original_notify  # type: ignore[method-assign]


class Garm(Protocol):
    """What the driver needs of a GARM backend."""

    @property
    def url(self) -> str:
        """The API base URL the charm talks to."""
        ...

    def replan(self, environment: Mapping[str, str]) -> None:
        """Restart as GARM would when Pebble replans with ``environment``."""
        ...


def _halt(garm: Garm) -> None:
    """Stop GARM's process, as Pebble does when the charm stops the service.

    A backend without ``halt`` (the emulator) keeps answering: tests on it read the Pebble
    service status instead.
    """
    halt = getattr(garm, "halt", None)
    if callable(halt):
        halt()


class CharmDriver:
    """Runs hooks of the real charm, carrying the output state into the next hook."""

    def __init__(
        self,
        emulator: Garm,
        state: testing.State,
        *,
        ready_timeout: float = 2.0,
        unit_id: int = 0,
        juju_version: str | None = None,
        budget_ticks: int | None = None,
    ) -> None:
        """Drive a charm whose GARM is ``emulator`` (or a real GARM), starting from ``state``.

        ``unit_id`` picks the unit (``garm/<unit_id>``): two drivers with their own GARM and
        storage play two units of one application. The deployment runs on ``juju_version``
        (by default the charm's minimum Juju), whose limits every hook meets
        (:class:`tests.juju_model_limits.ModelLimits`). ``budget_ticks`` (an emulator only)
        gives each pass a budget of that many GARM writes instead of the charm's seconds.
        """
        self.emulator = emulator
        self.api_url = emulator.url
        self.ready_timeout = ready_timeout
        self.limits = ModelLimits(juju_version)
        self.ctx = testing.Context(
            GarmCharm, unit_id=unit_id, juju_version=self.limits.juju_version
        )
        self.state = state
        self.replans = 0
        # Restarts of GARM's service the charm asked Pebble for (not through a replan).
        self.restarts = 0
        # Pebble's reason when GARM exits within its start window: each replan then raises it.
        self.start_failure: str | None = None
        self._start_failed = False
        self._tools = ToolCounter()
        self._pulls = PullRecorder()
        self._budget_ticks = budget_ticks

    @property
    def tool_calls(self) -> collections.Counter[str]:
        """The hook tools the last hook called, by name."""
        return collections.Counter(self._tools.calls)

    @property
    def pulls(self) -> list[str]:
        """The paths the last hook pulled from the workload container, in order."""
        return list(self._pulls.paths)

    @property
    def plan_reads(self) -> int:
        """How many times the last hook read the workload container's Pebble plan."""
        return self._pulls.plan_reads

    @property
    def continuation_asked(self) -> bool:
        """Whether the last hook recorded the charm's Pebble notice for the next pass."""
        return continuation.CONTINUE_KEY in self._pulls.notified

    def continue_passes(self, limit: int = 100) -> int:
        """Deliver the charm's notice as Juju does, while each hook asks for the next.

        Returns:
            How many ``pebble-custom-notice`` hooks ran.
        """
        hooks = 0
        while self.continuation_asked:
            assert hooks < limit, f"still continuing after {limit} hooks"
            self.continue_once()
            hooks += 1
        return hooks

    def continue_once(self) -> testing.State:
        """Deliver the charm's notice once: one ``pebble-custom-notice`` hook."""
        container = self.state.get_container(pebble_layer.CONTAINER_NAME)
        notice = testing.Notice(continuation.CONTINUE_KEY)
        container = dataclasses.replace(container, notices=[notice])
        others = {c for c in self.state.containers if c.name != container.name}
        self.state = dataclasses.replace(self.state, containers={*others, container})
        return self.run(self.ctx.on.pebble_custom_notice(container, notice))

    def juju_writes(self) -> dict[str, int]:
        """The writes to Juju the last hook made (relation data, secrets), by hook tool."""
        return {name: self._tools.calls[name] for name in JUJU_WRITES if self._tools.calls[name]}

    def run(self, event: testing.context._Event) -> testing.State:  # pyright: ignore[reportPrivateUsage]
        """Run one hook and keep its output state."""
        self._tools.calls.clear()
        self._pulls.paths.clear()
        self._pulls.plan_reads = 0
        self._pulls.notified.clear()
        self._start_failed = False
        with (
            self._wired(),
            self.limits.applied(),
            self._tools.counting(),
            self._pulls.recording(),
        ):
            self.state = self.ctx.run(event, self.state)
        if self._start_failed:
            # Pebble now restarts GARM with its back-off; ops.testing has no back-off state, so
            # an inactive service stands for a GARM that is not running.
            self.state = _with_service_status(self.state, ops.pebble.ServiceStatus.INACTIVE)
        return self.after_hook()

    def after_hook(self) -> testing.State:
        """What follows every hook: its secrets' values registered, the admin handed on."""
        _remember_secret_values(self.state)
        if hasattr(self.emulator, "admin"):
            # A backend read through GARM's own API logs in as the admin the charm created.
            admin = admin_credentials(self.state)
            if admin is not None:
                self.emulator.admin = admin  # pyright: ignore[reportAttributeAccessIssue]
        return self.state

    def add_configurator(self, cfg: Configurator) -> testing.State:
        """Integrate a configurator: relation created, then its units' data arrives."""
        self.state = dataclasses.replace(
            self.state,
            relations={*self.state.relations, cfg.relation},
            secrets={*self.state.secrets, *cfg.secrets},
        )
        self.run(self.ctx.on.relation_joined(cfg.relation, remote_unit=0))
        return self.run(self.ctx.on.relation_changed(cfg.relation, remote_unit=0))

    def change_relation(self, relation: testing.Relation, **unit_data: str) -> testing.State:
        """Update every remote unit's databag of ``relation`` and run relation-changed."""
        current = self.state.get_relation(relation.id)
        assert isinstance(current, testing.Relation)
        units = {n: {**d, **unit_data} for n, d in current.remote_units_data.items()}
        changed = dataclasses.replace(current, remote_units_data=units)
        others = {r for r in self.state.relations if r.id != relation.id}
        self.state = dataclasses.replace(self.state, relations={*others, changed})
        return self.run(self.ctx.on.relation_changed(changed, remote_unit=0))

    def publish(
        self, relation: testing.Relation, units: Mapping[int, Mapping[str, str]], remote_unit: int
    ) -> testing.State:
        """Remote units' databags become ``units``; ``remote_unit`` wrote: relation-changed."""
        current = self.state.get_relation(relation.id)
        assert isinstance(current, testing.Relation)
        data = {number: dict(databag) for number, databag in units.items()}
        changed = dataclasses.replace(current, remote_units_data=data)
        others = {r for r in self.state.relations if r.id != relation.id}
        self.state = dataclasses.replace(self.state, relations={*others, changed})
        return self.run(self.ctx.on.relation_changed(changed, remote_unit=remote_unit))

    def unit_departs(self, relation: testing.Relation, unit: int) -> testing.State:
        """A remote unit leaves the relation (removed): relation-departed."""
        current = self.state.get_relation(relation.id)
        assert isinstance(current, testing.Relation)
        # As in Juju, the departing unit is already gone from the relation in its hook.
        remaining = {n: d for n, d in current.remote_units_data.items() if n != unit}
        current = dataclasses.replace(current, remote_units_data=remaining)
        others = {r for r in self.state.relations if r.id != relation.id}
        self.state = dataclasses.replace(self.state, relations={*others, current})
        return self.run(
            self.ctx.on.relation_departed(current, remote_unit=unit, departing_unit=unit)
        )

    def new_secret_revision(
        self, secret: testing.Secret, content: Mapping[str, str]
    ) -> testing.State:
        """The owner of ``secret`` (a configurator) publishes a new revision: secret-changed."""
        current = next(s for s in self.state.secrets if s.id == secret.id)
        revised = dataclasses.replace(current, latest_content=dict(content))
        others = {s for s in self.state.secrets if s.id != secret.id}
        self.state = dataclasses.replace(self.state, secrets={*others, revised})
        return self.run(self.ctx.on.secret_changed(revised))

    def run_action(self, name: str, **params: str) -> dict[str, Any]:
        """Run an action (which reconciles nothing) and return its results."""
        self.run(self.ctx.on.action(name, params=params))
        return dict(self.ctx.action_results or {})

    def remove_relation(self, relation: testing.Relation) -> testing.State:
        """Remove a relation as Juju does: departed, broken, then gone from the model."""
        current = self.state.get_relation(relation.id)
        assert isinstance(current, testing.Relation)
        for unit in sorted(current.remote_units_data):
            self.unit_departs(relation, unit)
        current = self.state.get_relation(relation.id)
        assert isinstance(current, testing.Relation)
        self.run(self.ctx.on.relation_broken(current))
        others = {r for r in self.state.relations if r.id != relation.id}
        self.state = dataclasses.replace(self.state, relations=others)
        return self.state

    @contextmanager
    def _budget(self) -> Iterator[None]:
        if self._budget_ticks is None:
            yield
            return
        # The pass's time is the writes GARM received: a budget of N starts no object once the
        # pass has written N times, whatever the machine's speed.
        emulator = self.emulator

        def clock() -> float:
            return float(len(emulator.writes()))  # type: ignore[attr-defined]

        with (
            mock.patch.object(GarmCharm, "pass_budget", float(self._budget_ticks)),
            mock.patch.object(GarmCharm, "pass_clock", staticmethod(clock)),
        ):
            yield

    @contextmanager
    def _wired(self) -> Iterator[None]:
        real_apply = pebble_layer.apply_workload
        real_stand_by = pebble_layer.stand_by

        def apply_and_restart(
            container: ops.Container,
            layer: ops.pebble.LayerDict,
            entrypoint: str,
            *,
            plan: ops.pebble.Plan | None = None,
        ) -> bool:
            replanned = real_apply(container, layer, entrypoint, plan=plan)
            if replanned:
                self.replans += 1
                service = layer.get("services", {}).get(pebble_layer.SERVICE_NAME, {})
                self.emulator.replan(dict(service.get("environment", {})))
                if self.start_failure is not None:
                    # What the replan raises on the real Pebble when GARM exits at start.
                    self._start_failed = True
                    raise pebble_layer.GarmExitedError(self.start_failure)
            return replanned

        def stand_by_and_stop(container: ops.Container) -> str | None:
            stopped = real_stand_by(container)
            if stopped is not None:
                _halt(self.emulator)
            return stopped

        real_restart = ops.Container.restart

        def restart(container: ops.Container, *names: str) -> None:
            real_restart(container, *names)
            if pebble_layer.SERVICE_NAME in names:
                self.restarts += 1
                self.emulator.replan(pebble_layer.planned_environment(container.get_plan()))

        with (
            mock.patch.object(ops.Container, "restart", restart),
            mock.patch.object(GarmCharm, "garm_api_url", self.api_url),
            mock.patch.object(GarmCharm, "ready_timeout", self.ready_timeout),
            self._budget(),
            mock.patch.object(pebble_layer, "apply_workload", apply_and_restart),
            mock.patch.object(pebble_layer, "stand_by", stand_by_and_stop),
        ):
            yield


def deployed(garm: Garm, state: testing.State, *, ready_timeout: float = 2.0) -> CharmDriver:
    """The real charm from ``state``: installed, leader, bootstrapped against ``garm``."""
    charm = CharmDriver(garm, state, ready_timeout=ready_timeout)
    charm.run(charm.ctx.on.install())
    charm.run(charm.ctx.on.leader_elected())
    container = charm.state.get_container(pebble_layer.CONTAINER_NAME)
    charm.run(charm.ctx.on.pebble_ready(container))
    return charm
