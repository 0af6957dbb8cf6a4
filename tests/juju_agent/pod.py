"""The pod the packed charm runs in: the image's paths, the workload's real Pebble, GARM by it.

Owns the private namespaces a packed run lives in and what they hold. ops reaches the ``garm``
container's Pebble at ``/charm/containers/garm/pebble.socket`` (hard-coded in ops), and the
charm's layer runs the image's paths (``rockcraft.yaml``): ``python3
/opt/garm-charm/garm_entrypoint.py`` (the charm pushes it), ``/usr/local/bin/garm``, the
provider ``/usr/local/bin/garm-provider-openstack`` behind its shim, the configuration in
``/etc/garm``, the database in ``/var/lib/garm`` (the ``garm-data`` storage), the garm-agent
binaries and manifest in ``/opt/garm-agent``. So a packed run happens in its own mount and
network namespace (``unshare --mount --net --propagation private``, as root: :func:`run_in_pod`
starts a module there): each of those directories is a tmpfs there (``/usr/local/bin`` an
overlay on the host's), ``lo`` is up, and GARM's port 8080 clashes with nothing on the host.
The host keeps only the empty directories the mounts need (``/charm``, ``/etc/garm``,
``/var/lib/garm``, ``/opt/garm-charm``, ``/opt/garm-agent``), made once where missing.

In the pod, :class:`Pod` starts the real Pebble as Juju starts the workload's (``--hold``, its
state in ``/charm/container``, the socket linked where ops looks) with the base's ``python3``
on its ``PATH``, and installs the provider stand-in behind the charm's provider shim
(:mod:`tests.real_garm.harness`'s layout). ``/usr/local/bin/garm`` is the real GARM (a local
part) behind :data:`GARM_WRAPPER`, which moves GARM's listener to :data:`GARM_MOVED_PORT` on
127.0.0.1 in the configuration the entrypoint rendered, so that the recording proxy
(:mod:`tests.real_garm.proxy`) holds 8080 and sees every call the charm makes (the pod's one
change to GARM's configuration); it also writes GARM's pid and log where the harness reads them.
:class:`PackedGarm` is that GARM with the harness's surface (read views, the proxy, the
stand-in's cloud): Pebble, driven by the charm's own plan, starts and restarts it.

:meth:`Pod.restart_workload` makes the workload container a new pod's: Pebble's state and what
the charm pushed gone, the storage kept.

Everything is stopped by pid: Pebble by its process group (it stops GARM first), the stand-in
runners' agents by theirs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import ops

from tests.local_parts import GARM, PEBBLE
from tests.real_garm import provider_standin
from tests.real_garm.harness import DEFAULT_CATALOGUE, RealGarm, install_shim
from tests.real_garm.proxy import RecordingProxy
from tests.real_pebble import RealPebble

IN_POD = "JUJU_STANDIN_POD"
SOCKET = Path("/charm/containers/garm/pebble.socket")
PEBBLE_DIR = Path("/charm/container")
CONFIG_DIR = Path("/etc/garm")
IMAGE_DIRS = (Path("/charm"), CONFIG_DIR, Path("/var/lib/garm"), Path("/opt/garm-charm"))
AGENT_DIR = Path("/opt/garm-agent")
IMAGE_BIN = Path("/usr/local/bin")
GARM_PORT = 8080
GARM_MOVED_PORT = 18080
POD_TIMEOUT = 1800.0
# The exit code of a packed run that could not happen (no local part, no root).
NOT_RUN = 1

# /usr/local/bin/garm in the pod: GARM's listener moved to 127.0.0.1:<moved> (the proxy holds
# 8080), its pid and output where the harness reads them; then the real GARM, in place.
GARM_WRAPPER = """#!{python}
import os, re, sys
from pathlib import Path
config = Path(sys.argv[sys.argv.index("--config") + 1])
text = config.read_text(encoding="utf-8")
head, section, rest = text.partition("[apiserver]")
body, bracket, tail = rest.partition("\\n[")
body = re.sub(r'(?m)^bind = .*$', 'bind = "127.0.0.1"', body)
body = re.sub(r'(?m)^port = .*$', 'port = {port}', body)
moved = config.with_name("config-moved.toml")
moved.write_text(head + section + body + bracket + tail, encoding="utf-8")
moved.chmod(0o600)
Path("{workdir}/garm.pid").write_text(str(os.getpid()))
log = os.open("{workdir}/garm.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.dup2(log, 1)
os.dup2(log, 2)
os.execv("{garm}", ["garm", "--config", str(moved)])
"""


def skip_reason() -> str | None:
    """Why a packed run cannot happen here (no GARM, no Pebble, not root), else None."""
    for part in (GARM, PEBBLE):
        if part.find() is None:
            return part.skip_reason()
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return "a packed run needs root and unshare (private mount and network namespaces)"
    return None


def run_in_pod(module: str, argv: list[str], timeout: float = POD_TIMEOUT) -> int:
    """Run ``python -m module argv`` in fresh mount and network namespaces; its exit code."""
    command = ["unshare", "--mount", "--net", "--propagation", "private"]
    command += [sys.executable, "-m", module, *argv]
    env = {**os.environ, IN_POD: "1"}
    return subprocess.run(command, env=env, timeout=timeout, check=False).returncode


def into_pod(module: str, argv: list[str], what: str) -> int | None:
    """Where ``module``'s main runs: None in the pod; else its exit code from a pod.

    Outside a pod, ``python -m module argv`` is run in one (:func:`run_in_pod`) and its exit
    code is the caller's. Where none can be made, one line says why (``what`` was not run) and
    the code is :data:`NOT_RUN`: a run that did not happen never passes.
    """
    if in_pod():
        return None
    reason = skip_reason()
    if reason is not None:
        print(f"{what} NOT RUN on the packed charm: {reason}")
        return NOT_RUN
    return run_in_pod(module, argv)


def in_pod() -> bool:
    """Whether this process was started by :func:`run_in_pod`."""
    return os.environ.get(IN_POD) == "1"


class Pod:
    """The image's paths, ``lo``, the real Pebble of the ``garm`` container; stopped on exit."""

    def __init__(self, root: Path, agent_dir: Path) -> None:
        """Lay the pod out with ``root`` as scratch and ``agent_dir`` as ``/opt/garm-agent``."""
        if not in_pod():
            raise RuntimeError("a Pod is made only in the namespaces run_in_pod starts")
        self.root = root
        self.agent_dir = agent_dir
        self.pebble: RealPebble | None = None
        self._mounted: list[Path] = []

    def __enter__(self) -> Pod:
        """Mount the image's directories, install GARM and the provider, start Pebble."""
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        for directory in IMAGE_DIRS:
            directory.mkdir(parents=True, exist_ok=True)
            self._mount(directory, "-t", "tmpfs", "-o", "mode=0755", "tmpfs")
        AGENT_DIR.mkdir(parents=True, exist_ok=True)
        self._mount(AGENT_DIR, "--bind", str(self.agent_dir))
        upper, work = self.root / "bin-upper", self.root / "bin-work"
        upper.mkdir()
        work.mkdir()
        options = f"lowerdir={IMAGE_BIN},upperdir={upper},workdir={work}"
        self._mount(IMAGE_BIN, "-t", "overlay", "overlay", "-o", options)
        self._install_image_binaries()
        self.pebble = self._start_pebble()
        return self

    def __exit__(self, *_exc: object) -> None:
        """Stop Pebble (and GARM with it) and the stand-in runners' agents, by pid."""
        if self.pebble is not None:
            self.pebble.stop()
        provider_standin.stop_vm_agents(CONFIG_DIR)
        # Unmounted before the scratch goes (the overlay's upper directory and the agent's
        # directory are in it), so that another pod can be laid out in the same namespaces.
        for target in reversed(self._mounted):
            subprocess.run(["umount", str(target)], check=False)
        self._mounted.clear()

    def _mount(self, target: Path, *args: str) -> None:
        subprocess.run(["mount", *args, str(target)], check=True)
        self._mounted.append(target)

    def _install_image_binaries(self) -> None:
        garm = GARM.find()
        assert garm is not None
        wrapper = IMAGE_BIN / "garm"
        text = GARM_WRAPPER.format(
            python=sys.executable, port=GARM_MOVED_PORT, workdir=CONFIG_DIR, garm=garm
        )
        wrapper.write_text(text, encoding="utf-8")
        wrapper.chmod(0o755)
        provider_standin.install(IMAGE_BIN, DEFAULT_CATALOGUE, name="garm-provider-openstack")
        install_shim(IMAGE_BIN)

    def _start_pebble(self) -> RealPebble:
        binary = PEBBLE.find()
        assert binary is not None
        python = self.root / "python"
        python.mkdir()
        (python / "python3").symlink_to(Path(sys.executable).resolve())
        # Juju's Pebble runs services with a short environment: the image's PATH.
        path = os.pathsep.join([str(python), str(IMAGE_BIN), "/usr/bin", "/bin"])
        pebble = RealPebble(binary, PEBBLE_DIR, environment={"PATH": path}).start()
        SOCKET.parent.mkdir(parents=True, exist_ok=True)
        SOCKET.symlink_to(pebble.socket)
        return pebble

    def restart_workload(self) -> None:
        """The workload container of a new pod: Pebble's state and the charm's pushes gone.

        Pebble is stopped (GARM with it), its state directory (plan, notices, changes) and
        ``/opt/garm-charm`` (what the charm pushed: the entrypoint) emptied, and a new Pebble
        started on a fresh state with nothing planned. Kept: ``/var/lib/garm`` (the
        ``garm-data`` storage: GARM's database) and ``/etc/garm``, where the stand-in cloud
        keeps its servers beside the provider's configuration (the entrypoint writes GARM's
        configuration again at every start).
        """
        assert self.pebble is not None
        self.pebble.stop()
        for directory in (PEBBLE_DIR, Path("/opt/garm-charm")):
            for entry in directory.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        self.pebble.start()

    def client(self) -> ops.pebble.Client:
        """A Pebble client on the ``garm`` container's socket, as ops opens it."""
        return ops.pebble.Client(socket_path=str(SOCKET))


class PackedGarm(RealGarm):
    """The real GARM Pebble runs from the charm's plan, with the harness's surface.

    The recording proxy listens on 127.0.0.1:8080 (where the charm reaches GARM) and forwards to
    :data:`GARM_MOVED_PORT`. Nothing here starts GARM: the charm's replan does, through Pebble;
    :meth:`restart` and :meth:`halt` go through Pebble as the operator's ``pebble`` would.
    """

    def __init__(self, pod: Pod, github_endpoint: dict[str, str]) -> None:
        """GARM of ``pod``; its ``github.com`` endpoint is pointed at ``github_endpoint``."""
        super().__init__(
            CONFIG_DIR,
            binary=Path(str(GARM.find())),
            provider_binary=IMAGE_BIN / "garm-provider-openstack",
            provider_shim=IMAGE_BIN / "garm-provider-openstack-shim",
            github_endpoint=github_endpoint,
            pebble=None,
        )
        self.pod = pod
        self._port = GARM_MOVED_PORT
        self.proxy = RecordingProxy(GARM_MOVED_PORT, listen_port=GARM_PORT)
        self.proxy.on_urls_set = self._point_endpoint_once
        self.proxy.start()

    def restart(self) -> None:
        """Restart GARM's service through Pebble and wait until it answers."""
        self.pod.client().restart_services(["garm"])
        self._started()

    def halt(self) -> None:
        """Stop GARM's service through Pebble (the proxy stays: calls then fail)."""
        self.pod.client().stop_services(["garm"])

    def stop(self) -> None:
        """Stop the proxy and the stand-in runners' agents (Pebble stops GARM with the pod)."""
        provider_standin.stop_vm_agents(self.workdir)
        self.proxy.stop()


def scratch() -> Path:
    """A scratch directory for one pod (under the system's temporary directory)."""
    return Path(tempfile.mkdtemp(prefix="garm-pod-"))
