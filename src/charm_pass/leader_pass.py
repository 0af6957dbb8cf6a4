"""The leader's pass between its gates and GARM, and after it: what is wanted, and the workload.

Owns the steps ``charm.py`` calls once the leader's gates are met: the desired state read once
(the memory, the image's agent tools, the provider record, the configurator secrets, then
``CharmState``), the provider record admitted and saved before anything is published, the
workload published with the CA bundles GARM's process trusts (``reconcile.workload``), and
after the GARM part: the CA bundles GARM then needs, the stall restart, the next pass asked
for, the record trimmed. Knows Juju and Pebble; GARM only through what ``garm_sync`` returns.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Mapping, Sequence

import ops

from charm_pass import continuation, garm_sync
from charm_pass.charm_state import CharmState, describe_problems
from reconcile import Memory
from records import peer_record, provider_record, secrets_store
from records.configurator_record import ConfiguratorRecord
from records.configurator_secrets import ConfiguratorSecrets
from records.unit_shown import UnitShown
from vocabulary.desired_state import ProviderConfig
from vocabulary.telemetry import traced
from workload import agent_image, endpoint_trust, garm_restart, pebble_layer

# Before GARM is brought to a partial fleet: the record is read a rotation a hook.
READING_CONFIGURATORS = "reading garm-configurator relations: {read} of {listed}"

# What publishes the workload with a set of CA bundles, against a plan (None: read it again).
Publish = Callable[[Mapping[str, str], ops.pebble.Plan | None], None]


@dataclasses.dataclass(frozen=True)
class Wanted:
    """What the leader's pass wants, read once: the desired state and the providers to publish.

    Attributes:
        memory: the GARM side's memory, as ``garm-peers`` keeps it.
        state: the desired state read from the relations and secrets.
        admitted: the providers GARM may be given (the record merged with the relations').
        stored: the provider record as saved, before anything is published.
    """

    memory: Memory
    state: CharmState
    admitted: provider_record.Admission
    stored: provider_record.Stored

    @property
    def providers(self) -> tuple[ProviderConfig, ...]:
        """The providers GARM runs with in this pass."""
        return self.admitted.providers

    def problems(self) -> str:
        """The status fragment of what was held back: providers left out, bad input."""
        notices = (self.admitted.notice(), describe_problems(self.state.problems))
        return "; ".join(p for p in notices if p)

    def blocked(self) -> bool:
        """Whether what was held back needs the operator."""
        return self.state.blocked or bool(self.admitted.left_out)


def read_wanted(
    charm: ops.CharmBase,
    container: ops.Container,
    plan: ops.pebble.Plan,
    owned: secrets_store.OwnedSecrets,
    refreshed: Mapping[str, str],
    relations: ConfiguratorRecord,
) -> Wanted | ops.StatusBase:
    """Read what the pass wants, once, and save the provider record before it is published.

    Returns:
        What is wanted; or, while the unit's record of the configurators is partial (a new
        pod's first hooks), the status to wait with: the next pass follows at once.
    """
    configurators = relations.read()
    if not configurators.complete:
        listed = len(configurators.relation_ids)
        reading = READING_CONFIGURATORS.format(read=listed - configurators.unread, listed=listed)
        continuation.request(container, f"The unit's record is partial ({reading})")
        return ops.MaintenanceStatus(reading)
    memory = peer_record.load(charm.model)
    tools = agent_image.read_manifest(container)
    stored, record = provider_record.load_record(charm.model, owned.jwt_secret)
    if stored is None:
        record = provider_record.rebuild_missing(pebble_layer.planned_providers_json(plan))
    # A configurator secret is read again only for content GARM has not been given.
    secrets = ConfiguratorSecrets(
        charm.model,
        digest_key=owned.jwt_secret,
        known_passwords=[p.password for p in record],
        refreshed=refreshed,
    )
    state = CharmState.from_charm(charm, configurators, memory.incumbents, tools, secrets=secrets)
    admitted = provider_record.admit(record, provider_record.merge(record, state.providers))
    # Stored before it is published: whatever this hook does next, GARM never runs with a
    # provider the record could forget. The secrets' ledger goes in the same relation-set.
    stored = provider_record.save_record(
        charm.app, charm.model, stored, admitted.providers, owned.jwt_secret, secrets.ledger()
    )
    return Wanted(memory, state, admitted, stored)


def publish_workload(
    container: ops.Container,
    plan: ops.pebble.Plan,
    owned: secrets_store.OwnedSecrets,
    db: pebble_layer.DatabaseConfig,
    wanted: Wanted,
) -> tuple[Publish, dict[str, str], str]:
    """Publish the workload; how to publish it again, the CA bundles applied, GARM's state."""
    planned = endpoint_trust.from_environment(pebble_layer.planned_environment(plan))
    trusted = endpoint_trust.before_pass(planned, wanted.state.endpoints)
    publish: Publish = functools.partial(
        _apply_workload, container, owned, db, wanted.providers, wanted.state.external_url
    )
    try:
        publish(trusted, plan)
        running = pebble_layer.service_state(container)
    except pebble_layer.GarmExitedError as exc:
        running = str(exc)
    return publish, trusted, running


def after_sync(
    charm: ops.CharmBase,
    container: ops.Container,
    owned: secrets_store.OwnedSecrets,
    wanted: Wanted,
    publish: Publish,
    trusted: dict[str, str],
    sync: garm_sync.Sync,
    kept: tuple[UnitShown, continuation.NextPass],
) -> ops.StatusBase:
    """After the GARM part: the version, CA bundles, a stall restart, the next pass, the trim.

    Returns:
        The pass's status (GARM's going away in the pass decides it, ``continuation``).
    """
    shown, next_pass = kept
    if sync.version:
        # Read from the running GARM, never assumed (juju status: workload version).
        shown.workload_version(sync.version)
    if sync.endpoint_bundles is not None:
        garm_sync.retrust(publish, trusted, wanted.state.endpoints, sync.endpoint_bundles)
    if sync.restart_garm:
        garm_restart.restart_for_stall(container, sync.status)
    if sync.unfinished:
        continuation.request(container, f"Pass budget spent ({sync.unfinished})")
    # A trim restarts GARM next pass: only a pass that went through trims (not each of a
    # mass removal's continued passes, restarting a GARM of hundreds of scale sets).
    live = None if sync.unfinished else sync.live
    providers = provider_record.trim(wanted.providers, wanted.state.providers, live)
    provider_record.save_record(charm.app, charm.model, wanted.stored, providers, owned.jwt_secret)
    if sync.garm_away:
        return next_pass.went_away(container)
    next_pass.reached()
    return sync.status


@traced("reconcile.workload")
def _apply_workload(
    container: ops.Container,
    owned: secrets_store.OwnedSecrets,
    db: pebble_layer.DatabaseConfig,
    providers: Sequence[ProviderConfig],
    external_url: str,
    ca_bundles: Mapping[str, str],
    plan: ops.pebble.Plan | None,
) -> None:
    source = pebble_layer.entrypoint_source()
    environment = pebble_layer.build_environment(
        providers_json=provider_record.canonical_json(providers),
        jwt_secret=owned.jwt_secret,
        passphrase=owned.db_passphrase,
        database=db,
        app_base_url=external_url,
        proxy_env=pebble_layer.proxy_environment(os.environ),
        config_version=pebble_layer.config_version(source),
        ca_bundles=ca_bundles,
    )
    pebble_layer.apply_workload(
        container, pebble_layer.build_layer(environment), source, plan=plan
    )
