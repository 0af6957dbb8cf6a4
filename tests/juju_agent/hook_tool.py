"""The hook tools of the Juju unit-agent stand-in: one program, installed under each tool's name.

Owns the model file (``model.json``, the model as the unit agent sees it, kept between hooks)
and every hook tool the packed charm runs as a process: the tool is the name this program was
started under (``argv[0]``). It reads the model under a shared lock and writes it under an
exclusive one (``fcntl.flock`` on ``model.json.lock``), so the test side (:mod:`tests.
juju_agent.agent`) reads and changes the same file between hooks with :func:`locked_model`.
Stdlib only; the secret limits of the deployment's Juju come from :mod:`tests.juju_model_limits`
(imported only by ``secret-add`` and ``secret-set``, it imports nothing outside the stdlib).

Each call is appended to ``calls.log`` (the tool's name) and each ``juju-log`` line to
``juju-log.log`` beside the model, for the test's counts; no argument or content is logged.

The model (JSON): ``unit``, ``app``, ``leader``, ``juju_version``, ``model_name``,
``model_uuid``; ``config``; ``relations`` by id (``endpoint``, ``remote_app``, ``units`` and
``apps``: the databags by unit and by application, the local ones included); ``secrets`` by id
(``owner``: an application or unit name; ``label``, ``description``, ``expire``, ``rotate``,
``revisions`` by number, ``latest``, ``consumers``: per unit its tracked ``revision`` and
``label``, ``grants``); ``status`` (``unit`` and ``app``: ``status``, ``message``, ``since``),
``version``, ``ports``, ``state``, ``storage`` by id (``kind``, ``location``) and ``action``
(``params``, ``results``, ``failed``, ``log``).

Formats and refusals are Juju 3.6's. Each command is defined in juju/juju
``worker/uniter/runner/jujuc/`` (3.6; ``internal/worker/uniter/runner/jujuc/`` on main):
``relation-get.go``, ``relation-set.go``, ``relation-list.go``, ``relation-ids.go``,
``status-get.go``, ``status-set.go``, ``secret-add.go``, ``secret-get.go``,
``secret-info-get.go``, ``opened-ports.go``, ``network-get.go``, ``goal-state.go``,
``storage-get.go``, ``action-set.go``. What was read here: the flags ops 3.9 passes and the
JSON shapes its parsers take (``ops/hookcmds/``: ``_relation.py``, ``_secret.py``,
``_status.py``, ``_port.py``, ``_storage.py``, ``_other.py``, ``_types.py``), and the refusal
texts ops 3.9's ``ops/model.py`` documents Juju 3.6 answering (``_relation_is_gone``,
``_check_for_security_event``, the ``SecretNotFoundError`` rule): ``ERROR permission denied``
(a follower writing or reading its application databag, a follower adding or changing an
application-owned secret), ``ERROR ... relation not found`` (``-r`` names a relation the model
no longer has), ``ERROR secret "<id>" not found``; the size refusals are those of Juju's
``core/secrets/createsecret.go``, through :func:`tests.juju_model_limits.secret_refusal`. Usage
errors exit 2 and refusals 1, as Juju's ``cmd`` package does. ``secret-add`` prints the bare
URI (it has no ``--format``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
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


class ToolError(Exception):
    """What the tool prints as Juju's ``ERROR`` line, with its exit code."""

    def __init__(self, message: str, code: int = REFUSED) -> None:
        super().__init__(message)
        self.code = code


# ---- the model file ---------------------------------------------------------------------------


@contextlib.contextmanager
def locked_model(path: Path, *, write: bool = True) -> Iterator[dict[str, Any]]:
    """The model in ``path`` under its lock; written back on exit when ``write``."""
    with open(f"{path}.lock", "a+", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if write else fcntl.LOCK_SH)
        model = json.loads(path.read_text(encoding="utf-8"))
        yield model
        if write:
            temporary = path.with_suffix(".new")
            temporary.write_text(json.dumps(model), encoding="utf-8")
            temporary.replace(path)


def new_secret_id() -> str:
    """A secret URI as Juju makes one: ``secret:`` and a 20-character xid."""
    return "secret:" + "".join(secrets.choice(XID_ALPHABET) for _ in range(20))


def now() -> str:
    """The time as Juju's JSON gives it (RFC 3339, UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ---- arguments --------------------------------------------------------------------------------


class Args:
    """A hook tool's arguments: flags with values, boolean flags, positionals after them."""

    def __init__(self, argv: list[str], valued: set[str]) -> None:
        self.flags: dict[str, str] = {}
        self.positional: list[str] = []
        rest = iter(argv)
        for arg in rest:
            if arg == "--":
                self.positional.extend(rest)
                break
            if arg.startswith("-") and len(arg) > 1:
                name, has_value, value = arg.lstrip("-").partition("=")
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
    return sorted(u for u in relation["units"] if u != model["unit"])


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
            raise ToolError("permission denied")
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


def _content(args: Args) -> dict[str, str]:
    """``key=value`` and ``key#file=path`` arguments (ops passes each value as a file)."""
    content: dict[str, str] = {}
    for item in args.positional:
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
    return secret["owner"] == model["unit"] or (
        secret["owner"] == model["app"] and model["leader"]
    )


def _find_secret(model: dict[str, Any], uri: str | None, label: str | None) -> tuple[str, Any]:
    if uri:
        key = uri if uri.startswith("secret:") else f"secret:{uri.rsplit('/', 1)[-1]}"
        # A consumer may be given the model-qualified form secret://<model uuid>/<id>.
        key = f"secret:{key.rsplit('/', 1)[-1].removeprefix('secret:')}"
        if key in model["secrets"]:
            return key, model["secrets"][key]
        raise ToolError(f'secret "{uri.rsplit("/", 1)[-1].removeprefix("secret:")}" not found')
    for key, secret in model["secrets"].items():
        mine = secret["owner"] in (model["unit"], model["app"])
        consumer = secret["consumers"].get(model["unit"], {})
        if (mine and secret.get("label") == label) or consumer.get("label") == label:
            return key, secret
    raise ToolError(f'secret "{label}" not found')


def secret_add(model: dict[str, Any], args: Args) -> Any:
    owner = model["unit"] if args.flag("owner") == "unit" else model["app"]
    if owner == model["app"] and not model["leader"]:
        raise ToolError("permission denied")
    content = _content(args)
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
    _, secret = _find_secret(model, uri, None if uri else label)
    latest = secret["latest"]
    if _owns(model, secret) or secret["owner"] in (model["unit"], model["app"]):
        # The owner always reads the latest revision.
        if uri and label:
            secret["label"] = label
        return secret["revisions"][str(latest)]
    consumer = secret["consumers"].setdefault(model["unit"], {"revision": latest})
    if uri and label:
        consumer["label"] = label
    if args.true("refresh"):
        consumer["revision"] = latest
    revision = latest if args.true("peek") else consumer["revision"]
    return secret["revisions"][str(revision)]


def secret_set(model: dict[str, Any], args: Args) -> None:
    uri = args.positional[0] if args.positional else None
    key, secret = _find_secret(model, uri, None)
    if not _owns(model, secret):
        raise ToolError("permission denied")
    args.positional = args.positional[1:]
    content = _content(args)
    if content:
        _check_size(model, content)
        secret["latest"] += 1
        secret["revisions"][str(secret["latest"])] = content
    for field in ("label", "description", "expire", "rotate"):
        if args.flag(field) is not None:
            secret[field] = args.flag(field)
    model["secrets"][key] = secret


def secret_info_get(model: dict[str, Any], args: Args) -> Any:
    uri = args.positional[0] if args.positional else None
    key, secret = _find_secret(model, uri, args.flag("label"))
    if not _owns(model, secret):
        raise ToolError("permission denied")
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
    _, secret = _find_secret(model, args.positional[0] if args.positional else None, None)
    if not _owns(model, secret):
        raise ToolError("permission denied")
    _relation(model, args.flag("r", "relation"))
    secret["grants"].append(args.flag("r", "relation"))


def secret_revoke(model: dict[str, Any], args: Args) -> None:
    _, secret = _find_secret(model, args.positional[0] if args.positional else None, None)
    if not _owns(model, secret):
        raise ToolError("permission denied")
    ref = args.flag("r", "relation")
    secret["grants"] = [g for g in secret["grants"] if g != ref]


def secret_remove(model: dict[str, Any], args: Args) -> None:
    key, secret = _find_secret(model, args.positional[0] if args.positional else None, None)
    if not _owns(model, secret):
        raise ToolError("permission denied")
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
    status, *message = args.positional
    which = "unit"
    if args.true("application"):
        if not model["leader"]:
            raise ToolError("setting application status: this unit is not the leader")
        which = "app"
    model["status"][which] = {"status": status, "message": " ".join(message), "since": now()}


def application_version_set(model: dict[str, Any], args: Args) -> None:
    model["version"] = args.positional[0] if args.positional else ""


def _port(spec: str) -> str:
    return spec if "/" in spec or spec == "icmp" else f"{spec}/tcp"


def open_port(model: dict[str, Any], args: Args) -> None:
    port = _port(args.positional[0])
    if port not in model["ports"]:
        model["ports"].append(port)


def close_port(model: dict[str, Any], args: Args) -> None:
    port = _port(args.positional[0])
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
    del args
    since = model["status"]["unit"]["since"]
    relations: dict[str, dict[str, Any]] = {}
    for relation in model["relations"].values():
        goals = relations.setdefault(relation["endpoint"], {})
        for member in [relation["remote_app"], *relation["units"]]:
            if member != model["unit"]:
                goals[member] = {"status": "joined", "since": since}
    return {"units": {model["unit"]: {"status": "active", "since": since}}, "relations": relations}


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
    results = _action(model)["results"]
    for item in args.positional:
        key, _, value = item.partition("=")
        results[key] = value


def action_log(model: dict[str, Any], args: Args) -> None:
    _action(model)["log"].append(" ".join(args.positional))


def action_fail(model: dict[str, Any], args: Args) -> None:
    _action(model)["failed"] = " ".join(args.positional) or "action failed"


def juju_log(args: Args, log: Path) -> None:
    level = args.flag("l", "log-level") or "INFO"
    with log.open("a", encoding="utf-8") as out:
        out.write(f"{level} {' '.join(args.positional)}\n")


# tool -> (handler, writes the model, flags that take a value)
_RELATION = {"r", "relation"}
_SECRET = {"label", "description", "expire", "rotate", "owner", "revision", "r", "relation"}
TOOLS: dict[str, tuple[Callable[[dict[str, Any], Args], Any], bool, set[str]]] = {
    "is-leader": (is_leader, False, set()),
    "config-get": (config_get, False, set()),
    "relation-ids": (relation_ids, False, set()),
    "relation-list": (relation_list, False, _RELATION),
    "relation-get": (relation_get, False, _RELATION),
    "relation-set": (relation_set, True, {*_RELATION, "file"}),
    "relation-model-get": (relation_model_get, False, _RELATION),
    "secret-add": (secret_add, True, _SECRET),
    "secret-get": (secret_get, True, _SECRET),
    "secret-set": (secret_set, True, _SECRET),
    "secret-info-get": (secret_info_get, False, _SECRET),
    "secret-ids": (secret_ids, False, set()),
    "secret-grant": (secret_grant, True, {*_SECRET, "unit"}),
    "secret-revoke": (secret_revoke, True, {*_SECRET, "app", "unit"}),
    "secret-remove": (secret_remove, True, _SECRET),
    "status-get": (status_get, False, set()),
    "status-set": (status_set, True, set()),
    "application-version-set": (application_version_set, True, set()),
    "open-port": (open_port, True, {"endpoints"}),
    "close-port": (close_port, True, {"endpoints"}),
    "opened-ports": (opened_ports, False, set()),
    "network-get": (network_get, False, _RELATION),
    "goal-state": (goal_state, False, set()),
    "storage-list": (storage_list, False, set()),
    "storage-get": (storage_get, False, {"s"}),
    "state-get": (state_get, False, set()),
    "state-set": (state_set, True, {"file"}),
    "state-delete": (state_delete, True, set()),
    "action-get": (action_get, False, set()),
    "action-set": (action_set, True, set()),
    "action-log": (action_log, True, set()),
    "action-fail": (action_fail, True, set()),
}
LOG_TOOL = "juju-log"
TOOL_NAMES = (*TOOLS, LOG_TOOL)


def run(tool: str, argv: list[str], model_path: Path) -> int:
    """Run ``tool`` with ``argv`` on the model at ``model_path``; return the exit code."""
    with (model_path.parent / "calls.log").open("a", encoding="utf-8") as calls:
        calls.write(f"{tool}\n")
    if tool == LOG_TOOL:
        juju_log(Args(argv, {"l", "log-level"}), model_path.parent / "juju-log.log")
        return 0
    handler, writes, valued = TOOLS[tool]
    args = Args(argv, {*valued, "format"})
    try:
        with locked_model(model_path, write=writes) as model:
            result = handler(model, args)
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
