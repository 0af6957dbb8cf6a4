"""The provider shim between GARM and garm-provider-openstack.

End to end, the shim is installed as in the image (its file, executable, next to a provider
named ``garm-provider-openstack``) and run as GARM runs a provider: only GARM's variables, the
bootstrap parameters on stdin. The provider beside it is a recorder that prints what it got.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from container_scripts import provider_shim
from container_scripts.provider_shim import main, nova_pool_id, rewrite_bootstrap, tag_fits
from tests.real_garm.harness import install_shim

ENTITY = "6b1f0a52-8c1e-4d55-9d0e-1f6f5c0a7e10"
LONG_POOL = f"ubuntu-noble-x64-large-{ENTITY}"
# uuid5 of LONG_POOL in the shim's namespace. Pinned: a change would orphan every server
# started under the old mapping (ADR 0008).
LONG_POOL_MAPPED = "9ae5a2f3-c3a7-5d16-a270-a563655ac90e"
SECRET = "os-password-shim-test"
TOKEN = "instance-token-shim-test"

# Records what it was given and answers as told by the test.
RECORDER = textwrap.dedent(
    """
    import json, os, sys
    stdin = sys.stdin.buffer.read()
    record = {"argv0": sys.argv[0], "env": dict(os.environ), "stdin": stdin.decode()}
    with open(os.environ["RECORD_FILE"], "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    sys.stdout.write(os.environ.get("ANSWER", ""))
    sys.stderr.write(os.environ.get("COMPLAINT", ""))
    sys.exit(int(os.environ.get("EXIT", "0")))
    """
)


class Installed:
    def __init__(self, directory: Path) -> None:
        self.shim = install_shim(directory)
        self.provider = directory / provider_shim.PROVIDER_NAME
        self.provider.write_text(f"#!{sys.executable}\n{RECORDER}", encoding="utf-8")
        self.provider.chmod(0o755)
        self.record_file = directory / "record.json"

    def run(
        self, command: str, stdin: bytes = b"", **extra: str
    ) -> subprocess.CompletedProcess[bytes]:
        env = {
            "GARM_COMMAND": command,
            "GARM_CONTROLLER_ID": "0d4c3a1b-2e5f-4a6b-8c7d-9e0f1a2b3c4d",
            "GARM_PROVIDER_CONFIG_FILE": "/etc/garm/provider-cfg-a-0.toml",
            "GARM_INTERFACE_VERSION": "v0.1.0",
            "HTTPS_PROXY": f"http://user:{SECRET}@proxy:3128",
            "RECORD_FILE": str(self.record_file),
            **extra,
        }
        return subprocess.run(
            [str(self.shim)], env=env, input=stdin, capture_output=True, timeout=30, check=False
        )

    def record(self) -> dict[str, Any]:
        return json.loads(self.record_file.read_text(encoding="utf-8"))


@pytest.fixture
def installed(tmp_path: Path) -> Installed:
    return Installed(tmp_path)


def bootstrap(pool_id: str, **extra: Any) -> bytes:
    document = {
        "name": "garm-runner-1",
        "pool_id": pool_id,
        "instance-token": TOKEN,
        "labels": ["linux", "large"],
        "extra_specs": {"pre_install_scripts": {"a.sh": "ZWNobyDDqQ=="}},
        "note": "d\u00e9j\u00e0 vu <&>",
        **extra,
    }
    return json.dumps(document, indent=1).encode()


# --------------------------------------------------------------------------- the mapping


def test_the_derivation_is_pinned_and_stable_across_processes() -> None:
    assert nova_pool_id(LONG_POOL) == LONG_POOL_MAPPED
    code = f"import provider_shim; print(provider_shim.nova_pool_id({LONG_POOL!r}))"
    for seed in ("0", "1", "random"):
        # The shim is found where this process found it, whatever PYTHONPATH says.
        src = str(Path(provider_shim.__file__).parent)
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": src}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert done.stdout.strip() == LONG_POOL_MAPPED


@pytest.mark.parametrize(
    "pool_id",
    [
        ENTITY,  # a pool's own ID (a UUID)
        f"abcdefghij-{ENTITY}",  # a 10-character scale-set name: a 60-character tag
        "x" * 47,
    ],
)
def test_a_pool_id_whose_tag_fits_is_untouched(pool_id: str) -> None:
    assert len(provider_shim.POOL_TAG_PREFIX + pool_id) <= 60
    assert tag_fits(pool_id)
    assert nova_pool_id(pool_id) == pool_id


@pytest.mark.parametrize(
    "pool_id", [f"abcdefghijk-{ENTITY}", "x" * 48, LONG_POOL, "a,b", "runners/x"]
)
def test_a_pool_id_nova_would_refuse_becomes_a_uuid(pool_id: str) -> None:
    assert not tag_fits(pool_id)
    mapped = nova_pool_id(pool_id)
    assert len(mapped) == 36
    assert tag_fits(mapped)
    assert nova_pool_id(pool_id) == mapped
    assert nova_pool_id(pool_id + "2") != mapped


def test_bootstrap_rewrite_changes_only_the_pool_id() -> None:
    original = json.loads(bootstrap(LONG_POOL))
    rewritten = json.loads(rewrite_bootstrap(bootstrap(LONG_POOL)))
    assert rewritten == {**original, "pool_id": LONG_POOL_MAPPED}


@pytest.mark.parametrize(
    "data", [bootstrap(ENTITY), b"not json", b"[1, 2]", b'{"pool_id": 7}', b"{}"]
)
def test_bootstrap_the_shim_need_not_change_passes_byte_for_byte(data: bytes) -> None:
    assert rewrite_bootstrap(data) == data


# --------------------------------------------------------------------------- main, in process


class Exec:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], dict[str, str]]] = []
        self.stdin: list[bytes] = []

    def execve(self, path: str, argv: list[str], env: Any) -> None:
        self.calls.append((path, argv, dict(env)))

    def replace_stdin(self, data: bytes) -> None:
        self.stdin.append(data)


def test_main_maps_the_environment_and_stdin_of_a_create() -> None:
    fake = Exec()
    environ = {"GARM_COMMAND": "CreateInstance", "GARM_POOL_ID": LONG_POOL, "OTHER": "kept"}
    rc = main(environ, io.BytesIO(bootstrap(LONG_POOL)), fake.execve, fake.replace_stdin)
    assert rc == 0
    ((path, argv, env),) = fake.calls
    assert path == argv[0] == provider_shim.provider_path()
    assert Path(path).name == "garm-provider-openstack"
    assert env == {**environ, "GARM_POOL_ID": LONG_POOL_MAPPED}
    assert environ["GARM_POOL_ID"] == LONG_POOL  # the caller's mapping is not changed
    (data,) = fake.stdin
    assert json.loads(data)["pool_id"] == LONG_POOL_MAPPED


@pytest.mark.parametrize(
    ("command", "pool_id"),
    [("ListInstances", LONG_POOL), ("CreateInstance", ENTITY), ("GetInstance", "")],
)
def test_main_leaves_stdin_alone_unless_a_create_needs_a_new_pool_id(
    command: str, pool_id: str
) -> None:
    fake = Exec()
    stdin = io.BytesIO(b"must not be read")
    environ = {"GARM_COMMAND": command, "GARM_POOL_ID": pool_id}
    assert main(environ, stdin, fake.execve, fake.replace_stdin) == 0
    assert fake.stdin == []
    assert stdin.tell() == 0
    ((_, _, env),) = fake.calls
    assert env["GARM_POOL_ID"] == nova_pool_id(pool_id)


def test_main_reports_a_provider_it_cannot_run(capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(path: str, argv: list[str], env: Any) -> None:
        raise FileNotFoundError(2, "No such file or directory")

    rc = main({"GARM_COMMAND": "GetVersion", "SECRET": SECRET}, io.BytesIO(), refuse)
    assert rc == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"garm-provider-shim: cannot execute {provider_shim.provider_path()}: "
        "No such file or directory\n"
    )


# --------------------------------------------------------------------------- end to end


def test_create_with_a_long_pool_id_reaches_the_provider_mapped(installed: Installed) -> None:
    answer = '{"provider_id":"p-1","name":"garm-runner-1","status":"running"}'
    result = installed.run(
        "CreateInstance", bootstrap(LONG_POOL), GARM_POOL_ID=LONG_POOL, ANSWER=answer
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, answer.encode(), b"")
    record = installed.record()
    assert record["argv0"] == str(installed.provider)
    assert record["env"]["GARM_POOL_ID"] == LONG_POOL_MAPPED
    sent = json.loads(bootstrap(LONG_POOL))
    assert json.loads(record["stdin"]) == {**sent, "pool_id": LONG_POOL_MAPPED}


def test_everything_else_passes_through_untouched(installed: Installed) -> None:
    data = bootstrap(ENTITY)
    result = installed.run(
        "CreateInstance",
        data,
        GARM_POOL_ID=ENTITY,
        ANSWER="out \u00e9",
        COMPLAINT="failed to run command: refused",
        EXIT="31",
    )
    assert result.returncode == 31
    assert result.stdout == "out \u00e9".encode()
    assert result.stderr == b"failed to run command: refused"
    record = installed.record()
    assert record["stdin"].encode() == data
    sent = {
        "GARM_COMMAND": "CreateInstance",
        "GARM_POOL_ID": ENTITY,
        "HTTPS_PROXY": f"http://user:{SECRET}@proxy:3128",
        "EXIT": "31",
    }
    assert sent.items() <= record["env"].items()


def test_bootstrap_larger_than_a_pipe_buffer_reaches_the_provider(installed: Installed) -> None:
    script = "IyEvYmluL3NoCg==" * 40_000  # 640 kB of base64, as a large pre-install script
    data = bootstrap(LONG_POOL, extra_specs={"pre_install_scripts": {"big.sh": script}})
    result = installed.run("CreateInstance", data, GARM_POOL_ID=LONG_POOL)
    assert result.returncode == 0, result.stderr
    received = json.loads(installed.record()["stdin"])
    assert received["extra_specs"]["pre_install_scripts"]["big.sh"] == script
    assert received["pool_id"] == LONG_POOL_MAPPED


def test_list_with_a_long_pool_id_is_mapped_and_stdin_untouched(installed: Installed) -> None:
    result = installed.run("ListInstances", b"", GARM_POOL_ID=LONG_POOL, ANSWER="[]")
    assert (result.returncode, result.stdout) == (0, b"[]")
    assert installed.record()["env"]["GARM_POOL_ID"] == LONG_POOL_MAPPED


def test_no_provider_beside_the_shim_fails_without_leaking(installed: Installed) -> None:
    installed.provider.unlink()
    result = installed.run("CreateInstance", bootstrap(LONG_POOL), GARM_POOL_ID=LONG_POOL)
    assert result.returncode == 1
    assert result.stdout == b""
    stderr = result.stderr.decode()
    assert stderr == (
        f"garm-provider-shim: cannot execute {installed.provider}: No such file or directory\n"
    )
    for value in (SECRET, TOKEN, LONG_POOL, LONG_POOL_MAPPED):
        assert value not in stderr


def test_the_shim_writes_nothing_of_its_own(installed: Installed) -> None:
    result = installed.run("CreateInstance", bootstrap(LONG_POOL), GARM_POOL_ID=LONG_POOL)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
