#!/usr/bin/env python3
"""Kubernetes charm for GARM, the GitHub Actions Runner Manager.

Every event runs one holistic :meth:`GarmCharm._reconcile`. It records facts (the status to
show, the changeover progress) that ``collect-status`` turns into the unit and app status.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence

import ops

import actions
import cos
import database
import ingress
import leadership
import provider_record
import removal
import secrets_store
import workload
from charm_state import CharmState, describe_problems
from configurator_contract import CONFIGURATOR_RELATION_NAME
from debug_ssh import DEBUG_SSH_RELATION_NAME
from garm import (
    GARM_API_URL,
    READY_TIMEOUT,
    GarmApiError,
    GarmClient,
    GarmConnectionError,
    GarmUnauthorizedError,
    ScaleSet,
)
from notices import Notice, blocked, summarise
from reconcile import teardown
from reconcile.chain import run_chain
from reconcile.charmed_template import CharmedTemplateError
from telemetry import traced

logger = logging.getLogger(__name__)

# httpx and httpcore log every request (about a dozen lines per GARM call); under Juju each line
# is a juju-log process start, so they are kept to warnings. The charm logs what it changes in
# GARM itself, and charm tracing has a span for every call.
LIBRARY_LOGGERS = ("httpx", "httpcore")

WAITING_PEBBLE = "Waiting for pebble ready"
WAITING_SECRETS = "Waiting for GARM secrets"
WAITING_STORAGE = "Waiting for garm-data storage"
WAITING_DATABASE = "Waiting for postgresql relation data"
WAITING_READY = "Waiting for GARM to become ready"
WAITING_CONFIGURATOR = "Waiting for garm-configurator relation"
SYNC_FAILED = "GARM sync failed"
ADMIN_REJECTED = "GARM rejected the admin credentials"
STANDBY = "standby; GARM runs on the leader unit"


class GarmCharm(ops.CharmBase):
    """Runs GARM and keeps it equal to what the garm-configurator relations publish."""

    # Where the charm reaches GARM; the simulation and tests point it at the emulator.
    garm_api_url = GARM_API_URL
    ready_timeout = READY_TIMEOUT
    # How long the removal cleanup waits for scale sets to drain (ADR 0006).
    teardown_timeout = teardown.TEARDOWN_TIMEOUT
    teardown_poll_interval = teardown.POLL_INTERVAL

    def __init__(self, framework: ops.Framework) -> None:
        """Observe every event that can change the desired or the observed state."""
        super().__init__(framework)
        for name in LIBRARY_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        # Charm tracing to Tempo: hooks, Juju and Pebble calls, and the spans of telemetry.py.
        self.tracing = ops.tracing.Tracing(self, cos.TRACING_RELATION)
        # None until a reconcile decides: hooks that do not reconcile (actions, secret
        # housekeeping) then add no status, and Juju keeps the last one shown.
        self._status: ops.StatusBase | None = None
        self._notices: Sequence[Notice] = ()
        self._problems = ""
        # Leader only: more than one unit on SQLite, shown on the application (ADR 0007).
        self._units_blocked: ops.StatusBase | None = None
        self._blocked_input = False
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

    # --- events ------------------------------------------------------------------------------

    def _on_reconcile_event(self, _: ops.EventBase) -> None:
        if removal.application_removed(self.app):
            # GARM keeps its plan and providers until the stop hook has cleaned up (ADR 0006).
            logger.info("The application is being removed: not reconciling")
            return
        self._reconcile()

    def _on_secret_changed(self, event: ops.SecretChangedEvent) -> None:
        # The charm moves to a configurator secret's new revision here, once; every other hook
        # reads the revision it tracks, with one secret-get per secret.
        event.secret.get_content(refresh=True)
        self._on_reconcile_event(event)

    def _on_secret_revision_obsolete(self, event: ops.SecretRemoveEvent) -> None:
        event.remove_revision()

    def _on_collect_unit_status(self, event: ops.CollectStatusEvent) -> None:
        if self._status is not None:
            event.add_status(_with_problems(self._status, self._problems, self._blocked_input))

    def _on_collect_app_status(self, event: ops.CollectStatusEvent) -> None:
        # Only the leader gets this event; the app shows what the leader's unit shows.
        if self._status is not None:
            event.add_status(_with_problems(self._status, self._problems, self._blocked_input))
        if self._units_blocked is not None:
            event.add_status(self._units_blocked)

    def _on_get_credentials_action(self, event: ops.ActionEvent) -> None:
        actions.get_credentials(self.model, event)

    def _on_scaleset_status_action(self, event: ops.ActionEvent) -> None:
        actions.scaleset_status(self, event, self.garm_api_url)

    def _on_stop(self, _: ops.StopEvent) -> None:
        removal.clean_up(
            self,
            api_url=self.garm_api_url,
            ready_timeout=self.ready_timeout,
            timeout=self.teardown_timeout,
            poll_interval=self.teardown_poll_interval,
        )

    # --- the reconcile pass ------------------------------------------------------------------

    @traced("reconcile")
    def _reconcile(self) -> None:
        """Bring the workload and GARM to the desired state, in the spec's order."""
        if self.unit.is_leader():
            secrets_store.ensure_owned_secrets(self.app, self.model)
            leadership.announce(self.model)
        # Relation data only: every unit publishes its ingress address, leader or not.
        ingress.publish_ingress_request(self)
        cos.publish(self)
        container = self.unit.get_container(workload.CONTAINER_NAME)
        if not container.can_connect():
            self._status = ops.WaitingStatus(WAITING_PEBBLE)
            return
        cos.forward_logs(self, container)
        try:
            owned = secrets_store.read_owned_secrets(self.model)
        except secrets_store.SecretsUnavailableError:
            self._status = ops.WaitingStatus(WAITING_SECRETS)
            return
        if not self.unit.is_leader():
            workload.stand_by(container)
            leadership.release(self.unit)
            self._status = leadership.units_blocked(self.model) or ops.ActiveStatus(STANDBY)
            return
        self._units_blocked = leadership.units_blocked(self.model)
        refused = leadership.claim(self.model)
        if refused is not None:
            workload.stand_by(container)
            leadership.release(self.unit)
            self._status = refused
            return
        leadership.serve(self.unit)
        if not container.exists(workload.DATA_DIR):
            self._status = ops.WaitingStatus(WAITING_STORAGE)
            return
        database.request_database(self)
        db = self._database_config(container)
        if db is None:
            self._status = ops.WaitingStatus(WAITING_DATABASE)
            return
        state = CharmState.from_charm(self)
        self._problems = describe_problems(state.problems)
        self._blocked_input = state.blocked
        stored, record = provider_record.load_record(self.model)
        providers = provider_record.merge(record, state.providers)
        # Stored before it is published: whatever this hook does next, GARM never runs with a
        # provider the record could forget.
        stored = provider_record.save_record(self.app, self.model, stored, providers)
        self._apply_workload(container, owned, db, providers)
        live = self._sync_garm(state, owned.admin)
        if live is not None:
            self._status = self._chain_status(state)
        kept = provider_record.trim(providers, state.providers, live)
        provider_record.save_record(self.app, self.model, stored, kept)

    @traced("reconcile.database")
    def _database_config(self, container: ops.Container) -> workload.DatabaseConfig | None:
        """Return the database to run GARM with, or None while waiting for PostgreSQL data."""
        wanted = database.database_config(self).config
        current = workload.planned_database(container)
        if wanted is None:
            # Related but incomplete: keep what the plan already runs, if anything.
            return current
        database.warn_on_backend_switch(current.backend if current else None, wanted.backend)
        return wanted

    @traced("reconcile.workload")
    def _apply_workload(
        self,
        container: ops.Container,
        owned: secrets_store.OwnedSecrets,
        db: workload.DatabaseConfig,
        providers: Sequence[provider_record.ProviderConfig],
    ) -> None:
        source = workload.entrypoint_source()
        environment = workload.build_environment(
            providers_json=provider_record.canonical_json(providers),
            jwt_secret=owned.jwt_secret,
            passphrase=owned.db_passphrase,
            database=db,
            app_base_url=ingress.external_base_url(self),
            proxy_env=workload.proxy_environment(os.environ),
            config_version=workload.config_version(source),
        )
        workload.apply_workload(container, workload.build_layer(environment), source)

    @traced("reconcile.garm")
    def _sync_garm(
        self, state: CharmState, admin: secrets_store.AdminCredentials
    ) -> list[ScaleSet] | None:
        """Bootstrap GARM and run the reconcile chain; return the live scale sets or None."""
        with GarmClient(self.garm_api_url) as client:
            try:
                initialised = client.wait_for_ready(timeout=self.ready_timeout)
            except GarmConnectionError:
                logger.warning("GARM did not answer within %.0f s", self.ready_timeout)
                self._status = self._not_answering_status()
                return None
            except GarmApiError as exc:
                self._fail_sync(exc)
                return None
            try:
                if not initialised:
                    logger.info("GARM is not initialised: running first-run setup")
                    client.first_run(admin.username, admin.password, admin.email, admin.full_name)
                    logger.info("GARM first-run done; admin user %s created", admin.username)
            except GarmApiError as exc:
                self._fail_sync(exc)
                return None
            return self._run_chain(client, state, admin)

    @traced("reconcile.chain")
    def _run_chain(
        self, client: GarmClient, state: CharmState, admin: secrets_store.AdminCredentials
    ) -> list[ScaleSet] | None:
        try:
            client.login(admin.username, admin.password)
            _ensure_controller_urls(self, client)
        except GarmUnauthorizedError:
            logger.error("GARM refused the admin credentials from secret garm-admin-credentials")
            self._status = ops.BlockedStatus(ADMIN_REJECTED)
            return None
        except GarmApiError as exc:
            self._fail_sync(exc)
            return None
        try:
            result = run_chain(client, state)
        except CharmedTemplateError as exc:
            logger.warning("Charmed template not applied: %s; scale sets skipped", exc)
            self._status = ops.WaitingStatus(str(exc))
            return None
        except GarmApiError as exc:
            self._fail_sync(exc)
            return None
        self._notices = result.notices
        return result.live

    def _chain_status(self, state: CharmState) -> ops.StatusBase:
        """The status of a pass that ran: what is held back or under way, else plain active."""
        if not state.configurator_relation_count:
            # The chain ran to zero: there is nothing to run GARM for yet.
            return ops.WaitingStatus(WAITING_CONFIGURATOR)
        message = summarise(self._notices)
        if blocked(self._notices):
            return ops.BlockedStatus(message)
        return ops.ActiveStatus(message)

    def _not_answering_status(self) -> ops.StatusBase:
        container = self.unit.get_container(workload.CONTAINER_NAME)
        refused = database.login_refused_status(workload.planned_database(container))
        return refused or ops.WaitingStatus(WAITING_READY)

    def _fail_sync(self, exc: GarmApiError) -> None:
        logger.warning("Reconcile failed (%s): %s; will retry", type(exc).__name__, exc)
        self._status = ops.WaitingStatus(SYNC_FAILED)


def _with_problems(status: ops.StatusBase, problems: str, blocked_input: bool) -> ops.StatusBase:
    """Add the input-problem summary to whatever status the pass decided."""
    if not problems:
        return status
    message = "; ".join(part for part in (status.message, problems) if part)
    if blocked_input and isinstance(status, ops.ActiveStatus):
        # Only the configurator's operator can settle a conflict: say so in the status.
        return ops.BlockedStatus(message)
    return type(status)(message) if not isinstance(status, ops.UnknownStatus) else status


@traced("reconcile.controller_urls")
def _ensure_controller_urls(charm: ops.CharmBase, client: GarmClient) -> None:
    """Set GARM's controller URLs when they differ, and show GARM's version on the unit."""
    urls = ingress.controller_urls(ingress.external_base_url(charm))
    current = client.get_controller()
    if current.version:
        # Read from the running GARM, never assumed (juju status: workload version).
        charm.unit.set_workload_version(current.version)
    wanted = dataclasses.asdict(urls)
    if all(getattr(current, key) == value for key, value in wanted.items()):
        logger.debug("GARM controller URLs are up to date")
        return
    logger.info("Setting GARM controller URLs to base %s", urls.metadata_url)
    client.update_controller(**wanted)


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
        events += [
            on[relation].relation_joined,
            on[relation].relation_changed,
            on[relation].relation_departed,
            on[relation].relation_broken,
        ]
    for relation in (database.POSTGRESQL_RELATION, ingress.INGRESS_RELATION):
        events += [
            on[relation].relation_joined,
            on[relation].relation_changed,
            on[relation].relation_broken,
        ]
    # A deposed leader gets one of these soon after leadership moves (ADR 0007).
    events += [
        on.leader_settings_changed,
        on[leadership.PEER_RELATION].relation_joined,
        on[leadership.PEER_RELATION].relation_changed,
        on[leadership.PEER_RELATION].relation_departed,
    ]
    return events


if __name__ == "__main__":  # pragma: nocover
    ops.main(GarmCharm)
