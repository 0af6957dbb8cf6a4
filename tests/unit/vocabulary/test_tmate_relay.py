"""The tmate relay: the proxy parse, the rendered ``01-tmate-proxy`` script, and the relay run.

The script is checked four ways: exact lines, Debian's ``shellcheck``, bash running it with its
system paths rewritten into a temp dir (``systemctl`` and ``apt-get`` stubbed), and the socat
command of its unit run for real: through Debian's ``tinyproxy`` (an HTTP CONNECT proxy the
test starts on 127.0.0.1 with its own config, stopped by pid) to a TCP server on 127.0.0.1
standing in for tmate's SSH port, with bytes crossing both ways. Without the Debian programs
those parts skip with one line (``.ci/run`` installs them).
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import socketserver
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.log_secrets import register_secret
from vocabulary import runner_template as rt
from vocabulary.tmate_relay import (
    RELAY_HOST,
    RELAY_PORT,
    DebugSshConnection,
    ProxyAddress,
    RelayRefused,
    TmateRelay,
    proxy_address,
    relay_host,
)

SERVER = DebugSshConnection("tmate.example.com", 10022, "SHA256:rsa", "SHA256:ed")
# tinyproxy's config takes no symbols in a password.
PASSWORD = "Relay-Pa55_w0rd.x"
register_secret(PASSWORD)
BANNER = b"SSH-2.0-tmate-standin\r\n"
MESSAGE = b"keystrokes from the runner \x00\xff\n"
NO_RELAY_PROGRAMS = (
    "socat or tinyproxy not on PATH (Debian's socat, tinyproxy; .ci/run installs them)"
)

# ---------------------------------------------------------------- the proxy parse


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("http://squid.internal:3128", ProxyAddress("squid.internal", 3128)),
        ("squid.internal:3128", ProxyAddress("squid.internal", 3128)),
        ("  HTTP://Squid.Internal:3128/  ", ProxyAddress("squid.internal", 3128)),
        ("http://squid.internal", ProxyAddress("squid.internal", 80)),
        ("squid.internal", ProxyAddress("squid.internal", 80)),
        ("http://10.1.2.3:3128", ProxyAddress("10.1.2.3", 3128)),
        ("http://[2001:db8::8]:3128", ProxyAddress("[2001:db8::8]", 3128)),
        ("[2001:DB8:0::8]:3128", ProxyAddress("[2001:db8::8]", 3128)),
        ("http://[2001:db8::8]", ProxyAddress("[2001:db8::8]", 80)),
        ("http://proxy_1.lab:8080", ProxyAddress("proxy_1.lab", 8080)),
    ],
)
def test_proxy_values_the_relay_takes(value: str, expected: ProxyAddress):
    assert proxy_address(value) == expected


@pytest.mark.parametrize(
    ("value", "credentials"),
    [
        ("http://alice:s3cret@squid:3128", "alice:s3cret"),
        ("alice:s3cret@squid:3128", "alice:s3cret"),
        ("http://alice:p%40ss%3Aw0rd%20x@squid:3128", "alice:p@ss:w0rd x"),
        ("http://alice:a:b@squid:3128", "alice:a:b"),
        ("http://alice@squid:3128", "alice:"),
        ("http://al%C3%AFce:pw@[::1]:3128", "al\u00efce:pw"),
    ],
)
def test_credentials_are_decoded_and_kept_out_of_repr(value: str, credentials: str):
    address = proxy_address(value)
    assert address.credentials == credentials
    assert credentials not in repr(address)
    assert credentials not in repr(TmateRelay.through(value, SERVER))


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("https://squid.internal:3128", "not an http:// proxy"),
        ("socks5://squid.internal:1080", "not an http:// proxy"),
        ("ftp://squid.internal", "not an http:// proxy"),
        ("http://2001:db8::8:3128", "no host and port it can use"),
        ("http://[2001:db8::8:3128", "no host and port it can use"),
        ("http://[fe80::1%25eth0]:3128", "no host and port it can use"),
        ("http://squid.internal:0", "no host and port it can use"),
        ("http://squid.internal:65536", "no host and port it can use"),
        ("http://squid.internal:port", "no host and port it can use"),
        ("http://:3128", "no host and port it can use"),
        ("", "no host and port it can use"),
        ("http://squid internal:3128", "no host and port it can use"),
        ("http://squid;reboot:3128", "no host and port it can use"),
        ("http://%24(reboot):3128", "no host and port it can use"),
        ("http://-squid:3128", "no host and port it can use"),
        ("http://user%3Aname:pw@squid:3128", "credentials HTTP basic authentication cannot"),
        ("http://alice:pw%0D%0AX-Evil:1@squid:3128", "credentials HTTP basic authentication"),
    ],
)
def test_proxy_values_the_relay_refuses_are_named_never_shown(value: str, why: str):
    with pytest.raises(RelayRefused) as refused:
        proxy_address(value)
    assert refused.value.reason.startswith(
        f"runner_http_proxy cannot carry the tmate relay: {why}"
    )
    assert not refused.value.server_side
    for part in ("squid", "pw", "reboot", "2001", "alice", "user"):
        assert part not in refused.value.reason


@pytest.mark.parametrize(
    ("host", "written"),
    [
        ("tmate.example.com", "tmate.example.com"),
        ("10.0.0.5", "10.0.0.5"),
        ("2001:db8::5", "[2001:db8::5]"),
        ("tmate example", None),
        ("tmate.example.com.", None),
        ("fe80::1%eth0", None),
        ("[2001:db8::5]", None),
        ("a" * 64, None),
    ],
)
def test_relay_host(host: str, written: str | None):
    assert relay_host(host) == written


def test_a_server_host_the_relay_cannot_reach_is_the_servers_refusal():
    server = DebugSshConnection("tmate example", 22, "r", "e", unit_name="tmate/0")
    with pytest.raises(RelayRefused) as refused:
        TmateRelay.through("http://squid:3128", server)
    assert refused.value.server_side
    assert refused.value.reason == (
        "the tmate relay cannot reach the debug-ssh host: not a DNS name or IP address"
    )


def test_the_runners_are_told_the_relay_with_the_servers_fingerprints():
    relay = TmateRelay.through("squid:3128", SERVER)
    assert relay.relayed == DebugSshConnection(RELAY_HOST, RELAY_PORT, "SHA256:rsa", "SHA256:ed")
    assert (RELAY_HOST, RELAY_PORT) == ("127.0.0.1", 3129)


# ---------------------------------------------------------------- the rendered script


def exec_start(script: str) -> list[str]:
    """The command of the unit the script writes (systemd's quoting here is the shell's)."""
    (line,) = [line for line in script.splitlines() if line.startswith("ExecStart=")]
    return shlex.split(line.removeprefix("ExecStart="))


def written_credentials(script: str) -> str | None:
    """What the script writes into the proxy's credentials file, or None when it writes none."""
    lines = [line for line in script.splitlines() if line.startswith("printf '%s' ")]
    if not lines:
        return None
    (line,) = lines
    words = shlex.split(line)
    assert words[:2] == ["printf", "%s"]
    assert words[3:] == [">", rt.TMATE_RELAY_AUTH_PATH]
    return words[2]


def test_the_unit_runs_socat_through_the_proxy_to_the_server():
    script = rt.render_tmate_relay_script(TmateRelay.through("http://squid:3128", SERVER))
    assert exec_start(script) == [
        "socat",
        "TCP-LISTEN:3129,bind=127.0.0.1,reuseaddr,fork",
        "PROXY:squid:tmate.example.com:10022,proxyport=3128",
    ]
    assert written_credentials(script) is None
    assert rt.TMATE_RELAY_AUTH_PATH not in script
    assert script.startswith("#!/bin/bash\n")
    assert f"cat > {rt.TMATE_RELAY_UNIT_PATH} << " in script
    assert "systemctl enable --now tmate-proxy.service" in script
    assert script.rstrip().endswith("exit 0")


def test_ipv6_hosts_are_bracketed_in_the_socat_address():
    server = DebugSshConnection("2001:db8::5", 22, "r", "e")
    script = rt.render_tmate_relay_script(TmateRelay.through("http://[2001:db8::8]:8080", server))
    assert exec_start(script)[2] == "PROXY:[2001:db8::8]:[2001:db8::5]:22,proxyport=8080"


def test_credentials_go_to_a_root_only_file_never_to_the_command_line():
    value = "http://alice:it%27s%20%24HOME%60x%60@squid:3128"
    script = rt.render_tmate_relay_script(TmateRelay.through(value, SERVER))
    assert exec_start(script)[2] == (
        "PROXY:squid:tmate.example.com:10022,proxyport=3128,"
        f"proxy-authorization-file={rt.TMATE_RELAY_AUTH_PATH}"
    )
    assert written_credentials(script) == "alice:it's $HOME`x`"
    assert f"install -d -m 0700 {rt.TMATE_RELAY_CONFIG_DIR}\n" in script
    assert f"install -m 0600 /dev/null {rt.TMATE_RELAY_AUTH_PATH}\n" in script
    assert "it's" not in "\n".join(line for line in script.splitlines() if "ExecStart" in line)


RENDERED = {
    "plain": ("http://squid.internal:3128", SERVER),
    "credentials": ("http://alice:it%27s%20%24HOME%60x%60%22@squid:3128", SERVER),
    "ipv6": ("[2001:db8::8]:3128", DebugSshConnection("2001:db8::5", 22, "r", "e")),
    "no-port": ("squid.internal", SERVER),
}


@pytest.mark.parametrize("case", sorted(RENDERED))
def test_the_rendered_script_passes_shellcheck(case: str, tmp_path: Path):
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck not on PATH (Debian's shellcheck; .ci/run installs it)")
    proxy, server = RENDERED[case]
    script = tmp_path / "01-tmate-proxy"
    script.write_text(rt.render_tmate_relay_script(TmateRelay.through(proxy, server)))
    result = subprocess.run(
        [shellcheck, "--shell=bash", "--severity=style", str(script)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------- the script run by bash

_STUB = """#!/bin/bash
echo "$(basename "$0") $*" >> "$STUB_LOG"
if [ "$(basename "$0")" = apt-get ] && [ "$1" = install ] && [ -n "$APT_INSTALLS" ]; then
    printf '#!/bin/bash\\n' > "$STUB_BIN/socat" && chmod 0755 "$STUB_BIN/socat"
fi
exit "${STUB_RC:-0}"
"""
# What the script runs besides the stubs, and bash itself.
_TOOLS = ("bash", "cat", "sed", "install", "env", "basename", "chmod")


def run_script(
    script: str, tmp_path: Path, *, socat: bool, apt_installs: bool = True
) -> tuple[subprocess.CompletedProcess[str], list[str], Path]:
    """Run the script with its system paths in ``tmp_path``; only stubs and a few tools on PATH.

    Returns the result, the stubbed calls and the directory standing in for ``/etc``.
    """
    etc = tmp_path / "etc"
    (etc / "systemd" / "system").mkdir(parents=True)
    script = script.replace(rt.TMATE_RELAY_UNIT_PATH, str(etc / "systemd/system/unit.service"))
    script = script.replace(rt.TMATE_RELAY_CONFIG_DIR, str(etc / "tmate-proxy"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in _TOOLS:
        found = shutil.which(tool)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)
    for stub in ("systemctl", "apt-get", *(("socat",) if socat else ())):
        (bin_dir / stub).write_text(_STUB)
        (bin_dir / stub).chmod(0o755)
    log = tmp_path / "calls"
    log.touch()
    path = tmp_path / "01-tmate-proxy"
    path.write_text(script)
    result = subprocess.run(
        [str(bin_dir / "bash"), str(path)],
        env={
            "PATH": str(bin_dir),
            "STUB_LOG": str(log),
            "STUB_BIN": str(bin_dir),
            "APT_INSTALLS": "yes" if apt_installs else "",
        },
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    return result, log.read_text().splitlines(), etc


def test_the_script_writes_the_unit_and_the_credentials_and_starts_the_relay(tmp_path: Path):
    relay = TmateRelay.through(f"http://alice:{PASSWORD}@squid:3128", SERVER)
    script = rt.render_tmate_relay_script(relay)
    result, calls, etc = run_script(script, tmp_path, socat=True)
    assert result.returncode == 0, result.stderr
    assert calls == ["systemctl daemon-reload", "systemctl enable --now tmate-proxy.service"]
    unit = (etc / "systemd/system/unit.service").read_text()
    assert "[Service]\n" in unit and "Restart=always\n" in unit
    assert "WantedBy=multi-user.target\n" in unit
    auth = etc / "tmate-proxy" / "proxy-auth"
    # socat sends the file as it is: no trailing newline, and only its owner reads it.
    assert auth.read_bytes() == f"alice:{PASSWORD}".encode()
    assert stat.S_IMODE(auth.stat().st_mode) == 0o600
    assert stat.S_IMODE((etc / "tmate-proxy").stat().st_mode) == 0o700
    assert "[tmate-proxy] tmate connections to 127.0.0.1:3129 now go through" in result.stdout
    assert PASSWORD not in result.stdout + result.stderr


def test_the_script_installs_socat_when_the_image_lacks_it(tmp_path: Path):
    script = rt.render_tmate_relay_script(TmateRelay.through("squid:3128", SERVER))
    result, calls, etc = run_script(script, tmp_path, socat=False)
    assert result.returncode == 0, result.stderr
    assert calls[:2] == [
        "apt-get update -q",
        "apt-get install -y -q --no-install-recommends socat",
    ]
    assert calls[2:] == ["systemctl daemon-reload", "systemctl enable --now tmate-proxy.service"]
    assert (etc / "systemd/system/unit.service").exists()
    assert not (etc / "tmate-proxy").exists()


def test_without_socat_the_script_says_so_writes_nothing_and_exits_0(tmp_path: Path):
    script = rt.render_tmate_relay_script(TmateRelay.through("squid:3128", SERVER))
    result, calls, etc = run_script(script, tmp_path, socat=False, apt_installs=False)
    assert result.returncode == 0
    assert "[tmate-proxy] error: socat is not installed" in result.stdout
    assert not any(call.startswith("systemctl") for call in calls)
    assert not (etc / "systemd/system/unit.service").exists()


# ---------------------------------------------------------------- the relay run for real


def free_port(host: str = "127.0.0.1") -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def wait_listening(host: str, port: int, process: subprocess.Popen[bytes], output: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{process.args!r} exited: {output.read_text(errors='replace')}")
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"{process.args!r} did not listen on {host}:{port}")


@contextmanager
def started(argv: list[str], output: Path, host: str, port: int) -> Iterator[None]:
    """A program started, listening on ``host:port``, stopped by its pid after."""
    with output.open("wb") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_listening(host, port, process, output)
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


@contextmanager
def tinyproxy(tmp_path: Path, listen: str, port: int, user: str = "") -> Iterator[Path]:
    """Debian's tinyproxy on ``listen:port`` with its own config; yields its log."""
    log = tmp_path / "tinyproxy.log"
    config = tmp_path / "tinyproxy.conf"
    lines = [
        f"Port {port}",
        f"Listen {listen}",
        "Timeout 30",
        "MaxClients 8",
        "LogLevel Connect",
        f'LogFile "{log}"',
    ]
    if user:
        lines.append(f"BasicAuth {user} {PASSWORD}")
    config.write_text("\n".join(lines) + "\n")
    binary = shutil.which("tinyproxy")
    assert binary is not None
    with started([binary, "-d", "-c", str(config)], tmp_path / "tinyproxy.out", listen, port):
        yield log


class _TmateStandin(socketserver.BaseRequestHandler):
    """tmate's SSH port as far as the relay sees it: a banner, then every byte echoed."""

    def handle(self) -> None:
        self.request.sendall(BANNER)
        while data := self.request.recv(4096):
            self.request.sendall(data)


@contextmanager
def tmate_standin() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _TmateStandin)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def receive(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def relay_session(script: str, tmp_path: Path) -> tuple[bytes, bytes]:
    """Run the unit's socat as the script writes it; one session through it.

    Only the listening port (the test's own, free) and the credentials file's path (the test's
    copy of what the script writes) differ from the rendered command.

    Returns the bytes the runner side received first (the server's banner) and its echo.
    """
    port = free_port()
    argv = [
        word.replace(f"TCP-LISTEN:{RELAY_PORT},", f"TCP-LISTEN:{port},")
        for word in exec_start(script)
    ]
    credentials = written_credentials(script)
    if credentials is not None:
        auth = tmp_path / "proxy-auth"
        auth.write_text(credentials)
        auth.chmod(0o600)
        argv = [word.replace(rt.TMATE_RELAY_AUTH_PATH, str(auth)) for word in argv]
    socat = shutil.which(argv[0])
    assert socat is not None
    with (
        started([socat, *argv[1:]], tmp_path / "socat.out", RELAY_HOST, port),
        socket.create_connection((RELAY_HOST, port), timeout=10) as conn,
    ):
        conn.settimeout(10)
        banner = receive(conn, len(BANNER))
        if not banner:  # the proxy refused the CONNECT: socat closed the session
            return banner, b""
        conn.sendall(MESSAGE)
        echoed = receive(conn, len(MESSAGE))
    return banner, echoed


@pytest.fixture
def relay_programs() -> None:
    if shutil.which("socat") is None or shutil.which("tinyproxy") is None:
        pytest.skip(NO_RELAY_PROGRAMS)


def _ipv6_loopback() -> bool:
    try:
        free_port("::1")
    except OSError:
        return False
    return True


# The proxy values (``{port}``: tinyproxy's), by case: where tinyproxy listens, the value, the
# user tinyproxy asks for.
REAL_PROXIES = {
    "scheme": ("127.0.0.1", "http://127.0.0.1:{port}", ""),
    "no-scheme": ("127.0.0.1", "127.0.0.1:{port}", ""),
    "ipv6": ("::1", "http://[::1]:{port}", ""),
    "credentials": ("127.0.0.1", f"http://alice:{PASSWORD}@127.0.0.1:{{port}}", "alice"),
    "no-scheme-credentials": ("127.0.0.1", f"alice:{PASSWORD}@127.0.0.1:{{port}}", "alice"),
}


@pytest.mark.usefixtures("relay_programs")
@pytest.mark.parametrize("case", sorted(REAL_PROXIES))
def test_bytes_cross_the_relay_both_ways_through_a_real_proxy(tmp_path: Path, case: str):
    listen, proxy, user = REAL_PROXIES[case]
    if listen == "::1" and not _ipv6_loopback():
        pytest.skip("no IPv6 loopback here")
    port = free_port(listen)
    with tmate_standin() as tmate_port, tinyproxy(tmp_path, listen, port, user) as log:
        server = DebugSshConnection("127.0.0.1", tmate_port, "r", "e")
        script = rt.render_tmate_relay_script(TmateRelay.through(proxy.format(port=port), server))
        banner, echoed = relay_session(script, tmp_path)
        seen = log.read_text(errors="replace")
    assert banner == BANNER, case
    assert echoed == MESSAGE
    assert f"CONNECT 127.0.0.1:{tmate_port} HTTP/1.0" in seen


@pytest.mark.usefixtures("relay_programs")
def test_a_proxy_named_without_a_port_is_reached_on_port_80(tmp_path: Path):
    # Port 80 needs root; a loopback address of its own keeps it apart from anything on 80.
    listen = f"127.{os.getpid() % 250 + 1}.{threading.get_ident() % 250 + 1}.80"
    if os.geteuid() != 0:
        pytest.skip("port 80 needs root")
    try:
        free_port(listen)
        with socket.socket() as probe:
            probe.bind((listen, 80))
    except OSError as exc:
        pytest.skip(f"cannot listen on {listen}:80 here: {exc}")
    with tmate_standin() as tmate_port, tinyproxy(tmp_path, listen, 80) as log:
        server = DebugSshConnection("127.0.0.1", tmate_port, "r", "e")
        script = rt.render_tmate_relay_script(TmateRelay.through(listen, server))
        assert exec_start(script)[2].endswith(",proxyport=80")
        banner, echoed = relay_session(script, tmp_path)
        seen = log.read_text(errors="replace")
    assert (banner, echoed) == (BANNER, MESSAGE)
    assert f"CONNECT 127.0.0.1:{tmate_port} HTTP/1.0" in seen


@pytest.mark.usefixtures("relay_programs")
def test_the_proxy_refuses_the_relay_without_the_right_credentials(tmp_path: Path):
    # The relay really authenticates: the same proxy lets nothing through on a wrong password.
    port = free_port()
    with tmate_standin() as tmate_port, tinyproxy(tmp_path, "127.0.0.1", port, "alice"):
        server = DebugSshConnection("127.0.0.1", tmate_port, "r", "e")
        wrong = f"http://alice:not-{PASSWORD[::-1]}@127.0.0.1:{port}"
        script = rt.render_tmate_relay_script(TmateRelay.through(wrong, server))
        banner, _ = relay_session(script, tmp_path)
    assert banner == b""
