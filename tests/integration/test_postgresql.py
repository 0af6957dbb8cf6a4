"""garm switches its database to PostgreSQL when related to postgresql-k8s (spec 6.2).

Deploys ``postgresql-k8s`` (channel 14/stable, trusted) from Charmhub, which takes a while:
deselect with ``-m "not postgresql"``. See ``test_bootstrap.py`` for how to run.
"""

from __future__ import annotations

import jubilant
import pytest

from tests.integration import helpers

POSTGRESQL = "postgresql-k8s"
POSTGRESQL_TIMEOUT = 30 * 60

pytestmark = pytest.mark.postgresql


def test_postgresql_relation_switches_the_backend(juju: jubilant.Juju, garm: str) -> None:
    juju.deploy(POSTGRESQL, channel="14/stable", trust=True)
    juju.integrate(f"{garm}:postgresql", f"{POSTGRESQL}:database")

    def settled(status: jubilant.Status) -> bool:
        return jubilant.all_active(status, POSTGRESQL) and helpers.is_waiting_for_configurator(
            status
        )

    juju.wait(settled, error=jubilant.any_error, timeout=POSTGRESQL_TIMEOUT)

    def on_postgresql() -> bool:
        return helpers.garm_service_environment(juju).get("GARM_DB_BACKEND") == "postgresql"

    helpers.wait_until(on_postgresql, "GARM_DB_BACKEND=postgresql in the Pebble plan")
    environment = helpers.garm_service_environment(juju)
    # Scalars and key names only: the environment holds the database password.
    db_keys = sorted(key for key in environment if key.startswith("POSTGRESQL_DB_"))
    host_set = bool(environment.get("POSTGRESQL_DB_HOSTNAME"))
    db_name = environment.get("POSTGRESQL_DB_NAME")
    sslmode = environment.get("POSTGRESQL_DB_SSLMODE")
    has_sqlite_file = "GARM_SQLITE_DB_FILE" in environment

    assert db_keys == [
        "POSTGRESQL_DB_HOSTNAME",
        "POSTGRESQL_DB_NAME",
        "POSTGRESQL_DB_PASSWORD",
        "POSTGRESQL_DB_PORT",
        "POSTGRESQL_DB_SSLMODE",
        "POSTGRESQL_DB_USERNAME",
    ]
    assert host_set
    assert db_name == "garm"
    assert sslmode == "prefer"
    assert not has_sqlite_file


def test_garm_on_postgresql_is_initialised(juju: jubilant.Juju, garm: str) -> None:
    # The new database starts empty, so the charm must have run first-run again.
    def initialised() -> bool:
        answer = helpers.garm_get(juju, "/api/v1/controller-info")
        error = answer.body.get("error") if isinstance(answer.body, dict) else None
        return answer.status == 401 or (answer.status, error) == (409, "urls_required")

    helpers.wait_until(initialised, "GARM on PostgreSQL to be initialised")
    admin = helpers.get_admin_credentials(juju)
    status, token_received = helpers.garm_login(juju, admin)

    assert (status, token_received) == (200, True)
    assert helpers.CHARMED_TEMPLATE in helpers.templates_by_name(juju, admin)
