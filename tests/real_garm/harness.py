"""Run the real GARM server for tests, started exactly as the charm's Pebble layer starts it.

:class:`RealGarm` runs ``garm_entrypoint`` with a service environment (the one the charm planned,
or one built the same way), so the entrypoint validates it, writes ``config.toml`` and the
provider files and execs the GARM binary. Only the :class:`garm_entrypoint.Layout` differs from
production: a temporary configuration directory, the SQLite file inside it, GARM on a free port
of 127.0.0.1 and the stand-in external provider in place of the OpenStack one. As in the image,
GARM runs the provider through the provider shim (``src/container_scripts/provider_shim.py``)
installed beside it; the stand-in's cloud has the images and flavors of
:data:`DEFAULT_CATALOGUE` unless a test sets others (:meth:`RealGarm.set_catalogue`).

In front of GARM sits a :class:`~tests.real_garm.proxy.RecordingProxy`, so tests see what GARM
itself received and answered. After GARM accepts its controller URLs, the proxy has the harness
point GARM's ``github.com`` endpoint at the GitHub stand-in, before any credential can exist.

The surface follows the emulator's where the charm driver and the conformance tests use it
(``url``, ``base_url``, ``requests``, ``writes()``, ``clear_requests()``, ``bootstrap()``,
``replan()`` and the read views), so a test can take either backend.

Where real Pebble is found (:data:`tests.local_parts.PEBBLE`), GARM is the service of the
charm's own layer on a real Pebble (:mod:`tests.real_garm.pebble_service`): Pebble starts and
stops it, restarts it when it exits (its back-off) and when its ``garm-alive`` check goes down,
as in the pod, on one port held for the harness's life. Without Pebble, every process is
started in its own session and stopped by its pid (the whole group, so the provider children go
too), and a GARM that exits on its own is started again as Pebble would (its back-off). Either
way, GARM's log is kept in the work directory for failure messages; a GARM that does not answer
in time is sent SIGQUIT (Go then writes every goroutine's stack to the log) and started once
more; under Pebble, its ``garm-alive`` check usually goes down first (15 s), and Pebble ends
it and starts it again, as in the pod. Exits are noted in :attr:`RealGarm.exits` and
:data:`UNEXPECTED_EXITS`. A GARM that exits before it answers is the caller's
:class:`GarmStartError`, and stays stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Self

import httpx

from container_scripts import garm_entrypoint
from tests.local_parts import GARM, PEBBLE
from tests.log_secrets import register_secret
from tests.real_garm import provider_standin
from tests.real_garm.pebble_service import CHECK_FAILED, PebbleService, ServiceProcess, alive
from tests.real_garm.ports import reserved_port
from tests.real_garm.provider_standin import Catalogue
from tests.real_garm.proxy import API_PREFIX, RecordedCall, RecordingProxy, writes

REPO_ROOT = Path(__file__).resolve().parents[2]
# The container's scripts run there as single files, on their own directory.
SCRIPTS_DIR = REPO_ROOT / "src" / "container_scripts"
SHIM_SOURCE = SCRIPTS_DIR / "provider_shim.py"
SKIP_REASON = GARM.skip_reason()
DEFAULT_ADMIN = ("admin", "Real-Garm-Adm1n-Passw0rd-9f3c7a1e")
# GARM answers within a second, a few under load; one that does not answer in this time has
# hung (seen on restarts with credentials and entities in its database, see _launch).
START_TIMEOUT = 60.0
# The images and flavors the tests' scale sets name, so their runners can start.
DEFAULT_CATALOGUE = Catalogue(
    images=("ubuntu-24.04", "ubuntu-22.04", "noble", "jammy"),
    flavors=("small", "m1.small", "large"),
)
STOP_TIMEOUT = 10.0
# A GARM that exits on its own is restarted as Pebble restarts it (the charm's layer keeps the
# default on-failure: restart): after half a second, doubling up to 30 s, and back to half a
# second once it stayed up 30 s.
RESTART_DELAY = 0.5
RESTART_DELAY_LIMIT = 30.0
# One line per GARM of this test process that exited on its own (the conformance suite lists
# them at the end of a run).
UNEXPECTED_EXITS: list[str] = []

# Runs the charm's entrypoint with a test layout; the entrypoint then execs GARM in place, so
# the process started here is GARM itself and its pid (written to the pid file first) is GARM's.
# Its output goes to GARM's log, whoever started it.
_RUNNER = """
import json, os, sys
from pathlib import Path
log = os.open(sys.argv[3], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.dup2(log, 1)
os.dup2(log, 2)
pid = Path(sys.argv[4])
pid.with_suffix(".new").write_text(str(os.getpid()))
pid.with_suffix(".new").replace(pid)
sys.path.insert(0, sys.argv[1])
import garm_entrypoint
fields = json.loads(sys.argv[2])
fields["config_dir"] = Path(fields["config_dir"])
sys.exit(garm_entrypoint.main(layout=garm_entrypoint.Layout(**fields)))
"""


class GarmStartError(RuntimeError):
    """GARM exited or did not answer in time; the message carries the end of its log."""


class GarmHungError(GarmStartError):
    """GARM ran but did not answer in time, and was ended: by the harness or by Pebble's check."""

    def __init__(
        self, message: str, *, pid: int, note: str = "its goroutines are in its log"
    ) -> None:
        """``pid``: the GARM that hung (ended since); ``note``: how it ended, for the exits."""
        super().__init__(message)
        self.pid = pid
        self.note = note


# GARM's process: the harness's child, or Pebble's.
_Process = subprocess.Popen[bytes] | ServiceProcess


def garm_binary() -> Path | None:
    """Return the GARM binary to test against (:data:`tests.local_parts.GARM`), else None."""
    return GARM.find()


def install_shim(directory: Path) -> Path:
    """Install the provider shim into ``directory`` under its image name, as the rock does.

    The copy's shebang names the running interpreter (the image's is ``/usr/bin/python3``), so
    it runs with the empty ``PATH`` GARM gives providers; it execs the provider beside it.
    """
    source = SHIM_SOURCE.read_text(encoding="utf-8")
    body = source.split("\n", 1)[1] if source.startswith("#!") else source
    target = directory / Path(garm_entrypoint.PROVIDER_SHIM).name
    target.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
    target.chmod(0o755)
    return target


def standalone_environment(providers: list[dict[str, str]] | None = None) -> dict[str, str]:
    """Build a service environment as the charm would, with fresh secrets, on SQLite."""
    from records import secrets_store
    from workload import pebble_layer

    source = pebble_layer.entrypoint_source()
    return pebble_layer.build_environment(
        providers_json=json.dumps(providers or []),
        jwt_secret=secrets.token_hex(32),
        passphrase=secrets_store.generate_passphrase(),
        database=pebble_layer.DatabaseConfig.sqlite(),
        app_base_url="http://garm.test.svc.cluster.local:8080",
        proxy_env={},
        config_version=pebble_layer.config_version(source),
        ca_bundles={},
    )


class RealGarm:
    """One real GARM, its recording proxy and its working directory.

    Args:
        workdir: an empty directory the harness owns (configuration, database, log).
        binary: the GARM executable.
        provider_binary: the external provider the shim runs for every configured provider.
        provider_shim: what GARM runs as the provider (the shim beside ``provider_binary``), or
            None to have GARM run ``provider_binary`` itself, as on an image without the shim.
        github_endpoint: the JSON body for ``PUT /github/endpoints/github.com`` (the GitHub
            stand-in's URLs), or None to leave GARM pointing at github.com.
        pebble: the real Pebble to run GARM under, or None to imitate its restarts.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        binary: Path,
        provider_binary: Path,
        provider_shim: Path | None = None,
        github_endpoint: Mapping[str, str] | None = None,
        pebble: Path | None = None,
    ) -> None:
        self.workdir = workdir
        self.pebble = pebble
        self.binary = binary
        self.provider_binary = provider_binary
        self.provider_shim = provider_shim
        self.github_endpoint = dict(github_endpoint) if github_endpoint else None
        self.admin: tuple[str, str] | None = None
        self.environment: dict[str, str] = {}
        self.starts = 0
        self.exits: list[str] = []
        self._endpoint_pointed = False
        # Held while GARM is started or stopped, by the harness or by a restart after an exit.
        self._lock = threading.RLock()
        self._restart_delay = RESTART_DELAY
        self._process: _Process | None = None
        self._port = 0
        self._token: str | None = None
        self._http: httpx.Client | None = None
        self._service: PebbleService | None = None
        self._held_port = contextlib.ExitStack()
        self.proxy = RecordingProxy()
        self.proxy.on_urls_set = self._point_endpoint_once

    @classmethod
    def prepare(
        cls,
        root: Path,
        *,
        binary: Path,
        github_endpoint: Mapping[str, str],
        shim: bool = True,
    ) -> Self:
        """Lay out ``root`` (``garm/`` for GARM, ``bin/`` with the shim and the stand-in).

        The stand-in is installed under the OpenStack provider's name, next to the shim that
        execs it, with :data:`DEFAULT_CATALOGUE`. ``shim=False`` has GARM run the stand-in
        directly (what an image without the shim does). GARM runs under the real Pebble where
        one is found.

        Returns a RealGarm whose recording proxy already listens, so its ``url`` can be handed
        to the charm; GARM itself starts with :meth:`start` or the charm's first replan.
        """
        bin_dir = root / "bin"
        bin_dir.mkdir(parents=True)
        (root / "garm").mkdir()
        provider = provider_standin.install(
            bin_dir, DEFAULT_CATALOGUE, name=Path(garm_entrypoint.PROVIDER_BINARY).name
        )
        real = cls(
            root / "garm",
            binary=binary,
            provider_binary=provider,
            provider_shim=install_shim(bin_dir) if shim else None,
            github_endpoint=github_endpoint,
            pebble=PEBBLE.find(),
        )
        real.proxy.start()
        return real

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self, environment: Mapping[str, str] | None = None) -> RealGarm:
        """Start GARM with ``environment`` (a standalone one when None), and the proxy."""
        if self._server_started():
            return self
        if not self.proxy.listening:
            self.proxy.start()
        self._launch(dict(environment) if environment is not None else standalone_environment())
        return self

    def replan(self, environment: Mapping[str, str]) -> None:
        """Restart GARM with a new service environment, as Pebble does on a changed layer."""
        self._terminate()
        self._launch(dict(environment))

    def restart(self) -> None:
        """Restart GARM with the environment it runs with."""
        self.replan(self.environment)

    @property
    def provider_executable(self) -> Path:
        """What GARM runs as the provider: the shim, or the stand-in without one."""
        return self.provider_shim or self.provider_binary

    def set_catalogue(self, catalogue: Catalogue) -> None:
        """Give the stand-in's cloud these images and flavors (read at every create)."""
        provider_standin.set_catalogue(self.provider_binary, catalogue)

    def set_trusted_ca(self, pem: bytes) -> None:
        """Have the stand-in cloud's VMs trust these CA certificates (read at every boot)."""
        provider_standin.set_trusted_ca(self.provider_binary, pem)

    @property
    def port(self) -> int:
        """The port GARM listens on (127.0.0.1), where a front for it relays to."""
        return self._port

    def vm_dir(self, instance_name: str) -> Path:
        """The stand-in cloud's simulated VM directory of one runner (any provider)."""
        found = list(self.workdir.rglob(f"*{provider_standin.VM_DIR_INFIX}{instance_name}"))
        if len(found) != 1:
            raise LookupError(f"no single VM directory for {instance_name}: {found}")
        return found[0]

    def provider_calls(self) -> list[dict[str, Any]]:
        """Every provider command the stand-in ran (all providers), oldest first."""
        calls: list[dict[str, Any]] = []
        for path in self.workdir.rglob("*.standin-calls.jsonl"):
            text = path.read_text(encoding="utf-8")
            calls += [json.loads(line) for line in text.splitlines() if line]
        return sorted(calls, key=lambda call: call["time"])

    def run_provider(
        self, provider: str, command: str, **variables: str
    ) -> subprocess.CompletedProcess[str]:
        """Run ``command`` as GARM runs its provider ``provider`` (the same executable and file).

        ``variables`` adds GARM's other variables (``GARM_POOL_ID``, ``GARM_INSTANCE_ID``).
        """
        env = {
            "GARM_COMMAND": command,
            "GARM_CONTROLLER_ID": self.controller()["controller_id"],
            "GARM_PROVIDER_CONFIG_FILE": str(
                garm_entrypoint.provider_file(self.workdir / "etc", provider)
            ),
            "GARM_INTERFACE_VERSION": "v0.1.0",
            **variables,
        }
        return subprocess.run(
            [str(self.provider_executable)],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    def provider_servers(self) -> list[dict[str, Any]]:
        """The servers the stand-in's cloud holds (all providers)."""
        servers: list[dict[str, Any]] = []
        for path in self.workdir.rglob("*.standin-state.json"):
            servers += json.loads(path.read_text(encoding="utf-8"))["servers"].values()
        return servers

    def kill(self) -> None:
        """SIGKILL GARM (its whole group) and return once it is dead; it is started again.

        As a GARM killed in the pod: nothing is stopped cleanly, and the restart after an exit
        (Pebble's) starts it again on the same database. The exit is noted in :attr:`exits`.
        """
        with self._lock:
            process = self._process
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        deadline = time.monotonic() + STOP_TIMEOUT
        while alive(process.pid) and time.monotonic() < deadline:
            time.sleep(0.01)

    def reset_restart_delay(self) -> None:
        """Start the imitated restart after an exit with the first delay again (a new pod's).

        The real Pebble keeps its own back-off.
        """
        self._restart_delay = RESTART_DELAY

    def halt(self) -> None:
        """Stop GARM by its pid and keep the proxy: calls then fail as on a stopped service."""
        self._terminate()

    def stop(self) -> None:
        """Stop GARM (and everything it started) by its pid, the VMs' agents, then the proxy."""
        self._terminate()
        if self._service is not None:
            self._service.close()
            self._service = None
        self._held_port.close()
        provider_standin.stop_vm_agents(self.workdir)
        left = provider_standin.leftover_processes(self.workdir)
        self.proxy.stop()
        if self._http is not None:
            self._http.close()
            self._http = None
        if left:
            raise AssertionError(f"runner or garm-agent processes outlived the test: {left}")

    def __enter__(self) -> RealGarm:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        """GARM's pid while it runs."""
        return self._process.pid if self._process is not None else None

    @property
    def pebble_service(self) -> PebbleService | None:
        """The real Pebble GARM runs under (once started), or None where it is imitated."""
        return self._service

    @property
    def log_path(self) -> Path:
        """GARM's own log (stdout and stderr)."""
        return self.workdir / "garm.log"

    def trusted_ca_bundles(self) -> list[str]:
        """The certificates (PEM) GARM's running process trusts beyond Go's default stores.

        Read from the process itself: the directories its ``SSL_CERT_DIR`` adds to Go's
        default ones, and the certificates in their files.
        """
        pid = int(self.pid_path.read_text(encoding="utf-8"))
        items = Path(f"/proc/{pid}/environ").read_bytes().decode("utf-8", "replace").split("\0")
        environ = dict(item.partition("=")[::2] for item in items if "=" in item)
        directories = [
            Path(d)
            for d in environ.get(garm_entrypoint.SSL_CERT_DIR, "").split(":")
            if d and d not in garm_entrypoint.GO_DEFAULT_CERT_DIRS
        ]
        pem = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", re.DOTALL)
        files = [f for d in directories for f in sorted(d.iterdir()) if f.is_file()]
        return [block for f in files for block in pem.findall(f.read_text(encoding="utf-8"))]

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of GARM's log."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    # ---- the emulator's surface -----------------------------------------------------------

    name = "real"

    def settle(self) -> None:
        """Give GARM's own workers half a second of real time."""
        time.sleep(0.5)

    @property
    def base_url(self) -> str:
        """The proxy's ``http://127.0.0.1:<port>``: what the charm and tests talk to."""
        return self.proxy.base_url

    @property
    def url(self) -> str:
        """The API base URL, through the proxy."""
        return self.proxy.base_url + API_PREFIX

    @property
    def requests(self) -> list[RecordedCall]:
        """Every call GARM received through the proxy, oldest first."""
        return self.proxy.calls

    def writes(self) -> list[RecordedCall]:
        """The calls that change GARM's state, login excepted."""
        return writes(self.proxy.calls)

    def clear_requests(self) -> None:
        """Forget the recorded calls."""
        self.proxy.clear()

    def bootstrap(
        self,
        username: str = DEFAULT_ADMIN[0],
        password: str = DEFAULT_ADMIN[1],
        urls: bool = True,
    ) -> str:
        """First-run, login and (with ``urls``) the controller URLs, through GARM's own API.

        The calls go to GARM directly, not through the proxy, so they are not recorded.
        Returns the admin's bearer token.
        """
        with httpx.Client(base_url=self._direct_url, timeout=30) as http:
            _check(http.post("/first-run", json=_new_user(username, password)))
            self.admin = (username, password)
            token = self._login(http)
            if urls:
                base = f"http://127.0.0.1:{self._port}"
                body = {
                    "metadata_url": f"{base}/api/v1/metadata",
                    "callback_url": f"{base}/api/v1/callbacks",
                    "webhook_url": f"{base}/webhooks",
                    "agent_url": f"{base}/agent",
                }
                _check(http.put("/controller", json=body, headers=_bearer(token)))
                self._point_endpoint_once(f"Bearer {token}")
        return token

    # ---- read views, through GARM's API as the admin --------------------------------------

    def get(self, path: str, **params: str) -> Any:
        """``GET`` one API path as the admin (not recorded) and return the decoded JSON.

        When GARM dies under the call (on its own: it is started again), the call is made again
        to the GARM started in its place.
        """
        exits = len(self.exits)
        try:
            return self._get(path, params)
        except httpx.TransportError:
            if not self._exit_noted_since(exits):
                raise
        return self._get(path, params)

    def _exit_noted_since(self, exits: int) -> bool:
        """Wait a little for an exit of GARM to be noted (its restart then holds the lock)."""
        deadline = time.monotonic() + STOP_TIMEOUT
        while len(self.exits) == exits:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def _get(self, path: str, params: Mapping[str, str]) -> Any:
        with self._lock:  # not while GARM is being restarted
            http = self._reader()
        if self._token is None:
            self._token = self._login(http)
        response = http.get(path, params=params, headers=_bearer(self._token))
        if response.status_code == 401:
            self._token = self._login(http)
            response = http.get(path, params=params, headers=_bearer(self._token))
        _check(response)
        return response.json()

    def _reader(self) -> httpx.Client:
        """The read views' client for the GARM running now (one per port: a client is costly)."""
        url = self._direct_url
        if self._http is None or str(self._http.base_url).rstrip("/") != url:
            if self._http is not None:
                self._http.close()
            self._http = httpx.Client(base_url=url, timeout=30)
        return self._http

    def controller(self) -> dict[str, Any]:
        """GARM's controller information."""
        return self.get("/controller")

    def endpoints(self) -> list[dict[str, Any]]:
        """The GitHub endpoints as GARM lists them."""
        return self.get("/github/endpoints") or []

    def credentials(self) -> list[dict[str, Any]]:
        """The credentials as GARM lists them."""
        return self.get("/github/credentials") or []

    def organizations(self) -> list[dict[str, Any]]:
        """The organisations as GARM lists them."""
        return self.get("/organizations") or []

    def repositories(self) -> list[dict[str, Any]]:
        """The repositories as GARM lists them."""
        return self.get("/repositories") or []

    def scalesets(self) -> list[dict[str, Any]]:
        """The scale sets as GARM lists them."""
        return self.get("/scalesets") or []

    def scaleset_by_name(self, name: str) -> dict[str, Any] | None:
        """The named scale set as GARM lists it, or None."""
        return next((s for s in self.scalesets() if s.get("name") == name), None)

    def instances(self, scaleset_name: str | None = None) -> list[dict[str, Any]]:
        """Runners of one scale set (or of all) as GARM lists them."""
        if scaleset_name is None:
            return self.get("/instances") or []
        scaleset = self.scaleset_by_name(scaleset_name)
        if scaleset is None:
            return []
        return self.get(f"/scalesets/{scaleset['id']}/instances") or []

    def providers(self) -> list[str]:
        """Names of the providers GARM loaded."""
        return [p["name"] for p in self.get("/providers") or []]

    def templates(self) -> list[dict[str, Any]]:
        """The templates as GARM lists them."""
        return self.get("/templates") or []

    # ---- internals ------------------------------------------------------------------------

    @property
    def _direct_url(self) -> str:
        return f"http://127.0.0.1:{self._port}{API_PREFIX}"

    def _server_started(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _layout(self, port: int) -> dict[str, Any]:
        return {
            "config_dir": str(self.workdir / "etc"),
            "garm_binary": str(self.binary),
            "provider_binary": str(self.provider_binary),
            "provider_shim": str(self.provider_shim or ""),
            "bind_address": "127.0.0.1",
            "port": port,
        }

    def _launch(self, environment: dict[str, str]) -> None:
        with self._lock:
            self._start_watched(lambda: self._spawn(environment))

    def _start_watched(self, start: Callable[[], None]) -> None:
        """Run ``start`` (GARM answers after it), then watch GARM for an exit of its own."""
        log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        try:
            start()
        except GarmHungError as hung:
            # GARM v0.2.1-afda4e76 was seen to hang, now and then, starting on a database
            # that holds credentials and entities: its cache worker never finished loading
            # them (it takes the credentials and the entity cache locks in opposite orders
            # there). A second start gets through.
            self._note_exit(f"hung at start ({hung.note}); started again")
            log_start = self.log_path.stat().st_size
            if self._service is None:
                self._spawn(self.environment)
            else:
                self._adopt(self._service, hung.pid)  # Pebble restarts it: it exited
        process, started = self._process, time.monotonic()
        threading.Thread(
            target=self._restart_after_exit, args=(process, started, log_start), daemon=True
        ).start()

    def _restart_after_exit(
        self, process: _Process | None, started: float, log_start: int
    ) -> None:
        """Wait for GARM to end; if nobody stopped or replaced it, it is restarted as in a pod.

        Under the real Pebble, Pebble restarts it and the harness waits for that GARM; else the
        harness starts it after Pebble's back-off.
        """
        if process is None:
            return
        code = process.wait()
        with self._lock:
            if process is not self._process:
                return
            up_for = time.monotonic() - started
            reason = self._exit_reason(log_start)
            self._note_exit(f"exited with {code} after {up_for:.0f} s: {reason}")
            service = self._service
            try:
                if service is not None:
                    self._start_watched(lambda: self._adopt(service, process.pid))
                    return
                if up_for >= RESTART_DELAY_LIMIT:
                    self._restart_delay = RESTART_DELAY
                time.sleep(self._restart_delay)
                self._restart_delay = min(2 * self._restart_delay, RESTART_DELAY_LIMIT)
                self._launch(self.environment)
            except GarmStartError as exc:
                self._process = None
                self._note_exit(f"did not start again: {exc}".splitlines()[0])

    def _note_exit(self, what: str) -> None:
        line = f"GARM in {self.workdir} {what}"
        self.exits.append(line)
        UNEXPECTED_EXITS.append(line)

    def _exit_reason(self, log_start: int) -> str:
        """The panic line this GARM wrote in its log after ``log_start``, else its last line."""
        with self.log_path.open("rb") as log:
            log.seek(log_start)
            lines = log.read().decode("utf-8", "replace").splitlines()
        panic = [line for line in lines if line.startswith("panic:")]
        return (panic or lines or [""])[-1]

    def _spawn(self, environment: dict[str, str]) -> None:
        self.environment = dict(environment)
        env = {**environment, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        if env.get(garm_entrypoint.GARM_DB_BACKEND) == garm_entrypoint.BACKEND_SQLITE:
            # The pod's storage path, moved into the work directory.
            env[garm_entrypoint.GARM_SQLITE_DB_FILE] = str(self.workdir / "garm.db")
        self.pid_path.unlink(missing_ok=True)
        if self.pebble is not None:
            self._spawn_under_pebble(env)
            return
        # The port stays reserved until GARM answers on it, so what answers is this GARM.
        with reserved_port() as port:
            self._port = port
            with self.log_path.open("ab") as log:
                self._process = subprocess.Popen(
                    self._command(port),
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self._started()

    def _spawn_under_pebble(self, env: dict[str, str]) -> None:
        """Plan and start GARM on the real Pebble; a GARM that exits at start stays stopped."""
        assert self.pebble is not None
        if self._service is None:
            self._service = PebbleService(self.pebble)
            # Pebble restarts GARM on the same port: held for the harness's life, no other
            # process's port 0 can take it while GARM is down.
            self._port = self._held_port.enter_context(reserved_port())
        check_url = f"http://127.0.0.1:{self._port}/metrics"
        self._service.start(shlex.join(self._command(self._port)), env, check_url)
        try:
            self._adopt(self._service, None)
        except GarmHungError:
            raise  # Pebble restarts it: it exited
        except GarmStartError as failed:
            self._service.stop()
            raise GarmStartError(f"{failed}\nPebble's log:\n{self._service.log_tail()}") from None

    def _adopt(self, service: PebbleService, old_pid: int | None) -> None:
        """Take the GARM Pebble started in place of ``old_pid``; return once it answers."""
        deadline = time.monotonic() + START_TIMEOUT
        while (pid := self._written_pid()) is None or pid == old_pid or not alive(pid):
            if time.monotonic() > deadline:
                raise GarmStartError(f"Pebble did not start GARM ({service.state()})")
            time.sleep(0.02)
        self._process = ServiceProcess(pid, service, service.log_size())
        self._started()

    def _written_pid(self) -> int | None:
        try:
            return int(self.pid_path.read_text(encoding="ascii"))
        except (OSError, ValueError):
            return None

    @property
    def pid_path(self) -> Path:
        """Where the runner writes GARM's pid before it execs GARM."""
        return self.workdir / "garm.pid"

    def _command(self, port: int) -> list[str]:
        layout = json.dumps(self._layout(port))
        log, pid = str(self.log_path), str(self.pid_path)
        return [sys.executable, "-c", _RUNNER, str(SCRIPTS_DIR), layout, log, pid]

    def _started(self) -> None:
        self.starts += 1
        self.proxy.retarget(self._port)
        self._token = None
        self._wait_until_answering()

    def _wait_until_answering(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        # One client for the whole wait: each new httpx client loads the CA bundle (about 50 ms
        # of CPU), and a new one every 50 ms made that most of the harness's CPU at GARM's starts.
        with httpx.Client(timeout=1) as probe:
            self._poll_until_answering(probe, deadline)

    def _poll_until_answering(self, probe: httpx.Client, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                if self._process.returncode == CHECK_FAILED:
                    # Pebble restarts a GARM that hangs at start once its check goes down.
                    raise GarmHungError(
                        f"GARM did not answer its check at start:\n{self.log_tail()}",
                        pid=self._process.pid,
                        note="Pebble's check ended it",
                    )
                raise GarmStartError(
                    f"GARM exited with {self._process.returncode}:\n{self.log_tail()}"
                )
            try:
                probe.get(f"{self._direct_url}/controller-info")
                return
            except httpx.TransportError:
                time.sleep(0.05)
        process = self._process
        if process is None or process.poll() is not None:
            raise GarmStartError(f"GARM did not answer in {START_TIMEOUT} s:\n{self.log_tail()}")
        # Go writes every goroutine's stack to the log on SIGQUIT: where GARM waits. Then the
        # whole group goes, as on a stop.
        process.send_signal(signal.SIGQUIT)
        with contextlib.suppress(subprocess.TimeoutExpired, TimeoutError):
            process.wait(timeout=STOP_TIMEOUT)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_TIMEOUT)
        raise GarmHungError(
            f"GARM did not answer in {START_TIMEOUT} s (its goroutines: {self.log_path}):\n"
            + self.log_tail(),
            pid=process.pid,
        )

    def _terminate(self) -> None:
        with self._lock:
            process, self._process = self._process, None
        if self._service is not None:
            self._service.stop()
            return
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=STOP_TIMEOUT)

    def _login(self, http: httpx.Client) -> str:
        if self.admin is None:
            raise RuntimeError("the admin of this GARM is not known yet")
        username, password = self.admin
        response = http.post("/auth/login", json={"username": username, "password": password})
        _check(response)
        token = response.json()["token"]
        register_secret(token)
        return token

    def _point_endpoint_once(self, authorization: str) -> None:
        """Point ``github.com`` at the stand-in, once per database, before any credential."""
        if self.github_endpoint is None or self._endpoint_pointed:
            return
        response = httpx.put(
            f"{self._direct_url}/github/endpoints/github.com",
            json=self.github_endpoint,
            headers={"Authorization": authorization},
            timeout=30,
        )
        if response.status_code == 409:
            # Only part of the controller URLs is set yet: GARM still gates the endpoint; the
            # PUT that completes them brings the harness back here.
            return
        _check(response)
        self._endpoint_pointed = True


def _new_user(username: str, password: str) -> dict[str, str]:
    return {
        "username": username,
        "password": password,
        "email": f"{username}@garm.test",
        "full_name": "GARM test admin",
    }


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _check(response: httpx.Response) -> None:
    if response.is_error:
        raise RuntimeError(
            f"GARM answered {response.request.method} {response.request.url.path} with "
            f"{response.status_code}: {response.text[:300]}"
        )
