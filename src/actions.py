"""The charm's actions: ``get-credentials`` and ``scaleset-status``.

Each handler reads what it needs and answers through the action event; none writes to GARM or
changes the charm's status. Every ``get-credentials`` run is a security event (``sensitive_read``)
naming the action id. Knows Juju (the event, the model) and reads GARM through the client.
"""

from __future__ import annotations

import ops

import peer_record
import secrets_store
import security_events
from charm_state import CharmState
from garm import GarmApiError, GarmClient
from reconcile.scalesets.table import format_runner_faults, format_scaleset_table, read_status


def get_credentials(model: ops.Model, event: ops.ActionEvent) -> None:
    """Answer with GARM's admin credentials, the one place a secret may be returned."""
    label = secrets_store.ADMIN_CREDENTIALS_LABEL
    try:
        admin = secrets_store.read_admin_credentials(model)
    except secrets_store.SecretsUnavailableError:
        security_events.credentials_disclosed(label, disclosed=False)
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
    security_events.credentials_disclosed(label, admin.username, disclosed=True)


def scaleset_status(charm: ops.CharmBase, event: ops.ActionEvent, api_url: str) -> None:
    """Answer with the table of live scale set generations, read from GARM on the leader."""
    if not charm.unit.is_leader():
        event.fail("GARM runs on the leader unit only: run this action on the leader.")
        return
    try:
        admin = secrets_store.read_admin_credentials(charm.model)
    except secrets_store.SecretsUnavailableError:
        event.fail("GARM is not bootstrapped yet: its admin credentials do not exist.")
        return
    memory = peer_record.load(charm.model)
    state = CharmState.from_charm(charm, memory.incumbents)
    try:
        with GarmClient(api_url) as client:
            secrets_store.admin_login(client, admin)
            report = read_status(client, state.scalesets, memory.faults)
    except GarmApiError as exc:
        event.fail(f"Cannot read scale sets from GARM ({type(exc).__name__}).")
        return
    results: dict[str, str | int] = {
        "scalesets": format_scaleset_table(report.rows),
        "count": len(report.rows),
    }
    if report.faults:
        results["runner-faults"] = format_runner_faults(report.faults)
    event.set_results(results)
