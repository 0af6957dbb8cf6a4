"""The OpenStack provider stand-in, run as GARM runs a provider.

Each call is a subprocess with only GARM's variables in its environment and the bootstrap
parameters on stdin.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import stat
import subprocess
import sys
import threading
import time
import tomllib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from container_scripts.garm_entrypoint import (
    clouds_file,
    provider_file,
    render_clouds,
    render_provider,
)
from tests.real_garm import provider_standin
from tests.real_garm.provider_standin import VERSION, Catalogue, install, set_catalogue

CONTROLLER = "6b1f0a52-8c1e-4d55-9d0e-1f6f5c0a7e10"
OTHER_CONTROLLER = "0d4c3a1b-2e5f-4a6b-8c7d-9e0f1a2b3c4d"
POOL = "pool-a"
IMAGE_ID = "6f1c0c0e-1d2e-4f3a-8b4c-5d6e7f8a9b0c"
CATALOGUE = Catalogue(images=("ubuntu-24.04", IMAGE_ID), flavors=("m1.small",))
INSTANCE_KEYS = ("provider_id", "name", "os_type", "os_name", "os_version", "os_arch")


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


@dataclass
class Provider:
    """An installed stand-in and one provider configuration rendered as the charm renders it."""

    executable: Path
    config_file: Path

    def env(self, command: str, **extra: str) -> dict[str, str]:
        env = {
            "GARM_COMMAND": command,
            "GARM_CONTROLLER_ID": CONTROLLER,
            "GARM_PROVIDER_CONFIG_FILE": str(self.config_file),
            "GARM_INTERFACE_VERSION": "v0.1.0",
        }
        env.update(extra)
        return env

    def run(self, command: str, stdin: bytes = b"", **extra: str) -> Result:
        return run_env(self.executable, self.env(command, **extra), stdin)

    def create(self, name: str, pool: str = POOL, **params: Any) -> dict[str, Any]:
        # GARM sends the pool ID twice: in the environment and in the bootstrap parameters.
        data = bootstrap(name, pool_id=pool, **params)
        result = self.run("CreateInstance", data, GARM_POOL_ID=pool)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def list(self, pool: str = POOL, controller: str = CONTROLLER) -> list[dict[str, Any]]:
        result = self.run("ListInstances", GARM_POOL_ID=pool, GARM_CONTROLLER_ID=controller)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)


def run_env(executable: Path, env: dict[str, str], stdin: bytes = b"") -> Result:
    # GARM gives the provider exactly these variables: no PATH, no HOME.
    done = subprocess.run(
        [str(executable)], env=env, input=stdin, capture_output=True, timeout=30, check=False
    )
    return Result(done.returncode, done.stdout.decode(), done.stderr.decode())


def bootstrap(name: str, **params: Any) -> bytes:
    """Bootstrap parameters shaped as GARM sends them for a Linux amd64 runner."""
    document: dict[str, Any] = {
        "name": name,
        "tools": [
            {
                "os": "linux",
                "architecture": "x64",
                "download_url": "https://example.invalid/actions-runner-linux-x64.tar.gz",
                "filename": "actions-runner-linux-x64.tar.gz",
            },
            {"os": "win", "architecture": "x64", "download_url": "https://example.invalid/w"},
        ],
        "repo_url": "https://github.com/acme",
        "metadata-url": "",
        "callback-url": "",
        "instance-token": "",
        "ssh-keys": None,
        "github-runner-group": "",
        "ca-cert-bundle": None,
        "arch": "amd64",
        "os_type": "linux",
        "flavor": "m1.small",
        "image": "ubuntu-24.04",
        "labels": ["linux"],
        "pool_id": POOL,
        "user_data_options": {"disable_updates_on_boot": False, "extra_packages": None},
        "jit_config_enabled": True,
        "proxy_config": {"http_proxy": "", "https_proxy": "", "no_proxy": ""},
    }
    document.update(params)
    return json.dumps(document).encode()


def make_provider(directory: Path, executable: Path, unit: str = "cfg-a-0") -> Provider:
    entry = {
        "unit_name": unit,
        "network": "net-" + unit,
        "auth_url": "http://127.0.0.1:5000/v3",
        "username": "user",
        "password": "os-password-standin",
        "project_name": "project",
        "user_domain_name": "Default",
        "project_domain_name": "Default",
        "region_name": "RegionOne",
    }
    clouds_file(directory, unit).write_text(render_clouds(entry))
    config = provider_file(directory, unit)
    config.write_text(render_provider(entry, directory))
    return Provider(executable, config)


@pytest.fixture
def executable(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    return install(bin_dir, CATALOGUE)


@pytest.fixture
def provider(tmp_path: Path, executable: Path) -> Provider:
    etc = tmp_path / "etc"
    etc.mkdir()
    return make_provider(etc, executable)


# --------------------------------------------------------------------------- install, version


def test_install_writes_an_executable_copy_for_this_interpreter(executable: Path) -> None:
    mode = stat.S_IMODE(executable.stat().st_mode)
    assert mode == 0o755
    lines = executable.read_text().splitlines()
    assert lines[0] == f"#!{sys.executable}"
    assert lines[1:] == Path(provider_standin.__file__).read_text().splitlines()[1:]


def test_get_version_prints_the_version_without_newline(provider: Provider) -> None:
    result = provider.run("GetVersion")
    assert result == Result(0, VERSION, "")


def test_missing_interface_version_means_v010(provider: Provider) -> None:
    env = provider.env("GetVersion")
    del env["GARM_INTERFACE_VERSION"]
    assert run_env(provider.executable, env) == Result(0, VERSION, "")


# --------------------------------------------------------------------------- create, get, list


def test_create_prints_the_instance_as_the_openstack_provider_does(provider: Provider) -> None:
    result = provider.run("CreateInstance", bootstrap("garm-runner-1"), GARM_POOL_ID=POOL)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert not result.stdout.endswith("\n")
    # Go's encoder: compact, fields in struct order, empty ones (provider_fault) omitted.
    assert result.stdout.startswith('{"provider_id":"')
    instance = json.loads(result.stdout)
    assert list(instance) == [*INSTANCE_KEYS, "addresses", "status"]
    assert uuid.UUID(instance["provider_id"])
    assert instance["name"] == "garm-runner-1"
    assert (instance["os_type"], instance["os_arch"]) == ("linux", "amd64")
    assert (instance["os_name"], instance["os_version"]) == ("ubuntu", "24.04")
    assert instance["status"] == "running"
    [address] = instance["addresses"]
    assert address["type"] == "private"


def test_create_omits_os_name_when_the_image_does_not_say(provider: Provider) -> None:
    instance = provider.create("garm-runner-1", image=IMAGE_ID)
    assert "os_name" not in instance
    assert "os_version" not in instance


def test_instances_persist_and_are_found_by_id_or_name(provider: Provider) -> None:
    created = provider.create("garm-runner-1")
    for key in (created["provider_id"], "garm-runner-1"):
        result = provider.run("GetInstance", GARM_INSTANCE_ID=key, GARM_POOL_ID=POOL)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout) == created
    assert provider.list() == [created]


def test_list_filters_by_pool_and_controller(provider: Provider) -> None:
    first = provider.create("garm-runner-1")
    provider.create("garm-runner-2", pool="pool-b")
    assert provider.list() == [first]
    assert [i["name"] for i in provider.list(pool="pool-b")] == ["garm-runner-2"]
    result = provider.run("ListInstances", GARM_POOL_ID="pool-empty")
    assert result == Result(0, "[]", "")
    assert provider.list(controller=OTHER_CONTROLLER) == []


def test_another_controller_cannot_see_or_delete_the_instance(provider: Provider) -> None:
    created = provider.create("garm-runner-1")
    other = {"GARM_CONTROLLER_ID": OTHER_CONTROLLER}
    by_name = provider.run("GetInstance", GARM_INSTANCE_ID="garm-runner-1", **other)
    assert by_name.returncode == 1
    by_id = provider.run("DeleteInstance", GARM_INSTANCE_ID=created["provider_id"], **other)
    assert by_id.returncode == 1
    assert "not found" in by_id.stderr
    # A name is looked up among this controller's servers only: nothing to delete, success.
    assert (
        provider.run("DeleteInstance", GARM_INSTANCE_ID="garm-runner-1", **other).returncode == 0
    )
    assert provider.list() == [created]


def test_get_unknown_instance_fails_with_exit_1_as_the_real_provider(provider: Provider) -> None:
    result = provider.run("GetInstance", GARM_INSTANCE_ID="garm-nobody")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        "failed to run command: failed to get instance from provider: failed to get server: "
        "failed to find server with name or id garm-nobody"
    )


def test_two_servers_with_one_name_need_manual_intervention(provider: Provider) -> None:
    provider.create("garm-twin")
    provider.create("garm-twin")
    result = provider.run("GetInstance", GARM_INSTANCE_ID="garm-twin")
    assert result.returncode == 1
    assert "manual intervention required" in result.stderr


# --------------------------------------------------------------------------- delete, start, stop


def test_delete_is_idempotent(provider: Provider) -> None:
    created = provider.create("garm-runner-1")
    kept = provider.create("garm-runner-2")
    assert provider.run("DeleteInstance", GARM_INSTANCE_ID=created["provider_id"]) == Result(
        0, "", ""
    )
    assert provider.list() == [kept]
    for again in (created["provider_id"], "garm-runner-1", str(uuid.uuid4()), "garm-nobody"):
        assert provider.run("DeleteInstance", GARM_INSTANCE_ID=again) == Result(0, "", "")
    gone = provider.run("GetInstance", GARM_INSTANCE_ID=created["provider_id"])
    assert gone.returncode == 1
    assert "Resource not found" in gone.stderr


def test_delete_by_name_removes_the_server(provider: Provider) -> None:
    provider.create("garm-runner-1")
    assert provider.run("DeleteInstance", GARM_INSTANCE_ID="garm-runner-1").returncode == 0
    assert provider.list() == []


def test_stop_and_start_change_the_status(provider: Provider) -> None:
    created = provider.create("garm-runner-1")
    key = {"GARM_INSTANCE_ID": created["provider_id"]}
    assert provider.run("StopInstance", **key) == Result(0, "", "")
    assert json.loads(provider.run("GetInstance", **key).stdout)["status"] == "stopped"
    assert provider.run("StopInstance", **key).returncode == 0
    assert provider.run("StartInstance", **key) == Result(0, "", "")
    assert json.loads(provider.run("GetInstance", **key).stdout)["status"] == "running"
    missing = provider.run("StartInstance", GARM_INSTANCE_ID="garm-nobody")
    assert missing.returncode == 1
    assert missing.stderr.startswith("failed to run command: failed to start instance: ")


def test_remove_all_instances_is_a_no_op_as_in_the_real_provider(provider: Provider) -> None:
    created = provider.create("garm-runner-1")
    assert provider.run("RemoveAllInstances") == Result(0, "", "")
    assert provider.list() == [created]


# --------------------------------------------------------------------------- refusals


def test_missing_config_file_is_refused(provider: Provider) -> None:
    result = provider.run("GetVersion", GARM_PROVIDER_CONFIG_FILE="/nonexistent/provider.toml")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.endswith(
        " failed to validate execution environment: error accessing config file: "
        "lstat /nonexistent/provider.toml: no such file or directory\n"
    )


def test_unreadable_config_file_is_refused(provider: Provider, tmp_path: Path) -> None:
    # Running as root makes mode 000 readable; a directory cannot be read by anyone.
    result = provider.run("GetVersion", GARM_PROVIDER_CONFIG_FILE=str(tmp_path))
    assert result.returncode == 1
    assert " error loading config: error decoding config: open " in result.stderr


def test_config_naming_an_undefined_cloud_is_refused(provider: Provider) -> None:
    text = provider.config_file.read_text().replace('cloud = "cfg-a-0"', 'cloud = "other"')
    provider.config_file.write_text(text)
    result = provider.run("ListInstances", GARM_POOL_ID=POOL)
    assert result.returncode == 1
    assert result.stderr.endswith(
        "error loading config: error validating config: "
        "cloud other is not defined in clouds.yaml\n"
    )


def test_missing_clouds_file_is_refused(provider: Provider) -> None:
    clouds_file(provider.config_file.parent, "cfg-a-0").unlink()
    result = provider.run("GetVersion")
    assert result.returncode == 1
    assert "failed to load clouds.yaml: failed to read clouds config" in result.stderr


def test_yaml_clouds_file_is_understood(provider: Provider) -> None:
    clouds_file(provider.config_file.parent, "cfg-a-0").write_text(
        "clouds:\n  cfg-a-0:\n    auth:\n      auth_url: http://127.0.0.1:5000/v3\n"
    )
    assert provider.run("GetVersion").returncode == 0


@pytest.mark.parametrize(
    ("command", "missing", "message"),
    [
        ("GetVersion", "GARM_CONTROLLER_ID", "missing GARM_CONTROLLER_ID"),
        ("GetVersion", "GARM_COMMAND", "missing GARM_COMMAND"),
        ("GetInstance", "GARM_INSTANCE_ID", "missing instance ID"),
        ("ListInstances", "GARM_POOL_ID", "missing pool ID"),
    ],
)
def test_missing_variables_are_refused(
    provider: Provider, command: str, missing: str, message: str
) -> None:
    env = provider.env(command, GARM_POOL_ID=POOL, GARM_INSTANCE_ID="x")
    del env[missing]
    result = run_env(provider.executable, env)
    assert result.returncode == 1
    assert result.stderr.endswith(f"failed to validate execution environment: {message}\n")


def test_unknown_command_is_refused(provider: Provider) -> None:
    result = provider.run("Start")
    assert result.returncode == 1
    assert result.stderr.endswith("unknown GARM_COMMAND: Start\n")


def test_interface_v011_is_not_implemented(provider: Provider) -> None:
    result = provider.run("GetVersion", GARM_INTERFACE_VERSION="v0.1.1")
    assert result == Result(
        1, "", "failed to run command: provider does not implement v0.1.1 ExternalProvider"
    )
    other = provider.run("GetVersion", GARM_INTERFACE_VERSION="v9")
    assert other.returncode == 1
    assert other.stderr.endswith(" unsupported interface version: v9\n")


def test_create_without_stdin_is_refused(provider: Provider) -> None:
    result = provider.run("CreateInstance", b"", GARM_POOL_ID=POOL)
    assert result.returncode == 1
    assert "CreateInstance requires data passed into stdin" in result.stderr
    assert provider.list() == []


def test_create_without_matching_tools_is_refused(provider: Provider) -> None:
    result = provider.run(
        "CreateInstance", bootstrap("garm-runner-1", arch="arm64"), GARM_POOL_ID=POOL
    )
    assert result == Result(
        1,
        "",
        "failed to run command: failed to create instance in provider: failed to build machine "
        "spec: failed to get tools: failed to find tools for OS linux and arch arm64",
    )
    assert provider.list() == []


# --------------------------------------------------------------------------- state


def test_concurrent_creates_all_persist(provider: Provider) -> None:
    count = 12
    processes = [
        subprocess.Popen(
            [str(provider.executable)],
            env=provider.env("CreateInstance", GARM_POOL_ID=POOL),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(count)
    ]
    outputs = [
        process.communicate(bootstrap(f"garm-runner-{index}"), timeout=60)
        for index, process in enumerate(processes)
    ]
    assert [process.returncode for process in processes] == [0] * count, outputs
    created = {json.loads(stdout)["provider_id"] for stdout, _ in outputs}
    listed = provider.list()
    assert {instance["provider_id"] for instance in listed} == created
    assert sorted(instance["name"] for instance in listed) == sorted(
        f"garm-runner-{index}" for index in range(count)
    )


def test_commands_wait_for_the_state_lock(provider: Provider) -> None:
    lock_path = provider.config_file.with_name(provider.config_file.name + ".standin.lock")
    with lock_path.open("a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        process = subprocess.Popen(
            [str(provider.executable)],
            env=provider.env("CreateInstance", GARM_POOL_ID=POOL),
            stdin=subprocess.PIPE,
            # Never read: pipes left open would leak (a ResourceWarning, an error here).
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        assert process.stdin is not None
        process.stdin.write(bootstrap("garm-runner-1"))
        process.stdin.close()
        with pytest.raises(subprocess.TimeoutExpired):
            process.wait(timeout=1.5)
        fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    assert process.wait(timeout=30) == 0
    assert [instance["name"] for instance in provider.list()] == ["garm-runner-1"]


def test_every_command_is_recorded_without_the_bootstrap_params(provider: Provider) -> None:
    provider.create("garm-runner-1", **{"instance-token": "token-not-recorded"})
    provider.run("GetInstance", GARM_INSTANCE_ID="garm-nobody")
    calls_path = provider.config_file.with_name(provider.config_file.name + ".standin-calls.jsonl")
    text = calls_path.read_text()
    assert "token-not-recorded" not in text
    calls = [json.loads(line) for line in text.splitlines()]
    summary = [(c["command"], c["name"], c["instance_id"], c["exit_code"]) for c in calls]
    assert summary == [
        ("CreateInstance", "garm-runner-1", "", 0),
        ("GetInstance", "", "garm-nobody", 1),
    ]


def test_each_provider_config_has_its_own_state(provider: Provider, executable: Path) -> None:
    other = make_provider(provider.config_file.parent, executable, unit="cfg-b-0")
    created = provider.create("garm-runner-1")
    assert other.list() == []
    assert provider.list() == [created]
    state = provider.config_file.with_name(provider.config_file.name + ".standin-state.json")
    assert created["provider_id"] in json.loads(state.read_text())["servers"]


# --------------------------------------------------------------------------- runner agent


class FakeGarm:
    """Records what the simulated runner agent sends to GARM's callback and metadata URLs."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str, Any]] = []
        # What a GET of a path answers; any other GET answers a JIT runner file.
        self.answers: dict[str, bytes] = {}
        self.release_metadata = threading.Event()
        self.idle = threading.Event()
        garm = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _record(self, body: Any) -> None:
                auth = self.headers.get("Authorization", "")
                garm.requests.append((self.command, self.path, auth, body))

            def do_GET(self) -> None:
                self._record(None)
                garm.release_metadata.wait(20)
                payload = (
                    garm.answers.get(self.path)
                    or json.dumps({"agentId": "42", "agentName": "garm-runner-1"}).encode()
                )
                self.send_response(200)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                self._record(body)
                if body.get("status") == "idle":
                    garm.idle.set()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeGarm:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release_metadata.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_garm() -> Iterator[FakeGarm]:
    with FakeGarm() as garm:
        yield garm


def test_runner_agent_reports_installing_then_idle(
    provider: Provider, fake_garm: FakeGarm
) -> None:
    token = "instance-token-standin-test"
    started = time.monotonic()
    created = provider.create(
        "garm-runner-1",
        **{
            "callback-url": f"{fake_garm.url}/callbacks",
            "metadata-url": f"{fake_garm.url}/metadata",
            "instance-token": token,
        },
    )
    # CreateInstance returned while the agent is still blocked on the metadata request, so the
    # agent does not hold GARM's stdout pipe open.
    assert not fake_garm.idle.is_set()
    assert time.monotonic() - started < 15
    fake_garm.release_metadata.set()
    assert fake_garm.idle.wait(30), fake_garm.requests
    bearer = f"Bearer {token}"
    assert fake_garm.requests == [
        (
            "POST",
            "/api/v1/callbacks/status",
            bearer,
            {"status": "installing", "message": "configuring runner"},
        ),
        ("GET", "/api/v1/metadata/runner-metadata", bearer, None),
        ("GET", "/api/v1/metadata/credentials/runner", bearer, None),
        (
            "POST",
            "/api/v1/callbacks/system-info/",
            bearer,
            {"os_name": "Ubuntu", "os_version": "24.04", "agent_id": 42},
        ),
        (
            "POST",
            "/api/v1/callbacks/status",
            bearer,
            {"status": "idle", "message": "runner successfully installed", "agent_id": 42},
        ),
    ]
    log = provider.config_file.with_name(
        provider.config_file.name + ".standin-agent-garm-runner-1.log"
    )
    deadline = time.monotonic() + 10
    while "done" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "runner-agent garm-runner-1: done" in log.read_text()
    assert token not in log.read_text()
    assert created["status"] == "running"


def test_runner_agent_without_jit_fetches_a_registration_token(
    provider: Provider, fake_garm: FakeGarm
) -> None:
    fake_garm.release_metadata.set()
    provider.create(
        "garm-runner-1",
        jit_config_enabled=False,
        **{
            "callback-url": f"{fake_garm.url}/callbacks/status",
            "metadata-url": f"{fake_garm.url}/metadata",
            "instance-token": "tok",
        },
    )
    assert fake_garm.idle.wait(30), fake_garm.requests
    paths = [(method, path) for method, path, _, _ in fake_garm.requests]
    assert paths == [
        ("POST", "/api/v1/callbacks/status"),
        ("GET", "/api/v1/metadata/runner-metadata"),
        ("GET", "/api/v1/metadata/runner-registration-token/"),
        ("POST", "/api/v1/callbacks/system-info/"),
        ("POST", "/api/v1/callbacks/status"),
    ]
    assert fake_garm.requests[-1][3]["agent_id"] is None


def test_runner_agent_only_talks_to_loopback(provider: Provider) -> None:
    provider.create(
        "garm-runner-1",
        **{
            "callback-url": "http://192.0.2.1/api/v1/callbacks",
            "metadata-url": "http://192.0.2.1/api/v1/metadata",
            "instance-token": "tok",
        },
    )
    logs = list(provider.config_file.parent.glob("*.standin-agent-*.log"))
    assert logs == []


AGENT_TOKEN = "agent-token-standin-test"


def agent_mode(fake_garm: FakeGarm, tool: bytes, listed: bytes | None = None) -> None:
    """Have the fake GARM put the runner in agent mode with ``tool`` as its garm-agent."""
    download = f"{fake_garm.url}/metadata/tools/garm-agent/7/download"
    metadata = {
        "agent_mode": True,
        "agent_tools": {
            "download_url": download,
            "sha256sum": hashlib.sha256(tool if listed is None else listed).hexdigest(),
        },
        "agent_token": AGENT_TOKEN,
        "agent_shell_enabled": True,
        "metadata_access": {"agent_url": "https://127.0.0.1:1/agent"},
    }
    fake_garm.answers["/api/v1/metadata/runner-metadata"] = json.dumps(metadata).encode()
    fake_garm.answers["/api/v1/metadata/tools/garm-agent/7/download"] = tool
    fake_garm.release_metadata.set()


def create_runner(provider: Provider, fake_garm: FakeGarm, name: str = "garm-runner-1") -> None:
    provider.create(
        name,
        **{
            "callback-url": f"{fake_garm.url}/callbacks",
            "metadata-url": f"{fake_garm.url}/metadata",
            "instance-token": "tok",
        },
    )


def statuses(fake_garm: FakeGarm) -> list[tuple[str, str]]:
    return [
        (body["status"], body["message"])
        for method, path, _, body in fake_garm.requests
        if method == "POST" and path.endswith("/status")
    ]


def wait_for_status(fake_garm: FakeGarm, status: str) -> None:
    deadline = time.monotonic() + 30
    while status not in [s for s, _ in statuses(fake_garm)]:
        assert time.monotonic() < deadline, fake_garm.requests
        time.sleep(0.05)


def vm_dir(provider: Provider, name: str = "garm-runner-1") -> Path:
    return provider.config_file.with_name(provider.config_file.name + ".standin-vm-" + name)


def test_in_agent_mode_the_runner_downloads_configures_and_starts_garm_agent(
    provider: Provider, fake_garm: FakeGarm
) -> None:
    # A garm-agent that records how it was started, then waits to be stopped.
    tool = b'#!/bin/sh\necho "$@" > started\nexec sleep 60\n'
    agent_mode(fake_garm, tool)
    create_runner(provider, fake_garm)
    wait_for_status(fake_garm, "idle")
    assert statuses(fake_garm) == [
        ("installing", "configuring runner"),
        ("installing", "Agent mode is enabled; setting up agent"),
        (
            "installing",
            f"Downloading agent from {fake_garm.url}/metadata/tools/garm-agent/7/download",
        ),
        ("installing", "Creating config and systemd unit"),
        ("installing", "Starting garm-agent service"),
        ("idle", "runner successfully installed"),
    ]
    vm = vm_dir(provider)
    assert (vm / "garm-agent").read_bytes() == tool
    config = tomllib.loads((vm / "garm-agent.toml").read_text())
    assert {k: config[k] for k in ("server_url", "token", "enable_shell")} == {
        "server_url": "https://127.0.0.1:1/agent",
        "token": AGENT_TOKEN,
        "enable_shell": True,
    }
    runner = json.loads((vm / "actions-runner" / ".runner").read_text())
    assert runner["agentId"] == "42"
    deadline = time.monotonic() + 10
    while not (vm / "started").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert (vm / "started").read_text() == f"daemon --config {vm / 'garm-agent.toml'}\n"
    # The runner command GARM's userdata names exists and says what the agent waits for.
    assert config["runner_cmdline"] == ["/bin/bash", "-C", str(vm / "actions-runner" / "run.sh")]
    assert "Listening for Jobs" in (vm / "actions-runner" / "run.sh").read_text()
    assert len(provider_standin.session_processes(vm / "garm-agent.pid")) == 1

    # Deleting the server stops its garm-agent and all it started, by pid.
    assert provider.run("DeleteInstance", GARM_INSTANCE_ID="garm-runner-1").returncode == 0
    assert provider_standin.leftover_processes(provider.config_file.parent) == []


def test_stopping_a_vm_stops_what_its_agent_started_in_another_directory_and_group(
    tmp_path: Path,
) -> None:
    # As garm-agent does: change into the runner's directory, start the runner in a process
    # group of its own; a stop by working directory would miss both.
    vm = tmp_path / "cfg.standin-vm-r1"
    (vm / "actions-runner").mkdir(parents=True)
    group = "import os; os.setpgid(0, 0); os.execvp('sleep', ['sleep', '60'])"
    script = f'cd actions-runner; {sys.executable} -c "{group}" & exec sleep 60'
    agent = subprocess.Popen(["/bin/sh", "-c", script], cwd=vm, start_new_session=True)
    provider_standin.record_session(vm / "garm-agent.pid", agent.pid)
    deadline = time.monotonic() + 10
    while len(provider_standin.session_processes(vm / "garm-agent.pid")) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    provider_standin.stop_vm_agents(tmp_path)
    agent.wait(timeout=10)
    assert provider_standin.leftover_processes(tmp_path) == []


def test_a_download_that_is_not_the_listed_tool_fails_the_runner(
    provider: Provider, fake_garm: FakeGarm
) -> None:
    agent_mode(fake_garm, b"#!/bin/sh\n", listed=b"another build")
    create_runner(provider, fake_garm)
    wait_for_status(fake_garm, "failed")
    assert statuses(fake_garm)[-1] == ("failed", "failed to download garm-agent")
    assert not (vm_dir(provider) / "garm-agent").exists()


def test_a_garm_agent_that_cannot_run_is_reported_and_the_runner_goes_idle(
    provider: Provider, fake_garm: FakeGarm
) -> None:
    agent_mode(fake_garm, b"\x7fELF garm-agent for another machine")
    create_runner(provider, fake_garm)
    wait_for_status(fake_garm, "idle")
    assert statuses(fake_garm)[-2:] == [
        ("installing", "failed to start garm-agent"),
        ("idle", "runner successfully installed"),
    ]
    assert not (vm_dir(provider) / "garm-agent.pid").exists()


# --------------------------------------------------------------------------- the cloud's refusals

ENTITY = "0d4c3a1b-2e5f-4a6b-8c7d-9e0f1a2b3c4d"
NOVA_400 = (
    "failed to run command: failed to create instance in provider: failed to create server: "
    "failed to create server: Bad request with: [POST http://127.0.0.1:8774/v2.1/servers], "
    "error message: "
)


def nova_refusal(field: object, value: str, message: str) -> str:
    detail = f"Invalid input for field/attribute {field}. Value: {value}. {message}"
    return NOVA_400 + json.dumps({"badRequest": {"code": 400, "message": detail}})


def refused(provider: Provider, data: bytes, pool: str = POOL) -> str:
    """Run a create that must fail: nothing printed, nothing created; return stderr."""
    before = provider.list(pool)
    result = provider.run("CreateInstance", data, GARM_POOL_ID=pool)
    assert (result.returncode, result.stdout) == (1, ""), result
    assert provider.list(pool) == before
    return result.stderr


def test_a_pool_tag_over_60_characters_is_refused_as_nova_does(provider: Provider) -> None:
    pool = f"ubuntu-noble-x64-large-{ENTITY}"
    tag = f"garm-pool-id={pool}"
    assert len(tag) == 72
    stderr = refused(provider, bootstrap("garm-runner-1", pool_id=pool), pool)
    assert stderr == nova_refusal(0, tag, f"{tag!r} is too long")


def test_a_pool_tag_of_60_characters_is_accepted(provider: Provider) -> None:
    pool = f"abcdefghij-{ENTITY}"
    assert len(f"garm-pool-id={pool}") == 60
    created = provider.create("garm-runner-1", pool=pool)
    assert provider.list(pool) == [created]


@pytest.mark.parametrize("pool", ["a,b", "runners/a"])
def test_a_pool_tag_with_a_comma_or_slash_is_refused(provider: Provider, pool: str) -> None:
    tag = f"garm-pool-id={pool}"
    stderr = refused(provider, bootstrap("garm-runner-1", pool_id=pool), pool)
    assert stderr == nova_refusal(0, tag, f"{tag!r} does not match '^[^,/]*$'")


def test_the_tag_holds_the_bootstrap_pool_id_as_in_the_real_provider(provider: Provider) -> None:
    long_pool = f"ubuntu-noble-x64-large-{ENTITY}"
    # A short GARM_POOL_ID does not help: the provider tags with the bootstrap's pool_id.
    stderr = refused(provider, bootstrap("garm-runner-1", pool_id=long_pool), ENTITY)
    assert "is too long" in stderr
    # And a server tagged from the bootstrap's pool_id is listed under that pool only.
    data = bootstrap("garm-runner-2", pool_id=ENTITY)
    assert provider.run("CreateInstance", data, GARM_POOL_ID=long_pool).returncode == 0
    assert provider.list(long_pool) == []
    assert [i["name"] for i in provider.list(ENTITY)] == ["garm-runner-2"]


def test_a_server_name_over_255_characters_is_refused(provider: Provider) -> None:
    name = "garm-" + "r" * 251
    stderr = refused(provider, bootstrap(name))
    assert stderr == nova_refusal("name", name, f"{name!r} is too long")
    assert provider.create("garm-" + "r" * 250)["name"] == "garm-" + "r" * 250


def test_a_metadata_value_over_255_characters_is_refused_before_the_tags(
    provider: Provider,
) -> None:
    pool = "p" * 256
    stderr = refused(provider, bootstrap("garm-runner-1", pool_id=pool), pool)
    assert stderr == nova_refusal("garm-pool-id", pool, f"{pool!r} is too long")


def test_a_metadata_key_nova_does_not_accept_is_refused() -> None:
    server = {
        "name": "garm-runner-1",
        "metadata": {"os_type": "linux", "bad/key": "x"},
        "user_data": "",
        "tags": [],
    }
    with pytest.raises(provider_standin.ProviderError) as refusal:
        provider_standin.nova_create(server)
    message = str(refusal.value)
    assert "Invalid input for field/attribute metadata. Value: {'bad/key': 'x', 'os_type'" in (
        message
    )
    assert "Additional properties are not allowed ('bad/key' was unexpected)" in message


def _script(size: int) -> dict[str, Any]:
    content = base64.b64encode(b"#" * size).decode()
    return {"pre_install_scripts": {"big.sh": content}}


def _largest_accepted_script() -> int:
    """The largest pre-install script whose user data Nova still takes (found by bisection)."""
    low, high = 0, 65535
    while low < high:
        middle = (low + high + 1) // 2
        data = json.loads(bootstrap("garm-runner-1", extra_specs=_script(middle)))
        if len(provider_standin._user_data(data)) <= 65535:
            low = middle
        else:
            high = middle - 1
    return low


def test_user_data_over_nova_limit_is_refused(provider: Provider) -> None:
    largest = _largest_accepted_script()
    # Nova takes 49,149 bytes of cloud-config (65,535 once base64-encoded), where the script is
    # base64 too, beside the install script (here the ~6.6 kB default template) and the rest.
    assert 25_000 < largest < 49_149 * 3 // 4
    created = provider.create("garm-runner-1", extra_specs=_script(largest))
    assert created["name"] == "garm-runner-1"
    data = bootstrap("garm-runner-2", extra_specs=_script(largest + 3))
    stderr = refused(provider, data, POOL)
    assert stderr.startswith(NOVA_400)
    message = json.loads(stderr.removeprefix(NOVA_400))["badRequest"]["message"]
    field, rest = message.split(". Value: ", 1)
    assert field == "Invalid input for field/attribute user_data"
    value, complaint = rest.split(". ", 1)
    assert len(value) > 65535
    assert complaint == f"{value!r} is too long"
    assert provider.list() == [created]


def test_user_data_is_rendered_as_garm_provider_common_renders_it() -> None:
    token = "eyJhbGciOi.instance.token"
    data = json.loads(
        bootstrap(
            "garm-runner-1",
            **{"instance-token": token, "ssh-keys": ["ssh-ed25519 AAAAC3 me@host"]},
            extra_specs={
                "pre_install_scripts": {
                    "b.sh": base64.b64encode(b"echo b\n").decode(),
                    "a.sh": base64.b64encode(b"echo a\n").decode(),
                },
                "runner_install_template": base64.b64encode(b"#!/bin/bash\nwrapper\n").decode(),
            },
        )
    )
    text = base64.b64decode(provider_standin._user_data(data)).decode()

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    assert text == (
        "#cloud-config\n"
        "users:\n"
        "    - default\n"
        "package_upgrade: true\n"
        "packages:\n"
        "    - curl\n"
        "    - tar\n"
        "ssh_authorized_keys:\n"
        "    - ssh-ed25519 AAAAC3 me@host\n"
        "system_info:\n"
        "    default_user:\n"
        "        name: runner\n"
        "        home: /home/runner\n"
        "        shell: /bin/bash\n"
        "        groups:\n"
        "            - sudo\n"
        "            - adm\n"
        "            - cdrom\n"
        "            - dialout\n"
        "            - dip\n"
        "            - video\n"
        "            - plugdev\n"
        "            - netdev\n"
        "            - docker\n"
        "            - lxd\n"
        "        sudo: ALL=(ALL) NOPASSWD:ALL\n"
        "runcmd:\n"
        "    - /garm-pre-install/a.sh\n"
        "    - /garm-pre-install/b.sh\n"
        "    - rm -rf /garm-pre-install\n"
        "    - su -l -c /install_runner.sh runner\n"
        "    - rm -f /install_runner.sh\n"
        "write_files:\n"
        "    - encoding: b64\n"
        f"      content: {b64(b'echo a' + bytes([10]))}\n"
        "      owner: root:root\n"
        "      path: /garm-pre-install/a.sh\n"
        '      permissions: "755"\n'
        "    - encoding: b64\n"
        f"      content: {b64(b'echo b' + bytes([10]))}\n"
        "      owner: root:root\n"
        "      path: /garm-pre-install/b.sh\n"
        '      permissions: "755"\n'
        "    - encoding: b64\n"
        f"      content: {b64(b'#!/bin/bash' + bytes([10]) + b'wrapper' + bytes([10]))}\n"
        "      owner: root:root\n"
        "      path: /install_runner.sh\n"
        '      permissions: "755"\n'
    )


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        (
            {"flavor": "m1.huge", "image": "ubuntu-99.04"},
            "failed to resolve flavor m1.huge: failed to find flavor with name or id m1.huge",
        ),
        (
            {"image": "ubuntu-99.04"},
            "failed to resolve image info: failed to find image with name or id ubuntu-99.04 "
            "and visibility 'public'",
        ),
        (
            {"image": ENTITY},
            "failed to resolve image info: failed to find image: Resource not found: "
            f"[GET http://127.0.0.1:9292/v2/images/{ENTITY}], error message: 404 Not Found"
            f"\n\nNo image found with ID {ENTITY}\n\n   ",
        ),
    ],
)
def test_an_image_or_flavor_not_in_the_catalogue_is_refused(
    provider: Provider, params: dict[str, str], reason: str
) -> None:
    stderr = refused(provider, bootstrap("garm-runner-1", **params))
    assert stderr == f"failed to run command: failed to create instance in provider: {reason}"


def test_without_a_catalogue_the_cloud_is_empty_until_one_is_set(provider: Provider) -> None:
    set_catalogue(provider.executable, Catalogue())
    stderr = refused(provider, bootstrap("garm-runner-1"))
    assert "failed to find flavor with name or id m1.small" in stderr
    set_catalogue(provider.executable, Catalogue(images=("ubuntu-24.04",), flavors=("m1.small",)))
    assert provider.create("garm-runner-1")["name"] == "garm-runner-1"


def test_extra_specs_that_are_not_base64_are_refused(provider: Provider) -> None:
    data = bootstrap("garm-runner-1", extra_specs={"pre_install_scripts": {"a.sh": "not base64!"}})
    stderr = refused(provider, data)
    assert stderr == (
        "failed to run command: failed to create instance in provider: failed to build machine "
        "spec: failed to get extra specs: failed to unmarshal extra_specs: illegal base64 data"
    )
