"""A throwaway PostgreSQL server for the real-GARM tests (Debian's ``postgresql`` package).

:class:`PostgresServer` creates a cluster in a fresh temporary directory with ``initdb``, starts
it with ``pg_ctl`` on a free port of 127.0.0.1 (its Unix socket inside the directory), creates a
login role and a database for GARM, and stops the cluster with ``pg_ctl stop`` (then by the
postmaster's pid if needed) before removing the directory. :meth:`PostgresServer.restart` stops
it and starts it again on the same data directory and port (the fault campaign's database
restart); :meth:`PostgresServer.copy_database` copies a database (its snapshots). Run as root,
every server command runs as the ``postgres`` user (``runuser``), which owns the directory:
PostgreSQL refuses to run as root. Run as anyone else, the commands run as that user.

Host connections need a password (``scram-sha-256``); the role's password is generated per
server. The binaries come from ``$PG_BIN`` or the newest ``/usr/lib/postgresql/*/bin``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.log_secrets import register_secret
from tests.real_garm.harness import SKIP_REASON as GARM_SKIP_REASON
from tests.real_garm.harness import garm_binary
from tests.real_garm.ports import reserved_port

PG_BIN_ENV = "PG_BIN"
SKIP_REASON = (
    "PostgreSQL server binaries not found: install Debian's postgresql package "
    "(apt-get install -y postgresql) or set PG_BIN to a directory holding initdb and pg_ctl"
)
DATABASE = "garm"
ROLE = "garm"
START_TIMEOUT = 30


def postgres_bin() -> Path | None:
    """Return the directory holding ``initdb``, ``pg_ctl`` and ``psql``, or None."""
    configured = os.environ.get(PG_BIN_ENV)
    candidates = (
        [Path(configured)]
        if configured
        else sorted(
            Path("/usr/lib/postgresql").glob("*/bin"),
            key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
            reverse=True,
        )
    )
    for candidate in candidates:
        if all((candidate / tool).is_file() for tool in ("initdb", "pg_ctl", "psql")):
            return candidate
    return None


@contextlib.contextmanager
def started_or_skipped() -> Iterator[PostgresServer]:
    """A started server for a real-GARM test, stopped afterwards; its password is a known secret.

    The test skips, with one line, where real GARM or PostgreSQL's binaries are not found.
    """
    # Not at the top: the simulation imports this module where pytest is not installed.
    import pytest

    if garm_binary() is None:
        pytest.skip(GARM_SKIP_REASON)
    bin_dir = postgres_bin()
    if bin_dir is None:
        pytest.skip(SKIP_REASON)
    with PostgresServer(bin_dir) as server:
        register_secret(server.password)
        yield server


class PostgresServer:
    """One PostgreSQL cluster on 127.0.0.1, with role :data:`ROLE` owning :data:`DATABASE`."""

    def __init__(self, bin_dir: Path) -> None:
        """Prepare a server using the binaries of ``bin_dir``; :meth:`start` creates it."""
        self.bin_dir = bin_dir
        self.port = 0
        self.password = f"Pg-{secrets.token_hex(12)}"
        self.root: Path | None = None
        self._as_postgres = os.geteuid() == 0

    @property
    def endpoint(self) -> str:
        """``host:port`` as a PostgreSQL provider publishes it in ``endpoints``."""
        return f"127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        """The cluster's data directory."""
        assert self.root is not None
        return self.root / "data"

    def start(self) -> PostgresServer:
        """Create the cluster, start it, create the role and the database."""
        self.root = Path(tempfile.mkdtemp(prefix="garm-pg-"))
        if self._as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(
            "initdb",
            "-D",
            str(self.data_dir),
            "-U",
            "postgres",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--no-sync",
        )
        # Reserved until the server listens (``pg_ctl -w``): nothing else can take it before.
        with reserved_port() as self.port:
            self._launch()
        self.sql(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{self.password}'")
        self.sql(f"CREATE DATABASE {DATABASE} OWNER {ROLE}")
        return self

    @contextlib.contextmanager
    def restart(self) -> Iterator[None]:
        """Stop the server for the block; start it again on the same data directory and port.

        ``pg_ctl stop -m fast``: open sessions are ended (their clients read SQLSTATE 57P01),
        committed data stays. While the block runs, the port is held and nothing listens on it,
        so a connection is refused as by a server that is down.
        """
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")
        with reserved_port(self.port):
            try:
                yield
            finally:
                self._launch()

    def copy_database(self, source: str, target: str) -> None:
        """Make ``target`` a copy of ``source`` (replacing it), owned by :data:`ROLE`.

        Nobody may be connected to either (PostgreSQL's rule for a template): stop GARM first.
        """
        self.sql(f"DROP DATABASE IF EXISTS {target} WITH (FORCE)")
        self.sql(f"CREATE DATABASE {target} TEMPLATE {source} OWNER {ROLE}")

    def sql(self, statement: str, database: str = "postgres") -> str:
        """Run one statement as the superuser over the Unix socket; return psql's output."""
        assert self.root is not None
        return self._run(
            "psql",
            "-h",
            str(self.root),
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-d",
            database,
            "-v",
            "ON_ERROR_STOP=1",
            "-At",
            "-c",
            statement,
        )

    def stop(self) -> None:
        """Stop the server (``pg_ctl stop``, else the postmaster's pid) and remove its files."""
        if self.root is None:
            return
        pid = self._postmaster_pid()
        try:
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")
        except subprocess.CalledProcessError:
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGQUIT)
                    time.sleep(0.5)
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 20) -> str:
        """The end of the server's log."""
        assert self.root is not None
        try:
            text = (self.root / "server.log").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _launch(self) -> None:
        """Start the cluster on :attr:`port` and wait until it accepts connections."""
        assert self.root is not None
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c fsync=off"
        self._run(
            "pg_ctl",
            "-D",
            str(self.data_dir),
            "-l",
            str(self.root / "server.log"),
            "-o",
            options,
            "-t",
            str(START_TIMEOUT),
            "-w",
            "start",
        )

    def _postmaster_pid(self) -> int | None:
        try:
            first = (self.data_dir / "postmaster.pid").read_text().splitlines()[0]
        except (OSError, IndexError):
            return None
        return int(first) if first.strip().isdigit() else None

    def _run(self, tool: str, *args: str) -> str:
        command = [str(self.bin_dir / tool), *args]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, cwd=self.root, timeout=120
        )
        if done.returncode != 0:
            raise subprocess.CalledProcessError(
                done.returncode, [tool, *args[:2]], done.stdout, done.stderr
            )
        return done.stdout.strip()
