#!/usr/bin/env python3
"""Container entrypoint: render GARM's configuration from the environment, then exec GARM.

Pebble runs this file as ``python3 /opt/garm-charm/garm_entrypoint.py``. It is pushed into the
container on its own, so it uses the standard library only and defines every value it needs.
The charm imports from here only the environment it writes for this script (the variable
names, the values of ``GARM_DB_BACKEND``, how the provider list is cut into variables) and
:data:`UNIT_NAME_PATTERN`; values both sides need otherwise (GARM's port, the highest port, the
PostgreSQL defaults, the provider fields) have a charm-side copy that a unit test pins equal.

Steps, in order: validate the environment, parse the provider list, pick the provider
executable (the image's provider shim, or the provider itself on an image without the shim),
prepare ``/etc/garm`` (mode 0700) and remove provider files of providers that are gone, write
every file atomically with mode 0600, write the GitHub Enterprise Server CA bundles where
``SSL_CERT_DIR`` then points GARM (GARM's Actions client reads only the process's trust store),
scrub the secret variables and the bundles' variables from the environment and exec ``garm``.

A validation failure prints one line on stderr naming the variable or field (never its value)
and exits with code 2.

Tests call :func:`main` with another :class:`Layout` (configuration directory, GARM and
provider binaries, listen address); the production path (``python3 garm_entrypoint.py``)
always uses :data:`PRODUCTION_LAYOUT`, so no environment variable can redirect where files are
written or what is executed.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn, cast

# Environment variables set by the charm's Pebble layer.
GARM_PROVIDERS_JSON = "GARM_PROVIDERS_JSON"
GARM_JWT_SECRET = "GARM_JWT_SECRET"  # noqa: S105 (a variable name, not a secret)
GARM_PASSPHRASE = "GARM_PASSPHRASE"  # noqa: S105 (a variable name)
GARM_DB_BACKEND = "GARM_DB_BACKEND"
GARM_SQLITE_DB_FILE = "GARM_SQLITE_DB_FILE"
POSTGRESQL_DB_HOSTNAME = "POSTGRESQL_DB_HOSTNAME"
POSTGRESQL_DB_PORT = "POSTGRESQL_DB_PORT"
POSTGRESQL_DB_USERNAME = "POSTGRESQL_DB_USERNAME"
POSTGRESQL_DB_PASSWORD = "POSTGRESQL_DB_PASSWORD"  # noqa: S105 (a variable name)
POSTGRESQL_DB_NAME = "POSTGRESQL_DB_NAME"
POSTGRESQL_DB_SSLMODE = "POSTGRESQL_DB_SSLMODE"
APP_BASE_URL = "APP_BASE_URL"
GARM_CONFIG_VERSION = "GARM_CONFIG_VERSION"
# The CA bundles of the GitHub Enterprise Server endpoints, a JSON object of endpoint name to
# PEM text, cut into pieces like the provider list. Absent when no endpoint has a bundle.
GARM_GITHUB_CA_BUNDLES = "GARM_GITHUB_CA_BUNDLES"

# The argument of a unit's stand-by layer: the entrypoint then exits without starting GARM.
STAND_BY_FLAG = "--stand-by"

BACKEND_SQLITE = "sqlite3"
BACKEND_POSTGRESQL = "postgresql"
# Applied when a variable is empty; the charm's copies are in its workload module.
DEFAULT_POSTGRESQL_PORT = 5432
DEFAULT_POSTGRESQL_DB_NAME = "garm"
DEFAULT_POSTGRESQL_SSLMODE = "prefer"
PASSPHRASE_LENGTH = 32

# Linux refuses to start a process when one environment string is longer than 128 KiB
# (MAX_ARG_STRLEN), which a list of about 490 providers reaches. The charm therefore cuts a long
# JSON value into pieces of at most this many characters (the JSON is ASCII): the first in
# the variable itself (GARM_PROVIDERS_JSON), the next in GARM_PROVIDERS_JSON_1, _2, ...
PROVIDERS_JSON_PIECE = 96 * 1024
# Cut into pieces that way.
PIECED_ENV_VARS = (GARM_PROVIDERS_JSON, GARM_GITHUB_CA_BUNDLES)

REQUIRED_ENV_VARS = (
    GARM_JWT_SECRET,
    GARM_PASSPHRASE,
    GARM_DB_BACKEND,
    APP_BASE_URL,
    GARM_PROVIDERS_JSON,
)
# Removed from the environment before exec so GARM and its provider children never see them.
SECRET_ENV_VARS = (
    GARM_PROVIDERS_JSON,
    GARM_JWT_SECRET,
    GARM_PASSPHRASE,
    POSTGRESQL_DB_PASSWORD,
)
# GARM's Actions client (the scale sets' GitHub Actions service) trusts only the process's CA
# store, not an endpoint's bundle: the bundles are written to a directory GARM is pointed at
# with SSL_CERT_DIR, which Go reads as a list replacing its default directories (kept first).
SSL_CERT_DIR = "SSL_CERT_DIR"
GO_DEFAULT_CERT_DIRS = ("/etc/ssl/certs", "/etc/pki/tls/certs")
GITHUB_CA_DIR_NAME = "github-ca"
GITHUB_CA_FILE_NAME = "endpoints.pem"
PROXY_ENV_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")

PROVIDER_REQUIRED_FIELDS = (
    "unit_name",
    "network",
    "auth_url",
    "username",
    "password",
    "project_name",
    "user_domain_name",
    "project_domain_name",
    "region_name",
)
# The one definition of a safe provider (configurator unit) name: the charm validates with
# this same pattern before publishing a provider, and the entrypoint checks it again here
# because the name becomes a file path. Used with fullmatch, so a trailing newline cannot slip
# past the ``$``.
UNIT_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9-]*-[0-9]+$")
# The highest TCP port (the charm's copy is in its runner_options module).
MAX_PORT = 65535

CONFIG_DIR = "/etc/garm"
CONFIG_FILE_NAME = "config.toml"
CONFIG_FILE = f"{CONFIG_DIR}/{CONFIG_FILE_NAME}"
CONFIG_DIR_PATH = Path(CONFIG_DIR)
GARM_BINARY = "/usr/local/bin/garm"
PROVIDER_BINARY = "/usr/local/bin/garm-provider-openstack"
# What GARM runs as its provider: the image's shim (src/container_scripts/provider_shim.py),
# which execs PROVIDER_BINARY with a pool ID Nova accepts in a server tag (ADR 0008).
PROVIDER_SHIM = "/usr/local/bin/garm-provider-openstack-shim"
# GARM's API port (the charm's copy, for ports, ingress and metrics, is in its workload module).
GARM_PORT = 8080
# Inside the pod GARM must be reachable through the Kubernetes service, so it listens on every
# interface; tests override this to stay on loopback.
GARM_BIND_ADDRESS = "0.0.0.0"  # noqa: S104

DIR_MODE = 0o700
FILE_MODE = 0o600
EXIT_INVALID = 2
EXIT_FAILED = 1

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SIMPLE_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


@dataclass(frozen=True)
class Layout:
    """Where the configuration goes, what is executed and where GARM listens.

    Production always uses :data:`PRODUCTION_LAYOUT`; tests pass another one so that a real GARM
    runs from a temporary directory, on loopback, with a stand-in provider.

    ``provider_shim`` is what GARM runs as the provider; the shim execs the provider beside it,
    which must be ``provider_binary``. An empty ``provider_shim`` makes GARM run
    ``provider_binary`` itself.
    """

    config_dir: Path = CONFIG_DIR_PATH
    garm_binary: str = GARM_BINARY
    provider_binary: str = PROVIDER_BINARY
    provider_shim: str = PROVIDER_SHIM
    bind_address: str = GARM_BIND_ADDRESS
    port: int = GARM_PORT


PRODUCTION_LAYOUT = Layout()


class EntrypointError(Exception):
    """The environment cannot be turned into a GARM configuration.

    The message names the variable or field at fault and never carries its value.
    """


# --------------------------------------------------------------------------- TOML writer


def toml_string(value: str) -> str:
    """Render a TOML basic string, escaping backslash, quote and every control character.

    Args:
        value: any text; lone surrogates are refused because TOML cannot carry them.

    Returns:
        The quoted string.

    Raises:
        ValueError: the text holds a lone surrogate.
    """
    out: list[str] = ['"']
    for char in value:
        code = ord(char)
        if char in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[char])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        elif 0xD800 <= code <= 0xDFFF:
            raise ValueError("TOML strings cannot hold lone surrogates")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else toml_string(key)


def _toml_value(value: object) -> str:
    # bool first: it is a subclass of int.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return toml_string(value)
    if _is_string_list(value):
        items = cast("list[str]", value)
        return "[" + ", ".join(toml_string(item) for item in items) + "]"
    raise TypeError(f"cannot write a {type(value).__name__} value as TOML")


def _is_string_list(value: object) -> bool:
    if not isinstance(value, list):
        return False
    items = cast("list[object]", value)
    return all(isinstance(item, str) for item in items)


def _is_table_array(value: object) -> bool:
    if not isinstance(value, list):
        return False
    items = cast("list[object]", value)
    return bool(items) and all(isinstance(item, Mapping) for item in items)


def _write_table(lines: list[str], path: Sequence[str], table: Mapping[str, Any]) -> None:
    """Append the scalar keys of ``table``, then its sub-tables, then its arrays of tables."""
    for key, value in table.items():
        if not isinstance(value, Mapping) and not _is_table_array(value):
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, value in table.items():
        if isinstance(value, Mapping):
            child = [*path, key]
            lines.append("[" + ".".join(_toml_key(part) for part in child) + "]")
            _write_table(lines, child, cast("Mapping[str, Any]", value))
    for key, value in table.items():
        if _is_table_array(value):
            child = [*path, key]
            header = "[[" + ".".join(_toml_key(part) for part in child) + "]]"
            for element in value:
                lines.append(header)
                _write_table(lines, child, element)


def toml_dumps(document: Mapping[str, Any]) -> str:
    """Render a document made of str, int, bool, lists of str, tables and arrays of tables.

    Args:
        document: the root table; key order is kept within each kind of entry.

    Returns:
        The TOML text, ending with a newline.

    Raises:
        TypeError: a value has a type the writer does not support.
        ValueError: a string holds a lone surrogate.
    """
    lines: list[str] = []
    _write_table(lines, [], document)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- validation


@dataclass(frozen=True)
class Database:
    """The database settings GARM is configured with."""

    backend: str
    passphrase: str
    settings: dict[str, str | int]


@dataclass(frozen=True)
class Settings:
    """Everything read from the environment that ends up in GARM's configuration."""

    jwt_secret: str
    database: Database
    providers: list[dict[str, str]]
    proxies: dict[str, str]
    ca_bundles: dict[str, str]


def _fail(message: str) -> NoReturn:
    raise EntrypointError(message)


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _get(environ: Mapping[str, str], name: str) -> str:
    value = environ.get(name, "")
    if not value:
        _fail(f"required variable {name} is missing or empty")
    if not _is_text(value):
        _fail(f"variable {name} is not valid UTF-8 text")
    return value


def _postgresql_port(environ: Mapping[str, str]) -> int:
    raw = environ.get(POSTGRESQL_DB_PORT, "") or str(DEFAULT_POSTGRESQL_PORT)
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= MAX_PORT:
        _fail(f"variable {POSTGRESQL_DB_PORT} must be an integer between 1 and 65535")
    return int(raw)


def _database(environ: Mapping[str, str]) -> Database:
    passphrase = _get(environ, GARM_PASSPHRASE)
    if len(passphrase) != PASSPHRASE_LENGTH:
        _fail(f"variable {GARM_PASSPHRASE} must be exactly {PASSPHRASE_LENGTH} characters")
    backend = _get(environ, GARM_DB_BACKEND)
    if backend == BACKEND_SQLITE:
        db_file = _get(environ, GARM_SQLITE_DB_FILE)
        if not os.path.isabs(db_file):
            _fail(f"variable {GARM_SQLITE_DB_FILE} must be an absolute path")
        return Database(backend, passphrase, {"db_file": db_file})
    if backend == BACKEND_POSTGRESQL:
        settings: dict[str, str | int] = {
            "hostname": _get(environ, POSTGRESQL_DB_HOSTNAME),
            "port": _postgresql_port(environ),
            "username": _get(environ, POSTGRESQL_DB_USERNAME),
            "password": _get(environ, POSTGRESQL_DB_PASSWORD),
            "database": environ.get(POSTGRESQL_DB_NAME) or DEFAULT_POSTGRESQL_DB_NAME,
            "sslmode": environ.get(POSTGRESQL_DB_SSLMODE) or DEFAULT_POSTGRESQL_SSLMODE,
        }
        return Database(backend, passphrase, settings)
    _fail(f"variable {GARM_DB_BACKEND} must be {BACKEND_SQLITE!r} or {BACKEND_POSTGRESQL!r}")


def _provider(index: int, entry: object) -> dict[str, str]:
    where = f"{GARM_PROVIDERS_JSON} entry {index}"
    if not isinstance(entry, dict):
        _fail(f"{where} is not a JSON object")
    fields = cast("dict[str, object]", entry)
    for name, value in fields.items():
        if isinstance(value, str) and ("\n" in value or "\r" in value):
            _fail(f"{where}: field {name!r} contains a line break")
    provider: dict[str, str] = {}
    for name in PROVIDER_REQUIRED_FIELDS:
        value = fields.get(name)
        if not isinstance(value, str) or not value:
            _fail(f"{where}: field {name!r} must be a non-empty string")
        if not _is_text(value):
            _fail(f"{where}: field {name!r} is not valid text")
        provider[name] = value
    if not UNIT_NAME_PATTERN.fullmatch(provider["unit_name"]):
        _fail(f"{where}: field 'unit_name' is not a valid unit name")
    return provider


def _json_variable(name: str, raw: str, kind: type, noun: str) -> Any:
    """The JSON value of variable ``name``, which must be a ``kind`` (a JSON ``noun``)."""
    try:
        value: object = json.loads(raw)
    except ValueError:
        _fail(f"variable {name} is not valid JSON")
    if not isinstance(value, kind):
        _fail(f"variable {name} must be a JSON {noun}")
    return value


def parse_providers(raw: str) -> list[dict[str, str]]:
    """Parse and validate the provider list published by the charm.

    Args:
        raw: the JSON text of ``GARM_PROVIDERS_JSON``.

    Returns:
        The providers, sorted by unit name, each holding exactly the required fields.

    Raises:
        EntrypointError: the text is not a list of valid, distinct providers.
    """
    entries = _json_variable(GARM_PROVIDERS_JSON, raw, list, "list")
    providers: list[dict[str, str]] = []
    seen: set[str] = set()
    for index, entry in enumerate(cast("list[object]", entries)):
        provider = _provider(index, entry)
        if provider["unit_name"] in seen:
            _fail(f"{GARM_PROVIDERS_JSON} entry {index}: duplicate 'unit_name'")
        seen.add(provider["unit_name"])
        providers.append(provider)
    return sorted(providers, key=lambda p: p["unit_name"])


def split_variable(name: str, text: str) -> dict[str, str]:
    """Cut a JSON value into environment variables no longer than Linux allows.

    Args:
        name: one of :data:`PIECED_ENV_VARS`.
        text: the JSON text.

    Returns:
        ``name`` with the first piece, then ``<name>_<n>`` for each further piece; just the one
        variable for a value that fits.
    """
    pieces = [
        text[i : i + PROVIDERS_JSON_PIECE] for i in range(0, len(text), PROVIDERS_JSON_PIECE)
    ]
    names = [name] + [f"{name}_{n}" for n in range(1, len(pieces))]
    return dict(zip(names, pieces or [""], strict=False))


def continuation_names(environ: Mapping[str, str], name: str) -> list[str]:
    """Names of the ``<name>_<n>`` pieces present, in order."""
    names: list[str] = []
    while f"{name}_{len(names) + 1}" in environ:
        names.append(f"{name}_{len(names) + 1}")
    return names


def joined_variable(environ: Mapping[str, str], name: str) -> str:
    """Join a variable cut by :func:`split_variable` and its continuation pieces back."""
    names = [name, *continuation_names(environ, name)]
    return "".join(environ.get(piece, "") for piece in names)


def split_providers_json(text: str) -> dict[str, str]:
    """The provider list as :func:`split_variable` cuts it."""
    return split_variable(GARM_PROVIDERS_JSON, text)


def joined_providers_json(environ: Mapping[str, str]) -> str:
    """The provider list joined back from the environment."""
    return joined_variable(environ, GARM_PROVIDERS_JSON)


def parse_ca_bundles(raw: str) -> dict[str, str]:
    """Parse the endpoints' CA bundles published by the charm (``""``: none).

    Returns:
        Endpoint name to PEM text, sorted by name.

    Raises:
        EntrypointError: the text is not a JSON object of non-empty names to PEM texts.
    """
    if not raw:
        return {}
    data = _json_variable(GARM_GITHUB_CA_BUNDLES, raw, dict, "object")
    bundles: dict[str, str] = {}
    for name, bundle in cast("dict[str, object]", data).items():
        if not name or not isinstance(bundle, str) or "-----BEGIN CERTIFICATE-----" not in bundle:
            _fail(f"{GARM_GITHUB_CA_BUNDLES}: entry {name!r} must hold PEM certificates")
        if not _is_text(bundle):
            _fail(f"{GARM_GITHUB_CA_BUNDLES}: entry {name!r} is not valid text")
        bundles[name] = bundle
    return dict(sorted(bundles.items()))


def load_settings(environ: Mapping[str, str]) -> Settings:
    """Validate the environment and collect GARM's settings from it.

    Args:
        environ: the process environment.

    Returns:
        The validated settings.

    Raises:
        EntrypointError: a variable is missing or invalid.
    """
    for name in REQUIRED_ENV_VARS:
        _get(environ, name)
    database = _database(environ)
    providers = parse_providers(joined_providers_json(environ))
    proxies = {name: environ[name] for name in PROXY_ENV_VARS if environ.get(name)}
    for name, value in proxies.items():
        if not _is_text(value):
            _fail(f"variable {name} is not valid UTF-8 text")
    ca_bundles = parse_ca_bundles(joined_variable(environ, GARM_GITHUB_CA_BUNDLES))
    return Settings(environ[GARM_JWT_SECRET], database, providers, proxies, ca_bundles)


# --------------------------------------------------------------------------- rendering


def provider_file(config_dir: Path, unit_name: str) -> Path:
    """Return the path of a provider's GARM provider configuration."""
    return config_dir / f"provider-{unit_name}.toml"


def clouds_file(config_dir: Path, unit_name: str) -> Path:
    """Return the path of a provider's OpenStack clouds file."""
    return config_dir / f"clouds-{unit_name}.yaml"


def _proxy_table(proxies: Mapping[str, str]) -> dict[str, str]:
    table: dict[str, str] = {}
    for key in ("http_proxy", "https_proxy", "no_proxy"):
        # The upper-case spelling wins when both are set, as most tools do.
        value = proxies.get(key.upper()) or proxies.get(key)
        if value:
            table[key] = value
    return table


def render_config(settings: Settings, layout: Layout) -> str:
    """Render GARM's ``config.toml``.

    Args:
        settings: the validated settings.
        layout: the configuration directory, provider binary and listen address.

    Returns:
        The TOML text.
    """
    database: dict[str, Any] = {
        "backend": settings.database.backend,
        "passphrase": settings.database.passphrase,
        settings.database.backend: dict(settings.database.settings),
    }
    document: dict[str, Any] = {
        "default": {"enable_webhook_management": False},
        "logging": {"log_level": "info", "log_format": "text"},
        "metrics": {"enable": True, "disable_auth": True},
        "jwt_auth": {"secret": settings.jwt_secret, "time_to_live": "8760h"},
        "apiserver": {"bind": layout.bind_address, "port": layout.port, "use_tls": False},
        "database": database,
    }
    proxy = _proxy_table(settings.proxies)
    if proxy:
        document["proxy"] = proxy
    providers: list[dict[str, Any]] = []
    for provider in settings.providers:
        unit = provider["unit_name"]
        external: dict[str, Any] = {
            "provider_executable": layout.provider_shim or layout.provider_binary,
            "config_file": str(provider_file(layout.config_dir, unit)),
        }
        if settings.proxies:
            external["environment_variables"] = list(settings.proxies)
        providers.append(
            {
                "name": unit,
                "provider_type": "external",
                "description": f"OpenStack provider {unit}",
                "external": external,
            }
        )
    if providers:
        document["provider"] = providers
    return toml_dumps(document)


def render_provider(provider: Mapping[str, str], config_dir: Path) -> str:
    """Render the OpenStack provider's own TOML configuration."""
    unit = provider["unit_name"]
    return toml_dumps(
        {
            "cloud": unit,
            "network_id": provider["network"],
            # Metadata through the config drive, not the metadata service (CVE-2024-6174).
            "use_config_drive": True,
            "credentials": {"clouds": str(clouds_file(config_dir, unit))},
        }
    )


def render_clouds(provider: Mapping[str, str]) -> str:
    """Render the provider's ``clouds.yaml`` as JSON, which every YAML parser reads as is."""
    auth_keys = (
        "auth_url",
        "username",
        "password",
        "project_name",
        "user_domain_name",
        "project_domain_name",
    )
    cloud = {
        "auth": {key: provider[key] for key in auth_keys},
        "region_name": provider["region_name"],
        "identity_api_version": 3,
    }
    document = {"clouds": {provider["unit_name"]: cloud}}
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------- files


def write_private(path: Path, content: str) -> None:
    """Replace ``path`` atomically with ``content``, readable by the owner only.

    Args:
        path: the destination; its directory must exist.
        content: the text, written as UTF-8.
    """
    temporary = path.with_name(f".{path.name}.tmp")
    # A temporary file left behind by an interrupted run is discarded, never reused.
    temporary.unlink(missing_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(temporary, flags, FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), FILE_MODE)
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def prepare_config_dir(config_dir: Path, providers: Sequence[Mapping[str, str]]) -> None:
    """Create the directory (0700) and remove provider files of providers that are gone."""
    config_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.chmod(config_dir, DIR_MODE)
    wanted: set[Path] = set()
    for provider in providers:
        wanted.add(provider_file(config_dir, provider["unit_name"]))
        wanted.add(clouds_file(config_dir, provider["unit_name"]))
    stale = [*config_dir.glob("provider-*.toml"), *config_dir.glob("clouds-*.yaml")]
    for path in stale:
        if path not in wanted:
            path.unlink(missing_ok=True)


def write_ca_bundles(config_dir: Path, bundles: Mapping[str, str]) -> Path | None:
    """Write the endpoints' CA bundles in one file of their own directory (removed when none).

    Returns:
        The directory to add to ``SSL_CERT_DIR``; None when there is no bundle.
    """
    directory = config_dir / GITHUB_CA_DIR_NAME
    path = directory / GITHUB_CA_FILE_NAME
    if not bundles:
        path.unlink(missing_ok=True)
        return None
    directory.mkdir(mode=DIR_MODE, exist_ok=True)
    os.chmod(directory, DIR_MODE)
    write_private(path, "".join(bundle.strip() + "\n" for bundle in bundles.values()))
    return directory


def cert_dirs(environ: Mapping[str, str], extra: Path) -> str:
    """``SSL_CERT_DIR`` with ``extra`` after the directories Go would read without it."""
    current = environ.get(SSL_CERT_DIR) or ":".join(GO_DEFAULT_CERT_DIRS)
    return f"{current}:{extra}"


def write_files(settings: Settings, layout: Layout) -> Path:
    """Write the provider files and GARM's configuration; return the configuration path."""
    config_dir = layout.config_dir
    prepare_config_dir(config_dir, settings.providers)
    for provider in settings.providers:
        unit = provider["unit_name"]
        write_private(clouds_file(config_dir, unit), render_clouds(provider))
        write_private(provider_file(config_dir, unit), render_provider(provider, config_dir))
    config_path = config_dir / CONFIG_FILE_NAME
    write_private(config_path, render_config(settings, layout))
    return config_path


# --------------------------------------------------------------------------- main


def _error(message: str, level: str = "error") -> None:
    # One line only, whatever the message holds.
    text = message.replace("\n", " ").replace("\r", " ")
    print(f"garm-entrypoint: {level}: {text}", file=sys.stderr, flush=True)


def usable_layout(layout: Layout) -> Layout:
    """Return ``layout``, without its shim when the image has none (an image built before it).

    GARM refuses to start with a provider executable that does not exist; running the provider
    directly keeps such an image working as it did, with a warning that scale sets whose pool ID
    is too long for a Nova server tag get no runners.
    """
    shim = layout.provider_shim
    if not shim or os.access(shim, os.X_OK):
        return layout
    _error(
        f"{shim} is not in the image: GARM runs {layout.provider_binary} directly, and scale "
        "sets with long names get no runners on OpenStack; rebuild the image",
        level="warning",
    )
    return replace(layout, provider_shim="")


def main(
    environ: MutableMapping[str, str] = os.environ,
    *,
    layout: Layout = PRODUCTION_LAYOUT,
    execv: Callable[[str, list[str]], object] = os.execv,
) -> int:
    """Render GARM's configuration and replace this process with GARM.

    Args:
        environ: the environment to read and scrub; ``os.execv`` passes ``os.environ`` on.
        layout: paths and listen address (tests only; production uses the fixed layout).
        execv: the exec function (tests only).

    Returns:
        2 when the environment is invalid, 1 when files cannot be written or GARM cannot be
        executed; does not return when the exec succeeds.
    """
    try:
        settings = load_settings(environ)
    except EntrypointError as exc:
        _error(str(exc))
        return EXIT_INVALID
    layout = usable_layout(layout)
    try:
        config_path = write_files(settings, layout)
    except OSError as exc:
        _error(f"cannot write the GARM configuration in {layout.config_dir}: {exc.strerror}")
        return EXIT_FAILED
    try:
        ca_dir = write_ca_bundles(layout.config_dir, settings.ca_bundles)
    except OSError as exc:
        _error(f"cannot write the CA bundles in {layout.config_dir}: {exc.strerror}")
        return EXIT_FAILED
    if ca_dir is not None:
        environ[SSL_CERT_DIR] = cert_dirs(environ, ca_dir)
    pieces = [piece for name in PIECED_ENV_VARS for piece in continuation_names(environ, name)]
    for name in (*SECRET_ENV_VARS, *PIECED_ENV_VARS, *pieces):
        environ.pop(name, None)
    try:
        # GARM is a cobra CLI: only the double-dash flag is understood (older builds that used
        # Go's flag package accept it too).
        execv(layout.garm_binary, ["garm", "--config", str(config_path)])
    except OSError as exc:
        _error(f"cannot execute {layout.garm_binary}: {exc.strerror}")
        return EXIT_FAILED
    return 0


def stand_by() -> int:
    """Start no GARM: the unit does not lead (its stand-by layer runs this), so exit at once."""
    _error("standing by: GARM runs on the leader unit, not on this one", level="info")
    return 0


if __name__ == "__main__":
    sys.exit(stand_by() if STAND_BY_FLAG in sys.argv[1:] else main())
