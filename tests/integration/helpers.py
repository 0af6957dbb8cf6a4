"""Shared helpers of the integration tests: deploy, wait, and look inside the garm pod.

Everything that reaches GARM runs inside the pod (GARM listens on the pod's loopback only as far
as these tests are concerned), through ``juju ssh --container garm`` and the stdlib script
``garm_probe.py``. Printed output never contains secrets: the Pebble plan is logged only through
:func:`redact_plan`, admin credentials travel on standard input, and tokens stay in the pod.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import re
import shlex
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jubilant
import yaml

logger = logging.getLogger(__name__)

APP = "garm"
UNIT = "garm/0"
CONTAINER = "garm"
WAITING_CONFIGURATOR = "Waiting for garm-configurator relation"
CHARMED_TEMPLATE = "github_linux_charmed"
BASE_TEMPLATE = "github_linux"
DEPLOY_TIMEOUT = 20 * 60
CONVERGE_TIMEOUT = 5 * 60

# Juju starts the workload container's Pebble with this socket.
_PEBBLE = "PEBBLE_SOCKET=/charm/container/pebble.socket /charm/bin/pebble"
_PROBE_SOURCE = (Path(__file__).parent / "garm_probe.py").read_text(encoding="utf-8")
# Drops the encoded script from argv so the probe sees only its own arguments.
_PROBE_BOOT = "import base64,sys;exec(base64.b64decode(sys.argv.pop(1)))"
_ENV_LINE = re.compile(r"^(?P<indent>\s*)environment:(?P<rest>.*)$")


@dataclasses.dataclass(frozen=True)
class AdminCredentials:
    """What the ``get-credentials`` action returned (the password is kept out of ``repr``)."""

    username: str
    password: str = dataclasses.field(repr=False)
    email: str
    full_name: str

    def stdin(self) -> str:
        """Return the JSON the probe reads on standard input to log in."""
        return json.dumps({"username": self.username, "password": self.password})


@dataclasses.dataclass(frozen=True)
class Answer:
    """A GARM answer seen from inside the pod; ``status`` 0 means GARM was unreachable."""

    status: int
    body: Any


def redact_plan(text: str) -> str:
    """Replace the contents of every ``environment:`` block of a Pebble plan with a marker.

    Handles both the block form (``environment:`` followed by more-indented lines) and the
    inline form (``environment: {...}``). Everything else is returned unchanged.

    Args:
        text: the plan as ``pebble plan`` prints it (YAML).

    Returns:
        The plan with every environment value hidden.
    """
    out: list[str] = []
    block_indent: int | None = None
    for line in text.splitlines():
        if block_indent is not None:
            indent = len(line) - len(line.lstrip())
            if not line.strip() or indent > block_indent:
                continue
            block_indent = None
        match = _ENV_LINE.match(line)
        if match:
            out.append(f"{match['indent']}environment: <redacted>")
            if not match["rest"].strip():
                block_indent = len(match["indent"])
            continue
        out.append(line)
    return "\n".join(out)


def app_message(status: jubilant.Status, app: str = APP) -> tuple[str, str]:
    """Return the ``(current, message)`` of an application's status."""
    info = status.apps[app].app_status
    return info.current, info.message


def is_waiting_for_configurator(status: jubilant.Status) -> bool:
    """Tell whether garm shows the waiting-for-configurator status and its agent is idle."""
    return app_message(status) == ("waiting", WAITING_CONFIGURATOR) and jubilant.all_agents_idle(
        status, APP
    )


def deploy_garm(juju: jubilant.Juju, charm: Path, image: str) -> None:
    """Deploy one garm unit with the workload image and wait until it waits for a configurator."""
    juju.deploy(charm.resolve(), APP, resources={"garm-image": image})
    juju.wait(is_waiting_for_configurator, error=jubilant.any_error, timeout=DEPLOY_TIMEOUT)


def in_garm_container(juju: jubilant.Juju, command: str, stdin: str = "") -> str:
    """Run a shell command in the garm workload container and return its standard output."""
    # Always give stdin, so juju ssh never waits on a terminal.
    return juju.cli("ssh", "--container", CONTAINER, UNIT, command, stdin=stdin)


def probe(
    juju: jubilant.Juju, *args: str, credentials: AdminCredentials | None = None
) -> dict[str, Any]:
    """Run ``garm_probe.py`` in the garm container and return its JSON result."""
    encoded = base64.b64encode(_PROBE_SOURCE.encode()).decode()
    command = shlex.join(["python3", "-c", _PROBE_BOOT, encoded, *args])
    output = in_garm_container(juju, command, credentials.stdin() if credentials else "")
    return json.loads(output.strip().splitlines()[-1])


def garm_get(
    juju: jubilant.Juju, path: str, credentials: AdminCredentials | None = None
) -> Answer:
    """GET a GARM path (``/api/v1/...`` or ``/metrics``), logged in as admin when given."""
    if credentials is None:
        result = probe(juju, "get", path)
    else:
        result = probe(juju, "admin-get", path, credentials=credentials)
    return Answer(status=int(result["status"]), body=result["body"])


def garm_login(juju: jubilant.Juju, credentials: AdminCredentials) -> tuple[int, bool]:
    """Log in to GARM from the pod; return the status and whether a token came back."""
    result = probe(juju, "login", credentials=credentials)
    return int(result["status"]), bool(result["token_received"])


def get_admin_credentials(juju: jubilant.Juju) -> AdminCredentials:
    """Run the ``get-credentials`` action on the garm unit."""
    task = juju.run(UNIT, "get-credentials")
    results = task.results
    return AdminCredentials(
        username=str(results.get("username", "")),
        password=str(results.get("password", "")),
        email=str(results.get("email", "")),
        full_name=str(results.get("full-name", "")),
    )


def pebble_plan(juju: jubilant.Juju) -> dict[str, Any]:
    """Return the workload container's Pebble plan, logging it with the environment redacted."""
    text = in_garm_container(juju, f"{_PEBBLE} plan")
    logger.debug("garm Pebble plan:\n%s", redact_plan(text))
    return yaml.safe_load(text) or {}


def garm_service_environment(juju: jubilant.Juju) -> Mapping[str, str]:
    """Return the environment of the planned ``garm`` service (never print it)."""
    service = pebble_plan(juju).get("services", {}).get("garm", {})
    return {str(k): str(v) for k, v in (service.get("environment") or {}).items()}


def templates_by_name(juju: jubilant.Juju, credentials: AdminCredentials) -> dict[str, int]:
    """Return GARM's templates as ``{name: id}``."""
    answer = garm_get(juju, "/api/v1/templates", credentials)
    assert answer.status == 200, f"GET /templates answered {answer.status}"
    return {t["name"]: int(t["id"]) for t in answer.body or [] if t.get("name") and t.get("id")}


def template_body(juju: jubilant.Juju, credentials: AdminCredentials, template_id: int) -> str:
    """Return the decoded body of one GARM template."""
    answer = garm_get(juju, f"/api/v1/templates/{template_id}", credentials)
    assert answer.status == 200, f"GET /templates/{template_id} answered {answer.status}"
    return base64.b64decode(answer.body.get("data") or "").decode("utf-8")


def wait_until(
    check: Callable[[], bool], what: str, timeout: float = CONVERGE_TIMEOUT, delay: float = 5
) -> None:
    """Poll ``check`` until it is true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(delay)
