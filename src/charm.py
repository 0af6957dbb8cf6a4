#!/usr/bin/env python3
"""Kubernetes charm for GARM, the GitHub Actions Runner Manager.

The event table and the pass boundary: observe, gate, call, report. Every event runs one
holistic :meth:`GarmCharm._reconcile`, returning one ``Outcome`` that ``collect-status`` shows;
past the leader's gates ``leader_pass`` reads what is wanted and publishes the workload,
``garm_sync`` brings GARM to it, and ``continuation`` asks for the next pass when one is owed.
"""

from __future__ import annotations

import dataclasses
import logging
import time

import ops

from charm_pass import actions, continuation, garm_sync, leader_pass, removal, worker_idle
from charm_pass.outcome import Outcome
from garm import GARM_API_URL, READY_TIMEOUT
from reconcile import PASS_BUDGET, POLL_INTERVAL, TEARDOWN_TIMEOUT, Writes
from records import configurator_record, leadership, secrets_store, unit_shown
from relations import backup_target, cos, database, ingress
from relations.configurator_contract import CONFIGURATOR_RELATION_NAME
from relations.debug_ssh import DEBUG_SSH_RELATION_NAME
from vocabulary.telemetry import traced
from workload import agent_image, pebble_layer

logger = logging.getLogger(__name__)

# httpx and httpcore log every request; under Juju each line is a juju-log process: warnings
# only. The charm logs what it changes in GARM, and charm tracing has a span for every call.
LIBRARY_LOGGERS = ("httpx", "httpcore")

WAITING_PEBBLE = "Waiting for pebble ready"
WAITING_SECRETS = "Waiting for GARM secrets"
WAITING_STORAGE = "Waiting for garm-data storage"
WAITING_DATABASE = "Waiting for postgresql relation data"
STANDBY = "standby; GARM runs on the leader unit"
NOT_RUNNING = (
    "GARM is not running (Pebble: {state}); read its log: "
    "juju ssh --container garm {unit} pebble logs garm"
)


class GarmCharm(ops.CharmBase):
    """Runs GARM and keeps it equal to what the garm-configurator relations publish."""

    # Where the charm reaches GARM; the simulation and tests point it at the emulator.
    garm_api_url = GARM_API_URL
    ready_timeout = READY_TIMEOUT
    # How long the removal cleanup waits for scale sets to drain (ADR 0006).
    teardown_timeout = TEARDOWN_TIMEOUT
    teardown_poll_interval = POLL_INTERVAL
    # After this many seconds a pass starts no new GARM write; the next pass goes on at once.
    pass_budget = PASS_BUDGET
    pass_clock = staticmethod(time.monotonic)

    def __init__(self, framework: ops.Framework) -> None:
        """Observe every event that can change the desired or the observed state."""
        super().__init__(framework)
        for name in LIBRARY_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        self.tracing = ops.tracing.Tracing(self, cos.TRACING_RELATION)  # to Tempo
        self._outcome: Outcome | None = None  # no reconcile, no status: Juju keeps the last
        self._refreshed: dict[str, str] = {}  # secret-changed: the content refreshed to, by id
        self._planned_units = 1
        self.configurators = configurator_record.ConfiguratorRecord(self)
        on = self.on
        for event in _reconcile_events(on):
            framework.observe(event, self._on_reconcile_event)
        framework.observe(on.secret_changed, self._on_secret_changed)
        framework.observe(on.secret_remove, self._on_secret_revision_obsolete)
        framework.observe(on.secret_expired, self._on_secret_revision_obsolete)
        framework.observe(on.collect_unit_status, self._on_collect_unit_status)
        framework.observe(on.collect_app_status, self._on_collect_app_status)
        framework.observe(on.get_credentials_action, self._on_get_credentials_action)
        framework.observe(on.scaleset_status_action, self._on_scaleset_status_action)
        framework.observe(on.stop, self._on_stop)
        container = on[pebble_layer.CONTAINER_NAME]
        framework.observe(container.pebble_custom_notice, self._on_custom_notice)
        cos.push_security_events(self)
        self.backup = backup_target.offer(self)
        self.shown = unit_shown.UnitShown(self)
        self.pod = ingress.PodAddress(self)
        self.next_pass = continuation.NextPass(self, pebble_layer.CONTAINER_NAME)
        self.worker_idle = worker_idle.WorkerIdle(self)

    # --- events ------------------------------------------------------------------------------

    def _on_reconcile_event(self, _: ops.EventBase) -> None:
        # Asked once a hook: the removal check and the unit-count status both need it.
        self._planned_units = self.app.planned_units()
        if removal.application_removed(self._planned_units):  # GARM kept for stop (ADR 0006)
            logger.info("The application is being removed: not reconciling")
            return
        self._outcome = self._reconcile()

    def _on_secret_changed(self, event: ops.SecretChangedEvent) -> None:
        content = event.secret.get_content(refresh=True)  # the one move to a new revision
        if event.secret.id and "value" in content:
            self._refreshed[event.secret.id] = content["value"]
        self._on_reconcile_event(event)

    def _on_secret_revision_obsolete(self, event: ops.SecretRemoveEvent) -> None:
        event.remove_revision()

    def _on_collect_unit_status(self, event: ops.CollectStatusEvent) -> None:
        if self._outcome is not None and self.shown.status_changed(self._outcome.shown()):
            event.add_status(self._outcome.shown())

    def _on_collect_app_status(self, event: ops.CollectStatusEvent) -> None:
        # Only the leader gets this event: the unit's status, or the unit count's when blocked.
        if self._outcome is not None and self.shown.app_status_changed(self._outcome.app_shown()):
            event.add_status(self._outcome.app_shown())

    def _on_get_credentials_action(self, event: ops.ActionEvent) -> None:
        actions.get_credentials(self.model, event)

    def _on_scaleset_status_action(self, event: ops.ActionEvent) -> None:
        actions.scaleset_status(self, event, self.garm_api_url, self.configurators)

    def _on_stop(self, _: ops.StopEvent) -> None:
        removal.clean_up(
            self,
            api_url=self.garm_api_url,
            ready_timeout=self.ready_timeout,
            timeout=self.teardown_timeout,
            poll_interval=self.teardown_poll_interval,
        )

    def _on_custom_notice(self, event: ops.PebbleCustomNoticeEvent) -> None:
        if continuation.is_continuation(event):
            self._on_reconcile_event(event)

    # --- the reconcile pass ------------------------------------------------------------------

    @traced("reconcile")
    def _reconcile(self) -> Outcome:
        """Bring the workload and GARM to the desired state, in the spec's order."""
        leader = self.unit.is_leader()
        try:
            # The leader creates a missing one: a new deployment has them before GARM runs.
            owned = secrets_store.owned_secrets(self.app, self.model, create=leader)
        except secrets_store.SecretsUnavailableError:
            owned = None
        if leader:
            leadership.announce(self.model)
        # Relation data only: every unit publishes its ingress address, leader or not.
        ingress.publish_ingress_request(self, self.pod)
        cos.publish(self)
        container = self.unit.get_container(pebble_layer.CONTAINER_NAME)
        if not container.can_connect():
            return Outcome(ops.WaitingStatus(WAITING_PEBBLE))
        # Read once: what this pass knows of the workload's plan (log targets, database,
        # providers, the layer) comes from here.
        plan = container.get_plan()
        cos.forward_logs(self, container, plan)
        if owned is None:
            return Outcome(ops.WaitingStatus(WAITING_SECRETS))
        if not leader:
            self.configurators.forget()  # a record kept only while leader stays true
            leadership.stand_by(self.shown, container, "this unit is no longer the leader")
            blocked = leadership.units_blocked(self.model, self._planned_units)
            return Outcome(blocked or ops.ActiveStatus(STANDBY))
        outcome = self._serve(container, plan, owned)
        return dataclasses.replace(
            outcome, units_blocked=leadership.units_blocked(self.model, self._planned_units)
        )

    def _serve(
        self, container: ops.Container, plan: ops.pebble.Plan, owned: secrets_store.OwnedSecrets
    ) -> Outcome:
        """The leader's part of the pass: run GARM and bring it to the desired state."""
        refused = leadership.claim(self.model)
        if refused is not None:
            leadership.stand_by(self.shown, container, refused.message)
            return Outcome(refused)
        leadership.serve(self.shown)
        if not container.exists(pebble_layer.DATA_DIR):
            return Outcome(ops.WaitingStatus(WAITING_STORAGE))
        database.request_database(self)
        db = database.choose_database(self, pebble_layer.planned_database(plan))
        if db is None:
            return Outcome(ops.WaitingStatus(WAITING_DATABASE))
        wanted = leader_pass.read_wanted(
            self, container, plan, owned, self._refreshed, self.configurators
        )
        if isinstance(wanted, ops.StatusBase):
            return Outcome(wanted)
        # The budget runs from here, once the desired state is read.
        writes = Writes(budget=self.pass_budget, clock=self.pass_clock)
        publish, trusted, running = leader_pass.publish_workload(
            container, plan, owned, db, wanted
        )
        if running != ops.pebble.ServiceStatus.ACTIVE.value:
            # GARM exits at start, or an operator stopped it: no GARM to wait 30 s for.
            not_running = NOT_RUNNING.format(state=running, unit=self.unit.name)
            return Outcome(database.refused_login_status(db) or ops.BlockedStatus(not_running))
        sync = garm_sync.sync_garm(
            self,
            garm_sync.GarmAccess(self.garm_api_url, self.ready_timeout),
            wanted.state,
            owned.admin,
            wanted.memory,
            read_tool=agent_image.tool_reader(container),
            db=db,
            writes=writes,
            idle=self.worker_idle,
        )
        kept = (self.shown, self.next_pass)
        status = leader_pass.after_sync(
            self, container, owned, wanted, publish, trusted, sync, kept
        )
        return Outcome(status, wanted.problems(), wanted.blocked())


def _reconcile_events(on: ops.CharmEvents) -> list[ops.BoundEvent]:
    """Return every event that can change the desired or the observed state."""
    events: list[ops.BoundEvent] = [
        on.install,
        on.upgrade_charm,
        on.config_changed,
        on.leader_elected,
        on.update_status,
        on.garm_pebble_ready,
        on.garm_data_storage_attached,
    ]
    for relation in (CONFIGURATOR_RELATION_NAME, DEBUG_SSH_RELATION_NAME, *cos.RELATIONS):
        r = on[relation]
        events += [r.relation_joined, r.relation_changed, r.relation_departed, r.relation_broken]
    for relation in (database.POSTGRESQL_RELATION, ingress.INGRESS_RELATION):
        r = on[relation]
        events += [r.relation_joined, r.relation_changed, r.relation_broken]
    # A deposed leader gets one of these soon after leadership moves (ADR 0007); created, so
    # that the leader writes its memory into the peer relation as soon as Juju gives it one.
    events += [
        on.leader_settings_changed,
        on[leadership.PEER_RELATION].relation_created,
        on[leadership.PEER_RELATION].relation_joined,
        on[leadership.PEER_RELATION].relation_changed,
        on[leadership.PEER_RELATION].relation_departed,
    ]
    return events


if __name__ == "__main__":  # pragma: nocover
    ops.main(GarmCharm)
