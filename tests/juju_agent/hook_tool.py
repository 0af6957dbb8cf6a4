"""The hook tools of the Juju unit-agent stand-in: one program, installed under each tool's name.

Owns the model file (``model.json``, the model as the unit agent sees it, kept between hooks),
the hook's context while a hook runs, and every hook tool the packed charm runs as a process:
the tool is the name this program was started under (``argv[0]``).

A hook is a transaction, as Juju makes it (juju/juju 3.6 ``worker/uniter/runner/context/
context.go``, ``HookContext.Flush``: the changes are committed only when the hook exited 0).
:func:`open_context` starts a hook: its tool server listens (``hook.json``, the context id
it answers) and its own view of the model is the model as it stands (``hook-model.json``).
Every tool reads that view, so a hook sees its own pending writes (its own databags, a secret
it added, its charm state); the writes Juju flushes (relation settings, secrets created,
updated, removed, granted and revoked, ports, charm state: :data:`TRANSACTIONAL`) change
only the view, and :func:`close_context` commits them into the model at once when the hook
exited 0, or drops them. What Juju applies while the hook runs goes to both at once (``status
-set`` and ``application-version-set`` are API calls, ``action-set``, ``action-fail`` and
``action-log`` are reported whatever the exit code, and a consumer's tracked revision and
label are saved by the controller's ``secret-get``: ``apiserver/facades/agent/secretsmanager/
secrets.go``, ``getConsumedRevision``). ``secret-set`` keeps its new revision pending until
the hook ends: the latest revision ``secret-info-get`` shows stays the old one and a plain
``secret-get`` by the owner reads it; ``--peek`` and ``--refresh`` read the pending content
(``HookContext.getPendingSecretValue``); content equal to the latest revision's adds none
(``HookContext.UpdateSecret`` compares checksums). A change Juju takes in the hook and refuses
only at the commit (``secret-set``, ``secret-remove``, ``secret-revoke`` of a secret the unit
does not manage) fails the hook then, its other changes dropped with it.

A tool outside its hook is refused as Juju's ``jujuc`` client and tool server refuse it
(``cmd/jujuc/main.go``, ``worker/uniter/runner/jujuc/server.go``, ``worker/uniter/runner/
runner.go`` ``startJujucServer``): without ``JUJU_CONTEXT_ID`` (``JUJU_CONTEXT_ID not set``),
when no hook runs (the hook's server is closed when it ends: ``dial unix <address>: connect:
connection refused``), or with another hook's context id (``bad request: expected context id
"<current>", got "<given>"``); each exits 1.

The model and the view are read and written under one lock (``fcntl.flock`` on
``model.json.lock``), so the test side (:mod:`tests.juju_agent.agent`) reads and changes the
model between hooks with :func:`locked_model`. Stdlib only; the secret limits of the
deployment's Juju come from :mod:`tests.juju_model_limits` (imported only by ``secret-add``
and ``secret-set``, it imports nothing outside the stdlib).

A kill plan (``kill-plan.json``) has the charm's process sent SIGKILL at a hook's k-th tool
call, once (:func:`_killed_here`).

Each call is appended to ``calls.log`` (the tool's name) and each ``juju-log`` line to
``juju-log.log`` beside the model, for the test's counts; no argument or content is logged.

The model (JSON): ``unit``, ``app``, ``leader``, ``juju_version``, ``model_name``,
``model_uuid``; ``life`` (``unit`` and ``app``: ``dying`` once the application is being removed,
else absent); ``config``; ``relations`` by id (``endpoint``, ``remote_app``, ``units`` and
``apps``: the databags by unit and by application, the local ones included; ``departed``: the
units that left it, whose databags a hook may still read but ``relation-list`` no longer
names); ``secrets`` by id
(``owner``: an application or unit name, ``remote`` for another application's; ``label``,
``description``, ``expire``, ``rotate``, ``revisions`` by number, ``latest``, ``pending``: the
content a hook's ``secret-set`` gave, in the hook's view only; ``consumers``: per unit its
tracked ``revision`` and ``label``; ``grants``: ``relation`` and ``subject``, the application or
unit that may read it; ``obsolete-told``: the revisions the owner was sent ``secret-remove``
for); ``status`` (``unit`` and ``app``: ``status``, ``message``, ``since``),
``version``, ``ports``, ``state``, ``storage`` by id (``kind``, ``location``) and ``action``
(``params``, ``results``, ``failed``, ``log``); in the hook's view, ``refusals``: what the
commit will refuse.

Formats and refusals are Juju 3.6's. Each command is defined in juju/juju
``worker/uniter/runner/jujuc/`` (3.6; ``internal/worker/uniter/runner/jujuc/`` on main):
``relation-get.go``, ``relation-set.go``, ``relation-list.go``, ``relation-ids.go``,
``status-get.go``, ``status-set.go``, ``secret-add.go``, ``secret-get.go``,
``secret-info-get.go``, ``opened-ports.go``, ``ports.go``, ``network-get.go``,
``goal-state.go``, ``storage-get.go``, ``action-set.go``. What was read here: the flags ops 3.9
passes and the JSON shapes its parsers take (``ops/hookcmds/``: ``_relation.py``,
``_secret.py``, ``_status.py``, ``_port.py``, ``_storage.py``, ``_other.py``, ``_types.py``);
the refusals: ``ERROR cannot write relation settings`` (``relation-set.go``: a follower
writing its application databag), ``ERROR permission denied`` (a follower reading its
application databag of a non-peer relation; ``secret-get`` of a secret neither the unit, its
application nor a grant lets it read: the secrets facade's ``canRead``), ``ERROR this unit is
not the leader`` (``context.go`` ``ErrIsNotLeader``: a follower adding an application-owned
secret or setting the application's status), ``ERROR ... relation not found`` (``-r`` names a
relation the model no longer has), ``ERROR secret "<id>" not found`` (an unknown secret, or
``secret-info-get`` and ``secret-grant`` of one the unit does not manage); the size refusals
are those of Juju's ``core/secrets/createsecret.go``, through
:func:`tests.juju_model_limits.secret_refusal`. An application-owned secret is read by every
unit of its application, by its URI or its owner's label, at its latest revision; only the
leader relabels it (the secrets facade's ``getAppOwnedOrUnitOwnedSecretMetadata`` and
``updateLabelForAppOwnedOrUnitOwnedSecret``). Usage errors (an unknown flag, arguments the
command's ``Init`` refuses) exit 2 and refusals 1, as Juju's ``cmd`` package does.
``secret-add`` prints the bare URI (it has no ``--format``). ``goal-state`` gives the unit its
workload status, or ``dying`` once its life is (``apiserver/facades/agent/uniter/uniter.go``,
``goalStateUnits``), so ops' ``planned_units()`` is 0 while the application is removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

MODEL_ENV = "JUJU_STANDIN_MODEL"
# The repository, for tests.juju_model_limits (the tool runs isolated from the charm's paths).
REPO_ENV = "JUJU_STANDIN_REPO"
USAGE = 2
REFUSED = 1
XID_ALPHABET = "0123456789abcdefghijklmnopqrstuv"
# Beside the model: the running hook's context (its tool server) and its own view of the model.
HOOK_FILE = "hook.json"
VIEW_FILE = "hook-model.json"
# Beside the model: where the test side plans the charm's process killed at a hook's k-th tool.
KILL_FILE = "kill-plan.json"
# What a hook's tools change only when it exits 0 (HookContext.Flush, doFlush).
TRANSACTIONAL = ("relations", "secrets", "ports", "state")
# status-set.go: the statuses a charm may set.
SETTABLE_STATUSES = ("maintenance", "blocked", "waiting", "active")
# action-set.go: the keys Juju keeps for the action's own output.
RESERVED_ACTION_KEYS = ("stdout", "stdout-encoding", "stderr", "stderr-encoding")
# ports.go
PORT_FORMAT = "<port>[/<protocol>] or <from>-<to>[/<protocol>] or icmp"
PORT_OR_RANGE = re.compile(r"^icmp|(?:[0-9]+)(?:-(?:[0-9]+))?(/(?:[a-z0-9]+))?$")


class ToolError(Exception):
    """What the tool prints as Juju's ``ERROR`` line, with its exit code."""

    def __init__(self, message: str, code: int = REFUSED) -> None:
        super().__init__(message)
        self.code = code


# ---- the model file and the hook's view -------------------------------------------------------


@contextlib.contextmanager
def _lock(model_path: Path, *, exclusive: bool) -> Iterator[None]:
    with open(f"{model_path}.lock", "a+", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _save(path: Path, data: dict[str, Any]) -> None:
    temporary = path.with_suffix(".new")
    temporary.write_text(json.dumps(data), encoding="utf-8")
    temporary.replace(path)


@contextlib.contextmanager
def locked_model(path: Path, *, write: bool = True) -> Iterator[dict[str, Any]]:
    """The model in ``path`` under its lock; written back on exit when ``write``."""
    with _lock(path, exclusive=write):
        model = _load(path)
        yield model
        if write:
            _save(path, model)


def open_context(model_path: Path, context_id: str) -> None:
    """A hook starts: its tool server answers ``context_id``; its view is the model now."""
    with _lock(model_path, exclusive=True):
        shutil.copyfile(model_path, model_path.with_name(VIEW_FILE))
        (model_path.with_name(HOOK_FILE)).write_text(
            json.dumps({"context_id": context_id}), encoding="utf-8"
        )


def close_context(model_path: Path, *, commit: bool) -> str | None:
    """The hook ended: commit its pending writes (``commit``) or drop them; close its server.

    Returns:
        What the commit refused (the hook then fails, as Juju's ``Flush`` error fails it), or
        None.
    """
    view_path = model_path.with_name(VIEW_FILE)
    refused = None
    with _lock(model_path, exclusive=True):
        if commit and view_path.exists():
            view = _load(view_path)
            refused = "; ".join(view.get("refusals", ())) or None
            if refused is None:
                model = _load(model_path)
                for section in TRANSACTIONAL:
                    model[section] = view[section]
                for secret in model["secrets"].values():
                    _settle(secret)
                _save(model_path, model)
        view_path.unlink(missing_ok=True)
        model_path.with_name(HOOK_FILE).unlink(missing_ok=True)
    return refused


def _settle(secret: dict[str, Any]) -> None:
    """A committed secret-set: its pending content becomes the latest revision."""
    pending = secret.pop("pending", None)
    if pending is not None:
        secret["latest"] += 1
        secret["revisions"][str(secret["latest"])] = pending


def _connect(model_path: Path) -> None:
    """What the jujuc client and the hook's tool server refuse before any tool runs."""
    context_id = _env("JUJU_CONTEXT_ID")
    for name in ("JUJU_CONTEXT_ID", "JUJU_AGENT_SOCKET_ADDRESS", "JUJU_AGENT_SOCKET_NETWORK"):
        if not _env(name):
            raise ToolError(f"{name} not set")
    hook = model_path.with_name(HOOK_FILE)
    try:
        current = json.loads(hook.read_text(encoding="utf-8"))["context_id"]
    except FileNotFoundError:
        network, address = _env("JUJU_AGENT_SOCKET_NETWORK"), _env("JUJU_AGENT_SOCKET_ADDRESS")
        raise ToolError(f"dial {network} {address}: connect: connection refused") from None
    if current != context_id:
        raise ToolError(
            f"bad request: expected context id {_quote(current)}, got {_quote(context_id)}"
        )


def _quote(text: str) -> str:
    """Go's ``%q`` of a plain string."""
    return json.dumps(text)


def _refuse_at_commit(view: dict[str, Any], reason: str) -> None:
    """A change Juju takes now and refuses when the hook's changes are committed."""
    view.setdefault("refusals", []).append(reason)


def new_secret_id() -> str:
    """A secret URI as Juju makes one: ``secret:`` and a 20-character xid."""
    return "secret:" + "".join(secrets.choice(XID_ALPHABET) for _ in range(20))


def now() -> str:
    """The time as Juju's JSON gives it (RFC 3339, UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ---- arguments --------------------------------------------------------------------------------


class Args:
    """A hook tool's arguments: flags with values, boolean flags, positionals after them.

    A flag the tool does not define is refused as gnuflag refuses it (exit 2).
    """

    def __init__(self, argv: list[str], valued: set[str], boolean: set[str] = frozenset()) -> None:
        self.flags: dict[str, str] = {}
        self.positional: list[str] = []
        rest = iter(argv)
        for arg in rest:
            if arg == "--":
                self.positional.extend(rest)
                break
            if arg.startswith("-") and len(arg) > 1:
                name, has_value, value = arg.lstrip("-").partition("=")
                if name not in valued and name not in boolean:
                    raise ToolError(
                        f"flag provided but not defined: {arg.partition('=')[0]}", USAGE
                    )
                if name in valued and not has_value:
                    value = next(rest, None) or ""
                self.flags[name] = value if (has_value or name in valued) else "true"
            else:
                self.positional.append(arg)

    def flag(self, *names: str) -> str | None:
        return next((self.flags[n] for n in names if n in self.flags), None)

    def true(self, name: str) -> bool:
        return self.flags.get(name, "false").lower() != "false"


def _env(name: str) -> str:
    return os.environ.get(name, "")


# ---- relations --------------------------------------------------------------------------------


def _relation(model: dict[str, Any], ref: str | None) -> tuple[str, dict[str, Any]]:
    """The relation ``-r`` names (``endpoint:id`` or ``id``), else the hook's own."""
    ref = ref or _env("JUJU_RELATION_ID")
    if not ref:
        raise ToolError("no relation id specified", USAGE)
    endpoint, _, number = ref.rpartition(":")
    relation = model["relations"].get(number)
    if relation is None or (endpoint and relation["endpoint"] != endpoint):
        raise ToolError(f'invalid value "{ref}" for option -r: relation not found', USAGE)
    return number, relation


def relation_ids(model: dict[str, Any], args: Args) -> Any:
    endpoint = args.positional[0] if args.positional else _env("JUJU_RELATION")
    return [
        f"{r['endpoint']}:{number}"
        for number, r in sorted(model["relations"].items(), key=lambda item: int(item[0]))
        if r["endpoint"] == endpoint
    ]


def relation_list(model: dict[str, Any], args: Args) -> Any:
    _, relation = _relation(model, args.flag("r", "relation"))
    if args.true("app"):
        return relation["remote_app"]
    departed = set(relation.get("departed", ()))
    return sorted(u for u in relation["units"] if u != model["unit"] and u not in departed)


def relation_get(model: dict[str, Any], args: Args) -> Any:
    _, relation = _relation(model, args.flag("r", "relation"))
    key = args.positional[0] if args.positional else "-"
    member = args.positional[1] if len(args.positional) > 1 else _env("JUJU_REMOTE_UNIT")
    if args.true("app"):
        app = member.split("/")[0]
        peer = relation["remote_app"] == model["app"]
        if app == model["app"] and not peer and not model["leader"]:
            raise ToolError("permission denied")
        bag = relation["apps"].get(app)
    else:
        bag = relation["units"].get(member)
    if bag is None:
        raise ToolError("permission denied")
    return dict(bag) if key == "-" else bag.get(key)


def relation_set(model: dict[str, Any], args: Args) -> None:
    _, relation = _relation(model, args.flag("r", "relation"))
    changes: dict[str, str] = {}
    source = args.flag("file")
    if source is not None:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        changes.update(json.loads(text) or {})
    changes.update(dict(p.split("=", 1) for p in args.positional if "=" in p))
    if args.true("app"):
        if not model["leader"]:
            raise ToolError("cannot write relation settings")
        bag = relation["apps"].setdefault(model["app"], {})
    else:
        bag = relation["units"].setdefault(model["unit"], {})
    for key, value in changes.items():
        if value == "":
            bag.pop(key, None)
        else:
            bag[key] = str(value)


def relation_model_get(model: dict[str, Any], args: Args) -> Any:
    _relation(model, args.flag("r", "relation"))
    return {"uuid": model["model_uuid"]}


# ---- secrets ----------------------------------------------------------------------------------


def _content(positional: list[str]) -> dict[str, str]:
    """``key=value`` and ``key#file=path`` arguments (ops passes each value as a file)."""
    content: dict[str, str] = {}
    for item in positional:
        key, _, value = item.partition("=")
        if key.endswith("#file"):
            content[key.removesuffix("#file")] = Path(value).read_text(encoding="utf-8")
        elif key.endswith("#base64"):
            raise ToolError("base64 content is not served by this stand-in", USAGE)
        else:
            content[key] = value
    return content


def _check_size(model: dict[str, Any], content: dict[str, str]) -> None:
    sys.path.insert(0, os.environ[REPO_ENV])
    from tests.juju_model_limits import secret_refusal

    refusal = secret_refusal(content, model["juju_version"])
    if refusal is not None:
        raise ToolError(refusal.removeprefix("ERROR "))


def _owns(model: dict[str, Any], secret: dict[str, Any]) -> bool:
    """Whether this unit manages ``secret``: its own, or its application's as the leader."""
    return secret["owner"] == model["unit"] or (
        secret["owner"] == model["app"] and model["leader"]
    )


def _of_this_application(model: dict[str, Any], secret: dict[str, Any]) -> bool:
    """The unit's own secret or its application's: read at the latest revision by any unit."""
    return secret["owner"] in (model["unit"], model["app"])


def _can_read(model: dict[str, Any], secret: dict[str, Any]) -> bool:
    subjects = (model["unit"], model["app"])
    granted = any(grant.get("subject") in subjects for grant in secret["grants"])
    return _of_this_application(model, secret) or granted


def _secret_key(uri: str) -> str:
    """``secret:<id>`` of any URI form (a consumer may be given ``secret://<model>/<id>``)."""
    return f"secret:{uri.rsplit('/', 1)[-1].removeprefix('secret:')}"


def _find_secret(model: dict[str, Any], uri: str | None, label: str | None) -> tuple[str, Any]:
    if uri:
        key = _secret_key(uri)
        if key in model["secrets"]:
            return key, model["secrets"][key]
        raise ToolError(f'secret "{key.removeprefix("secret:")}" not found')
    for key, secret in model["secrets"].items():
        consumer = secret["consumers"].get(model["unit"], {})
        owner_label = _of_this_application(model, secret) and secret.get("label") == label
        if owner_label or consumer.get("label") == label:
            return key, secret
    raise ToolError(f'secret "{label}" not found')


def _managed(model: dict[str, Any], uri: str | None) -> tuple[str, Any] | None:
    """The secret ``uri`` names if this unit manages it; else the commit is refused."""
    if not uri:
        raise ToolError("missing secret URI", USAGE)
    key = _secret_key(uri)
    secret = model["secrets"].get(key)
    if secret is None:
        _refuse_at_commit(model, f'secret "{key.removeprefix("secret:")}" not found')
        return None
    if not _owns(model, secret):
        _refuse_at_commit(model, "permission denied")
        return None
    return key, secret


def secret_add(model: dict[str, Any], args: Args) -> Any:
    owner = model["unit"] if args.flag("owner") == "unit" else model["app"]
    if owner == model["app"] and not model["leader"]:
        raise ToolError("this unit is not the leader")
    content = _content(args.positional)
    if not content:
        raise ToolError("missing secret value or filename", USAGE)
    _check_size(model, content)
    label = args.flag("label")
    if label and any(
        s.get("label") == label and s["owner"] == owner for s in model["secrets"].values()
    ):
        raise ToolError(f'secret with label "{label}" already exists')
    uri = new_secret_id()
    model["secrets"][uri] = {
        "owner": owner,
        "label": label,
        "description": args.flag("description"),
        "expire": args.flag("expire"),
        "rotate": args.flag("rotate"),
        "revisions": {"1": content},
        "latest": 1,
        "consumers": {},
        "grants": [],
    }
    return uri


def secret_get(model: dict[str, Any], args: Args) -> Any:
    uri = args.positional[0] if args.positional else None
    label = args.flag("label")
    if not uri and not label:
        raise ToolError("require either a secret URI or label", USAGE)
    if args.true("peek") and args.true("refresh"):
        raise ToolError("specify one of --peek or --refresh but not both", USAGE)
    _, secret = _find_secret(model, uri, None if uri else label)
    if not _can_read(model, secret):
        raise ToolError("permission denied")
    latest = secret["latest"]
    if _of_this_application(model, secret):
        # The unit's own and its application's secrets are read at the latest revision; only
        # a unit that manages one relabels it. A hook's own secret-set is read back with
        # --peek or --refresh.
        if uri and label and _owns(model, secret):
            secret["label"] = label
        pending = secret.get("pending")
        if pending is not None and (args.true("peek") or args.true("refresh")):
            return pending
        return secret["revisions"][str(latest)]
    consumer = secret["consumers"].setdefault(model["unit"], {"revision": latest})
    if uri and label:
        consumer["label"] = label
    if args.true("refresh"):
        consumer["revision"] = latest
    revision = latest if args.true("peek") else consumer["revision"]
    return secret["revisions"][str(revision)]


def secret_set(model: dict[str, Any], args: Args) -> None:
    managed = _managed(model, args.positional[0] if args.positional else None)
    if managed is None:
        return
    key, secret = managed
    content = _content(args.positional[1:])
    if content:
        _check_size(model, content)
        if content == secret["revisions"].get(str(secret["latest"])):
            # Juju compares checksums: the same content adds no revision.
            secret.pop("pending", None)
        else:
            secret["pending"] = content
    for field in ("label", "description", "expire", "rotate"):
        if args.flag(field) is not None:
            secret[field] = args.flag(field)
    model["secrets"][key] = secret


def secret_info_get(model: dict[str, Any], args: Args) -> Any:
    uri = args.positional[0] if args.positional else None
    label = args.flag("label")
    key, secret = _find_secret(model, uri, None if uri else label)
    if not _owns(model, secret):
        raise ToolError(f'secret "{key.removeprefix("secret:") if uri else label}" not found')
    info = {
        "revision": secret["latest"],
        "label": secret.get("label") or "",
        "owner": "unit" if secret["owner"] == model["unit"] else "application",
        "rotation": secret.get("rotate") or "never",
    }
    if secret.get("description"):
        info["description"] = secret["description"]
    return {key.removeprefix("secret:"): info}


def secret_ids(model: dict[str, Any], args: Args) -> Any:
    del args
    return sorted(k for k, s in model["secrets"].items() if _owns(model, s))


def secret_grant(model: dict[str, Any], args: Args) -> None:
    uri = args.positional[0] if args.positional else None
    key, secret = _find_secret(model, uri, None) if uri else ("", None)
    if secret is None or not _owns(model, secret):
        raise ToolError(f'secret "{key.removeprefix("secret:")}" not found')
    ref = args.flag("r", "relation")
    number, relation = _relation(model, ref)
    subject = args.flag("unit") or relation["remote_app"]
    grant = {"relation": number, "subject": subject}
    if grant not in secret["grants"]:
        secret["grants"].append(grant)


def secret_revoke(model: dict[str, Any], args: Args) -> None:
    managed = _managed(model, args.positional[0] if args.positional else None)
    if managed is None:
        return
    _, secret = managed
    ref = args.flag("r", "relation")
    number = ref.rpartition(":")[2] if ref else None
    subject = args.flag("unit") or args.flag("app")
    secret["grants"] = [
        g
        for g in secret["grants"]
        if not (
            (number is None or g["relation"] == number)
            and (subject is None or g["subject"] == subject)
        )
    ]


def secret_remove(model: dict[str, Any], args: Args) -> None:
    managed = _managed(model, args.positional[0] if args.positional else None)
    if managed is None:
        return
    key, secret = managed
    revision = args.flag("revision")
    if revision is None:
        del model["secrets"][key]
    else:
        secret["revisions"].pop(revision, None)


# ---- the rest ---------------------------------------------------------------------------------


def is_leader(model: dict[str, Any], args: Args) -> Any:
    del args
    return model["leader"]


def config_get(model: dict[str, Any], args: Args) -> Any:
    if args.positional:
        return model["config"].get(args.positional[0])
    return model["config"]


def status_get(model: dict[str, Any], args: Args) -> Any:
    def shown(status: dict[str, str]) -> dict[str, Any]:
        return {**status, "status-data": {}}

    if args.true("application"):
        if not model["leader"]:
            raise ToolError("finding application status: this unit is not the leader")
        return {
            "application-status": shown(model["status"]["app"]),
            "units": {model["unit"]: shown(model["status"]["unit"])},
        }
    return shown(model["status"]["unit"])


def status_set(model: dict[str, Any], args: Args) -> None:
    if not args.positional:
        raise ToolError("invalid args, require <status> [message]", USAGE)
    status, *message = args.positional
    if status not in SETTABLE_STATUSES:
        expected = " ".join(SETTABLE_STATUSES)
        raise ToolError(f"invalid status {_quote(status)}, expected one of [{expected}]", USAGE)
    which = "unit"
    if args.true("application"):
        if not model["leader"]:
            raise ToolError("this unit is not the leader")
        which = "app"
    model["status"][which] = {"status": status, "message": " ".join(message), "since": now()}


def application_version_set(model: dict[str, Any], args: Args) -> None:
    model["version"] = args.positional[0] if args.positional else ""


def _port(args: Args) -> str:
    """The port or range ``open-port`` and ``close-port`` take, checked as ``ports.go`` does."""
    if not args.positional:
        raise ToolError("no port or range specified", USAGE)
    spec = args.positional[0].lower()
    if not PORT_OR_RANGE.match(spec):
        raise ToolError(f"expected {PORT_FORMAT}; got {_quote(args.positional[0])}", USAGE)
    if spec == "icmp":
        return spec
    ports, _, protocol = spec.partition("/")
    first, _, last = ports.partition("-")
    for number in (first, last or first):
        if not 1 <= int(number) <= 65535:
            raise ToolError(f'port must be in the range [1, 65535]; got "{int(number)}"', USAGE)
    return f"{ports}/{protocol or 'tcp'}"


def open_port(model: dict[str, Any], args: Args) -> None:
    port = _port(args)
    if port not in model["ports"]:
        model["ports"].append(port)


def close_port(model: dict[str, Any], args: Args) -> None:
    port = _port(args)
    model["ports"] = [p for p in model["ports"] if p != port]


def opened_ports(model: dict[str, Any], args: Args) -> Any:
    del args
    return list(model["ports"])


def network_get(model: dict[str, Any], args: Args) -> Any:
    if args.flag("r", "relation"):
        _relation(model, args.flag("r", "relation"))
    address = {"hostname": "", "value": "127.0.0.1", "cidr": "127.0.0.0/8"}
    return {
        "bind-addresses": [
            {"mac-address": "", "interface-name": "lo", "addresses": [address]},
        ],
        "egress-subnets": ["127.0.0.1/32"],
        "ingress-addresses": ["127.0.0.1"],
    }


def goal_state(model: dict[str, Any], args: Args) -> Any:
    """Juju's goal state: the unit's workload status, ``dying`` once it is (``goalStateUnits``).

    ops' ``planned_units()`` counts the units whose status is not ``dying``.
    """
    del args
    unit_status = model["status"]["unit"]
    since = unit_status["since"]
    dying = model.get("life", {}).get("unit") == "dying"
    relations: dict[str, dict[str, Any]] = {}
    for relation in model["relations"].values():
        goals = relations.setdefault(relation["endpoint"], {})
        departed = set(relation.get("departed", ()))
        for member in [relation["remote_app"], *relation["units"]]:
            if member != model["unit"] and member not in departed:
                goals[member] = {"status": "joined", "since": since}
    unit = {"status": "dying" if dying else unit_status["status"], "since": since}
    return {"units": {model["unit"]: unit}, "relations": relations}


def storage_list(model: dict[str, Any], args: Args) -> Any:
    name = args.positional[0] if args.positional else None
    return sorted(s for s in model["storage"] if name is None or s.split("/")[0] == name)


def storage_get(model: dict[str, Any], args: Args) -> Any:
    ident = args.flag("s") or _env("JUJU_STORAGE_ID")
    if ident not in model["storage"]:
        raise ToolError(f'invalid value "{ident}" for option -s: storage not found', USAGE)
    storage = model["storage"][ident]
    return storage[args.positional[0]] if args.positional else storage


def state_get(model: dict[str, Any], args: Args) -> Any:
    return model["state"].get(args.positional[0]) if args.positional else model["state"]


def state_set(model: dict[str, Any], args: Args) -> None:
    if args.flag("file") == "-":
        model["state"].update(json.loads(sys.stdin.read()) or {})
    model["state"].update(dict(p.split("=", 1) for p in args.positional if "=" in p))


def state_delete(model: dict[str, Any], args: Args) -> None:
    model["state"].pop(args.positional[0], None)


def _action(model: dict[str, Any]) -> dict[str, Any]:
    if not _env("JUJU_ACTION_NAME") or model.get("action") is None:
        raise ToolError("not running an action")
    return model["action"]


def action_get(model: dict[str, Any], args: Args) -> Any:
    params = _action(model)["params"]
    return params.get(args.positional[0]) if args.positional else params


def action_set(model: dict[str, Any], args: Args) -> None:
    pairs = []
    for item in args.positional:
        key, equals, value = item.partition("=")
        if not equals:
            raise ToolError(f"argument {_quote(item)} must be of the form key...=value", USAGE)
        for part in key.split("."):
            if part in RESERVED_ACTION_KEYS:
                raise ToolError(f"cannot set reserved action key {_quote(part)}", USAGE)
        pairs.append((key, value))
    results = _action(model)["results"]
    for key, value in pairs:
        results[key] = value


def action_log(model: dict[str, Any], args: Args) -> None:
    _action(model)["log"].append(" ".join(args.positional))


def action_fail(model: dict[str, Any], args: Args) -> None:
    _action(model)["failed"] = " ".join(args.positional) or "action failed"


def juju_log(args: Args, log: Path) -> None:
    level = args.flag("l", "log-level") or "INFO"
    with log.open("a", encoding="utf-8") as out:
        out.write(f"{level} {' '.join(args.positional)}\n")


# How a tool's writes reach the model: it only reads the hook's view (READ); it changes the
# view, committed when the hook exits 0 (PENDING); it changes the model at once as well (NOW).
READ, PENDING, NOW = "read", "pending", "now"
Handler = Callable[[dict[str, Any], Args], Any]
_RELATION = {"r", "relation"}
_SECRET = {"label", "description", "expire", "rotate", "owner"}
_NETWORK = {"primary-address", "bind-address", "ingress-address", "egress-subnets"}
# tool -> (handler, kind, flags that take a value, boolean flags)
TOOLS: dict[str, tuple[Handler, str, set[str], set[str]]] = {
    "is-leader": (is_leader, READ, set(), set()),
    "config-get": (config_get, READ, set(), {"a", "all"}),
    "relation-ids": (relation_ids, READ, set(), set()),
    "relation-list": (relation_list, READ, _RELATION, {"app"}),
    "relation-get": (relation_get, READ, _RELATION, {"app"}),
    "relation-set": (relation_set, PENDING, {*_RELATION, "file"}, {"app"}),
    "relation-model-get": (relation_model_get, READ, _RELATION, set()),
    "secret-add": (secret_add, PENDING, _SECRET, set()),
    "secret-get": (secret_get, NOW, {"label"}, {"peek", "refresh"}),
    "secret-set": (secret_set, PENDING, _SECRET, set()),
    "secret-info-get": (secret_info_get, READ, {"label"}, set()),
    "secret-ids": (secret_ids, READ, set(), set()),
    "secret-grant": (secret_grant, PENDING, {*_RELATION, "unit"}, set()),
    "secret-revoke": (secret_revoke, PENDING, {*_RELATION, "app", "unit"}, set()),
    "secret-remove": (secret_remove, PENDING, {"revision"}, set()),
    "status-get": (status_get, READ, set(), {"application", "include-data"}),
    "status-set": (status_set, NOW, set(), {"application"}),
    "application-version-set": (application_version_set, NOW, set(), set()),
    "open-port": (open_port, PENDING, {"endpoints"}, set()),
    "close-port": (close_port, PENDING, {"endpoints"}, set()),
    "opened-ports": (opened_ports, READ, set(), {"endpoints"}),
    "network-get": (network_get, READ, _RELATION, _NETWORK),
    "goal-state": (goal_state, READ, set(), set()),
    "storage-list": (storage_list, READ, set(), set()),
    "storage-get": (storage_get, READ, {"s"}, set()),
    "state-get": (state_get, READ, set(), set()),
    "state-set": (state_set, PENDING, {"file"}, set()),
    "state-delete": (state_delete, PENDING, set(), set()),
    "action-get": (action_get, READ, set(), set()),
    "action-set": (action_set, NOW, set(), set()),
    "action-log": (action_log, NOW, set(), set()),
    "action-fail": (action_fail, NOW, set(), set()),
}
LOG_TOOL = "juju-log"
TOOL_NAMES = (*TOOLS, LOG_TOOL)


def _serve(tool: str, args: Args, model_path: Path) -> Any:
    """Run ``tool`` on the hook's view; a NOW tool's change reaches the model at once too."""
    handler, kind, _, _ = TOOLS[tool]
    view_path = model_path.with_name(VIEW_FILE)
    with _lock(model_path, exclusive=kind != READ):
        view = _load(view_path)
        result = handler(view, args)
        if kind != READ:
            _save(view_path, view)
        if kind == NOW:
            model = _load(model_path)
            # What the view refused was refused; a secret the hook itself added is not there.
            with contextlib.suppress(ToolError):
                handler(model, args)
            _save(model_path, model)
    return result


def _killed_here(model_path: Path) -> bool:
    """Whether this call is the one the kill plan names; then the charm's process is killed.

    The plan (``kill-plan.json`` beside the model, written by the test side:
    :meth:`tests.juju_agent.agent.UnitAgent.plan_kill`) names a dispatch path and ``at``, the
    number of that hook's tool call at which the charm's process (this tool's parent: ops runs
    each tool as its child) is sent SIGKILL, as a pod's OOM kill or node loss would end it; the
    plan is spent after one kill.
    """
    plan_path = model_path.with_name(KILL_FILE)
    if not plan_path.exists() or _env("JUJU_DISPATCH_PATH") != _load(plan_path)["dispatch"]:
        return False
    with _lock(model_path, exclusive=True):
        plan = _load(plan_path)
        if plan.get("killed"):
            return False
        plan["count"] = plan.get("count", 0) + 1
        plan["killed"] = plan["count"] >= plan["at"]
        _save(plan_path, plan)
    if plan["killed"]:
        os.kill(os.getppid(), signal.SIGKILL)
    return plan["killed"]


def run(tool: str, argv: list[str], model_path: Path) -> int:
    """Run ``tool`` with ``argv`` on the model at ``model_path``; return the exit code."""
    with (model_path.parent / "calls.log").open("a", encoding="utf-8") as calls:
        calls.write(f"{tool}\n")
    try:
        _connect(model_path)
        if _killed_here(model_path):
            return REFUSED
        if tool == LOG_TOOL:
            juju_log(Args(argv, {"l", "log-level"}, {"debug"}), model_path.parent / "juju-log.log")
            return 0
        _, _, valued, boolean = TOOLS[tool]
        args = Args(argv, {*valued, "format"}, boolean)
        result = _serve(tool, args, model_path)
    except ToolError as error:
        sys.stderr.write(f"ERROR {error}\n")
        return error.code
    if args.flag("format") == "json":
        sys.stdout.write(json.dumps(result) + "\n")
    elif result is not None:
        # secret-add prints the new secret's URI as it is (it has no --format).
        sys.stdout.write(f"{result if isinstance(result, str) else json.dumps(result)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[0]).name, sys.argv[1:], Path(os.environ[MODEL_ENV])))
