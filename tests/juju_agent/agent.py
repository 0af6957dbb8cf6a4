"""The Juju unit agent's part for the packed charm: each hook as a process, as Juju runs it.

Owns the charm directory of one unit (a copy of the packed prime directory, so the unit's ops
state stays its own), the hook tools' bin directory (:mod:`tests.juju_agent.hook_tool` installed
under every tool's name, run by this interpreter in isolated mode: the charm's ``PYTHONPATH``
never reaches it), and the environment Juju gives a hook: what ops 3.9 reads
(``ops/jujucontext.py``: ``JUJU_DISPATCH_PATH``, ``JUJU_UNIT_NAME``, ``JUJU_MODEL_NAME``,
``JUJU_MODEL_UUID``, ``JUJU_VERSION``, ``JUJU_CHARM_DIR``, ``JUJU_HOOK_NAME``, the relation,
remote unit and app, departing unit, secret, notice, workload, check, storage and action
variables) and the rest a Kubernetes unit agent sets (``JUJU_CONTEXT_ID``,
``JUJU_AGENT_SOCKET_*``, ``JUJU_API_ADDRESSES``, ``CLOUD_API_VERSION``, ``JUJU_SLA``), as
juju/juju ``internal/worker/uniter/runner/context/context.go`` (``HookVars``) lists them.

``PATH`` holds the tool directory, then the base's Python (``dispatch`` runs
``#!/usr/bin/env python3``: it must be the 3.12 the venv was built for), then the system's: a
tool the charm calls and the stand-in does not serve fails the hook (command not found).

Each hook runs as Juju runs it (``worker/uniter/runner/runner.go``): its tool server opens
with a new context id before ``dispatch`` starts and closes when it ends, and its writes are
committed only when it exits 0 (:func:`tests.juju_agent.hook_tool.open_context`,
:func:`~tests.juju_agent.hook_tool.close_context`). A hook that fails (a non-zero exit, a
kill, or a commit Juju refuses) leaves nothing of what Juju commits, and is run again, the
same hook with the same environment and a new context id, as Juju retries a failed hook
(``apiserver/facades/agent/retrystrategy/retrystrategy.go``: after 5 s, doubling to 5 min,
for as long as ``automatically-retry-hooks`` is on): here after :data:`RETRY_FIRST` seconds,
doubling to :data:`RETRY_MAX`, and at most :data:`RETRY_ATTEMPTS` runs in all, so that a
hook that keeps failing ends the test (:meth:`HookRun.check` names every run). An action is
run once (Juju reports its failure and retries nothing); a hook killed at
:data:`HOOK_TIMEOUT` is not run again (the test would wait as long again); one whose charm was
killed (:meth:`UnitAgent.plan_kill`: SIGKILL at its k-th tool call) is, as any failed hook.

Beyond single hooks, the sequences Juju runs on its own: :meth:`UnitAgent.remove_application`
(``juju remove-application``: each relation departed and broken, then ``stop`` and ``remove``,
``goal-state`` showing the unit dying, so ops' ``planned_units()`` is 0),
:meth:`UnitAgent.restart_pod` (the pod made again: ``stop``, a fresh charm directory and
workload, ``upgrade-charm``, ``config-changed``, ``start``, ``pebble-ready``) and
:meth:`UnitAgent.deliver_secret_removals` (``secret-remove`` for each revision of an owned
secret left obsolete). Every unit databag holds the address settings Juju writes there
(:func:`unit_network_settings`).

The model's Juju is by default the oldest the charm assumes (``assumes`` in
``charmcraft.yaml``: 3.6, so 3.6.0 and its secret limits); ``juju_version`` picks another.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from tests.juju_agent import charm_clock, hook_tool
from tests.juju_model_limits import oldest_juju

REPO = Path(__file__).resolve().parents[2]
PRIME_DIR = REPO / "build" / "pack" / "prime"
MODEL_NAME = "garm-model"
UNIT = "garm/0"
APP = "garm"
STORAGE_ID = "garm-data/0"
STORAGE_LOCATION = "/var/lib/garm"
HOOK_TIMEOUT = 600.0
RETRY_FIRST = 0.05
RETRY_MAX = 0.8
RETRY_ATTEMPTS = 5
KILLED = -9


# The unit's address as the stand-in's network-get gives it.
UNIT_ADDRESS = "127.0.0.1"


def unit_network_settings(unit: str) -> dict[str, str]:
    """The settings Juju writes into ``unit``'s databag of every relation it enters.

    ``private-address`` and ``ingress-address`` are the unit's first ingress address for the
    relation's endpoint, ``egress-subnets`` its egress subnets joined by commas (juju/juju
    ``apiserver/facades/agent/uniter/uniter.go``: the relation settings written as the unit
    enters a relation's scope and again when its addresses change). This unit's address is
    :data:`UNIT_ADDRESS`; another application's unit gets one of 10.1.0.0/16, fixed per name.
    """
    if unit == UNIT:
        address = UNIT_ADDRESS
    else:
        digest = zlib.crc32(unit.encode())
        address = f"10.1.{digest % 256}.{(digest >> 8) % 254 + 1}"
    return {
        "egress-subnets": f"{address}/32",
        "ingress-address": address,
        "private-address": address,
    }


@dataclass(frozen=True)
class HookRun:
    """One hook as it ran: exit code, output, wall time, the hook tools it called.

    ``refused`` is what Juju refused when it committed the hook's changes (the hook then failed
    though it exited 0); ``retried`` the failed runs of the same hook before this one.
    """

    hook: str
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    tools: collections.Counter[str]
    log: str = ""
    refused: str | None = None
    retried: tuple[HookRun, ...] = ()
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        """Whether the hook succeeded: it exited 0 and Juju committed its changes."""
        return self.returncode == 0 and self.refused is None

    def failure(self) -> str:
        """Why this run failed, in one line."""
        if self.timed_out:
            return f"killed after {HOOK_TIMEOUT:g} s"
        if self.returncode < 0:
            return f"killed by signal {-self.returncode}"
        if self.returncode != 0:
            return f"exited {self.returncode}"
        return f"exited 0 but its changes were refused: {self.refused}"

    def check(self) -> HookRun:
        """Raise with the hook's stderr and log when it failed (the unit in error)."""
        if not self.ok:
            runs = len(self.retried) + 1
            raise HookFailedError(
                f"{self.hook} {self.failure()} (run {runs} time(s)):\n{self.stderr[-4000:]}\n"
                f"juju-log:\n{self.log[-4000:]}"
            )
        return self


class HookFailedError(RuntimeError):
    """A hook exited non-zero: Juju would put the unit in error."""


def install_tools(bin_dir: Path) -> Path:
    """One copy of the hook-tool program in ``bin_dir`` and a link to it per tool name."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    program = bin_dir / "juju-hook-tool"
    source = Path(hook_tool.__file__).read_text(encoding="utf-8")
    # The base interpreter (the tool is stdlib only): a virtual environment recreated under a
    # running deployment takes no tool away. -I: the charm's PYTHONPATH (lib:venv, relative
    # to its directory) never reaches the tool; -S: no site-packages to scan, for a program
    # started thousands of times a run (one word: Linux passes a shebang's flags as one).
    python = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    program.write_text(f"#!{python} -IS\n{source}", encoding="utf-8")
    program.chmod(0o755)
    for name in hook_tool.TOOL_NAMES:
        link = bin_dir / name
        link.unlink(missing_ok=True)
        link.symlink_to(program.name)
    return bin_dir


def config_defaults(charm_dir: Path) -> dict[str, Any]:
    """The charm's options with their defaults, from the packed ``config.yaml``."""
    config = yaml.safe_load((charm_dir / "config.yaml").read_text(encoding="utf-8")) or {}
    options = config.get("options") or {}
    return {name: o["default"] for name, o in options.items() if "default" in o}


def new_model(charm_dir: Path, *, leader: bool, juju_version: str) -> dict[str, Any]:
    """A fresh model of one unit: its config's defaults, its storage, no relation yet."""
    unknown = {"status": "unknown", "message": "", "since": hook_tool.now()}
    return {
        "unit": UNIT,
        "app": APP,
        "leader": leader,
        "juju_version": juju_version,
        "model_name": MODEL_NAME,
        "model_uuid": str(uuid.uuid4()),
        "config": config_defaults(charm_dir),
        "relations": {},
        "secrets": {},
        "status": {"unit": dict(unknown), "app": dict(unknown)},
        "version": "",
        "ports": [],
        "state": {},
        "storage": {STORAGE_ID: {"kind": "filesystem", "location": STORAGE_LOCATION}},
        "action": None,
    }


class UnitAgent:
    """Runs the packed charm's hooks for unit ``garm/0`` with the model in ``workdir``."""

    def __init__(
        self,
        workdir: Path,
        *,
        prime_dir: Path = PRIME_DIR,
        python312: Path | None = None,
        leader: bool = True,
        juju_version: str | None = None,
    ) -> None:
        """Copy the prime directory into ``workdir``, install the tools, write a fresh model.

        ``juju_version``: the model's Juju (by default the oldest the charm assumes).
        """
        juju_version = juju_version or oldest_juju()
        self.workdir = workdir
        self.charm_dir = workdir / "charm"
        self.prime_dir = prime_dir
        shutil.copytree(prime_dir, self.charm_dir, symlinks=True)
        self.bin_dir = install_tools(workdir / "bin")
        self.model_path = workdir / "model.json"
        model = new_model(self.charm_dir, leader=leader, juju_version=juju_version)
        self.model_path.write_text(json.dumps(model), encoding="utf-8")
        # python3 is the base's interpreter itself, not a virtual environment's.
        self.python_dir = workdir / "python"
        self.python_dir.mkdir()
        self.python = python312 or base_python()
        (self.python_dir / "python3").symlink_to(self.python)
        self.contexts = 0
        # How far ahead the charm's clock reads (None: the real time).
        self.clock_shift: timedelta | None = None

    @property
    def calls_log(self) -> Path:
        """Where each hook-tool call is appended (its name)."""
        return self.workdir / "calls.log"

    @property
    def juju_log(self) -> Path:
        """Where each ``juju-log`` line is appended (level and message)."""
        return self.workdir / "juju-log.log"

    def model(self, *, write: bool = False) -> Any:
        """The model under its lock (a context manager); written back with ``write``."""
        return hook_tool.locked_model(self.model_path, write=write)

    def read(self) -> dict[str, Any]:
        """The model as it stands."""
        with self.model() as model:
            return model

    def environment(self, dispatch_path: str, context: Mapping[str, str]) -> dict[str, str]:
        """The hook's environment: Juju's variables for ``dispatch_path`` and ``context``."""
        model = self.read()
        self.contexts += 1
        path = os.pathsep.join([str(self.bin_dir), str(self.python_dir), "/usr/bin", "/bin"])
        env = {
            "PATH": path,
            "HOME": str(self.workdir),
            "LANG": "C.UTF-8",
            "JUJU_CHARM_DIR": str(self.charm_dir),
            "JUJU_CONTEXT_ID": f"{UNIT}-{dispatch_path.rsplit('/', 1)[-1]}-{self.contexts}",
            "JUJU_DISPATCH_PATH": dispatch_path,
            "JUJU_MODEL_NAME": model["model_name"],
            "JUJU_MODEL_UUID": model["model_uuid"],
            "JUJU_UNIT_NAME": UNIT,
            "JUJU_VERSION": model["juju_version"],
            "JUJU_AGENT_SOCKET_ADDRESS": "@/var/lib/juju/agents/unit-garm-0/agent.socket",
            "JUJU_AGENT_SOCKET_NETWORK": "unix",
            "JUJU_API_ADDRESSES": "10.1.0.1:17070",
            "JUJU_PRINCIPAL_UNIT": "",
            "JUJU_SLA": "unsupported",
            "CLOUD_API_VERSION": "1.33.0",
            hook_tool.MODEL_ENV: str(self.model_path),
            hook_tool.REPO_ENV: str(REPO),
        }
        kind, _, name = dispatch_path.partition("/")
        if kind == "hooks":
            env["JUJU_HOOK_NAME"] = name
        if self.clock_shift is not None:
            self._shift_clock()
            env[charm_clock.SHIFT_ENV] = str(self.clock_shift.total_seconds())
        return {**env, **context}

    def _shift_clock(self) -> None:
        """``python3`` becomes a wrapper that puts :mod:`charm_clock` first on the path."""
        site = self.workdir / "clock-site"
        if site.exists():
            return
        site.mkdir()
        shutil.copy(charm_clock.__file__, site / "sitecustomize.py")
        python3 = self.python_dir / "python3"
        python3.unlink()
        python3.write_text(
            f'#!/bin/sh\nPYTHONPATH="{site}:$PYTHONPATH" exec {self.python} "$@"\n',
            encoding="utf-8",
        )
        python3.chmod(0o755)

    def dispatch(self, dispatch_path: str, context: Mapping[str, str] | None = None) -> HookRun:
        """Run the packed ``dispatch`` for ``dispatch_path`` (``hooks/install``, ...) as Juju does.

        A failed hook is run again (not an action, not a killed hook) until it succeeds or has
        run :data:`RETRY_ATTEMPTS` times; the last run is returned, the failed ones before it
        in its ``retried``.
        """
        failed: list[HookRun] = []
        delay = RETRY_FIRST
        while True:
            run = self._run_once(dispatch_path, context or {})
            final = run.ok or not dispatch_path.startswith("hooks/") or run.timed_out
            if final or len(failed) + 1 >= RETRY_ATTEMPTS:
                return dataclasses.replace(run, retried=tuple(failed))
            failed.append(run)
            time.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)

    def _run_once(self, dispatch_path: str, context: Mapping[str, str]) -> HookRun:
        env = self.environment(dispatch_path, context)
        start = _size(self.calls_log)
        log_start = _size(self.juju_log)
        started = time.monotonic()
        hook_tool.open_context(self.model_path, env["JUJU_CONTEXT_ID"])
        returncode = KILLED
        timed_out = False
        try:
            process = subprocess.run(
                ["./dispatch"],
                cwd=self.charm_dir,
                env=env,
                capture_output=True,
                text=True,
                timeout=HOOK_TIMEOUT,
                check=False,
            )
            returncode, stdout, stderr = process.returncode, process.stdout, process.stderr
        except subprocess.TimeoutExpired as killed:
            stdout, stderr = _text(killed.stdout), _text(killed.stderr)
            timed_out = True
        finally:
            refused = hook_tool.close_context(self.model_path, commit=returncode == 0)
        return HookRun(
            hook=dispatch_path,
            returncode=returncode,
            stdout=stdout,
            stderr=stderr,
            seconds=time.monotonic() - started,
            tools=self.tools_since(start),
            log=_tail(self.juju_log, log_start),
            refused=refused,
            timed_out=timed_out,
        )

    @contextmanager
    def tool_environment(self) -> Iterator[dict[str, str]]:
        """A hook's context with no hook in it: the environment its tools run with.

        The tools answer while it is open; whatever they wrote is dropped when it closes.
        """
        env = self.environment("hooks/update-status", {})
        hook_tool.open_context(self.model_path, env["JUJU_CONTEXT_ID"])
        try:
            yield env
        finally:
            hook_tool.close_context(self.model_path, commit=False)

    def tools_since(self, offset: int) -> collections.Counter[str]:
        """The hook tools called after byte ``offset`` of the calls log, by name."""
        return collections.Counter(_tail(self.calls_log, offset).split())

    def hook(self, name: str, context: Mapping[str, str] | None = None) -> HookRun:
        """Run hook ``name`` (``install``, ``garm-peers-relation-changed``, ...)."""
        return self.dispatch(f"hooks/{name}", context)

    def plan_kill(self, dispatch_path: str, at: int) -> None:
        """The charm's process of the next ``dispatch_path`` is SIGKILLed at its tool call ``at``.

        Once: Juju's retry of the killed hook runs whole (:func:`hook_tool._killed_here`).
        """
        plan = {"dispatch": dispatch_path, "at": at, "count": 0, "killed": False}
        self.model_path.with_name(hook_tool.KILL_FILE).write_text(json.dumps(plan))

    def kill_plan(self) -> dict[str, Any] | None:
        """The kill plan as it stands (``count``: the calls seen; ``killed``), or None."""
        path = self.model_path.with_name(hook_tool.KILL_FILE)
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    def clear_kill(self) -> None:
        """No kill planned any more."""
        self.model_path.with_name(hook_tool.KILL_FILE).unlink(missing_ok=True)

    def obsolete_revisions(self) -> list[tuple[str, dict[str, Any], int]]:
        """The revisions Juju would tell this unit to remove: ``(uri, secret, revision)``.

        A revision of a secret the unit owns (its own; its application's while it leads) is
        obsolete once it is not the latest and no consumer tracks it (juju/juju 3.6
        ``domain``/``state`` secrets: the owner is sent ``secret-remove`` for each such
        revision, ``worker/uniter/secrets/resolver.go``), and is told once
        (``obsolete-told``, kept with the secret).
        """
        model = self.read()
        found = []
        for uri, secret in sorted(model["secrets"].items()):
            owner = secret["owner"]
            if owner != UNIT and not (owner == APP and model["leader"]):
                continue
            tracked = {c.get("revision") for c in secret["consumers"].values()}
            told = set(secret.get("obsolete-told", ()))
            for revision in sorted(int(r) for r in secret["revisions"]):
                if revision < secret["latest"] and revision not in tracked | told:
                    found.append((uri, secret, revision))
        return found

    def deliver_secret_removals(self) -> list[HookRun]:
        """Run ``secret-remove`` for each obsolete revision (:meth:`obsolete_revisions`).

        Each with Juju's variables: ``JUJU_SECRET_ID``, ``JUJU_SECRET_LABEL`` and
        ``JUJU_SECRET_REVISION``; a revision is told once, whatever the charm does with it.
        """
        runs = []
        for uri, secret, revision in self.obsolete_revisions():
            with self.model(write=True) as model:
                model["secrets"][uri].setdefault("obsolete-told", []).append(revision)
            context = {
                "JUJU_SECRET_ID": uri,
                "JUJU_SECRET_LABEL": secret.get("label") or "",
                "JUJU_SECRET_REVISION": str(revision),
            }
            runs.append(self.hook("secret-remove", context))
        return runs

    def restart_pod(self, new_workload: Callable[[], None]) -> list[HookRun]:
        """The unit's pod deleted and made again by Kubernetes, as Juju 3.6 runs it.

        Kubernetes sends the old pod SIGTERM and Juju runs ``stop`` there (the unit stays
        alive: ``goal-state`` does not show it dying). The new pod's charm container starts
        from the image: the charm directory is a fresh copy of the prime directory (ops'
        ``.unit-state.db``, its stored state, gone); what the controller keeps stays (the
        model: relations, secrets, Juju's charm state, the storage). ``new_workload`` makes
        the workload container a new pod's (:meth:`tests.juju_agent.pod.Pod.restart_workload`).
        Then the sequence Juju emits on a K8s unit whose pod was made again, as on a refresh:
        ``upgrade-charm``, ``config-changed``, ``start``, then ``<container>-pebble-ready``
        for each container of ``metadata.yaml`` (no ``leader-elected``, no relation hook;
        ``leader-settings-changed`` only on a follower). Sources: the "What happens after juju
        refresh" page of canonical/charm-refresh ("If, at any time, a pod is deleted and
        re-created, Juju may emit an upgrade-charm event on that unit", Launchpad bug 2021891)
        and the emission sequence of ops' ``upgrade-charm`` event page. A hook that keeps
        failing stops the sequence there; the runs so far are returned, the last one failed.
        """
        runs = [self.hook("stop")]
        if not runs[-1].ok:
            return runs
        shutil.rmtree(self.charm_dir)
        shutil.copytree(self.prime_dir, self.charm_dir, symlinks=True)
        new_workload()
        hooks: list[tuple[str, dict[str, str]]] = [("upgrade-charm", {}), ("config-changed", {})]
        if not self.read()["leader"]:
            hooks.append(("leader-settings-changed", {}))
        hooks.append(("start", {}))
        hooks += [(f"{c}-pebble-ready", {"JUJU_WORKLOAD_NAME": c}) for c in self.containers()]
        for name, context in hooks:
            runs.append(self.hook(name, context))
            if not runs[-1].ok:
                return runs
        return runs

    def containers(self) -> list[str]:
        """The workload containers of the charm's ``metadata.yaml``."""
        meta = yaml.safe_load((self.charm_dir / "metadata.yaml").read_text(encoding="utf-8"))
        return sorted((meta or {}).get("containers") or {})

    def remove_application(self) -> list[HookRun]:
        """``juju remove-application garm`` as Juju 3.6's uniter runs it on this unit.

        The unit and its application become dying (``goal-state`` then shows the unit
        ``dying``: ops' ``planned_units()`` is 0). Juju's resolver, for a dying unit, runs the
        relation hooks first (``worker/uniter/resolver.go``, ``nextOp``: "if we're dying we must
        ensure that all relations are broken first"), then ``stop``, then ``remove``. Per
        relation (``worker/uniter/relation/resolver.go``, ``nextHookForRelation``): a
        ``relation-departed`` for each remote unit, in name order, whose departing unit is this
        one (its unit or application is no longer alive), then ``relation-broken``, which a
        peer relation never gets. Juju takes the relations in its map's order; here in id
        order. A hook that keeps failing stops the removal there (as the unit would stay in
        error); the runs so far are returned, the last one failed.
        """
        with self.model(write=True) as model:
            model["life"] = {"unit": "dying", "app": "dying"}
            relations = sorted(model["relations"].items(), key=lambda item: int(item[0]))
        runs: list[HookRun] = []
        for number, relation in relations:
            endpoint, remote = relation["endpoint"], relation["remote_app"]
            env = {
                "JUJU_RELATION": endpoint,
                "JUJU_RELATION_ID": f"{endpoint}:{number}",
                "JUJU_REMOTE_APP": remote,
            }
            for unit in sorted(u for u in relation["units"] if u != UNIT):
                with self.model(write=True) as model:
                    model["relations"][number].setdefault("departed", []).append(unit)
                departing = {"JUJU_REMOTE_UNIT": unit, "JUJU_DEPARTING_UNIT": UNIT}
                runs.append(self.hook(f"{endpoint}-relation-departed", {**env, **departing}))
                if not runs[-1].ok:
                    return runs
            if remote == APP:
                continue
            runs.append(self.hook(f"{endpoint}-relation-broken", env))
            if not runs[-1].ok:
                return runs
            with self.model(write=True) as model:
                del model["relations"][number]
        for name in ("stop", "remove"):
            runs.append(self.hook(name))
            if not runs[-1].ok:
                return runs
        return runs

    def action(self, name: str, params: Mapping[str, Any] | None = None) -> tuple[HookRun, Any]:
        """Run action ``name`` as ``juju run`` does; return the run and the action's record."""
        with self.model(write=True) as model:
            model["action"] = {"params": dict(params or {}), "results": {}, "failed": None}
            model["action"]["log"] = []
        context = {"JUJU_ACTION_NAME": name, "JUJU_ACTION_UUID": str(uuid.uuid4())}
        run = self.dispatch(f"actions/{name}", context)
        with self.model(write=True) as model:
            record, model["action"] = model["action"], None
        return run, record


def _text(output: str | bytes | None) -> str:
    """What a killed process had written (``TimeoutExpired`` holds bytes, or None)."""
    if isinstance(output, bytes):
        return output.decode("utf-8", "replace")
    return output or ""


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _tail(path: Path, offset: int) -> str:
    """What was appended to ``path`` after byte ``offset``."""
    if not path.exists():
        return ""
    with path.open("rb") as log:
        log.seek(offset)
        return log.read().decode("utf-8", "replace")


def base_python() -> Path:
    """The base's Python (3.12): ``GARM_PY312``, else this interpreter when it is 3.12."""
    configured = os.environ.get("GARM_PY312")
    if configured:
        return Path(configured)
    if sys.version_info[:2] == (3, 12):
        return Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    found = shutil.which("python3.12")
    if found is None:
        raise RuntimeError("no Python 3.12 for the packed charm (GARM_PY312 or python3.12)")
    return Path(found)
