#!/usr/bin/env python3
"""Stand-in for the OpenStack external provider (garm-provider-openstack), for tests only.

GARM runs an external provider as a plain executable: the command is in ``GARM_COMMAND``,
the context in ``GARM_CONTROLLER_ID``, ``GARM_POOL_ID``, ``GARM_INSTANCE_ID``,
``GARM_PROVIDER_CONFIG_FILE`` and ``GARM_INTERFACE_VERSION``; ``CreateInstance`` gets the
bootstrap parameters as JSON on stdin. The answer is JSON on stdout, compact and without a
trailing newline, and the exit code says how it went. This script answers as
garm-provider-openstack does, with servers kept in a local JSON file instead of a cloud.

What it implements, as the real provider does:

- Interface v0.1.0 only (GARM's default when ``interface_version`` is not configured, which
  is how the charm configures it). ``v0.1.1`` is refused at run time ("provider does not
  implement v0.1.1 ExternalProvider") and anything else at start ("unsupported interface
  version"), both exit 1.
- Commands ``CreateInstance``, ``GetInstance``, ``ListInstances``, ``DeleteInstance``,
  ``StartInstance``, ``StopInstance``, ``RemoveAllInstances`` (a no-op that succeeds, as in
  the real provider) and ``GetVersion`` (prints :data:`VERSION`).
- Environment validation and provider-config loading fail like Go's ``log.Fatal``: a
  timestamped line on stderr and exit 1. A missing config file fails the validation
  (``error accessing config file: lstat ...``); an unreadable or invalid one fails loading
  (``error loading config: ...``): the TOML must name a ``cloud`` present in the clouds file
  at ``[credentials] clouds`` and a ``network_id``. This happens for every command,
  ``GetVersion`` included, because the real provider builds its client first.
- A command that fails prints ``failed to run command: <error>`` on stderr (no newline) and
  exits 1. The real provider never uses the not-found exit code (30) that GARM understands:
  ``GetInstance`` of an unknown server exits 1, while ``DeleteInstance`` of an unknown name or
  server ID succeeds (exit 0), so deletes are idempotent.
- Servers carry the tags ``garm-pool-id=<pool>`` and ``garm-controller-id=<controller>``, the
  pool being the bootstrap parameters' ``pool_id`` as in the real provider (``GARM_POOL_ID``
  only serves ``ListInstances``); ``ListInstances`` returns the servers with both tags (``[]``
  when none); a server ID owned by another controller is "not found" (an error, also for
  delete), a name owned by another controller is invisible. Instances are found by server ID
  (a UUID) or by name.
- Instances are ``ProviderInstance`` JSON: ``provider_id`` (server UUID), ``name``,
  ``os_type``, ``os_name``, ``os_version``, ``os_arch``, ``addresses`` (one fixed, private
  address), ``status`` (``running``, or ``stopped`` after ``StopInstance``); empty fields are
  omitted as Go's ``omitempty`` does, so ``provider_fault`` never appears. ``os_name`` and
  ``os_version`` come from the image name when it looks like ``<distro>-<version>`` (the real
  provider reads the image's ``os_distro``/``os_version`` properties).
- ``CreateInstance`` refuses, in the real provider's order and words, what the provider and
  the cloud refuse: tools for the requested OS type and architecture, a flavor, an image; a
  flavor or an image that is not in the cloud's catalogue (:class:`Catalogue`, set by the test
  beside the installed script; none means an empty cloud); then what Nova's server-create
  schema refuses (:func:`nova_create`): a name or a metadata value over 255 characters, a
  metadata key outside ``[a-zA-Z0-9-_:. ]{1,255}``, user data over 65,535 bytes once base64
  encoded (rendered as the provider renders it, :func:`render_user_data`, pre-install scripts
  included), a tag over 60 characters or holding ``,`` or ``/``. A refusal is a command failure
  (exit 1, the error on stderr), which GARM records as the instance's provider fault.

What it does not do: talk to OpenStack or anything else on the network (networks are accepted
as given, images match by name or ID whatever their visibility or owner), boot from volume, the
extra-specs schema, security groups, quotas, the interface v0.1.1 commands.

Simulated runner VM: when the bootstrap parameters carry ``callback-url`` and
``instance-token`` and the callback host is a loopback address, ``CreateInstance`` starts a
detached process (double fork) that does what GARM's Linux runner install script does towards
GARM, with the instance token as ``Authorization: Bearer``: after a short boot delay, POST
``{callback-url}/status`` ``{"status": "installing", "message": ...}``; with
``jit_config_enabled`` GET ``{metadata-url}/credentials/runner`` and read the agent ID from it
(otherwise GET ``{metadata-url}/runner-registration-token/``); POST
``{callback-url}/system-info/`` ``{"os_name", "os_version", "agent_id"}``; POST
``{callback-url}/status`` ``{"status": "idle", "message": ..., "agent_id": <id or null>}``.
If the credentials cannot be fetched it posts ``{"status": "failed", ...}`` instead, as the
script does. It never downloads or runs the GitHub runner, and exits within
:data:`AGENT_DEADLINE_SECONDS`.

Agent mode: after ``installing`` the runner reads ``{metadata-url}/runner-metadata`` (what GARM
also renders into the install script: ``agent_mode``, ``agent_tools``, ``agent_token``,
``agent_shell_enabled``, the agent URL); one it cannot read is a runner without agent mode. In
agent mode it downloads the tool's ``download_url`` (GARM's metadata route) with the instance
token, refuses a download whose SHA-256 is not the listed ``sha256sum`` (posting ``failed``, as
the script does when the download fails), and lays out its VM directory as the script lays out
the runner: the ``garm-agent`` executable, ``garm-agent.toml`` (``server_url``, ``token``,
``enable_shell``, ``work_dir``, ``runner_cmdline`` as GARM's userdata names it: ``/bin/bash -C
<work_dir>/run.sh``), the runner command ``run.sh`` (:data:`RUNNER_SCRIPT_TEXT`: prints
``Listening for Jobs`` as the GitHub runner does when up, then waits) and, once the credentials
are in, the JIT ``.runner`` file as GARM serves it. After the system info it starts
``garm-agent daemon --config ...`` as its own process
(pid in the VM directory; the VM's trust store is :func:`set_trusted_ca`'s file, given as
``SSL_CERT_FILE``), then reports idle. An executable the VM cannot run is reported as the
script reports it ("failed to start garm-agent") and the runner still goes idle. The simulated
runner's own calls to GARM trust that file too, so GARM's URLs may be ``https`` on a front
whose certificate it signs (a TLS ingress).
``DeleteInstance`` stops the deleted server's simulated runner and garm-agent;
:func:`stop_vm_agents` stops them all (the harness's teardown), by pid: each runs in a session
of its own, recorded with its leader's pid and start time, and every process of the session
(garm-agent's runner too) is stopped (:func:`stop_session`); :func:`leftover_processes` is what
the harness checks is gone.

State lives beside the provider config file, so each configured provider has its own:
``<config>.standin-state.json`` (servers, replaced atomically under an exclusive lock on
``<config>.standin.lock``), ``<config>.standin-calls.jsonl`` (one JSON line per command that
got past configuration loading: time, command, pool and instance IDs, instance name, exit code;
never the bootstrap parameters), one ``<config>.standin-agent-<name>.log`` (and ``.pid``) per
simulated runner and, in agent mode, one ``<config>.standin-vm-<name>/`` directory per VM.

Tests install a copy with :func:`install`, which points the shebang at the running Python.
Standard library only; protocol facts from cloudbase/garm ``runner/providers/v0.1.0`` and
``vendor/github.com/cloudbase/garm-provider-common`` and from cloudbase/garm-provider-openstack
``main.go``, ``provider/``, ``client/client.go`` and ``config/config.go``.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

VERSION = "v0.0.0-standin"
INSTALLED_NAME = "garm-provider-openstack-standin"

EXIT_FAILED = 1
# Defined by garm-provider-common; GARM treats 30 from DeleteInstance as success. The real
# OpenStack provider never returns either, and neither does this stand-in.
EXIT_NOT_FOUND = 30
EXIT_DUPLICATE = 31

CREATE = "CreateInstance"
DELETE = "DeleteInstance"
GET = "GetInstance"
LIST = "ListInstances"
START = "StartInstance"
STOP = "StopInstance"
REMOVE_ALL = "RemoveAllInstances"
GET_VERSION = "GetVersion"
V011_ONLY = (
    "GetSupportedInterfaceVersions",
    "ValidatePoolInfo",
    "GetConfigJSONSchema",
    "GetExtraSpecsJSONSchema",
)
INSTANCE_COMMANDS = (DELETE, GET, START, STOP)

POOL_TAG = "garm-pool-id"
CONTROLLER_TAG = "garm-controller-id"
# OpenStack server status -> GARM instance status (the real provider's statusMap).
STATUS_MAP = {
    "ACTIVE": "running",
    "SHUTOFF": "stopped",
    "BUILD": "pending_create",
    "ERROR": "error",
    "DELETING": "pending_delete",
}
GITHUB_ARCH = {
    "x86_64": "x64",
    "amd64": "x64",
    "armv7l": "arm",
    "aarch64": "arm64",
    "x64": "x64",
    "arm": "arm",
    "arm64": "arm64",
}
GITHUB_OS = {"linux": "linux", "windows": "win"}
SUPPORTED_ARCH = ("amd64", "arm", "arm64")
VISIBILITIES = ("public", "private", "community", "shared", "all")
IMAGE_OS = re.compile(r"([A-Za-z]+)[-_:]?v?([0-9][0-9.]*)")

# The cloud the stand-in plays (ADR 0008): what Nova's server-create schema and the provider's
# image and flavor look-ups refuse. Nova answers from its compute endpoint, which a real
# provider finds in Keystone's catalogue; the stand-in names fixed ones in its messages.
COMPUTE_URL = "http://127.0.0.1:8774/v2.1"
IMAGE_URL = "http://127.0.0.1:9292"
CATALOGUE_SUFFIX = ".catalogue.json"
MAX_TAG_LENGTH = 60
TAG_PATTERN = "^[^,/]*$"
MAX_NAME_LENGTH = 255
MAX_METADATA_LENGTH = 255
METADATA_KEY = re.compile(r"[a-zA-Z0-9-_:. ]{1,255}")
MAX_USER_DATA_LENGTH = 65535
DEFAULT_IMAGE_VISIBILITY = "public"
# Unrendered length of garm-provider-common v0.1.9's default Linux install template
# (cloudconfig/templates.go, CloudConfigTemplate): used only when the bootstrap parameters carry
# no runner_install_template, which GARM always adds.
DEFAULT_INSTALL_TEMPLATE_BYTES = 6599
RUNNER_USER = "runner"
RUNNER_GROUPS = (
    "sudo",
    "adm",
    "cdrom",
    "dialout",
    "dip",
    "video",
    "plugdev",
    "netdev",
    "docker",
    "lxd",
)

AGENT_BOOT_DELAY_SECONDS = 1.0
AGENT_DEADLINE_SECONDS = 60.0
AGENT_REQUEST_TIMEOUT_SECONDS = 5.0
AGENT_ATTEMPTS = 5
AGENT_RETRY_DELAY_SECONDS = 1.0
AGENT_OS_NAME = "Ubuntu"
AGENT_OS_VERSION = "24.04"
# The simulated VM: one directory per server beside the state, holding what the install script
# leaves on a runner in agent mode (the garm-agent binary, its config, the runner's JIT file).
VM_DIR_INFIX = "vm-"
AGENT_LOG_INFIX = "agent-"
GARM_AGENT = "garm-agent"
GARM_AGENT_PID = "garm-agent.pid"
GARM_AGENT_CONFIG = "garm-agent.toml"
# The runner command GARM's Linux userdata gives garm-agent (``runner_cmdline`` in
# ``internal/templates/userdata/github_linux_userdata.tmpl``): bash running ``run.sh`` in the
# runner's directory. The stand-in's run.sh prints what the GitHub runner prints when it is up
# (garm-agent watches for ``Listening for Jobs``, ``service/runner/types.go``) and waits.
RUNNER_SCRIPT = "run.sh"
RUNNER_SECONDS = 900
RUNNER_SCRIPT_TEXT = f"""#!/bin/bash
# Stand-in for the GitHub runner's run.sh: connects nowhere, says what the runner says when up.
echo "Connected to GitHub"
echo "$(date -u '+%Y-%m-%d %H:%M:%SZ'): Listening for Jobs"
exec sleep {RUNNER_SECONDS}
"""
# How long a stopped VM's processes get after SIGTERM before SIGKILL, and after that.
VM_STOP_SECONDS = 5.0
TRUSTED_CA_SUFFIX = ".trusted-ca.pem"


class FatalError(Exception):
    """Start-up failure: the real provider calls ``log.Fatal`` with this message."""


class ProviderError(Exception):
    """Command failure: printed as ``failed to run command: <message>``, exit 1."""


class ServerNotFoundError(ProviderError):
    """The cloud answered 404 for a server ID (gophercloud's ``ErrDefault404``)."""


# --------------------------------------------------------------------------- output


def go_json(value: object) -> bytes:
    """Encode like Go's ``json.Marshal``: compact, UTF-8, HTML characters escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return text.encode("utf-8")


def _os_error(operation: str, path: str, exc: OSError) -> str:
    # Go spells these "lstat /path: no such file or directory".
    reason = (exc.strerror or str(exc)).lower()
    return f"{operation} {path}: {reason}"


# --------------------------------------------------------------------------- environment


class Environment:
    """What GARM put in the environment and on stdin, validated as garm-provider-common does."""

    def __init__(self, environ: Mapping[str, str], stdin: BinaryIO) -> None:
        self.version = environ.get("GARM_INTERFACE_VERSION", "")
        if self.version not in ("", "v0.1.0", "v0.1.1"):
            raise FatalError(f"unsupported interface version: {self.version}")
        self.command = environ.get("GARM_COMMAND", "")
        self.controller_id = environ.get("GARM_CONTROLLER_ID", "")
        self.pool_id = environ.get("GARM_POOL_ID", "")
        self.config_file = environ.get("GARM_PROVIDER_CONFIG_FILE", "")
        self.instance_id = environ.get("GARM_INSTANCE_ID", "")
        self.bootstrap: dict[str, Any] = {}
        if self.command == CREATE:
            try:
                self.bootstrap = _read_bootstrap(stdin)
            except ValueError as exc:
                raise FatalError(f"failed to get bootstrap params: {exc}") from None
        problem = self._problem()
        if problem:
            raise FatalError(f"failed to validate execution environment: {problem}")

    def _problem(self) -> str:
        if not self.command:
            return "missing GARM_COMMAND"
        if not self.config_file:
            return "missing GARM_PROVIDER_CONFIG_FILE"
        try:
            os.lstat(self.config_file)
        except OSError as exc:
            return "error accessing config file: " + _os_error("lstat", self.config_file, exc)
        if not self.controller_id:
            return "missing GARM_CONTROLLER_ID"
        return self._command_problem()

    def _command_problem(self) -> str:
        needs = {
            CREATE: ("pool", "missing pool ID"),
            LIST: ("pool", "missing pool ID"),
            **dict.fromkeys(INSTANCE_COMMANDS, ("instance", "missing instance ID")),
            REMOVE_ALL: ("", ""),
            GET_VERSION: ("", ""),
        }
        if self.version == "v0.1.1":
            needs.update(dict.fromkeys(V011_ONLY, ("", "")))
        if self.command not in needs:
            return f"unknown GARM_COMMAND: {self.command}"
        if self.command == CREATE and not self.bootstrap.get("name"):
            return "missing bootstrap params"
        field, problem = needs[self.command]
        value = {"pool": self.pool_id, "instance": self.instance_id}.get(field, "set")
        return "" if value else problem


def _read_bootstrap(stdin: BinaryIO) -> dict[str, Any]:
    if stdin.isatty():
        raise ValueError(f"{CREATE} requires data passed into stdin")
    data = stdin.read()
    if not data:
        raise ValueError(f"{CREATE} requires data passed into stdin")
    try:
        params = json.loads(data)
    except ValueError as exc:
        raise ValueError(f"failed to decode instance params: {exc}") from None
    if not isinstance(params, dict):
        raise ValueError("failed to decode instance params: not a JSON object")
    return params


# --------------------------------------------------------------------------- configuration


def load_config(path: str) -> dict[str, Any]:
    """Load and validate the provider TOML as garm-provider-openstack's config package does.

    Raises:
        FatalError: the file cannot be read or parsed, or misses what the provider needs.
    """
    try:
        with open(path, "rb") as handle:
            config = tomllib.load(handle)
    except OSError as exc:
        raise FatalError(
            "error loading config: error decoding config: " + _os_error("open", path, exc)
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise FatalError(f"error loading config: error decoding config: {exc}") from None
    problem = _config_problem(config)
    if problem:
        raise FatalError(f"error loading config: error validating config: {problem}")
    return config


def _config_problem(config: Mapping[str, Any]) -> str:
    credentials = config.get("credentials")
    clouds_path = credentials.get("clouds", "") if isinstance(credentials, dict) else ""
    try:
        clouds = _read_clouds(str(clouds_path))
    except ValueError as exc:
        return f"failed to validate credentials: failed to load clouds.yaml: {exc}"
    cloud = str(config.get("cloud", ""))
    if cloud not in clouds:
        return f"cloud {cloud} is not defined in clouds.yaml"
    if not config.get("network_id"):
        return "missing network_id"
    visibility = str(config.get("image_visibility", ""))
    if visibility and visibility not in VISIBILITIES:
        return f"invalid image_visibility: {visibility}"
    return ""


def _read_clouds(path: str) -> set[str]:
    """Return the cloud names defined in a clouds file (JSON, or simple block YAML)."""
    if not path:
        raise ValueError("missing clouds config")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError("failed to read clouds config: " + _os_error("open", path, exc)) from None
    try:
        document = json.loads(text)
    except ValueError:
        return _yaml_cloud_names(text)
    clouds = document.get("clouds") if isinstance(document, dict) else None
    return set(clouds) if isinstance(clouds, dict) else set()


def _yaml_cloud_names(text: str) -> set[str]:
    names: set[str] = set()
    inside = False
    child_indent = -1
    for line in text.splitlines():
        stripped = line.split("#", 1)[0].rstrip()
        if not stripped:
            continue
        indent = len(stripped) - len(stripped.lstrip())
        if indent == 0:
            inside = stripped == "clouds:"
            continue
        if inside and stripped.endswith(":") and child_indent in (-1, indent):
            child_indent = indent
            names.add(stripped.strip()[:-1].strip("'\""))
    return names


# --------------------------------------------------------------------------- state


class Store:
    """Servers in a JSON file beside the provider config, guarded by an exclusive lock."""

    def __init__(self, config_file: str) -> None:
        base = Path(config_file)
        self.path = base.with_name(base.name + ".standin-state.json")
        self.lock_path = base.with_name(base.name + ".standin.lock")

    def record_call(self, env: Environment, exit_code: int) -> None:
        """Append one JSON line naming the command GARM ran and how it ended (no secrets)."""
        entry = {
            "time": round(time.time(), 3),
            "command": env.command,
            "pool_id": env.pool_id,
            "instance_id": env.instance_id,
            "name": str(env.bootstrap.get("name", "")),
            "exit_code": exit_code,
        }
        calls = self.path.with_name(self.path.name.replace("state.json", "calls.jsonl"))
        with open(calls, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")

    def agent_log(self, name: str) -> Path:
        """Return the log file of the simulated runner agent of one instance."""
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        name = self.path.name.replace("state.json", f"{AGENT_LOG_INFIX}{safe}.log")
        return self.path.with_name(name)

    def vm_dir(self, name: str) -> Path:
        """Return the directory of one instance's simulated VM (created by its runner agent)."""
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        return self.path.with_name(self.path.name.replace("state.json", VM_DIR_INFIX + safe))

    @contextlib.contextmanager
    def locked(self) -> Iterator[dict[str, dict[str, Any]]]:
        """Hold the lock, yield the servers by ID, write them back if the block succeeds."""
        with open(self.lock_path, "a", encoding="utf-8") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            servers = self._read()
            before = json.dumps(servers, sort_keys=True)
            yield servers
            if json.dumps(servers, sort_keys=True) != before:
                self._write(servers)

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        return dict(document.get("servers", {}))

    def _write(self, servers: Mapping[str, Any]) -> None:
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps({"servers": servers}, indent=1), encoding="utf-8")
        os.replace(temporary, self.path)


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _tag(server: Mapping[str, Any], key: str) -> str:
    for tag in server.get("tags", []):
        name, _, value = str(tag).partition("=")
        if name == key:
            return value
    return ""


def find_servers(
    servers: Mapping[str, dict[str, Any]], name_or_id: str, controller_id: str
) -> list[dict[str, Any]]:
    """Find servers by ID or by name, seen from one controller (ListServersWithNameOrID)."""
    if _is_uuid(name_or_id):
        server = servers.get(str(uuid.UUID(name_or_id)))
        if server is None:
            raise ServerNotFoundError("failed to get server: Resource not found")
        if _tag(server, CONTROLLER_TAG) != controller_id:
            raise ProviderError(f"server with name or ID {name_or_id} not found")
        return [server]
    return [
        server
        for server in servers.values()
        if _tag(server, CONTROLLER_TAG) == controller_id and server.get("name") == name_or_id
    ]


def get_server(
    servers: Mapping[str, dict[str, Any]], name_or_id: str, controller_id: str
) -> dict[str, Any]:
    """Return the one server with this ID or name (the real client's GetServer)."""
    try:
        found = find_servers(servers, name_or_id, controller_id)
    except ProviderError as exc:
        raise ProviderError(f"failed to find server: {exc}") from None
    if not found:
        raise ProviderError(f"failed to find server with name or id {name_or_id}")
    if len(found) > 1:
        raise ProviderError(
            f"multiple servers with name or id {name_or_id}; manual intervention required"
        )
    return found[0]


def to_instance(server: Mapping[str, Any]) -> dict[str, Any]:
    """Render a server as GARM's ProviderInstance, omitting empty fields as Go does."""
    metadata = server.get("metadata", {})
    addresses = [
        {"address": addr["addr"], "type": "public" if addr["type"] == "floating" else "private"}
        for addr in server.get("addresses", [])
        if addr.get("type") in ("fixed", "floating")
    ]
    instance: dict[str, Any] = {
        "provider_id": server["id"],
        "name": server["name"],
        "os_type": metadata.get("os_type", ""),
        "os_name": metadata.get("os_name", ""),
        "os_version": metadata.get("os_version", ""),
        "os_arch": metadata.get("os_arch", ""),
        "addresses": addresses,
        "status": STATUS_MAP.get(server.get("status", ""), ""),
    }
    return {key: value for key, value in instance.items() if value}


# --------------------------------------------------------------------------- the cloud


@dataclass(frozen=True)
class Catalogue:
    """The images and flavors the simulated cloud has (by name or ID), set by the test."""

    images: tuple[str, ...] = ()
    flavors: tuple[str, ...] = ()

    @classmethod
    def load(cls, path: Path) -> Catalogue:
        """Read the catalogue; none means an empty cloud, where every image is unknown."""
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls()
        return cls(tuple(document.get("images", [])), tuple(document.get("flavors", [])))

    def write(self, path: Path) -> None:
        """Store the catalogue where :meth:`load` reads it."""
        document = {"images": list(self.images), "flavors": list(self.flavors)}
        path.write_text(json.dumps(document, indent=1), encoding="utf-8")


def catalogue_path(executable: Path) -> Path:
    """Where an installed stand-in reads its catalogue: beside itself."""
    return executable.with_name(executable.name + CATALOGUE_SUFFIX)


def resolve_flavor(catalogue: Catalogue, flavor: str) -> None:
    """Refuse a flavor the cloud lacks, as the provider's GetFlavor does after listing them."""
    if flavor not in catalogue.flavors:
        raise ProviderError(
            f"failed to resolve flavor {flavor}: failed to find flavor with name or id {flavor}"
        )


def resolve_image(catalogue: Catalogue, image: str, visibility: str) -> None:
    """Refuse an image the cloud lacks, in the provider's GetImage words (by ID or by name)."""
    if image in catalogue.images:
        return
    if _is_uuid(image):
        # gophercloud's 404 with Glance's answer for an unknown image ID.
        reason = (
            f"failed to find image: Resource not found: [GET {IMAGE_URL}/v2/images/{image}], "
            f"error message: 404 Not Found\n\nNo image found with ID {image}\n\n   "
        )
    else:
        reason = (
            f"failed to find image with name or id {image} and visibility "
            f"'{visibility or DEFAULT_IMAGE_VISIBILITY}'"
        )
    raise ProviderError(f"failed to resolve image info: {reason}")


def _yaml_scalar(value: str, indent: str) -> str:
    """A string as gopkg.in/yaml.v3 writes it, close enough for the size Nova sees.

    Multi-line text becomes a literal block; text YAML would read as another type, or that
    starts with an indicator, is double-quoted; the rest is plain.
    """
    if "\n" in value:
        body = "".join(f"{indent}  {line}\n" for line in value.rstrip("\n").split("\n"))
        return ("|\n" if value.endswith("\n") else "|-\n") + body.rstrip("\n")
    special = value.lower() in ("", "true", "false", "yes", "no", "on", "off", "null", "~")
    if special or re.fullmatch(r"[-+]?[0-9][0-9_.]*", value) or value[0] in "-?:,[]{}#&*!|>'\"%@`":
        return json.dumps(value)
    return value


def _yaml_list(key: str, items: Iterable[str], indent: str) -> list[str]:
    lines = [f"{indent}{key}:"]
    lines += [f"{indent}    - {_yaml_scalar(item, indent + '    ')}" for item in items]
    return lines


def _pre_install_scripts(extra_specs: Mapping[str, Any]) -> list[tuple[str, bytes]]:
    scripts = extra_specs.get("pre_install_scripts") or {}
    return [(name, base64.b64decode(scripts[name])) for name in sorted(scripts)]


def install_script(bootstrap: Mapping[str, Any]) -> bytes:
    """The runner install script the provider puts in the user data.

    GARM always sends ``extra_specs.runner_install_template``: its wrapper, already rendered,
    which fetches the real script from GARM's metadata URL. The provider renders it again as a Go
    template; GARM's wrapper holds no template action, so the text is used as it is. Without it
    the provider renders its default template: its length plus the values it gets stands in.
    """
    extra_specs = bootstrap.get("extra_specs") or {}
    template = extra_specs.get("runner_install_template")
    if template:
        return base64.b64decode(template)
    values = ("instance-token", "callback-url", "metadata-url", "repo_url", "name")
    size = DEFAULT_INSTALL_TEMPLATE_BYTES + sum(len(str(bootstrap.get(k) or "")) for k in values)
    return b"#" * size


def render_user_data(bootstrap: Mapping[str, Any]) -> str:
    """The cloud-config the provider sends for a Linux runner.

    Follows garm-provider-common v0.1.9 (vendored by garm-provider-openstack v0.1.5),
    ``cloudconfig.GetCloudConfig`` -> ``GetCloudInitConfig`` and ``CloudInit.Serialize``: the
    default cloud-init, pre-install scripts (sorted by name) and the install script as base64
    ``write_files`` with their ``runcmd`` lines, SSH keys, the CA bundle, serialised by yaml.v3
    (indent 4, no line wrapping) after ``#cloud-config``.
    """
    extra_specs: Mapping[str, Any] = bootstrap.get("extra_specs") or {}
    files: list[tuple[bytes, str]] = []
    runcmd: list[str] = []
    for name, script in _pre_install_scripts(extra_specs):
        files.append((script, f"/garm-pre-install/{name}"))
        runcmd.append(f"/garm-pre-install/{name}")
    runcmd.append("rm -rf /garm-pre-install")
    files.append((install_script(bootstrap), "/install_runner.sh"))
    runcmd += [f"su -l -c /install_runner.sh {RUNNER_USER}", "rm -f /install_runner.sh"]
    packages = [] if extra_specs.get("disable_updates") else ["curl", "tar"]
    packages += [p for p in extra_specs.get("extra_packages") or [] if p not in packages]
    lines = ["#cloud-config", *_yaml_list("users", ["default"], "")]
    lines.append(f"package_upgrade: {'false' if extra_specs.get('disable_updates') else 'true'}")
    if packages:
        lines += _yaml_list("packages", packages, "")
    if bootstrap.get("ssh-keys"):
        lines += _yaml_list("ssh_authorized_keys", bootstrap["ssh-keys"], "")
    lines += [
        "system_info:",
        "    default_user:",
        f"        name: {RUNNER_USER}",
        f"        home: /home/{RUNNER_USER}",
        "        shell: /bin/bash",
        *_yaml_list("groups", RUNNER_GROUPS, "        "),
        "        sudo: ALL=(ALL) NOPASSWD:ALL",
        *_yaml_list("runcmd", runcmd, ""),
        "write_files:",
    ]
    for content, path in files:
        lines += [
            "    - encoding: b64",
            f"      content: {base64.b64encode(content).decode()}",
            "      owner: root:root",
            f"      path: {path}",
            '      permissions: "755"',
        ]
    bundle = bootstrap.get("ca-cert-bundle")
    if bundle:
        pem = base64.b64decode(bundle).decode("utf-8", "replace")
        lines += ["ca-certs:", "    remove-defaults: false"]
        lines += _yaml_list("trusted", [pem], "    ")
    return "\n".join(lines) + "\n"


NovaProblem = tuple[object, object, str]  # (last path element, value, jsonschema message)


def _too_long(path: object, value: str, limit: int) -> NovaProblem | None:
    return (path, value, f"{value!r} is too long") if len(value) > limit else None


def _metadata_problem(metadata: Mapping[str, str]) -> NovaProblem | None:
    ordered = dict(sorted(metadata.items()))
    for key, value in ordered.items():
        if not METADATA_KEY.fullmatch(key):
            unexpected = f"Additional properties are not allowed ({key!r} was unexpected)"
            return "metadata", ordered, unexpected
        problem = _too_long(key, value, MAX_METADATA_LENGTH)
        if problem:
            return problem
    return None


def _tags_problem(tags: list[str]) -> NovaProblem | None:
    for index, tag in enumerate(tags):
        problem = _too_long(index, tag, MAX_TAG_LENGTH)
        if problem:
            return problem
        if not re.fullmatch(TAG_PATTERN, tag):
            return index, tag, f"{tag!r} does not match {TAG_PATTERN!r}"
    return None


def _nova_field_problem(server: Mapping[str, Any]) -> NovaProblem | None:
    """Nova's first schema refusal of a server-create body, in the schema's property order."""
    return (
        _too_long("name", server["name"], MAX_NAME_LENGTH)
        or _metadata_problem(server["metadata"])
        or _too_long("user_data", server["user_data"], MAX_USER_DATA_LENGTH)
        or _tags_problem(server["tags"])
    )


def nova_create(server: Mapping[str, Any]) -> None:
    """Refuse what Nova's request schema refuses, with its 400 answer in gophercloud's words.

    Nova checks the body with its JSON schema and reports the first problem in the schema's
    property order (name, metadata, user_data, tags) as ``Invalid input for field/attribute
    <last path element>. Value: <value>. <jsonschema message>``.
    """
    problem = _nova_field_problem(server)
    if problem is None:
        return
    path, value, message = problem
    detail = f"Invalid input for field/attribute {path}. Value: {value}. {message}"
    body = json.dumps({"badRequest": {"code": 400, "message": detail}})
    raise ProviderError(
        "failed to create server: failed to create server: Bad request with: "
        f"[POST {COMPUTE_URL}/servers], error message: {body}"
    )


# --------------------------------------------------------------------------- commands


def _find_tools(bootstrap: Mapping[str, Any]) -> dict[str, Any]:
    os_type = str(bootstrap.get("os_type") or "")
    arch = str(bootstrap.get("arch") or "")
    if os_type not in GITHUB_OS:
        raise ProviderError(f"unsupported OS type: {os_type}")
    if arch not in SUPPORTED_ARCH:
        raise ProviderError(f"unsupported OS arch: {arch}")
    for tool in bootstrap.get("tools") or []:
        if not isinstance(tool, dict) or not tool.get("os") or not tool.get("architecture"):
            continue
        if tool["architecture"] in (GITHUB_ARCH[arch], arch) and tool["os"] in (
            GITHUB_OS[os_type],
            os_type,
        ):
            return tool
    raise ProviderError(f"failed to find tools for OS {os_type} and arch {arch}")


def _extra_specs_decode(extra_specs: Mapping[str, Any]) -> bool:
    """Tell whether the install template and pre-install scripts are valid base64 strings."""
    values = [extra_specs.get("runner_install_template") or ""]
    scripts = extra_specs.get("pre_install_scripts") or {}
    values += list(scripts.values()) if isinstance(scripts, dict) else [None]
    for value in values:
        try:
            base64.b64decode(value, validate=True)
        except (TypeError, ValueError):
            return False
    return True


def _spec_problem(bootstrap: Mapping[str, Any]) -> str:
    try:
        tools = _find_tools(bootstrap)
    except ProviderError as exc:
        return f"failed to get tools: {exc}"
    if not _extra_specs_decode(bootstrap.get("extra_specs") or {}):
        # Go decodes these []byte fields from base64 and stops at the first bad byte.
        return "failed to get extra specs: failed to unmarshal extra_specs: illegal base64 data"
    if not bootstrap.get("flavor"):
        return "failed to validate spec: missing flavor"
    if not bootstrap.get("image"):
        return "failed to validate spec: missing image"
    if not tools.get("download_url"):
        return "failed to validate spec: missing tools"
    return ""


def _user_data(bootstrap: Mapping[str, Any]) -> str:
    """What the provider sends Nova as user data: base64 of the cloud-config (Linux)."""
    tools = _find_tools(bootstrap)
    if not tools.get("filename"):
        raise ProviderError(
            "failed to get server create options: failed to get user data: failed to generate "
            "userdata: generating script: missing tools filename"
        )
    if bootstrap.get("os_type") == "windows":
        text = install_script(bootstrap)
    else:
        text = render_user_data(bootstrap).encode("utf-8")
    return base64.b64encode(text).decode("ascii")


def new_server(
    env: Environment, config: Mapping[str, Any], catalogue: Catalogue
) -> dict[str, Any]:
    """Build the server the real provider would create, refusing what it and Nova refuse.

    In the provider's order: the machine spec, the flavor, the image, the user data, then
    Nova's checks of the request. The pool ID in the tags and metadata is the one in the
    bootstrap parameters, as the provider takes it (``GARM_POOL_ID`` only serves listing).
    """
    bootstrap = env.bootstrap
    problem = _spec_problem(bootstrap)
    if problem:
        raise ProviderError(f"failed to build machine spec: {problem}")
    resolve_flavor(catalogue, str(bootstrap["flavor"]))
    resolve_image(catalogue, str(bootstrap["image"]), str(config.get("image_visibility", "")))
    server_id = str(uuid.uuid4())
    pool_id = str(bootstrap.get("pool_id") or "")
    metadata = {
        "os_arch": str(bootstrap.get("arch") or ""),
        "os_type": str(bootstrap.get("os_type") or ""),
        POOL_TAG: pool_id,
        CONTROLLER_TAG: env.controller_id,
    }
    match = IMAGE_OS.fullmatch(str(bootstrap["image"]))
    if match:
        metadata["os_name"] = match.group(1).lower()
        metadata["os_version"] = match.group(2)
    tags = [f"{POOL_TAG}={pool_id}", f"{CONTROLLER_TAG}={env.controller_id}"]
    name = str(bootstrap["name"])
    nova_create(
        {"name": name, "metadata": metadata, "user_data": _user_data(bootstrap), "tags": tags}
    )
    octets = uuid.UUID(server_id).bytes
    return {
        "id": server_id,
        "name": name,
        "status": "ACTIVE",
        "tags": tags,
        "metadata": metadata,
        "addresses": [{"addr": f"10.{octets[0]}.{octets[1]}.{octets[2] or 1}", "type": "fixed"}],
        "flavor": str(bootstrap["flavor"]),
        "image": str(bootstrap["image"]),
        "network_id": str(config.get("network_id", "")),
        "config_drive": bool(config.get("use_config_drive", False)),
        "created_at": time.time(),
    }


def create_instance(
    env: Environment, config: Mapping[str, Any], store: Store, catalogue: Catalogue
) -> bytes:
    """CreateInstance: record a new ACTIVE server, maybe start its agent, print it."""
    try:
        server = new_server(env, config, catalogue)
    except ProviderError as exc:
        raise ProviderError(f"failed to create instance in provider: {exc}") from None
    with store.locked() as servers:
        servers[server["id"]] = server
    maybe_start_agent(env.bootstrap, store.agent_log(server["name"]), store.vm_dir(server["name"]))
    return go_json(to_instance(server))


def get_instance(env: Environment, store: Store) -> bytes:
    """GetInstance: print the server found by ID or name."""
    with store.locked() as servers:
        try:
            server = get_server(servers, env.instance_id, env.controller_id)
        except ProviderError as exc:
            raise ProviderError(
                f"failed to get instance from provider: failed to get server: {exc}"
            ) from None
    return go_json(to_instance(server))


def list_instances(env: Environment, store: Store) -> bytes:
    """ListInstances: print this controller's servers in the pool, ``[]`` when none."""
    wanted = {POOL_TAG: env.pool_id, CONTROLLER_TAG: env.controller_id}
    with store.locked() as servers:
        found = [
            server
            for server in servers.values()
            if all(_tag(server, key) == value for key, value in wanted.items())
        ]
    found.sort(key=lambda server: server.get("created_at", 0))
    return go_json([to_instance(server) for server in found])


def delete_instance(env: Environment, store: Store) -> bytes:
    """DeleteInstance: remove every match; an unknown name or a 404 ID is a success."""
    with store.locked() as servers:
        try:
            found = find_servers(servers, env.instance_id, env.controller_id)
        except ServerNotFoundError:
            found = []
        except ProviderError as exc:
            raise ProviderError(
                "failed to delete instance from provider: failed to delete server: "
                f"failed to find server: {exc}"
            ) from None
        for server in found:
            servers.pop(server["id"], None)
            name = str(server.get("name", ""))
            stop_vm(store.agent_log(name), store.vm_dir(name))
    return b""


def _set_power(env: Environment, store: Store, status: str) -> None:
    verb = "start" if status == "ACTIVE" else "stop"
    with store.locked() as servers:
        try:
            server = get_server(servers, env.instance_id, env.controller_id)
        except ProviderError as exc:
            raise ProviderError(
                f"failed to {verb} instance: failed to {verb} server: failed to get server: {exc}"
            ) from None
        server["status"] = status


def start_instance(env: Environment, store: Store) -> bytes:
    """StartInstance: mark the server ACTIVE (already ACTIVE is fine)."""
    _set_power(env, store, "ACTIVE")
    return b""


def stop_instance(env: Environment, store: Store) -> bytes:
    """StopInstance: mark the server SHUTOFF (already SHUTOFF is fine)."""
    _set_power(env, store, "SHUTOFF")
    return b""


def run(env: Environment, config: Mapping[str, Any]) -> bytes:
    """Run the command and return what goes on stdout.

    Raises:
        ProviderError: the command failed.
    """
    if env.version == "v0.1.1":
        raise ProviderError("provider does not implement v0.1.1 ExternalProvider")
    store = Store(env.config_file)
    simple: dict[str, Callable[[Environment, Store], bytes]] = {
        GET: get_instance,
        LIST: list_instances,
        DELETE: delete_instance,
        START: start_instance,
        STOP: stop_instance,
    }
    if env.command == CREATE:
        catalogue = Catalogue.load(catalogue_path(Path(__file__)))
        return create_instance(env, config, store, catalogue)
    if env.command in simple:
        return simple[env.command](env, store)
    if env.command == GET_VERSION:
        return VERSION.encode()
    if env.command == REMOVE_ALL:
        return b""
    raise ProviderError(f"invalid command: {env.command}")


# --------------------------------------------------------------------------- runner agent


def _is_loopback(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return False
    host = parts.hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def maybe_start_agent(bootstrap: Mapping[str, Any], log_path: Path, vm_dir: Path) -> None:
    """Start the simulated runner agent in a detached grandchild when GARM can be reached."""
    callback = str(bootstrap.get("callback-url") or "")
    token = str(bootstrap.get("instance-token") or "")
    if not callback or not token or not _is_loopback(callback):
        return
    metadata = str(bootstrap.get("metadata-url") or "")
    if metadata and not _is_loopback(metadata):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child:
        os.waitpid(child, 0)
        return
    try:
        os.setsid()
        if os.fork():
            os._exit(0)
        # The grandchild leads no session (the child did): it starts one of its own to record.
        os.setsid()
        record_session(log_path.with_suffix(".pid"), os.getpid())
        _detach(log_path)
        RunnerAgent(bootstrap, vm_dir).run()
    finally:
        os._exit(0)


def _detach(log_path: Path) -> None:
    """Point stdin at /dev/null and stdout/stderr at the log; drop every other descriptor."""
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.closerange(3, 1024)
    sys.stdout = open(1, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = sys.stdout


class RunnerAgent:
    """What GARM's runner install script sends back to GARM, without installing anything."""

    def __init__(self, bootstrap: Mapping[str, Any], vm_dir: Path) -> None:
        callback = str(bootstrap["callback-url"]).rstrip("/")
        self.callback = callback[: -len("/status")] if callback.endswith("/status") else callback
        self.metadata = str(bootstrap.get("metadata-url") or "").rstrip("/")
        self.token = str(bootstrap["instance-token"])
        self.jit = bool(bootstrap.get("jit_config_enabled"))
        self.name = str(bootstrap.get("name", ""))
        self.vm_dir = vm_dir
        self.runner_file = b""
        self.deadline = time.monotonic() + AGENT_DEADLINE_SECONDS
        # No proxy: GARM passes proxy variables to providers, the agent talks to loopback. TLS
        # is verified against the VM's trust store, as curl in the install script does.
        self.opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}),
            urllib.request.HTTPSHandler(context=_vm_tls_context()),
        )

    def log(self, message: str) -> None:
        """Write one timestamped line to the agent log."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        print(f"{stamp} runner-agent {self.name}: {message}", flush=True)

    def request(self, method: str, url: str, body: object = None) -> bytes | None:
        """Send one request with retries; return the body, or None when it never succeeded."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json", "Authorization": f"Bearer {self.token}"}
        for attempt in range(1, AGENT_ATTEMPTS + 1):
            timeout = min(AGENT_REQUEST_TIMEOUT_SECONDS, self.deadline - time.monotonic())
            if timeout <= 0:
                break
            # Only http(s) URLs on loopback get here (see _is_loopback).
            req = urllib.request.Request(url, data=data, headers=headers, method=method)  # noqa: S310
            try:
                with self.opener.open(req, timeout=timeout) as response:
                    self.log(f"{method} {url} -> {response.status}")
                    return response.read()
            except urllib.error.HTTPError as exc:
                self.log(f"{method} {url} -> {exc.code} (attempt {attempt})")
            except (OSError, ValueError) as exc:
                self.log(f"{method} {url} failed: {exc} (attempt {attempt})")
            time.sleep(AGENT_RETRY_DELAY_SECONDS)
        return None

    def status(self, status: str, message: str, agent_id: int | None = None) -> None:
        """POST a status message to ``{callback}/status``."""
        body: dict[str, Any] = {"status": status, "message": message}
        if status == "idle":
            body["agent_id"] = agent_id
        self.request("POST", f"{self.callback}/status", body)

    def credentials(self) -> tuple[bool, int | None]:
        """Fetch what the runner needs to register; return (ok, agent ID)."""
        if not self.jit:
            token = self.request("GET", f"{self.metadata}/runner-registration-token/")
            return token is not None, None
        runner = self.request("GET", f"{self.metadata}/credentials/runner")
        if runner is None:
            return False, None
        self.runner_file = runner
        digits = re.search(rb'"agentId"\s*:\s*"?([0-9]+)', runner)
        return True, int(digits.group(1)) if digits else None

    def agent_metadata(self) -> dict[str, Any] | None:
        """GARM's runner metadata when it puts this runner in agent mode with a tool, else None.

        A runner that cannot read it goes on as one without agent mode (logged).
        """
        raw = self.request("GET", f"{self.metadata}/runner-metadata")
        try:
            metadata = json.loads(raw) if raw is not None else None
        except ValueError:
            metadata = None
        if not isinstance(metadata, dict):
            self.log("runner metadata unavailable; no agent mode")
            return None
        if not metadata.get("agent_mode") or not isinstance(metadata.get("agent_tools"), dict):
            return None
        return metadata

    def install_agent(self, metadata: Mapping[str, Any]) -> Path | None:
        """Download garm-agent through the metadata route and write its config, as the script.

        Returns the config path, or None once the runner was reported failed. Unlike the
        script, the download is also checked against the digest GARM lists for the tool.
        """
        tool: Mapping[str, Any] = metadata["agent_tools"]
        url = str(tool.get("download_url") or "")
        self.status("installing", "Agent mode is enabled; setting up agent")
        self.status("installing", f"Downloading agent from {url}")
        binary = self.request("GET", url) if _is_loopback(url) else None
        if binary is None:
            self.status("failed", "failed to download garm-agent")
            return None
        digest = hashlib.sha256(binary).hexdigest()
        if digest != tool.get("sha256sum"):
            self.log(f"garm-agent digest {digest} is not the listed {tool.get('sha256sum')}")
            self.status("failed", "failed to download garm-agent")
            return None
        work_dir = self.vm_dir / "actions-runner"
        work_dir.mkdir(parents=True, exist_ok=True)
        agent = self.vm_dir / GARM_AGENT
        agent.write_bytes(binary)
        agent.chmod(0o755)
        runner_script = work_dir / RUNNER_SCRIPT
        runner_script.write_text(RUNNER_SCRIPT_TEXT, encoding="utf-8")
        runner_script.chmod(0o755)
        self.status("installing", "Creating config and systemd unit")
        access = metadata.get("metadata_access") or {}
        settings = {
            "server_url": str(access.get("agent_url") or ""),
            "log_file": str(self.vm_dir / "garm-agent.log"),
            "work_dir": str(work_dir),
            "enable_shell": bool(metadata.get("agent_shell_enabled")),
            "token": str(metadata.get("agent_token") or ""),
            "runner_cmdline": ["/bin/bash", "-C", str(runner_script)],
            "state_db_path": str(self.vm_dir / "agent-state.db"),
        }
        config = self.vm_dir / GARM_AGENT_CONFIG
        config.write_text(
            "".join(f"{key} = {json.dumps(value)}\n" for key, value in settings.items()),
            encoding="utf-8",
        )
        config.chmod(0o600)
        return config

    def start_agent(self, config: Path) -> None:
        """Start garm-agent as the VM's service would: its own process, the VM's trust store."""
        (self.vm_dir / "actions-runner" / ".runner").write_bytes(self.runner_file)
        self.status("installing", "Starting garm-agent service")
        env = {"PATH": "/usr/bin:/bin"}
        trusted = trusted_ca_path(Path(__file__))
        if trusted.is_file():
            env["SSL_CERT_FILE"] = str(trusted)
        try:
            with open(self.vm_dir / "garm-agent.out", "ab") as out:
                process = subprocess.Popen(
                    [str(self.vm_dir / GARM_AGENT), "daemon", "--config", str(config)],
                    env=env,
                    cwd=self.vm_dir,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    # Its own session, as a service's: whatever it starts stays in it.
                    start_new_session=True,
                )
        except OSError as exc:
            self.log(f"garm-agent did not start: {exc}")
            self.status("installing", "failed to start garm-agent")
            return
        record_session(self.vm_dir / GARM_AGENT_PID, process.pid)
        self.log(f"garm-agent started (pid {process.pid})")

    def run(self) -> None:
        """Boot, report installing, set up the agent in agent mode, fetch credentials, go idle."""
        self.log("booting")
        time.sleep(AGENT_BOOT_DELAY_SECONDS)
        self.status("installing", "configuring runner")
        metadata = self.agent_metadata()
        config = self.install_agent(metadata) if metadata is not None else None
        if metadata is not None and config is None:
            self.log("gave up: garm-agent unavailable")
            return
        ok, agent_id = self.credentials()
        if not ok:
            self.status("failed", "failed to get runner file")
            self.log("gave up: credentials unavailable")
            return
        self.request(
            "POST",
            f"{self.callback}/system-info/",
            {"os_name": AGENT_OS_NAME, "os_version": AGENT_OS_VERSION, "agent_id": agent_id},
        )
        if config is not None:
            self.start_agent(config)
        self.status("idle", "runner successfully installed", agent_id)
        self.log("done")


def _vm_tls_context() -> ssl.SSLContext:
    """TLS as the VM verifies it: the system's CAs plus those :func:`set_trusted_ca` gave it."""
    context = ssl.create_default_context()
    trusted = trusted_ca_path(Path(__file__))
    if trusted.is_file():
        context.load_verify_locations(cafile=trusted)
    return context


def trusted_ca_path(executable: Path) -> Path:
    """The CA certificates the VMs of an installed stand-in's cloud trust: beside it."""
    return executable.with_name(executable.name + TRUSTED_CA_SUFFIX)


def _stat(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (field 3 first), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def _start_time(pid: int) -> int:
    """A process's start time in clock ticks since boot (0 once it is gone)."""
    fields = _stat(pid)
    return int(fields[19]) if fields else 0


def record_session(pid_file: Path, pid: int) -> None:
    """Write a session leader's pid and start time, for :func:`session_processes`."""
    pid_file.write_text(f"{pid} {_start_time(pid)}", encoding="ascii")


def session_processes(pid_file: Path) -> list[int]:
    """Pids of the live processes in the session whose leader ``pid_file`` names.

    The simulated runner and each VM's garm-agent run in sessions of their own
    (:func:`maybe_start_agent`, :meth:`RunnerAgent.start_agent`); what garm-agent starts, its
    runner's process group included, stays in its session. A session id outlives its leader,
    so the start time recorded with the pid tells the session's processes from later ones that
    reuse the number. Zombies are not counted: they are gone but for their parent's wait.
    """
    try:
        pid_text, started_text = pid_file.read_text(encoding="ascii").split()
        session, started = int(pid_text), int(started_text)
    except (OSError, ValueError):
        return []
    found = []
    for entry in Path("/proc").iterdir():
        fields = _stat(int(entry.name)) if entry.name.isdigit() else None
        # state (3), session (6), start time (22): indexes 0, 3 and 19 after the name.
        alive = fields is not None and fields[0] != "Z"
        if alive and int(fields[3]) == session and int(fields[19]) >= started:
            found.append(int(entry.name))
    return found


def stop_session(pid_file: Path) -> None:
    """Stop every process of a recorded session, by pid: SIGTERM, then SIGKILL.

    Not by working directory: garm-agent changes into the runner's directory, and its runner
    is a process group of its own.
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = session_processes(pid_file)
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + VM_STOP_SECONDS
        while pids and time.monotonic() < deadline:
            time.sleep(0.05)
            pids = session_processes(pid_file)
        if not pids:
            return


def stop_vm(log_path: Path, vm_dir: Path) -> None:
    """Stop one server's simulated runner first (so it starts nothing more), then its agent."""
    stop_session(log_path.with_suffix(".pid"))
    stop_session(vm_dir / GARM_AGENT_PID)


def session_files(directory: Path) -> list[Path]:
    """Every recorded session under ``directory``: simulated runners first, then agents."""
    runners = sorted(Path(directory).rglob(f"*{AGENT_LOG_INFIX}*.pid"))
    return runners + sorted(Path(directory).rglob(f"*{VM_DIR_INFIX}*/{GARM_AGENT_PID}"))


def stop_vm_agents(directory: Path) -> None:
    """Stop every simulated runner and VM garm-agent under ``directory`` (the teardown)."""
    for pid_file in session_files(directory):
        stop_session(pid_file)


def leftover_processes(directory: Path) -> list[int]:
    """Processes of the simulated runners and VMs under ``directory`` still alive."""
    return [pid for f in session_files(directory) for pid in session_processes(f)]


# --------------------------------------------------------------------------- entry points


def _fatal(message: str) -> NoReturn:
    stamp = time.strftime("%Y/%m/%d %H:%M:%S")
    sys.stderr.write(f"{stamp} {message}\n")
    sys.stderr.flush()
    sys.exit(EXIT_FAILED)


def main(environ: Mapping[str, str] = os.environ) -> int:
    """Run one provider command as GARM asks; return the exit code."""
    try:
        env = Environment(environ, sys.stdin.buffer)
        config = load_config(env.config_file)
    except FatalError as exc:
        _fatal(str(exc))
    try:
        output = run(env, config)
    except ProviderError as exc:
        Store(env.config_file).record_call(env, EXIT_FAILED)
        sys.stderr.write(f"failed to run command: {exc}")
        sys.stderr.flush()
        return EXIT_FAILED
    Store(env.config_file).record_call(env, 0)
    sys.stdout.buffer.write(output)
    sys.stdout.buffer.flush()
    return 0


def install(
    directory: Path, catalogue: Catalogue | None = None, name: str = INSTALLED_NAME
) -> Path:
    """Write an executable copy of this script into ``directory`` and return its path.

    The copy's shebang names the running interpreter, so it works with the empty ``PATH``
    GARM gives providers. ``catalogue`` is the cloud's images and flavors (none: an empty
    cloud, every create refused); :func:`set_catalogue` changes it later.
    """
    source = Path(__file__).read_text(encoding="utf-8")
    body = source.split("\n", 1)[1] if source.startswith("#!") else source
    target = Path(directory) / name
    target.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
    target.chmod(0o755)
    set_catalogue(target, catalogue or Catalogue())
    return target


def set_catalogue(executable: Path, catalogue: Catalogue) -> None:
    """Give an installed stand-in's cloud these images and flavors."""
    catalogue.write(catalogue_path(executable))


def set_trusted_ca(executable: Path, pem: bytes) -> None:
    """Have the VMs of an installed stand-in's cloud trust these CA certificates (PEM)."""
    trusted_ca_path(executable).write_bytes(pem)


if __name__ == "__main__":
    sys.exit(main())
