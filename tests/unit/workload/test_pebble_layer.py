"""Tests for the workload builders: environment, Pebble layer and entrypoint push."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import ops
import pytest
from ops import testing

from container_scripts import garm_entrypoint
from vocabulary import runner_options
from workload import pebble_layer
from workload.pebble_layer import (
    DatabaseConfig,
    apply_workload,
    build_environment,
    build_layer,
    config_version,
    entrypoint_source,
    proxy_environment,
)

PROVIDERS_JSON = '[{"unit_name":"cfg-0"}]'
JWT = "j" * 64
PASSPHRASE = "p" * 32


def env_for(database: DatabaseConfig, **overrides: object) -> dict[str, str]:
    arguments: dict[str, object] = {
        "providers_json": PROVIDERS_JSON,
        "jwt_secret": JWT,
        "passphrase": PASSPHRASE,
        "database": database,
        "app_base_url": "http://garm.example/",
        "proxy_env": {},
        "config_version": "abcdef012345",
        "ca_bundles": {},
    }
    arguments.update(overrides)
    return build_environment(**arguments)  # type: ignore[arg-type]


POSTGRES = DatabaseConfig(
    backend="postgresql", host="10.0.0.5", port=6432, username="u", password="secret-pw"
)


def test_sqlite_environment() -> None:
    assert env_for(DatabaseConfig.sqlite()) == {
        "GARM_PROVIDERS_JSON": PROVIDERS_JSON,
        "GARM_JWT_SECRET": JWT,
        "GARM_PASSPHRASE": PASSPHRASE,
        "GARM_DB_BACKEND": "sqlite3",
        "GARM_SQLITE_DB_FILE": "/var/lib/garm/garm.db",
        "APP_BASE_URL": "http://garm.example",
        "GARM_CONFIG_VERSION": "abcdef012345",
    }


def test_postgresql_environment() -> None:
    env = env_for(POSTGRES)

    assert env == {
        "GARM_PROVIDERS_JSON": PROVIDERS_JSON,
        "GARM_JWT_SECRET": JWT,
        "GARM_PASSPHRASE": PASSPHRASE,
        "GARM_DB_BACKEND": "postgresql",
        "POSTGRESQL_DB_HOSTNAME": "10.0.0.5",
        "POSTGRESQL_DB_PORT": "6432",
        "POSTGRESQL_DB_USERNAME": "u",
        "POSTGRESQL_DB_PASSWORD": "secret-pw",
        "POSTGRESQL_DB_NAME": "garm",
        "POSTGRESQL_DB_SSLMODE": "prefer",
        "APP_BASE_URL": "http://garm.example",
        "GARM_CONFIG_VERSION": "abcdef012345",
    }


def test_charm_side_copies_match_the_entrypoint() -> None:
    # The entrypoint runs in the container alone, so it keeps its own copy of these values.
    assert pebble_layer.GARM_PORT == garm_entrypoint.GARM_PORT
    assert garm_entrypoint.PRODUCTION_LAYOUT.port == pebble_layer.GARM_PORT
    assert runner_options.MAX_PORT == garm_entrypoint.MAX_PORT
    assert pebble_layer.DEFAULT_POSTGRESQL_PORT == garm_entrypoint.DEFAULT_POSTGRESQL_PORT
    assert pebble_layer.DEFAULT_POSTGRESQL_DB_NAME == garm_entrypoint.DEFAULT_POSTGRESQL_DB_NAME
    assert pebble_layer.DEFAULT_POSTGRESQL_SSLMODE == garm_entrypoint.DEFAULT_POSTGRESQL_SSLMODE


def test_database_config_defaults_and_repr() -> None:
    sqlite = DatabaseConfig.sqlite()
    assert (sqlite.backend, sqlite.port, sqlite.name, sqlite.sslmode) == (
        "sqlite3",
        5432,
        "garm",
        "prefer",
    )
    assert "secret-pw" not in repr(POSTGRES)
    with pytest.raises(ValueError, match="backend"):
        DatabaseConfig(backend="mysql")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://garm.example/", "http://garm.example"),
        ("http://garm.example//", "http://garm.example"),
        ("http://10.0.0.1:8080/model-garm/", "http://10.0.0.1:8080/model-garm"),
        ("http://garm.example", "http://garm.example"),
    ],
)
def test_app_base_url_without_trailing_slash(url: str, expected: str) -> None:
    assert env_for(DatabaseConfig.sqlite(), app_base_url=url)["APP_BASE_URL"] == expected


def test_proxy_environment_sets_both_cases() -> None:
    juju_env = {
        "JUJU_CHARM_HTTP_PROXY": "http://proxy:3128",
        "JUJU_CHARM_HTTPS_PROXY": "http://sproxy:3129",
        "JUJU_CHARM_NO_PROXY": "127.0.0.1,10.0.0.0/8",
        "JUJU_UNIT_NAME": "garm/0",
    }

    assert proxy_environment(juju_env) == {
        "HTTP_PROXY": "http://proxy:3128",
        "http_proxy": "http://proxy:3128",
        "HTTPS_PROXY": "http://sproxy:3129",
        "https_proxy": "http://sproxy:3129",
        "NO_PROXY": "127.0.0.1,10.0.0.0/8",
        "no_proxy": "127.0.0.1,10.0.0.0/8",
    }


def test_proxy_environment_only_set_ones() -> None:
    juju_env = {"JUJU_CHARM_HTTPS_PROXY": "http://sproxy:3129", "JUJU_CHARM_HTTP_PROXY": ""}

    assert proxy_environment(juju_env) == {
        "HTTPS_PROXY": "http://sproxy:3129",
        "https_proxy": "http://sproxy:3129",
    }
    assert proxy_environment({}) == {}


def test_proxy_names_are_those_the_entrypoint_forwards() -> None:
    all_set = dict.fromkeys(pebble_layer.JUJU_PROXY_ENV_VARS, "x")

    assert set(proxy_environment(all_set)) == set(garm_entrypoint.PROXY_ENV_VARS)


def test_proxy_variables_reach_and_leave_the_environment() -> None:
    with_proxy = env_for(
        DatabaseConfig.sqlite(),
        proxy_env=proxy_environment({"JUJU_CHARM_NO_PROXY": "localhost"}),
    )
    without_proxy = env_for(DatabaseConfig.sqlite(), proxy_env=proxy_environment({}))

    assert with_proxy["NO_PROXY"] == with_proxy["no_proxy"] == "localhost"
    assert "NO_PROXY" not in without_proxy
    assert "no_proxy" not in without_proxy


def test_layer_shape() -> None:
    env = env_for(DatabaseConfig.sqlite())

    assert build_layer(env) == {
        "summary": "garm",
        "services": {
            "garm": {
                "override": "replace",
                "summary": "GARM",
                "startup": "enabled",
                "command": "python3 /opt/garm-charm/garm_entrypoint.py",
                "environment": env,
                "on-check-failure": {"garm-alive": "restart"},
            }
        },
        "checks": {
            "garm-alive": {
                "override": "replace",
                "level": "alive",
                "startup": "enabled",
                "period": "5s",
                "http": {"url": "http://127.0.0.1:8080/metrics"},
            }
        },
    }


def test_identical_inputs_give_identical_layers() -> None:
    first = build_layer(env_for(POSTGRES, proxy_env={"HTTP_PROXY": "a", "http_proxy": "a"}))
    # Same values, built again and with the proxy mapping in another insertion order.
    second = build_layer(env_for(POSTGRES, proxy_env={"http_proxy": "a", "HTTP_PROXY": "a"}))

    assert json.dumps(first) == json.dumps(second)
    assert ops.pebble.Layer(first).to_yaml() == ops.pebble.Layer(second).to_yaml()


def test_any_value_change_changes_the_layer() -> None:
    base = json.dumps(build_layer(env_for(POSTGRES)))
    changed = [
        env_for(POSTGRES, passphrase="q" * 32),
        env_for(POSTGRES, providers_json="[]"),
        env_for(POSTGRES, config_version="000000000000"),
        env_for(DatabaseConfig.sqlite()),
        env_for(POSTGRES, proxy_env={"NO_PROXY": "x", "no_proxy": "x"}),
    ]

    for env in changed:
        assert json.dumps(build_layer(env)) != base


def test_entrypoint_source_is_the_shipped_file() -> None:
    source = entrypoint_source()

    assert source == Path(garm_entrypoint.__file__).read_text(encoding="utf-8")
    assert "def main(" in source


def test_config_version() -> None:
    source = entrypoint_source()

    version = config_version(source)

    assert version == hashlib.sha256(source.encode()).hexdigest()[:12]
    assert len(version) == 12
    assert config_version(source) == version
    assert config_version(source + "\n# changed\n") != version


class _WorkloadCharm(ops.CharmBase):
    """A minimal charm that only applies the workload, to drive apply_workload through Pebble."""

    def __init__(self, framework: ops.Framework) -> None:
        super().__init__(framework)
        framework.observe(self.on["garm"].pebble_ready, self._on_ready)

    def _on_ready(self, event: ops.PebbleReadyEvent) -> None:
        env = env_for(DatabaseConfig.sqlite())
        apply_workload(event.workload, build_layer(env), "print('entrypoint')\n")


META = {"name": "garm-workload-test", "containers": {"garm": {}}}


def _run(container: testing.Container) -> testing.State:
    ctx = testing.Context(_WorkloadCharm, meta=META)
    return ctx.run(ctx.on.pebble_ready(container), testing.State(containers={container}))


def test_apply_workload_pushes_entrypoint_and_plans_service(tmp_path: Path) -> None:
    container = testing.Container(
        "garm",
        can_connect=True,
        mounts={"charm": testing.Mount(location="/opt/garm-charm", source=tmp_path)},
    )

    state = _run(container)

    pushed = tmp_path / "garm_entrypoint.py"
    assert pushed.read_text(encoding="utf-8") == "print('entrypoint')\n"
    out = state.get_container("garm")
    service = out.plan.services["garm"]
    assert service.command == "python3 /opt/garm-charm/garm_entrypoint.py"
    assert service.environment["GARM_DB_BACKEND"] == "sqlite3"
    assert out.plan.checks["garm-alive"].level == ops.pebble.CheckLevel.ALIVE
    assert out.service_statuses["garm"] == ops.pebble.ServiceStatus.ACTIVE


def test_apply_workload_replaces_a_different_entrypoint(tmp_path: Path) -> None:
    (tmp_path / "garm_entrypoint.py").write_text("old\n", encoding="utf-8")
    container = testing.Container(
        "garm",
        can_connect=True,
        mounts={"charm": testing.Mount(location="/opt/garm-charm", source=tmp_path)},
    )

    _run(container)

    assert (tmp_path / "garm_entrypoint.py").read_text(encoding="utf-8") == "print('entrypoint')\n"


def test_apply_workload_leaves_an_identical_entrypoint_alone(tmp_path: Path) -> None:
    pushed = tmp_path / "garm_entrypoint.py"
    pushed.write_text("print('entrypoint')\n", encoding="utf-8")
    pushed.chmod(0o600)
    container = testing.Container(
        "garm",
        can_connect=True,
        mounts={"charm": testing.Mount(location="/opt/garm-charm", source=tmp_path)},
    )

    _run(container)

    # A push would have set 0755; the untouched file keeps its mode.
    assert pushed.stat().st_mode & 0o777 == 0o600
