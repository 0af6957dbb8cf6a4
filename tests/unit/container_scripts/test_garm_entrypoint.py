"""Tests for the container entrypoint, run for real in a subprocess with a stub GARM."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest

from container_scripts import garm_entrypoint
from container_scripts.garm_entrypoint import (
    PROVIDER_REQUIRED_FIELDS,
    SECRET_ENV_VARS,
    Layout,
    main,
    toml_dumps,
)
from vocabulary.desired_state import ProviderConfig

SRC_DIR = Path(garm_entrypoint.__file__).resolve().parent
ENTRYPOINT = SRC_DIR / "garm_entrypoint.py"

JWT = "jwt-secret-value-3f9a1c"
PASSPHRASE = "PassPhrase0123456789abcdefghijkl"
DB_PASSWORD = "db-password-value-77"
OS_PASSWORD_A = 'os-pass-a"\\quoted'
OS_PASSWORD_B = "os-pass-b-value"
SECRET_VALUES = (JWT, PASSPHRASE, DB_PASSWORD, OS_PASSWORD_A, OS_PASSWORD_B)

# Runs main() with a temporary config dir, the stub binary and a provider shim path; the real
# os.execv is used.
RUNNER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    import garm_entrypoint
    layout = garm_entrypoint.Layout(
        config_dir=Path(sys.argv[2]), garm_binary=sys.argv[3], provider_shim=sys.argv[4]
    )
    sys.exit(garm_entrypoint.main(layout=layout))
    """
)
PROVIDER = "/usr/local/bin/garm-provider-openstack"

STUB = textwrap.dedent(
    """
    import json, os, sys
    with open(sys.argv[2], encoding="utf-8") as handle:
        config = handle.read()
    print(json.dumps({
        "argv": sys.argv[1:],
        "env_keys": sorted(os.environ),
        "ssl_cert_dir": os.environ.get("SSL_CERT_DIR"),
        "config": config,
    }))
    """
)


def provider(unit_name: str, **overrides: str) -> dict[str, str]:
    fields = {
        "unit_name": unit_name,
        "network": f"net-{unit_name}",
        "auth_url": "https://keystone.example:5000/v3",
        "username": f"user-{unit_name}",
        "password": OS_PASSWORD_B,
        "project_name": "project",
        "user_domain_name": "Default",
        "project_domain_name": "Default",
        "region_name": "RegionOne",
    }
    fields.update(overrides)
    return fields


PROVIDERS = [provider("cfg-b-0"), provider("cfg-a-1", password=OS_PASSWORD_A)]


def sqlite_env(providers: list[dict[str, str]] | None = None) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "GARM_JWT_SECRET": JWT,
        "GARM_PASSPHRASE": PASSPHRASE,
        "GARM_DB_BACKEND": "sqlite3",
        "GARM_SQLITE_DB_FILE": "/var/lib/garm/garm.db",
        "APP_BASE_URL": "http://garm.example",
        "GARM_CONFIG_VERSION": "0123456789ab",
        "GARM_PROVIDERS_JSON": json.dumps(PROVIDERS if providers is None else providers),
    }


def postgres_env() -> dict[str, str]:
    env = sqlite_env()
    del env["GARM_SQLITE_DB_FILE"]
    env.update(
        {
            "GARM_DB_BACKEND": "postgresql",
            "POSTGRESQL_DB_HOSTNAME": "10.1.2.3",
            "POSTGRESQL_DB_PORT": "5433",
            "POSTGRESQL_DB_USERNAME": "relation-user",
            "POSTGRESQL_DB_PASSWORD": DB_PASSWORD,
            "POSTGRESQL_DB_NAME": "garm",
            "POSTGRESQL_DB_SSLMODE": "prefer",
        }
    )
    return env


class Workspace:
    def __init__(self, root: Path) -> None:
        self.config_dir = root / "etc" / "garm"
        self.stub = root / "bin" / "garm"
        self.stub.parent.mkdir()
        self.stub.write_text(f"#!{sys.executable}\n{STUB}", encoding="utf-8")
        self.stub.chmod(0o755)
        # Only its presence matters here: the entrypoint checks the image has a shim.
        self.shim = root / "bin" / "garm-provider-openstack-shim"
        self.shim.write_text("#!/bin/false\n", encoding="utf-8")
        self.shim.chmod(0o755)

    def run(
        self, env: dict[str, str], shim: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        shim = str(self.shim) if shim is None else shim
        argv = [
            sys.executable,
            "-c",
            RUNNER,
            str(SRC_DIR),
            str(self.config_dir),
            str(self.stub),
            shim,
        ]
        return subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=60, check=False
        )

    def run_ok(self, env: dict[str, str]) -> dict[str, Any]:
        result = self.run(env)
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        return json.loads(result.stdout)

    @property
    def config_path(self) -> Path:
        return self.config_dir / "config.toml"


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def expected_provider_entry(
    config_dir: Path, unit: str, env_names: list[str], executable: str
) -> dict[str, Any]:
    external: dict[str, Any] = {
        "provider_executable": executable,
        "config_file": str(config_dir / f"provider-{unit}.toml"),
    }
    if env_names:
        external["environment_variables"] = env_names
    return {
        "name": unit,
        "provider_type": "external",
        "description": f"OpenStack provider {unit}",
        "external": external,
    }


def base_config(database: dict[str, Any]) -> dict[str, Any]:
    return {
        "default": {"enable_webhook_management": False},
        "logging": {"log_level": "info", "log_format": "text"},
        "metrics": {"enable": True, "disable_auth": True},
        "jwt_auth": {"secret": JWT, "time_to_live": "8760h"},
        "apiserver": {"bind": "0.0.0.0", "port": 8080, "use_tls": False},  # noqa: S104
        "database": database,
    }


def test_sqlite_config_and_exec(workspace: Workspace) -> None:
    output = workspace.run_ok(sqlite_env())

    assert output["argv"] == ["--config", str(workspace.config_path)]
    assert output["config"] == workspace.config_path.read_text(encoding="utf-8")
    expected = base_config(
        {
            "backend": "sqlite3",
            "passphrase": PASSPHRASE,
            "sqlite3": {"db_file": "/var/lib/garm/garm.db"},
        }
    )
    # Sorted by unit name, whatever the input order.
    shim = str(workspace.shim)
    expected["provider"] = [
        expected_provider_entry(workspace.config_dir, "cfg-a-1", [], shim),
        expected_provider_entry(workspace.config_dir, "cfg-b-0", [], shim),
    ]
    assert tomllib.loads(output["config"]) == expected


def _executables(config: dict[str, Any]) -> list[str]:
    return [p["external"]["provider_executable"] for p in config["provider"]]


def test_an_image_without_the_shim_runs_the_provider_with_a_warning(
    workspace: Workspace, tmp_path: Path
) -> None:
    missing = tmp_path / "bin" / "no-shim"
    result = workspace.run(sqlite_env(), shim=str(missing))

    assert result.returncode == 0, result.stderr
    (warning,) = result.stderr.splitlines()
    assert warning.startswith(f"garm-entrypoint: warning: {missing} is not in the image")
    assert not any(value in result.stderr for value in SECRET_VALUES)
    config = tomllib.loads(json.loads(result.stdout)["config"])
    assert _executables(config) == [PROVIDER, PROVIDER]


def test_no_shim_in_the_layout_runs_the_provider_quietly(workspace: Workspace) -> None:
    result = workspace.run(sqlite_env(), shim="")

    assert (result.returncode, result.stderr) == (0, "")
    config = tomllib.loads(json.loads(result.stdout)["config"])
    assert _executables(config) == [PROVIDER, PROVIDER]


def test_postgresql_config(workspace: Workspace) -> None:
    output = workspace.run_ok(postgres_env())

    config = tomllib.loads(output["config"])
    assert config["database"] == {
        "backend": "postgresql",
        "passphrase": PASSPHRASE,
        "postgresql": {
            "hostname": "10.1.2.3",
            "port": 5433,
            "username": "relation-user",
            "password": DB_PASSWORD,
            "database": "garm",
            "sslmode": "prefer",
        },
    }
    assert "POSTGRESQL_DB_PASSWORD" not in output["env_keys"]
    assert "POSTGRESQL_DB_USERNAME" in output["env_keys"]


def test_postgresql_defaults_port_name_and_sslmode(workspace: Workspace) -> None:
    env = postgres_env()
    for name in ("POSTGRESQL_DB_PORT", "POSTGRESQL_DB_NAME", "POSTGRESQL_DB_SSLMODE"):
        del env[name]

    config = tomllib.loads(workspace.run_ok(env)["config"])

    settings = config["database"]["postgresql"]
    assert (settings["port"], settings["database"], settings["sslmode"]) == (
        5432,
        "garm",
        "prefer",
    )


def test_provider_files(workspace: Workspace) -> None:
    workspace.run_ok(sqlite_env())

    config_dir = workspace.config_dir
    assert mode(config_dir) == 0o700
    names = sorted(path.name for path in config_dir.iterdir())
    assert names == [
        "clouds-cfg-a-1.yaml",
        "clouds-cfg-b-0.yaml",
        "config.toml",
        "provider-cfg-a-1.toml",
        "provider-cfg-b-0.toml",
    ]
    for name in names:
        assert mode(config_dir / name) == 0o600, name

    provider_toml = tomllib.loads((config_dir / "provider-cfg-a-1.toml").read_text("utf-8"))
    assert provider_toml == {
        "cloud": "cfg-a-1",
        "network_id": "net-cfg-a-1",
        "use_config_drive": True,
        "credentials": {"clouds": str(config_dir / "clouds-cfg-a-1.yaml")},
    }
    clouds = json.loads((config_dir / "clouds-cfg-a-1.yaml").read_text("utf-8"))
    assert clouds == {
        "clouds": {
            "cfg-a-1": {
                "auth": {
                    "auth_url": "https://keystone.example:5000/v3",
                    "username": "user-cfg-a-1",
                    "password": OS_PASSWORD_A,
                    "project_name": "project",
                    "user_domain_name": "Default",
                    "project_domain_name": "Default",
                },
                "region_name": "RegionOne",
                "identity_api_version": 3,
            }
        }
    }


def test_no_providers_renders_no_provider_table(workspace: Workspace) -> None:
    config = tomllib.loads(workspace.run_ok(sqlite_env([]))["config"])

    assert "provider" not in config
    assert sorted(p.name for p in workspace.config_dir.iterdir()) == ["config.toml"]


def test_stale_provider_files_removed_and_modes_tightened(workspace: Workspace) -> None:
    config_dir = workspace.config_dir
    config_dir.mkdir(parents=True)
    config_dir.chmod(0o755)
    for name in ("provider-old-0.toml", "clouds-old-0.yaml", "provider-cfg-b-0.toml", "notes.txt"):
        (config_dir / name).write_text("old\n", encoding="utf-8")
    (config_dir / "config.toml").write_text("old\n", encoding="utf-8")
    (config_dir / "config.toml").chmod(0o644)

    workspace.run_ok(sqlite_env())

    assert not (config_dir / "provider-old-0.toml").exists()
    assert not (config_dir / "clouds-old-0.yaml").exists()
    assert (config_dir / "notes.txt").read_text("utf-8") == "old\n"
    assert "network_id" in (config_dir / "provider-cfg-b-0.toml").read_text("utf-8")
    assert mode(config_dir) == 0o700
    assert mode(config_dir / "config.toml") == 0o600
    assert not [p.name for p in config_dir.iterdir() if p.name.endswith(".tmp")]


def test_secrets_scrubbed_and_proxies_passed(workspace: Workspace) -> None:
    env = postgres_env()
    env.update({"HTTP_PROXY": "http://proxy:3128", "no_proxy": "10.0.0.0/8,localhost"})

    output = workspace.run_ok(env)

    keys = set(output["env_keys"])
    assert not keys & set(SECRET_ENV_VARS)
    assert {"HTTP_PROXY", "no_proxy", "GARM_DB_BACKEND", "APP_BASE_URL"} <= keys
    config = tomllib.loads(output["config"])
    assert config["proxy"] == {
        "http_proxy": "http://proxy:3128",
        "no_proxy": "10.0.0.0/8,localhost",
    }
    for entry in config["provider"]:
        assert entry["external"]["environment_variables"] == ["HTTP_PROXY", "no_proxy"]


def test_upper_case_proxy_wins_over_lower_case(workspace: Workspace) -> None:
    env = sqlite_env()
    env.update({"HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:2"})

    config = tomllib.loads(workspace.run_ok(env)["config"])

    assert config["proxy"] == {"https_proxy": "http://upper:1"}
    assert config["provider"][0]["external"]["environment_variables"] == [
        "HTTPS_PROXY",
        "https_proxy",
    ]


def test_no_proxy_means_no_proxy_table_nor_environment_variables(workspace: Workspace) -> None:
    config = tomllib.loads(workspace.run_ok(sqlite_env())["config"])

    assert "proxy" not in config
    assert all("environment_variables" not in p["external"] for p in config["provider"])


def _without(name: str) -> dict[str, str]:
    env = sqlite_env()
    del env[name]
    return env


def _with(base: dict[str, str], **changes: str) -> dict[str, str]:
    return {**base, **changes}


def _providers(entries: Any) -> dict[str, str]:
    return _with(sqlite_env(), GARM_PROVIDERS_JSON=json.dumps(entries))


HOSTILE_UNIT_NAMES = ["../etc-0", "cfg/a-0", "Cfg-a-0", "cfg-a", "cfg-a-0\n", "-cfg-0", "cfg a-0"]

INVALID_CASES: list[tuple[str, dict[str, str], str]] = [
    *[
        (f"missing {name}", _without(name), name)
        for name in ("GARM_PROVIDERS_JSON", "GARM_JWT_SECRET", "GARM_PASSPHRASE")
    ],
    ("missing backend", _without("GARM_DB_BACKEND"), "GARM_DB_BACKEND"),
    ("missing base url", _without("APP_BASE_URL"), "APP_BASE_URL"),
    ("empty jwt", _with(sqlite_env(), GARM_JWT_SECRET=""), "GARM_JWT_SECRET"),
    ("short passphrase", _with(sqlite_env(), GARM_PASSPHRASE=PASSPHRASE[:31]), "GARM_PASSPHRASE"),
    ("long passphrase", _with(sqlite_env(), GARM_PASSPHRASE=PASSPHRASE + "x"), "GARM_PASSPHRASE"),
    ("unknown backend", _with(sqlite_env(), GARM_DB_BACKEND="mysql"), "GARM_DB_BACKEND"),
    ("missing sqlite file", _without("GARM_SQLITE_DB_FILE"), "GARM_SQLITE_DB_FILE"),
    (
        "relative sqlite file",
        _with(sqlite_env(), GARM_SQLITE_DB_FILE="garm.db"),
        "GARM_SQLITE_DB_FILE",
    ),
    *[
        (f"postgres missing {name}", {k: v for k, v in postgres_env().items() if k != name}, name)
        for name in ("POSTGRESQL_DB_HOSTNAME", "POSTGRESQL_DB_USERNAME", "POSTGRESQL_DB_PASSWORD")
    ],
    *[
        (f"postgres port {port!r}", _with(postgres_env(), POSTGRESQL_DB_PORT=port), "PORT")
        for port in ("abc", "0", "65536", "-1", "54 32", "٣")
    ],
    ("bad json", _with(sqlite_env(), GARM_PROVIDERS_JSON="[{"), "GARM_PROVIDERS_JSON"),
    ("CA bundles not JSON", _with(sqlite_env(), GARM_GITHUB_CA_BUNDLES="{"), "CA_BUNDLES"),
    ("CA bundles a list", _with(sqlite_env(), GARM_GITHUB_CA_BUNDLES="[]"), "JSON object"),
    (
        "CA bundle without a certificate",
        _with(sqlite_env(), GARM_GITHUB_CA_BUNDLES='{"ghes.example.com": "not PEM"}'),
        "'ghes.example.com' must hold PEM certificates",
    ),
    ("json object", _providers({"unit_name": "cfg-0"}), "list"),
    ("entry not object", _providers(["cfg-0"]), "entry 0"),
    (
        "missing field",
        _providers([{k: v for k, v in provider("c-0").items() if k != "network"}]),
        "network",
    ),
    ("empty field", _providers([provider("c-0", region_name="")]), "region_name"),
    ("non-string field", _providers([{**provider("c-0"), "username": 7}]), "username"),
    *[(f"unit {n!r}", _providers([provider(n)]), "unit_name") for n in HOSTILE_UNIT_NAMES],
    (
        "newline in password",
        _providers([provider("c-0", password=OS_PASSWORD_B + "\nextra = 1")]),
        "password",
    ),
    ("carriage return in network", _providers([provider("c-0", network="n\r1")]), "network"),
    ("line break in extra key", _providers([{**provider("c-0"), "note": "a\nb"}]), "note"),
    (
        "duplicate unit",
        _providers([provider("c-0"), provider("d-1"), provider("c-0")]),
        "duplicate",
    ),
]


@pytest.mark.parametrize(
    ("env", "needle"),
    [pytest.param(env, needle, id=name) for name, env, needle in INVALID_CASES],
)
def test_invalid_environment_exits_2(
    workspace: Workspace, env: dict[str, str], needle: str
) -> None:
    result = workspace.run(env)

    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]
    for value in (*SECRET_VALUES, "extra = 1", "mysql"):
        assert value not in result.stderr
    assert not workspace.config_dir.exists()


def test_script_runs_as_main_and_rejects_an_empty_environment() -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}

    result = subprocess.run(
        [sys.executable, str(ENTRYPOINT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "GARM_JWT_SECRET" in result.stderr


def test_main_execs_garm_with_scrubbed_environment(tmp_path: Path) -> None:
    environ = {**postgres_env(), "HTTPS_PROXY": "http://proxy:3128"}
    calls: list[tuple[str, list[str], dict[str, str]]] = []

    def fake_execv(path: str, argv: list[str]) -> None:
        calls.append((path, argv, dict(environ)))

    layout = Layout(config_dir=tmp_path / "garm", garm_binary="/opt/garm")
    rc = main(environ, layout=layout, execv=fake_execv)

    assert rc == 0
    assert len(calls) == 1
    path, argv, seen = calls[0]
    assert path == "/opt/garm"
    assert argv == ["garm", "--config", str(tmp_path / "garm" / "config.toml")]
    assert not set(seen) & set(SECRET_ENV_VARS)
    assert seen["HTTPS_PROXY"] == "http://proxy:3128"
    assert seen["POSTGRESQL_DB_USERNAME"] == "relation-user"


def test_missing_garm_binary_is_reported(workspace: Workspace, tmp_path: Path) -> None:
    workspace.stub = tmp_path / "bin" / "absent"

    result = workspace.run(sqlite_env())

    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1
    assert str(workspace.stub) in result.stderr
    assert not any(value in result.stderr for value in SECRET_VALUES)


def test_production_defaults_are_fixed_paths() -> None:
    assert main.__kwdefaults__ == {"layout": garm_entrypoint.PRODUCTION_LAYOUT, "execv": os.execv}
    production = Layout(
        config_dir=Path("/etc/garm"),
        garm_binary="/usr/local/bin/garm",
        provider_binary=PROVIDER,
        provider_shim="/usr/local/bin/garm-provider-openstack-shim",
        bind_address="0.0.0.0",  # noqa: S104
        port=8080,
    )
    assert production == garm_entrypoint.PRODUCTION_LAYOUT
    assert garm_entrypoint.CONFIG_FILE == "/etc/garm/config.toml"


def test_provider_config_fields_match_entrypoint() -> None:
    config = ProviderConfig(**{name: f"{name}-value" for name in PROVIDER_REQUIRED_FIELDS})

    assert set(config.as_dict()) == set(PROVIDER_REQUIRED_FIELDS)
    assert len(PROVIDER_REQUIRED_FIELDS) == len(set(PROVIDER_REQUIRED_FIELDS))


HOSTILE_STRINGS = [
    "",
    'say "hi"',
    "back\\slash\\",
    "line\nbreak\r\nwindows",
    "tab\there",
    "ctrl\x01\x02\x1f\x7f\x00end",
    "unicodé ☃ 日本語 😀",
    "\\u0041 not an escape",
    "'''triple''' \"\"\"quotes\"\"\"",
    "# not a comment",
    "= [table] ]]",
]


@pytest.mark.parametrize("value", HOSTILE_STRINGS)
def test_toml_string_round_trip(value: str) -> None:
    document = {"key": value, "list": [value, value], "table": {value or "empty": value}}

    assert tomllib.loads(toml_dumps(document)) == document


def test_toml_document_round_trip() -> None:
    document: dict[str, Any] = {
        "title": "top",
        "count": 3,
        "negative": -42,
        "flag": False,
        "names": ["a", 'b"', "c\n"],
        "empty": [],
        "quoted key": "x",
        "dotted.key": "y",
        "database": {
            "backend": "postgresql",
            "postgresql": {"port": 5432, "password": 'p"\\\n'},
        },
        "empty_table": {},
        "provider": [
            {"name": "one", "external": {"environment_variables": ["HTTP_PROXY"]}},
            {"name": "two", "external": {"config_file": "/etc/garm/x.toml"}, "tags": []},
        ],
    }

    text = toml_dumps(document)

    assert tomllib.loads(text) == document
    assert text.endswith("\n")


@pytest.mark.parametrize("value", [1.5, None, [1, 2], ["a", 1], {"a"}])
def test_toml_rejects_unsupported_values(value: object) -> None:
    with pytest.raises(TypeError):
        toml_dumps({"key": value})


def test_toml_rejects_lone_surrogate() -> None:
    with pytest.raises(ValueError, match="surrogate"):
        toml_dumps({"key": "bad\ud800"})


def test_a_provider_list_longer_than_one_environment_string_still_starts_garm(
    workspace: Workspace,
) -> None:
    # 600 providers are about 160 KiB of JSON: one variable that long cannot be exec'd.
    providers = [provider(f"cfg-{n}-0") for n in range(600)]
    text = json.dumps(providers, sort_keys=True, separators=(",", ":"))
    assert len(text) > 128 * 1024
    env = {**sqlite_env(), **garm_entrypoint.split_providers_json(text)}
    assert max(len(value) for value in env.values()) <= garm_entrypoint.PROVIDERS_JSON_PIECE
    assert garm_entrypoint.joined_providers_json(env) == text

    output = workspace.run_ok(env)

    assert output["config"].count("[[provider]]") == 600
    assert not [key for key in output["env_keys"] if key.startswith("GARM_PROVIDERS_JSON")]


def test_a_short_provider_list_stays_in_one_variable() -> None:
    assert garm_entrypoint.split_providers_json("[]") == {"GARM_PROVIDERS_JSON": "[]"}
    assert garm_entrypoint.joined_providers_json({"GARM_PROVIDERS_JSON": "[]"}) == "[]"


def pem(label: str) -> str:
    """A PEM-shaped block: the entrypoint only places bundles, the charm checks them."""
    return f"-----BEGIN CERTIFICATE-----\n{label}\n-----END CERTIFICATE-----"


def test_ca_bundles_are_written_where_ssl_cert_dir_points_garm(workspace: Workspace) -> None:
    # Two endpoints, one with a bundle long enough to be cut into pieces.
    bundles = {"b.example.com": pem("B" * 120_000), "a.example.com": pem("A")}
    text = json.dumps(bundles)
    env = {**sqlite_env(), **garm_entrypoint.split_variable("GARM_GITHUB_CA_BUNDLES", text)}
    assert "GARM_GITHUB_CA_BUNDLES_1" in env

    output = workspace.run_ok(env)

    directory = workspace.config_dir / "github-ca"
    assert output["ssl_cert_dir"] == f"/etc/ssl/certs:/etc/pki/tls/certs:{directory}"
    written = directory / "endpoints.pem"
    assert written.read_text() == pem("A") + "\n" + pem("B" * 120_000) + "\n"
    assert (mode(directory), mode(written)) == (0o700, 0o600)
    assert not [k for k in output["env_keys"] if k.startswith("GARM_GITHUB_CA_BUNDLES")]

    # Without bundles GARM starts with Go's own stores, and the old file is gone.
    output = workspace.run_ok(sqlite_env())
    assert output["ssl_cert_dir"] is None
    assert not written.exists()


def test_an_ssl_cert_dir_already_set_is_kept_first(workspace: Workspace) -> None:
    env = {**sqlite_env(), "SSL_CERT_DIR": "/opt/certs", "GARM_GITHUB_CA_BUNDLES": "{}"}
    assert workspace.run_ok(env)["ssl_cert_dir"] == "/opt/certs"
    env["GARM_GITHUB_CA_BUNDLES"] = json.dumps({"ghes.example.com": pem("A")})
    output = workspace.run_ok(env)
    assert output["ssl_cert_dir"] == f"/opt/certs:{workspace.config_dir / 'github-ca'}"
