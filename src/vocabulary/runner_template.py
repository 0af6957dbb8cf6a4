"""Runner install templates and pre-install scripts derived from a scale set's runner options.

Owns the per-scale-set template content, the aproxy pre-install script and the tmate relay's
(``tmate_relay`` owns what the relay is; this module writes it down).

Everything here is a pure function of its arguments. Option values come from relation data
and are untrusted, so each rendering keeps them inert: heredoc bodies can never contain their
own delimiter, values on command lines are shell-quoted, ``.env`` entries stay on one line and
YAML scalars are emitted as JSON strings.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import shlex
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

import jinja2

from vocabulary.runner_options import AproxyExclusion, IPv4Range, RunnerConfig
from vocabulary.tmate_relay import RELAY_HOST, RELAY_PORT, DebugSshConnection, TmateRelay

RUNNER_USER = "runner"
RUNNER_HOME = "/home/runner/actions-runner"
PRE_JOB_HOOK_PATH = f"{RUNNER_HOME}/pre-job.sh"
RUNNER_ENV_PATH = f"{RUNNER_HOME}/.env"
APROXY_SCRIPT_NAME = "00-aproxy"
APROXY_LISTEN_PORT = 54969
CUSTOM_PRE_JOB_SCRIPT_PATH = "/tmp/custom_pre_job_script"  # noqa: S108 - path on the runner VM
OTEL_CONFIG_DIR = "/etc/otelcol/config.d"
OTEL_CONFIG_PATH = f"{OTEL_CONFIG_DIR}/github.yaml"
TMATE_RELAY_UNIT = "tmate-proxy"
TMATE_RELAY_UNIT_PATH = f"/etc/systemd/system/{TMATE_RELAY_UNIT}.service"
TMATE_RELAY_CONFIG_DIR = f"/etc/{TMATE_RELAY_UNIT}"
TMATE_RELAY_AUTH_PATH = f"{TMATE_RELAY_CONFIG_DIR}/proxy-auth"

DEFAULT_APROXY_PORTS = ("80", "443")
APROXY_ALWAYS_EXCLUDED = ipaddress.IPv4Network("127.0.0.0/8")

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"


@functools.cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        autoescape=False,  # noqa: S701 - the output is shell, not HTML
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )


def _render(name: str, **context: object) -> str:
    return _environment().get_template(name).render(**context)


def prepend_after_shebang(script: str, snippet: str) -> str:
    """Insert a snippet right after the script's shebang line (or at the top if it has none).

    Args:
        script: the script to extend.
        snippet: the text to insert; a trailing newline is added when missing.

    Returns:
        The extended script, or ``script`` unchanged when ``snippet`` is empty.
    """
    if not snippet:
        return script
    if not snippet.endswith("\n"):
        snippet += "\n"
    if script.startswith("#!"):
        first, _, rest = script.partition("\n")
        return f"{first}\n{snippet}{rest}"
    return snippet + script


def heredoc_delimiter(base: str, body: str) -> str:
    """Choose a heredoc delimiter that no line of the body can match.

    Args:
        base: the preferred delimiter.
        body: the text that goes between the heredoc markers.

    Returns:
        ``base`` followed by as many underscores as needed so that no body line equals it.
    """
    # Bash ends a heredoc on a line exactly equal to the delimiter; lines are split on "\n".
    lines = set(body.split("\n"))
    delimiter = base
    while delimiter in lines:
        delimiter += "_"
    return delimiter


def go_template_literal(text: str) -> str:
    """Make text print literally when GARM renders the template it sits in.

    GARM renders runner templates with Go's ``text/template``, where ``{{`` opens an action.
    Operator content (a pre-job script, a mirror URL) must never be read as one: each ``{{`` is
    replaced by an action that prints ``{{``.
    """
    return text.replace("{{", '{{"{{"}}')


def _single_line(value: str) -> str:
    """Drop every line break so that the value can never start a new line."""
    return "".join(value.splitlines())


def _with_final_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def render_tmate_snippet(
    host: str, port: int, rsa_fingerprint: str, ed25519_fingerprint: str
) -> str:
    """Render the debug-ssh snippet that appends the tmate server settings to the runner ``.env``.

    Args:
        host: tmate server host.
        port: tmate server port.
        rsa_fingerprint: the server's RSA key fingerprint.
        ed25519_fingerprint: the server's Ed25519 key fingerprint.

    Returns:
        The snippet, ending with a newline.

    Raises:
        ValueError: a value contains a line break (it could add lines to ``.env`` or end the
            heredoc).
    """
    values = (host, str(port), rsa_fingerprint, ed25519_fingerprint)
    if any(_single_line(value) != value for value in values):
        raise ValueError("debug-ssh values must not contain line breaks")
    return go_template_literal(
        f"mkdir -p $(dirname {RUNNER_ENV_PATH})\n"
        f'cat >> {RUNNER_ENV_PATH} << "EOF"\n'
        f"TMATE_SERVER_HOST={host}\n"
        f"TMATE_SERVER_PORT={port}\n"
        f"TMATE_SERVER_RSA_FINGERPRINT={rsa_fingerprint}\n"
        f"TMATE_SERVER_ED25519_FINGERPRINT={ed25519_fingerprint}\n"
        "EOF\n"
    )


def render_pre_install(cfg: RunnerConfig) -> str:
    """Render the pre-install block of a per-scale-set template (runs as the runner user).

    Args:
        cfg: the scale set's runner options.

    Returns:
        The shell block, ending with a newline.
    """
    mirror = _single_line(cfg.dockerhub_mirror)
    daemon_json = json.dumps({"registry-mirrors": [mirror]}) + "\n" if mirror else ""
    return _render(
        "pre_install.j2",
        runner_user=RUNNER_USER,
        daemon_json=daemon_json,
        docker_delimiter=heredoc_delimiter("GARM_CHARM_DOCKER", daemon_json),
    )


def _render_otel_config(endpoint: str) -> str:
    # A JSON string is a valid YAML double-quoted scalar, whatever the endpoint holds.
    return _render("otelcol_github.yaml.j2", endpoint=json.dumps(endpoint))


def render_pre_job_script(cfg: RunnerConfig) -> str:
    """Render the body of the job-started hook written to ``pre-job.sh``.

    Args:
        cfg: the scale set's runner options.

    Returns:
        The hook script, ending with a newline.
    """
    endpoint = _single_line(cfg.otel_collector_endpoint)
    otel_config = _render_otel_config(endpoint) if endpoint else ""
    custom = _with_final_newline(cfg.pre_job_script) if cfg.pre_job_script else ""
    return _render(
        "pre_job.sh.j2",
        otel_config=otel_config,
        otel_config_dir=OTEL_CONFIG_DIR,
        otel_config_path=OTEL_CONFIG_PATH,
        otel_delimiter=heredoc_delimiter("GARM_CHARM_OTEL", otel_config),
        custom_script=custom,
        custom_script_path=CUSTOM_PRE_JOB_SCRIPT_PATH,
        custom_delimiter=heredoc_delimiter("GARM_CHARM_CUSTOM_PREJOB", custom),
    )


def render_pre_job_hooks(cfg: RunnerConfig) -> str:
    """Render the block that installs the job-started hook and its ``.env`` entries.

    Args:
        cfg: the scale set's runner options.

    Returns:
        The shell block, ending with a newline.
    """
    hook = render_pre_job_script(cfg)
    mirror = _single_line(cfg.dockerhub_mirror)
    endpoint = _single_line(cfg.otel_collector_endpoint)
    env_lines: list[str] = []
    if mirror:
        env_lines += [f"DOCKERHUB_MIRROR={mirror}", f"CONTAINER_REGISTRY_URL={mirror}"]
    env_lines.append(f"ACTIONS_RUNNER_HOOK_JOB_STARTED={PRE_JOB_HOOK_PATH}")
    if endpoint:
        env_lines.append(f"ACTION_OTEL_EXPORTER_OTLP_ENDPOINT={endpoint}")
    env_body = "".join(f"{line}\n" for line in env_lines)
    return _render(
        "pre_job_hooks.j2",
        runner_user=RUNNER_USER,
        runner_home=RUNNER_HOME,
        pre_job_hook_path=PRE_JOB_HOOK_PATH,
        runner_env_path=RUNNER_ENV_PATH,
        hook_body=hook,
        hook_delimiter=heredoc_delimiter("GARM_CHARM_PREJOB", hook),
        env_body=env_body,
        env_delimiter=heredoc_delimiter("GARM_CHARM_ENV", env_body),
    )


def build_template_data(
    base: bytes, cfg: RunnerConfig, tmate: DebugSshConnection | None = None
) -> bytes:
    """Build a per-scale-set runner template from a base template and the runner options.

    Args:
        base: the base template body (bytes as stored in GARM).
        cfg: the scale set's runner options.
        tmate: the tmate server to tell the runners of, where the base does not (a relay's).

    Returns:
        Shebang, pre-install block, job-hooks block, the tmate snippet when ``tmate`` is
        given, then the rest of the base template: the order the charmed base gives.
    """
    snippet = go_template_literal(render_pre_install(cfg) + render_pre_job_hooks(cfg))
    if tmate is not None:
        snippet += render_tmate_snippet(
            tmate.host, tmate.port, tmate.rsa_fingerprint, tmate.ed25519_fingerprint
        )
    # Relation data may hold characters UTF-8 cannot encode (lone surrogates); never crash on them.
    snippet = snippet.encode("utf-8", "replace").decode("utf-8")
    # surrogateescape round-trips base bytes that are not valid UTF-8 unchanged.
    script = base.decode("utf-8", "surrogateescape")
    return prepend_after_shebang(script, snippet).encode("utf-8", "surrogateescape")


def _proxy_authority(proxy: str) -> str:
    """Return ``host:port`` (userinfo and IPv6 brackets kept) of a proxy URL.

    A value without a scheme is read as a bare authority; an unparsable one is passed on as is
    (it is shell-quoted, and aproxy then reports it).
    """
    try:
        netloc = urlsplit(proxy if "://" in proxy else f"//{proxy}").netloc
    except ValueError:
        return proxy
    return netloc or proxy


def _merged(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merge overlapping and adjacent inclusive intervals, in order (nft refuses overlaps)."""
    merged: list[tuple[int, int]] = []
    for low, high in sorted(intervals):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(high, merged[-1][1]))
        else:
            merged.append((low, high))
    return merged


def _aproxy_ports(ranges: Iterable[tuple[int, int]]) -> list[str]:
    """Return the redirect ports merged, as ``port`` or ``low-high``; 80 and 443 when none."""
    merged = _merged(ranges)
    if not merged:
        return list(DEFAULT_APROXY_PORTS)
    return [str(low) if low == high else f"{low}-{high}" for low, high in merged]


def _interval(exclusion: AproxyExclusion) -> tuple[int, int]:
    if isinstance(exclusion, IPv4Range):
        return int(exclusion.first), int(exclusion.last)
    return int(exclusion.network_address), int(exclusion.broadcast_address)


def _nft_element(low: int, high: int) -> str:
    """Write an interval as nft does: an address, a network when it is exactly one, else a-b."""
    first, last = ipaddress.IPv4Address(low), ipaddress.IPv4Address(high)
    if first == last:
        return str(first)
    networks = list(ipaddress.summarize_address_range(first, last))
    return str(networks[0]) if len(networks) == 1 else f"{first}-{last}"


def _aproxy_excludes(exclusions: Iterable[AproxyExclusion]) -> list[str]:
    """Return loopback plus the configured exclusions, merged into disjoint nft elements."""
    intervals = [_interval(APROXY_ALWAYS_EXCLUDED), *map(_interval, exclusions)]
    return [_nft_element(low, high) for low, high in _merged(intervals)]


def render_aproxy_pre_install_script(cfg: RunnerConfig) -> str:
    """Render the ``00-aproxy`` pre-install script that routes runner egress through aproxy.

    The script runs as root before GARM's install wrapper. It is best effort: every failure is
    logged with a ``[aproxy-bootstrap]`` prefix and the script still exits 0.

    Args:
        cfg: the scale set's runner options (``runner_http_proxy`` should be set).

    Returns:
        A complete bash script.
    """
    proxy = _single_line(cfg.runner_http_proxy)
    return _render(
        "aproxy.sh.j2",
        snap_proxy_http=shlex.quote(f"proxy.http={proxy}"),
        snap_proxy_https=shlex.quote(f"proxy.https={proxy}"),
        aproxy_proxy=shlex.quote(f"proxy={_proxy_authority(proxy)}"),
        listen_port=APROXY_LISTEN_PORT,
        excludes=", ".join(_aproxy_excludes(cfg.aproxy_exclude_addresses)),
        ports=", ".join(_aproxy_ports(cfg.aproxy_redirect_ports)),
    )


def render_tmate_relay_script(relay: TmateRelay) -> str:
    """Render the ``01-tmate-proxy`` pre-install script that starts the scale set's tmate relay.

    The script runs as root after aproxy's. It installs socat when missing and writes and
    starts a systemd unit whose socat listens on the loopback relay address and reaches the
    tmate server through the runner proxy with an HTTP CONNECT. The proxy's credentials, if
    any, go into a root-only file socat reads. Best effort: it logs with a ``[tmate-proxy]``
    prefix and always exits 0.

    Args:
        relay: the scale set's relay; its hosts are plain names or addresses
            (``tmate_relay.relay_host``), so nothing in the unit or the command needs quoting.

    Returns:
        A complete bash script.
    """
    proxy = relay.proxy
    options = [f"proxyport={proxy.port}"]
    if proxy.credentials:
        options.append(f"proxy-authorization-file={TMATE_RELAY_AUTH_PATH}")
    target = f"PROXY:{proxy.host}:{relay.target}:{relay.server.port}," + ",".join(options)
    listen = f"TCP-LISTEN:{RELAY_PORT},bind={RELAY_HOST},reuseaddr,fork"
    return _render(
        "tmate_proxy.sh.j2",
        listen=f"{RELAY_HOST}:{RELAY_PORT}",
        credentials=shlex.quote(proxy.credentials) if proxy.credentials else "",
        config_dir=TMATE_RELAY_CONFIG_DIR,
        auth_path=TMATE_RELAY_AUTH_PATH,
        unit_path=TMATE_RELAY_UNIT_PATH,
        unit_name=TMATE_RELAY_UNIT,
        exec_start=f"socat {listen} {target}",
    )
