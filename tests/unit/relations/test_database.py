"""PostgreSQL requirer: the database request and the completeness of the provider's answer."""

from __future__ import annotations

import json
import logging
from typing import Any

import ops
import pytest
from ops import testing

from relations.database import (
    POSTGRESQL_RELATION,
    database_config,
    request_database,
    warn_on_backend_switch,
)
from workload.pebble_layer import DatabaseConfig

META: dict[str, Any] = {
    "name": "garm",
    "requires": {
        "ingress": {"interface": "ingress", "limit": 1},
        "postgresql": {"interface": "postgresql_client", "limit": 1},
    },
}

PASSWORD = "s3cret-Pa55word"  # test value; asserted absent from logs

RESULTS: list[DatabaseConfig | None] = []


class DatabaseCharm(ops.CharmBase):
    def __init__(self, framework: ops.Framework):
        super().__init__(framework)
        framework.observe(self.on[POSTGRESQL_RELATION].relation_changed, self._handle)
        framework.observe(self.on[POSTGRESQL_RELATION].relation_broken, self._handle)
        framework.observe(self.on.update_status, self._handle)

    def _handle(self, _: ops.EventBase) -> None:
        request_database(self)
        RESULTS.append(database_config(self))


@pytest.fixture(autouse=True)
def _clear_results():
    RESULTS.clear()


def _run(
    relation: testing.Relation | None,
    *,
    leader: bool = True,
    secrets: tuple[testing.Secret, ...] = (),
) -> tuple[testing.State, DatabaseConfig | None]:
    ctx = testing.Context(DatabaseCharm, meta=META)
    state = testing.State(
        leader=leader, relations=[relation] if relation else [], secrets=list(secrets)
    )
    if relation is None:
        out = ctx.run(ctx.on.update_status(), state)
    else:
        out = ctx.run(ctx.on.relation_changed(relation, remote_unit=0), state)
    assert len(RESULTS) == 1
    return out, RESULTS[0]


def _pg(remote_app_data: dict[str, str], **kwargs: Any) -> testing.Relation:
    return testing.Relation(
        POSTGRESQL_RELATION,
        interface="postgresql_client",
        remote_app_name="postgresql-k8s",
        remote_app_data=remote_app_data,
        **kwargs,
    )


def _assert_no_password(caplog: pytest.LogCaptureFixture) -> None:
    assert PASSWORD not in caplog.text
    for record in caplog.records:
        assert PASSWORD not in record.getMessage()


# --- request -------------------------------------------------------------------------------


def test_leader_requests_database_and_secret_credentials():
    relation = _pg({})
    out, _ = _run(relation)

    app_data = out.get_relation(relation.id).local_app_data
    assert dict(app_data) == {
        "database": "garm",
        "requested-secrets": '["username", "password"]',
    }
    assert json.loads(app_data["requested-secrets"]) == ["username", "password"]


def test_non_leader_does_not_write_the_request():
    relation = _pg({})
    out, _ = _run(relation, leader=False)

    assert dict(out.get_relation(relation.id).local_app_data) == {}


def test_request_corrects_stale_values():
    relation = _pg({}, local_app_data={"database": "other", "requested-secrets": "[]"})
    out, _ = _run(relation)

    assert dict(out.get_relation(relation.id).local_app_data) == {
        "database": "garm",
        "requested-secrets": '["username", "password"]',
    }


# --- completeness --------------------------------------------------------------------------


def test_no_relation_means_sqlite():
    _, result = _run(None)

    assert result == DatabaseConfig.sqlite()


def test_relation_being_removed_means_sqlite():
    relation = _pg({"endpoints": "db", "username": "u", "password": PASSWORD})
    ctx = testing.Context(DatabaseCharm, meta=META)
    ctx.run(ctx.on.relation_broken(relation), testing.State(leader=True, relations=[relation]))

    [result] = RESULTS
    assert result == DatabaseConfig.sqlite()


def test_plaintext_credentials_complete(caplog: pytest.LogCaptureFixture):
    relation = _pg(
        {"endpoints": "pg-primary.svc:5433", "username": "relation-7", "password": PASSWORD}
    )
    _, result = _run(relation)

    assert result is not None
    assert result.backend == "postgresql"
    assert result == DatabaseConfig(
        backend="postgresql",
        host="pg-primary.svc",
        port=5433,
        username="relation-7",
        password=PASSWORD,
        name="garm",
        sslmode="prefer",
    )
    _assert_no_password(caplog)


def test_secret_user_credentials_complete(caplog: pytest.LogCaptureFixture):
    secret = testing.Secret({"username": "relation-9", "password": PASSWORD})
    relation = _pg(
        {"endpoints": "10.0.0.7:5432", "secret-user": secret.id, "database": "garm-prod"}
    )
    _, result = _run(relation, secrets=(secret,))

    assert result is not None
    assert result.backend == "postgresql"
    assert result == DatabaseConfig(
        backend="postgresql",
        host="10.0.0.7",
        port=5432,
        username="relation-9",
        password=PASSWORD,
        name="garm-prod",
        sslmode="prefer",
    )
    _assert_no_password(caplog)


def test_secret_user_is_read_at_its_latest_revision():
    secret = testing.Secret(
        {"username": "old-user", "password": "old-pass"},
        latest_content={"username": "new-user", "password": PASSWORD},
    )
    relation = _pg({"endpoints": "db:5432", "secret-user": secret.id})
    _, result = _run(relation, secrets=(secret,))

    assert result is not None
    assert (result.username, result.password) == ("new-user", PASSWORD)


def test_non_leader_reads_complete_data_too():
    relation = _pg({"endpoints": "db", "username": "u", "password": PASSWORD})
    _, result = _run(relation, leader=False)

    assert result is not None
    assert result.backend == "postgresql"


@pytest.mark.parametrize(
    "remote_app_data",
    [
        {},
        {"username": "u", "password": PASSWORD},
        {"endpoints": "", "username": "u", "password": PASSWORD},
        {"endpoints": " , db:5432", "username": "u", "password": PASSWORD},
        {"endpoints": ":5432", "username": "u", "password": PASSWORD},
        {"endpoints": "db:5432"},
        {"endpoints": "db:5432", "username": "u"},
        {"endpoints": "db:5432", "password": PASSWORD},
        {"endpoints": "db:5432", "username": "", "password": PASSWORD},
    ],
    ids=[
        "nothing",
        "no-endpoints",
        "empty-endpoints",
        "empty-first-endpoint",
        "no-host",
        "no-credentials",
        "no-password",
        "no-username",
        "empty-username",
    ],
)
def test_incomplete_data_waits(remote_app_data: dict[str, str], caplog: pytest.LogCaptureFixture):
    _, result = _run(_pg(remote_app_data))

    assert result is None
    _assert_no_password(caplog)


@pytest.mark.parametrize("port", ["abc", "0", "65536", "-1", "54 32"])
def test_invalid_port_waits(port: str, caplog: pytest.LogCaptureFixture):
    relation = _pg({"endpoints": f"db:{port}", "username": "u", "password": PASSWORD})
    _, result = _run(relation)

    assert result is None
    assert any(
        record.levelno == logging.WARNING and "port" in record.getMessage()
        for record in caplog.records
    )


def test_unknown_secret_waits_and_warns_with_its_id(caplog: pytest.LogCaptureFixture):
    secret_id = "secret:cu0q1a6m0d2s7ah8ue1g"
    relation = _pg(
        {"endpoints": "db:5432", "secret-user": secret_id, "username": "u", "password": PASSWORD}
    )
    _, result = _run(relation)

    assert result is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(secret_id in message for message in warnings)
    _assert_no_password(caplog)


def test_secret_missing_a_key_waits_and_warns(caplog: pytest.LogCaptureFixture):
    secret = testing.Secret({"username": "relation-9", "tls": PASSWORD})
    relation = _pg({"endpoints": "db:5432", "secret-user": secret.id})
    _, result = _run(relation, secrets=(secret,))

    assert result is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(secret.id in message and "password" in message for message in warnings)
    _assert_no_password(caplog)


@pytest.mark.parametrize(
    ("endpoints", "host", "port"),
    [
        ("db.svc", "db.svc", 5432),
        ("db.svc:", "db.svc", 5432),
        ("10.1.1.1:6432", "10.1.1.1", 6432),
        ("first:5440,second:5441", "first", 5440),
        (" first , second:5441", "first", 5432),
        ("[fd00::1]:5439", "fd00::1", 5439),
        ("[fd00::1]", "fd00::1", 5432),
        ("fd00::1", "fd00::1", 5432),
    ],
    ids=[
        "no-port",
        "empty-port",
        "host-port",
        "multiple",
        "multiple-first-without-port",
        "ipv6-port",
        "ipv6-bracketed",
        "ipv6-bare",
    ],
)
def test_first_endpoint_gives_host_and_port(endpoints: str, host: str, port: int):
    relation = _pg({"endpoints": endpoints, "username": "u", "password": PASSWORD})
    _, result = _run(relation)

    assert result is not None
    assert result.backend == "postgresql"
    assert (result.host, result.port) == (host, port)


def test_database_config_repr_hides_password():
    relation = _pg({"endpoints": "db", "username": "u", "password": PASSWORD})
    _, result = _run(relation)

    assert result is not None
    assert PASSWORD not in repr(result)


# --- backend switch ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("previous", "new"), [("sqlite3", "postgresql"), ("postgresql", "sqlite3")]
)
def test_backend_switch_warns_no_migration(
    previous: str, new: str, caplog: pytest.LogCaptureFixture
):
    assert warn_on_backend_switch(previous, new) is True

    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "not migrated" in warnings[0]
    assert previous in warnings[0]
    assert new in warnings[0]


@pytest.mark.parametrize(
    ("previous", "new"), [(None, "sqlite3"), (None, "postgresql"), ("sqlite3", "sqlite3")]
)
def test_no_warning_without_a_switch(
    previous: str | None, new: str, caplog: pytest.LogCaptureFixture
):
    assert warn_on_backend_switch(previous, new) is False
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
