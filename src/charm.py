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

import cos
import database
import ingress
import leadership
import provider_record
import secrets_store
import teardown
import workload
from charm_state import CharmState, describe_problems
from configurator_contract import CONFIGURATOR_RELATION_NAME
from debug_ssh import DEBUG_SSH_RELATION_NAME
from garm_api import (
    GARM_API_URL,
    READY_TIMEOUT,
    GarmApiError,
    GarmClient,
    GarmConnectionError,
    GarmUnauthorizedError,
    ScaleSet,
)
from garm_chain import run_chain
from garm_template import CharmedTemplateError
from notices import Notice, blocked, summarise
from scaleset_status import format_scaleset_table, read_status_rows
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
DATABASE_LOGIN_REFUSED = (
    "PostgreSQL refused GARM's login: check the credentials of the postgresql relation"
)
STANDBY = "standby; GARM runs on the leader unit"
CLEANUP_ON_REMOVE = "cleanup-on-remove"
REMOVAL_UNREACHABLE = (
    "GARM is not reachable, so its scale sets cannot be removed; retry the hook once it runs, "
    "or set cleanup-on-remove=false to leave them"
)


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
        if self._application_removed():
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
            event.add_status(self._unit_status(self._status))

    def _on_collect_app_status(self, event: ops.CollectStatusEvent) -> None:
        # Only the leader gets this event; the app shows what the leader's unit shows.
        if self._status is not None:
            event.add_status(self._unit_status(self._status))
        if self._units_blocked is not None:
            event.add_status(self._units_blocked)

    def _unit_status(self, status: ops.StatusBase) -> ops.StatusBase:
        """Add the input-problem summary to whatever status the pass decided."""
        if not self._problems:
            return status
        message = "; ".join(part for part in (status.message, self._problems) if part)
        if self._blocked_input and isinstance(status, ops.ActiveStatus):
            # Only the configurator's operator can settle a conflict: say so in the status.
            return ops.BlockedStatus(message)
        return type(status)(message) if not isinstance(status, ops.UnknownStatus) else status

    def _on_get_credentials_action(self, event: ops.ActionEvent) -> None:
        try:
            admin = secrets_store.read_admin_credentials(self.model)
        except secrets_store.SecretsUnavailableError:
            event.fail("The GARM admin credentials are not available yet; try again later.")
            return
        event.set_results(
            {
                "username": admin.username,
                "password": admin.password,
                "email": admin.email,
                "full-name": admin.full_name,
            }
        )

    def _on_scaleset_status_action(self, event: ops.ActionEvent) -> None:
        if not self.unit.is_leader():
            event.fail("GARM runs on the leader unit only: run this action on the leader.")
            return
        try:
            admin = secrets_store.read_admin_credentials(self.model)
        except secrets_store.SecretsUnavailableError:
            event.fail("GARM is not bootstrapped yet: its admin credentials do not exist.")
            return
        state = CharmState.from_charm(self)
        try:
            with GarmClient(self.garm_api_url) as client:
                client.login(admin.username, admin.password)
                rows = read_status_rows(client, state.scalesets)
        except GarmApiError as exc:
            event.fail(f"Cannot read scale sets from GARM ({type(exc).__name__}).")
            return
        event.set_results({"scalesets": format_scaleset_table(rows), "count": len(rows)})

    # --- removal (ADR 0006) ------------------------------------------------------------------

    def _application_removed(self) -> bool:
        """Tell whether every unit is going away: removal, not a pod restart or scale-down."""
        return self.app.planned_units() == 0

    def _on_stop(self, _: ops.StopEvent) -> None:
        """On application removal, the leader deletes from GARM what the charm created there."""
        if not self.unit.is_leader() or not self._application_removed():
            return
        if not self.config.get(CLEANUP_ON_REMOVE, True):
            logger.warning(
                "%s is false: leaving GARM's scale sets, entities and credentials in place",
                CLEANUP_ON_REMOVE,
            )
            return
        try:
            admin = secrets_store.read_admin_credentials(self.model)
        except secrets_store.SecretsUnavailableError:
            logger.info("GARM was never bootstrapped: nothing to remove from it")
            return
        if not self.unit.get_container(workload.CONTAINER_NAME).can_connect():
            raise teardown.TeardownError(f"{REMOVAL_UNREACHABLE} (the garm container is down)")
        with GarmClient(self.garm_api_url) as client:
            try:
                initialised = client.wait_for_ready(timeout=self.ready_timeout)
            except GarmConnectionError as exc:
                raise teardown.TeardownError(REMOVAL_UNREACHABLE) from exc
            if not initialised:
                logger.info("GARM was never initialised: nothing to remove from it")
                return
            logger.info("The application is being removed: deleting what the charm put in GARM")
            client.login(admin.username, admin.password)
            result = teardown.remove_managed(
                client, timeout=self.teardown_timeout, poll_interval=self.teardown_poll_interval
            )
        logger.info("GARM cleaned up for removal in %d sweep(s)", result.passes)

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
            self._ensure_controller_urls(client)
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

    @traced("reconcile.controller_urls")
    def _ensure_controller_urls(self, client: GarmClient) -> None:
        urls = ingress.controller_urls(ingress.external_base_url(self))
        current = client.get_controller()
        if current.version:
            # Read from the running GARM, never assumed (juju status: workload version).
            self.unit.set_workload_version(current.version)
        wanted = dataclasses.asdict(urls)
        if all(getattr(current, key) == value for key, value in wanted.items()):
            logger.debug("GARM controller URLs are up to date")
            return
        logger.info("Setting GARM controller URLs to base %s", urls.metadata_url)
        client.update_controller(**wanted)

    def _not_answering_status(self) -> ops.StatusBase:
        """Say why GARM does not answer when the database is why.

        On PostgreSQL, GARM exits at start when the server refuses its login, and only GARM's
        own output, which the charm cannot read, says so. The charm therefore tries the same
        login with the credentials of the plan GARM runs with (``database.probe_login``): a
        refusal blocks with :data:`DATABASE_LOGIN_REFUSED` until the relation data changes.
        Anything else keeps the plain wait. Nothing is written to GARM either way.
        """
        container = self.unit.get_container(workload.CONTAINER_NAME)
        db = workload.planned_database(container)
        if db is None or db.backend != "postgresql":
            return ops.WaitingStatus(WAITING_READY)
        if database.probe_login(db) is not database.LoginProbe.REFUSED:
            return ops.WaitingStatus(WAITING_READY)
        logger.error(
            "PostgreSQL at %s:%d refused the login of user %s: GARM cannot start",
            db.host,
            db.port,
            db.username,
        )
        return ops.BlockedStatus(DATABASE_LOGIN_REFUSED)

    def _fail_sync(self, exc: GarmApiError) -> None:
        logger.warning("Reconcile failed (%s): %s; will retry", type(exc).__name__, exc)
        self._status = ops.WaitingStatus(SYNC_FAILED)


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
