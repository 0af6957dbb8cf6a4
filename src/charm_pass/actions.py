"""The charm's actions: ``get-credentials`` and ``scaleset-status``.

Each handler reads what it needs and answers through the action event; none writes to GARM or
changes the charm's status. Results are cut so that none passes Linux's argument limit
(``split_result``). Every ``get-credentials`` run is a security event (``sensitive_read``)
naming the action id. Knows Juju (the event, the model) and reads GARM through the client.
"""

from __future__ import annotations

import ops

from charm_pass.charm_state import CharmState
from garm import GarmApiError
from reconcile import admin_session, format_runner_faults, format_scaleset_table, read_status
from records import juju_limits, peer_record, secrets_store
from records.configurator_record import ConfiguratorRecord
from vocabulary import security_events


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


def scaleset_status(
    charm: ops.CharmBase, event: ops.ActionEvent, api_url: str, record: ConfiguratorRecord
) -> None:
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
    # The table needs the scale sets' names and placement, never a configurator's secret.
    configurators = record.read(rotate=False)
    state = CharmState.from_charm(charm, configurators, memory.incumbents, read_secrets=False)
    try:
        with admin_session(api_url, admin) as client:
            report = read_status(client, state.scalesets, memory.faults)
    except GarmApiError as exc:
        event.fail(f"Cannot read scale sets from GARM ({type(exc).__name__}).")
        return
    results: dict[str, str | int] = {
        **split_result("scalesets", format_scaleset_table(report.rows)),
        "count": len(report.rows),
    }
    if report.faults:
        results.update(split_result("runner-faults", format_runner_faults(report.faults)))
    event.set_results(results)


def split_result(key: str, table: str) -> dict[str, str | int]:
    """One table as action results, each within one hook-tool argument.

    ops passes every result to ``action-set`` as one ``key=value`` argument, and Linux refuses
    an argument over 128 KiB (``juju_limits.MAX_ARG_STRLEN``). A table that fits stays under
    ``key``; a longer one is cut between rows into ``key`` (with the header), ``key-2``, ...,
    and ``key-parts`` says how many there are.
    """
    lines = table.split("\n")
    groups = juju_limits.pack(lines, juju_limits.ARG_PIECE_BYTES)
    if len(groups) == 1:
        return {key: table}
    parts: dict[str, str | int] = {
        (key if number == 1 else f"{key}-{number}"): "\n".join(group)
        for number, group in enumerate(groups, start=1)
    }
    parts[f"{key}-parts"] = len(groups)
    return parts
