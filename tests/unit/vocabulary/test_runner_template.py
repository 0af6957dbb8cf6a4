"""Tests for the runner template fragments, the aproxy script and the effective extra specs.

Rendered shell is checked three ways: exact lines, ``bash -n``, and real execution with bash
where that is honest (runner paths rewritten into a temp dir, and ``sudo``/``snap``/``nft``/
``ip``/``logger``/``sleep`` replaced by recording stubs on ``PATH``).
"""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
from ipaddress import IPv4Network
from pathlib import Path

import jinja2
import pytest
import yaml

from reconcile.scalesets.params import effective_extra_specs
from vocabulary import runner_template as rt
from vocabulary.runner_options import RunnerConfig

MIRROR = "https://mirror.example.com"
OTEL = "http://otel.example.com:4317"
PROXY = "http://proxy.example.com:3128"

HOSTILE_SCRIPT_LINES = [
    "EOF",
    "GARM_CHARM_PREJOB",
    "GARM_CHARM_PREJOB_",
    "GARM_CHARM_CUSTOM_PREJOB",
    "GARM_CHARM_ENV",
    "GARM_CHARM_OTEL",
    "GARM_CHARM_DOCKER",
    "echo $(touch PWNED_SUBST) `touch PWNED_TICK` ${HOME}",
]

# ---------------------------------------------------------------- helpers

_STUB = """#!{python}
import json, os, sys
name = os.path.basename(sys.argv[0])
args = sys.argv[1:]
reads_stdin = name == "nft" or (name == "sudo" and args[:1] == ["tee"])
stdin = sys.stdin.read() if reads_stdin else None
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(json.dumps({{"cmd": [name, *args], "stdin": stdin}}) + "\\n")
behaviour = json.loads(os.environ.get("STUB_BEHAVIOUR", "{{}}"))
line = " ".join([name, *args])
best = max((k for k in behaviour if line.startswith(k)), key=len, default=None)
if best is not None:
    sys.stdout.write(behaviour[best].get("stdout", ""))
    sys.exit(behaviour[best].get("rc", 0))
"""

_STUBBED = ("sudo", "snap", "nft", "ip", "logger", "sleep")


def _run(
    script: str,
    tmp_path: Path,
    behaviour: dict[str, dict[str, object]] | None = None,
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, object]]]:
    """Run a script with bash, stubbed commands first on PATH; return the result and calls."""
    bin_dir = tmp_path / "stub-bin"
    bin_dir.mkdir(exist_ok=True)
    for name in _STUBBED:
        stub = bin_dir / name
        stub.write_text(_STUB.format(python=sys.executable))
        stub.chmod(0o755)
    log = tmp_path / "stub-calls.jsonl"
    log.touch()
    script_file = tmp_path / "script.sh"
    script_file.write_text(script)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "STUB_LOG": str(log),
        "STUB_BEHAVIOUR": json.dumps(behaviour or {}),
    }
    result = subprocess.run(
        ["bash", str(script_file)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    return result, calls


def _bash_syntax_ok(script: str) -> None:
    result = subprocess.run(
        ["bash", "-n"], input=script, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def _rewrite(text: str, tmp_path: Path) -> tuple[str, Path]:
    home = tmp_path / "actions-runner"
    text = text.replace(rt.RUNNER_HOME, str(home))
    return text.replace(rt.CUSTOM_PRE_JOB_SCRIPT_PATH, str(tmp_path / "custom")), home


# ---------------------------------------------------------------- 15.1


class TestPrependAfterShebang:
    def test_empty_snippet_leaves_script_unchanged(self):
        assert rt.prepend_after_shebang("#!/bin/bash\necho hi\n", "") == "#!/bin/bash\necho hi\n"

    def test_inserts_after_shebang_and_adds_newline(self):
        out = rt.prepend_after_shebang("#!/bin/bash\necho hi\n", "echo first")
        assert out == "#!/bin/bash\necho first\necho hi\n"

    def test_snippet_ending_in_newline_is_not_doubled(self):
        out = rt.prepend_after_shebang("#!/bin/bash\necho hi\n", "echo first\n")
        assert out == "#!/bin/bash\necho first\necho hi\n"

    def test_without_shebang_snippet_goes_first(self):
        assert rt.prepend_after_shebang("echo hi\n", "echo first") == "echo first\necho hi\n"

    def test_shebang_only_script(self):
        assert rt.prepend_after_shebang("#!/bin/sh", "x") == "#!/bin/sh\nx\n"


class TestHeredocDelimiter:
    def test_base_when_free(self):
        assert rt.heredoc_delimiter("EOF", "a\nEOFX\n EOF\nEOF \n") == "EOF"

    def test_appends_underscores_until_free(self):
        assert rt.heredoc_delimiter("EOF", "EOF\nx\nEOF_\n") == "EOF__"

    def test_last_line_without_newline_counts(self):
        assert rt.heredoc_delimiter("EOF", "x\nEOF") == "EOF_"


class TestTmateSnippet:
    def test_exact_text(self):
        snippet = rt.render_tmate_snippet("tmate.example", 10022, "SHA256:rsa", "SHA256:ed")
        assert snippet == (
            "mkdir -p $(dirname /home/runner/actions-runner/.env)\n"
            'cat >> /home/runner/actions-runner/.env << "EOF"\n'
            "TMATE_SERVER_HOST=tmate.example\n"
            "TMATE_SERVER_PORT=10022\n"
            "TMATE_SERVER_RSA_FINGERPRINT=SHA256:rsa\n"
            "TMATE_SERVER_ED25519_FINGERPRINT=SHA256:ed\n"
            "EOF\n"
        )

    @pytest.mark.parametrize(
        "args",
        [
            ("h\nEOF", 22, "r", "e"),
            ("h", 22, "r\rX=1", "e"),
            ("h", 22, "r", "e\nEOF\nrm -rf /"),
        ],
    )
    def test_line_breaks_rejected(self, args: tuple[str, int, str, str]):
        with pytest.raises(ValueError):
            rt.render_tmate_snippet(*args)

    def test_executes_into_env_file(self, tmp_path: Path):
        snippet = rt.render_tmate_snippet("h$(touch PWNED)", 22, "r`touch PWNED`", "e")
        script, home = _rewrite(snippet, tmp_path)
        result, _ = _run(script, tmp_path)
        assert result.returncode == 0, result.stderr
        assert (home / ".env").read_text() == (
            "TMATE_SERVER_HOST=h$(touch PWNED)\n"
            "TMATE_SERVER_PORT=22\n"
            "TMATE_SERVER_RSA_FINGERPRINT=r`touch PWNED`\n"
            "TMATE_SERVER_ED25519_FINGERPRINT=e\n"
        )
        assert not (tmp_path / "PWNED").exists()


# ---------------------------------------------------------------- 15.3 environment


def test_jinja_environment_is_built_once_as_specified():
    env = rt._environment()
    assert env is rt._environment()
    assert isinstance(env.loader, jinja2.FileSystemLoader)
    assert [Path(p) for p in env.loader.searchpath] == [Path(rt.__file__).parent / "templates"]
    assert env.autoescape is False
    assert env.trim_blocks and env.lstrip_blocks and env.keep_trailing_newline
    assert env.undefined is jinja2.StrictUndefined


# ---------------------------------------------------------------- pre_install.j2

PRE_INSTALL_PLAIN = (
    "# --- GARM charm: pre-install setup (runs as the runner user, uses sudo) ---\n"
    "sudo adduser runner lxd || true\n"
    "sudo adduser runner adm || true\n"
    "# --- GARM charm: end of pre-install setup ---\n"
)

PRE_INSTALL_MIRROR = (
    "# --- GARM charm: pre-install setup (runs as the runner user, uses sudo) ---\n"
    "sudo mkdir -p /etc/docker\n"
    'sudo tee /etc/docker/daemon.json > /dev/null << "GARM_CHARM_DOCKER"\n'
    + json.dumps({"registry-mirrors": [MIRROR]})
    + "\n"
    "GARM_CHARM_DOCKER\n"
    "sudo systemctl daemon-reload\n"
    "sudo systemctl restart docker\n"
    "sudo adduser runner lxd || true\n"
    "sudo adduser runner adm || true\n"
    "# --- GARM charm: end of pre-install setup ---\n"
)


class TestPreInstall:
    @pytest.mark.parametrize(
        "cfg",
        [
            RunnerConfig(runner_http_proxy=PROXY),
            RunnerConfig(otel_collector_endpoint=OTEL),
            RunnerConfig(pre_job_script="echo hi"),
        ],
    )
    def test_without_mirror(self, cfg: RunnerConfig):
        assert rt.render_pre_install(cfg) == PRE_INSTALL_PLAIN

    def test_with_mirror(self):
        assert rt.render_pre_install(RunnerConfig(dockerhub_mirror=MIRROR)) == PRE_INSTALL_MIRROR

    def test_executes_the_expected_commands(self, tmp_path: Path):
        result, calls = _run(
            rt.render_pre_install(RunnerConfig(dockerhub_mirror=MIRROR)), tmp_path
        )
        assert result.returncode == 0, result.stderr
        assert calls == [
            {"cmd": ["sudo", "mkdir", "-p", "/etc/docker"], "stdin": None},
            {
                "cmd": ["sudo", "tee", "/etc/docker/daemon.json"],
                "stdin": '{"registry-mirrors": ["https://mirror.example.com"]}\n',
            },
            {"cmd": ["sudo", "systemctl", "daemon-reload"], "stdin": None},
            {"cmd": ["sudo", "systemctl", "restart", "docker"], "stdin": None},
            {"cmd": ["sudo", "adduser", "runner", "lxd"], "stdin": None},
            {"cmd": ["sudo", "adduser", "runner", "adm"], "stdin": None},
        ]

    def test_hostile_mirror_stays_inside_daemon_json(self, tmp_path: Path):
        mirror = 'https://m"}\nGARM_CHARM_DOCKER\ntouch PWNED\n$(touch PWNED2)'
        result, calls = _run(
            rt.render_pre_install(RunnerConfig(dockerhub_mirror=mirror)), tmp_path
        )
        assert result.returncode == 0, result.stderr
        written = next(c["stdin"] for c in calls if c["cmd"][:2] == ["sudo", "tee"])
        assert isinstance(written, str)
        single_line = mirror.replace("\n", "")
        assert json.loads(written) == {"registry-mirrors": [single_line]}
        assert not (tmp_path / "PWNED").exists()
        assert not (tmp_path / "PWNED2").exists()


# ---------------------------------------------------------------- pre-job hook body

HOOK_HEAD = (
    "#!/usr/bin/env bash\n"
    "# Job-started hook installed by the GARM charm; it never fails the job.\n"
    "set +e\n"
)


def _otel_block(endpoint_yaml: str) -> str:
    return (
        "sudo mkdir -p /etc/otelcol/config.d\n"
        'sudo tee /etc/otelcol/config.d/github.yaml > /dev/null << "GARM_CHARM_OTEL"\n'
        + rt._render_otel_config(json.loads(endpoint_yaml))
        + "GARM_CHARM_OTEL\n"
        "sudo snap enable opentelemetry-collector\n"
        "sudo snap start opentelemetry-collector\n"
    )


def _custom_block(script: str, delimiter: str = "GARM_CHARM_CUSTOM_PREJOB") -> str:
    return (
        "rm -f /tmp/custom_pre_job_script\n"
        f'cat > /tmp/custom_pre_job_script << "{delimiter}"\n'
        f"{script}\n"
        f"{delimiter}\n"
        "chmod 0755 /tmp/custom_pre_job_script\n"
        "if ! /tmp/custom_pre_job_script; then\n"
        '    logger -s "GARM charm: the custom pre-job script failed; the job continues"\n'
        "fi\n"
        "rm -f /tmp/custom_pre_job_script\n"
    )


class TestPreJobScript:
    def test_minimal(self):
        assert rt.render_pre_job_script(RunnerConfig(dockerhub_mirror=MIRROR)) == HOOK_HEAD

    def test_otel_block(self):
        hook = rt.render_pre_job_script(RunnerConfig(otel_collector_endpoint=OTEL))
        assert hook == HOOK_HEAD + _otel_block(json.dumps(OTEL))
        config = yaml.safe_load(rt._render_otel_config(OTEL))
        exporter = config["exporters"]["otlp/self_hosted_runner"]
        assert exporter == {"endpoint": OTEL, "tls": {"insecure": True}}
        assert set(config["receivers"]) == {"hostmetrics", "otlp", "loki", "syslog/aproxy"}
        for pipeline in config["service"]["pipelines"].values():
            assert pipeline["exporters"] == ["otlp/self_hosted_runner"]
        assert '    endpoint: "http://otel.example.com:4317"\n' in hook

    def test_otel_endpoint_is_yaml_safe(self):
        nasty = 'http://x"\n  evil: [1\\'
        hook = rt.render_pre_job_script(RunnerConfig(otel_collector_endpoint=nasty))
        body = hook.split('> /dev/null << "GARM_CHARM_OTEL"\n', 1)[1].split("GARM_CHARM_OTEL\n")[0]
        config = yaml.safe_load(body)
        assert config["exporters"]["otlp/self_hosted_runner"]["endpoint"] == nasty.replace(
            "\n", ""
        )
        assert "evil" not in config["exporters"]["otlp/self_hosted_runner"]

    def test_custom_block(self):
        hook = rt.render_pre_job_script(RunnerConfig(pre_job_script="echo one\necho two"))
        assert hook == HOOK_HEAD + _custom_block("echo one\necho two")

    def test_all_together_order(self):
        cfg = RunnerConfig(otel_collector_endpoint=OTEL, pre_job_script="echo one")
        hook = rt.render_pre_job_script(cfg)
        assert hook == HOOK_HEAD + _otel_block(json.dumps(OTEL)) + _custom_block("echo one")
        _bash_syntax_ok(hook)

    def test_custom_script_runs_and_failure_is_ignored(self, tmp_path: Path):
        marker = tmp_path / "ran"
        cfg = RunnerConfig(pre_job_script=f"touch {marker}\nexit 3")
        hook, _ = _rewrite(rt.render_pre_job_script(cfg), tmp_path)
        result, calls = _run(hook, tmp_path)
        assert result.returncode == 0
        assert marker.exists()
        assert not (tmp_path / "custom").exists()
        assert calls == [
            {
                "cmd": [
                    "logger",
                    "-s",
                    "GARM charm: the custom pre-job script failed; the job continues",
                ],
                "stdin": None,
            }
        ]

    def test_successful_custom_script_logs_nothing(self, tmp_path: Path):
        hook, _ = _rewrite(rt.render_pre_job_script(RunnerConfig(pre_job_script="true")), tmp_path)
        result, calls = _run(hook, tmp_path)
        assert result.returncode == 0
        assert calls == []

    def test_otel_block_commands(self, tmp_path: Path):
        hook = rt.render_pre_job_script(RunnerConfig(otel_collector_endpoint=OTEL))
        result, calls = _run(hook, tmp_path)
        assert result.returncode == 0, result.stderr
        assert [c["cmd"] for c in calls] == [
            ["sudo", "mkdir", "-p", "/etc/otelcol/config.d"],
            ["sudo", "tee", "/etc/otelcol/config.d/github.yaml"],
            ["sudo", "snap", "enable", "opentelemetry-collector"],
            ["sudo", "snap", "start", "opentelemetry-collector"],
        ]
        assert calls[1]["stdin"] == rt._render_otel_config(OTEL)


# ---------------------------------------------------------------- pre_job_hooks.j2


def _hooks_block(hook: str, env_lines: list[str]) -> str:
    return (
        "# --- GARM charm: job-started hook ---\n"
        "mkdir -p /home/runner/actions-runner\n"
        'cat > /home/runner/actions-runner/pre-job.sh << "GARM_CHARM_PREJOB"\n'
        + hook
        + "GARM_CHARM_PREJOB\n"
        "chmod 0755 /home/runner/actions-runner/pre-job.sh\n"
        'cat >> /home/runner/actions-runner/.env << "GARM_CHARM_ENV"\n'
        + "".join(f"{line}\n" for line in env_lines)
        + "GARM_CHARM_ENV\n"
        "chown -R runner:runner /home/runner/actions-runner 2>/dev/null || true\n"
        "# --- GARM charm: end of job-started hook ---\n"
    )


HOOK_ENV = "ACTIONS_RUNNER_HOOK_JOB_STARTED=/home/runner/actions-runner/pre-job.sh"


class TestPreJobHooks:
    def test_proxy_alone(self):
        out = rt.render_pre_job_hooks(RunnerConfig(runner_http_proxy=PROXY))
        assert out == _hooks_block(HOOK_HEAD, [HOOK_ENV])

    def test_mirror_alone(self):
        out = rt.render_pre_job_hooks(RunnerConfig(dockerhub_mirror=MIRROR))
        assert out == _hooks_block(
            HOOK_HEAD,
            [f"DOCKERHUB_MIRROR={MIRROR}", f"CONTAINER_REGISTRY_URL={MIRROR}", HOOK_ENV],
        )

    def test_otel_alone(self):
        out = rt.render_pre_job_hooks(RunnerConfig(otel_collector_endpoint=OTEL))
        assert out == _hooks_block(
            HOOK_HEAD + _otel_block(json.dumps(OTEL)),
            [HOOK_ENV, f"ACTION_OTEL_EXPORTER_OTLP_ENDPOINT={OTEL}"],
        )

    def test_pre_job_script_alone(self):
        out = rt.render_pre_job_hooks(RunnerConfig(pre_job_script="echo hi"))
        assert out == _hooks_block(HOOK_HEAD + _custom_block("echo hi"), [HOOK_ENV])

    def test_all_together(self):
        cfg = RunnerConfig(
            dockerhub_mirror=MIRROR,
            runner_http_proxy=PROXY,
            otel_collector_endpoint=OTEL,
            pre_job_script="echo hi",
        )
        out = rt.render_pre_job_hooks(cfg)
        assert out == _hooks_block(
            HOOK_HEAD + _otel_block(json.dumps(OTEL)) + _custom_block("echo hi"),
            [
                f"DOCKERHUB_MIRROR={MIRROR}",
                f"CONTAINER_REGISTRY_URL={MIRROR}",
                HOOK_ENV,
                f"ACTION_OTEL_EXPORTER_OTLP_ENDPOINT={OTEL}",
            ],
        )
        _bash_syntax_ok(out)

    def test_env_entries_stay_single_lines(self):
        # RunnerConfig strips line breaks; the renderer must not depend on that.
        cfg = RunnerConfig(
            dockerhub_mirror="http://m\nEVIL=1\r\nGARM_CHARM_ENV",
            otel_collector_endpoint="http://o\u2028BAD=2",
        )
        out = rt.render_pre_job_hooks(cfg)
        env_body = out.split('.env << "GARM_CHARM_ENV"\n', 1)[1].split("\nGARM_CHARM_ENV\n")[0]
        assert env_body.splitlines() == [
            "DOCKERHUB_MIRROR=http://mEVIL=1GARM_CHARM_ENV",
            "CONTAINER_REGISTRY_URL=http://mEVIL=1GARM_CHARM_ENV",
            HOOK_ENV,
            "ACTION_OTEL_EXPORTER_OTLP_ENDPOINT=http://oBAD=2",
        ]

    def test_executes_into_runner_home(self, tmp_path: Path):
        cfg = RunnerConfig(
            dockerhub_mirror=MIRROR, otel_collector_endpoint=OTEL, pre_job_script="echo hi"
        )
        block, home = _rewrite(rt.render_pre_job_hooks(cfg), tmp_path)
        (home).mkdir()
        (home / ".env").write_text("EXISTING=1\n")
        result, calls = _run(block, tmp_path)
        assert result.returncode == 0, result.stderr
        assert calls == []
        hook_file = home / "pre-job.sh"
        expected_hook, _ = _rewrite(rt.render_pre_job_script(cfg), tmp_path)
        assert hook_file.read_text() == expected_hook
        assert stat.S_IMODE(hook_file.stat().st_mode) == 0o755
        assert (home / ".env").read_text().splitlines() == [
            "EXISTING=1",
            f"DOCKERHUB_MIRROR={MIRROR}",
            f"CONTAINER_REGISTRY_URL={MIRROR}",
            f"ACTIONS_RUNNER_HOOK_JOB_STARTED={home}/pre-job.sh",
            f"ACTION_OTEL_EXPORTER_OTLP_ENDPOINT={OTEL}",
        ]


class TestHeredocInjection:
    def test_hostile_pre_job_script_survives_both_heredocs(self, tmp_path: Path):
        captured = tmp_path / "captured"
        script = "\n".join([f'cp "$0" {captured}', "exit 0", *HOSTILE_SCRIPT_LINES])
        cfg = RunnerConfig(pre_job_script=script)
        rendered = rt.render_pre_job_hooks(cfg)
        assert 'pre-job.sh << "GARM_CHARM_PREJOB__"\n' in rendered
        assert '<< "GARM_CHARM_CUSTOM_PREJOB_"\n' in rendered
        _bash_syntax_ok(rendered)

        block, home = _rewrite(rendered, tmp_path)
        result, calls = _run(block, tmp_path)
        assert result.returncode == 0, result.stderr
        assert calls == []
        assert not list(tmp_path.glob("PWNED*"))
        expected_hook, _ = _rewrite(rt.render_pre_job_script(cfg), tmp_path)
        assert (home / "pre-job.sh").read_text() == expected_hook
        assert (
            home / ".env"
        ).read_text() == f"ACTIONS_RUNNER_HOOK_JOB_STARTED={home}/pre-job.sh\n"

        # Now run the installed hook: the custom script must arrive byte for byte.
        hook_result, _ = _run((home / "pre-job.sh").read_text(), tmp_path)
        assert hook_result.returncode == 0, hook_result.stderr
        assert captured.read_text() == script + "\n"
        assert not list(tmp_path.glob("PWNED*"))

    def test_whole_template_with_hostile_script_parses(self):
        cfg = RunnerConfig(
            dockerhub_mirror=MIRROR,
            otel_collector_endpoint=OTEL,
            pre_job_script="\n".join(HOSTILE_SCRIPT_LINES),
        )
        base = b"#!/bin/bash\nset -e\n" + rt.render_tmate_snippet("h", 22, "r", "e").encode()
        data = rt.build_template_data(base + b"echo body\n", cfg).decode()
        _bash_syntax_ok(data)


# ---------------------------------------------------------------- build_template_data


class TestBuildTemplateData:
    def test_order_shebang_pre_install_hooks_then_base(self):
        cfg = RunnerConfig(dockerhub_mirror=MIRROR, pre_job_script="echo hi")
        tmate = rt.render_tmate_snippet("h", 22, "r", "e")
        base = f"#!/bin/bash\n{tmate}echo body\n".encode()
        data = rt.build_template_data(base, cfg)
        assert isinstance(data, bytes)
        assert data.decode() == (
            "#!/bin/bash\n"
            + rt.render_pre_install(cfg)
            + rt.render_pre_job_hooks(cfg)
            + tmate
            + "echo body\n"
        )
        _bash_syntax_ok(data.decode())

    def test_equals_prepend_after_shebang(self):
        cfg = RunnerConfig(runner_http_proxy=PROXY)
        snippet = rt.render_pre_install(cfg) + rt.render_pre_job_hooks(cfg)
        assert rt.build_template_data(b"echo x\n", cfg) == (snippet + "echo x\n").encode()

    def test_non_utf8_base_bytes_survive(self):
        base = b"#!/bin/bash\necho \xff\xfe\n"
        data = rt.build_template_data(base, RunnerConfig(pre_job_script="true"))
        assert data.startswith(b"#!/bin/bash\n# --- GARM charm")
        assert data.endswith(b"echo \xff\xfe\n")

    def test_unencodable_option_does_not_crash(self):
        data = rt.build_template_data(b"#!/bin/bash\n", RunnerConfig(pre_job_script="echo \ud800"))
        assert b"echo ?\n" in data


# ---------------------------------------------------------------- 15.4 aproxy


def _nft_ruleset(ip: str, excludes: str, ports: str) -> str:
    rule = f"ip daddr != @exclude tcp dport {{ {ports} }} counter dnat to $default-ipv4:54969"
    return (
        f"define default-ipv4 = {ip}\n"
        "table ip aproxy\n"
        "flush table ip aproxy\n"
        "table ip aproxy {\n"
        "    set exclude {\n"
        "        type ipv4_addr\n"
        "        flags interval\n"
        "        auto-merge\n"
        f"        elements = {{ {excludes} }}\n"
        "    }\n"
        "    chain prerouting {\n"
        "        type nat hook prerouting priority dstnat; policy accept;\n"
        f"        {rule}\n"
        "    }\n"
        "    chain output {\n"
        "        type nat hook output priority -100; policy accept;\n"
        f"        {rule}\n"
        "    }\n"
        "}\n"
    )


ROUTE_OK = {
    "snap install": {"stdout": "aproxy (edge) 0.2.4 installed\nsecond line\n"},
    "ip -4 route get": {"stdout": "1.1.1.1 via 10.0.0.1 dev ens3 src 10.0.0.5 uid 0\n"},
    "snap services aproxy": {
        "stdout": "Service  Startup  Current  Notes\naproxy.aproxy  enabled  active  -\n"
    },
}


def _cmds(calls: list[dict[str, object]]) -> list[object]:
    return [c["cmd"] for c in calls]


class TestAproxyScript:
    def test_is_a_bash_script_without_set_e(self):
        script = rt.render_aproxy_pre_install_script(RunnerConfig(runner_http_proxy=PROXY))
        assert script.startswith("#!/bin/bash\n")
        assert "set -e" not in script
        _bash_syntax_ok(script)

    def test_command_lines(self):
        script = rt.render_aproxy_pre_install_script(RunnerConfig(runner_http_proxy=PROXY))
        lines = script.splitlines()
        assert (
            f"run snap set system proxy.http={PROXY}"
            ' || log "error: could not set the snapd HTTP proxy"' in lines
        )
        assert (
            f"run snap set system proxy.https={PROXY}"
            ' || log "error: could not set the snapd HTTPS proxy"' in lines
        )
        assert "if ! run snap install aproxy --edge; then" in lines
        assert (
            "run snap set aproxy proxy=proxy.example.com:3128 listen=:54969"
            ' || log "error: could not configure aproxy"'
        ) in lines
        assert "    if snap services aproxy 2> /dev/null | grep -qw active; then" in lines

    def test_defaults_run_end_to_end(self, tmp_path: Path):
        script = rt.render_aproxy_pre_install_script(RunnerConfig(runner_http_proxy=PROXY))
        result, calls = _run(script, tmp_path, ROUTE_OK)
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        assert _cmds(calls) == [
            ["snap", "set", "system", f"proxy.http={PROXY}"],
            ["snap", "set", "system", f"proxy.https={PROXY}"],
            ["snap", "install", "aproxy", "--edge"],
            ["snap", "list", "aproxy"],
            ["snap", "set", "aproxy", "proxy=proxy.example.com:3128", "listen=:54969"],
            ["snap", "services", "aproxy"],
            ["ip", "-4", "route", "get", "1.1.1.1"],
            ["nft", "-f", "-"],
        ]
        assert calls[-1]["stdin"] == _nft_ruleset("10.0.0.5", "127.0.0.0/8", "80, 443")
        out_lines = result.stdout.splitlines()
        assert "[aproxy-bootstrap] aproxy (edge) 0.2.4 installed" in out_lines
        assert "[aproxy-bootstrap] second line" in out_lines
        assert (
            out_lines[-1] == "[aproxy-bootstrap] egress on ports 80, 443 now goes through aproxy"
        )
        assert all(line.startswith("[aproxy-bootstrap] ") for line in out_lines)

    def test_configured_ports_and_excludes(self, tmp_path: Path):
        cfg = RunnerConfig(
            runner_http_proxy=PROXY,
            aproxy_redirect_ports=((8080, 8080), (80, 80), (443, 443), (8000, 8100), (8050, 8050)),
            aproxy_exclude_addresses=(
                IPv4Network("192.168.0.0/16"),
                IPv4Network("10.0.0.0/8"),
                IPv4Network("10.0.0.0/8"),
            ),
        )
        result, calls = _run(rt.render_aproxy_pre_install_script(cfg), tmp_path, ROUTE_OK)
        assert result.returncode == 0, result.stderr
        assert calls[-1]["stdin"] == _nft_ruleset(
            "10.0.0.5", "10.0.0.0/8, 127.0.0.0/8, 192.168.0.0/16", "80, 443, 8000-8100"
        )

    def test_address_network_and_range_exclusions(self, tmp_path: Path):
        cfg, problems = RunnerConfig.from_databag(
            {
                "runner_http_proxy": PROXY,
                "aproxy_exclude_addresses": "192.168.1.10,172.16.0.0/12,10.0.0.1-10.0.0.9",
            }
        )
        assert problems == ()
        result, calls = _run(rt.render_aproxy_pre_install_script(cfg), tmp_path, ROUTE_OK)
        assert result.returncode == 0, result.stderr
        # nft's own forms: an address, a network, a first-last range.
        assert calls[-1]["stdin"] == _nft_ruleset(
            "10.0.0.5", "10.0.0.1-10.0.0.9, 127.0.0.0/8, 172.16.0.0/12, 192.168.1.10", "80, 443"
        )

    @pytest.mark.parametrize(
        ("excludes", "elements"),
        [
            # A range that is exactly one network is written as the network.
            ("10.0.0.0-10.0.0.255", "10.0.0.0/24, 127.0.0.0/8"),
            # Overlapping and adjacent entries of any form become one element.
            ("10.0.0.0-10.0.0.20,10.0.0.0/29,10.0.0.21", "10.0.0.0-10.0.0.21, 127.0.0.0/8"),
            ("10.0.0.0/25,10.0.0.128-10.0.0.255", "10.0.0.0/24, 127.0.0.0/8"),
            ("126.255.255.250-127.0.0.9", "126.255.255.250-127.255.255.255"),
            ("127.0.0.1,127.1.2.3-127.1.2.9,127.0.0.0/16", "127.0.0.0/8"),
            ("10.0.0.7-10.0.0.7,10.0.0.7/32", "10.0.0.7, 127.0.0.0/8"),
            ("0.0.0.0-255.255.255.255", "0.0.0.0/0"),
        ],
    )
    def test_exclusions_are_merged_into_disjoint_elements(self, excludes: str, elements: str):
        cfg, problems = RunnerConfig.from_databag(
            {"runner_http_proxy": PROXY, "aproxy_exclude_addresses": excludes}
        )
        assert problems == ()
        script = rt.render_aproxy_pre_install_script(cfg)
        assert f"        elements = {{ {elements} }}" in script.splitlines()

    def test_unusable_ports_and_excludes_never_reach_the_script(self):
        cfg, problems = RunnerConfig.from_databag(
            {
                "runner_http_proxy": PROXY,
                "aproxy_redirect_ports": "22;reboot,70000,90-80",
                "aproxy_exclude_addresses": "$(reboot),::1/128",
            }
        )
        assert problems == ("aproxy_exclude_addresses has 1 malformed entry",)
        script = rt.render_aproxy_pre_install_script(cfg)
        assert "reboot" not in script
        assert "        elements = { 127.0.0.0/8 }" in script.splitlines()
        assert "tcp dport { 80, 443 }" in script

    @pytest.mark.parametrize(
        ("proxy", "authority"),
        [
            ("http://[fd00::1]:3128", "[fd00::1]:3128"),
            ("http://user:pw@proxy:8080/path?q=1", "user:pw@proxy:8080"),
            ("proxy.internal:3128", "proxy.internal:3128"),
            ("http://[fd00::1:3128", "http://[fd00::1:3128"),
            ("http:///nohost", "http:///nohost"),
        ],
    )
    def test_authority(self, tmp_path: Path, proxy: str, authority: str):
        script = rt.render_aproxy_pre_install_script(RunnerConfig(runner_http_proxy=proxy))
        _, calls = _run(script, tmp_path, ROUTE_OK)
        assert ["snap", "set", "aproxy", f"proxy={authority}", "listen=:54969"] in _cmds(calls)

    @pytest.mark.parametrize(
        "proxy",
        [
            "http://x;rm -rf /",
            "http://$(touch PWNED):1",
            "http://`touch PWNED`'\"x",
            "http://a\nGARM\ntouch PWNED",
        ],
    )
    def test_hostile_proxy_is_a_single_argument(self, tmp_path: Path, proxy: str):
        script = rt.render_aproxy_pre_install_script(RunnerConfig(runner_http_proxy=proxy))
        _bash_syntax_ok(script)
        result, calls = _run(script, tmp_path, ROUTE_OK)
        assert result.returncode == 0
        flat = proxy.replace("\n", "")
        assert _cmds(calls)[:2] == [
            ["snap", "set", "system", f"proxy.http={flat}"],
            ["snap", "set", "system", f"proxy.https={flat}"],
        ]
        assert not (tmp_path / "PWNED").exists()

    def test_aproxy_missing_exits_zero_without_nft(self, tmp_path: Path):
        behaviour = {**ROUTE_OK, "snap install": {"rc": 1}, "snap list": {"rc": 1}}
        script = rt.render_aproxy_pre_install_script(RunnerConfig(runner_http_proxy=PROXY))
        result, calls = _run(script, tmp_path, behaviour)
        assert result.returncode == 0
        assert _cmds(calls)[-1] == ["snap", "list", "aproxy"]
        assert "[aproxy-bootstrap] error: aproxy is not installed" in result.stdout

    def test_already_installed_is_tolerated(self, tmp_path: Path):
        behaviour = {**ROUTE_OK, "snap install": {"rc": 1}}
        script = rt.render_aproxy_pre_install_script(RunnerConfig(runner_http_proxy=PROXY))
        result, calls = _run(script, tmp_path, behaviour)
        assert result.returncode == 0
        assert _cmds(calls)[-1] == ["nft", "-f", "-"]

    def test_inactive_service_leaves_egress_alone(self, tmp_path: Path):
        behaviour = {
            **ROUTE_OK,
            "snap services aproxy": {"stdout": "aproxy.aproxy  enabled  inactive  -\n"},
        }
        script = rt.render_aproxy_pre_install_script(RunnerConfig(runner_http_proxy=PROXY))
        result, calls = _run(script, tmp_path, behaviour)
        assert result.returncode == 0
        assert ["nft", "-f", "-"] not in _cmds(calls)
        assert _cmds(calls).count(["snap", "services", "aproxy"]) == 10
        assert "[aproxy-bootstrap] error: the aproxy service is not active" in result.stdout

    def test_no_default_route_leaves_egress_alone(self, tmp_path: Path):
        behaviour = {**ROUTE_OK, "ip -4 route get": {"stdout": "", "rc": 2}}
        script = rt.render_aproxy_pre_install_script(RunnerConfig(runner_http_proxy=PROXY))
        result, calls = _run(script, tmp_path, behaviour)
        assert result.returncode == 0
        assert ["nft", "-f", "-"] not in _cmds(calls)
        assert "[aproxy-bootstrap] error: no IPv4 source address" in result.stdout

    def test_nft_failure_is_logged(self, tmp_path: Path):
        behaviour = {**ROUTE_OK, "nft": {"rc": 1, "stdout": "Error: bad\nmore\n"}}
        script = rt.render_aproxy_pre_install_script(RunnerConfig(runner_http_proxy=PROXY))
        result, _ = _run(script, tmp_path, behaviour)
        assert result.returncode == 0
        assert "[aproxy-bootstrap] Error: bad\n[aproxy-bootstrap] more\n" in result.stdout
        assert "[aproxy-bootstrap] error: nft refused the aproxy ruleset" in result.stdout


# ---------------------------------------------------------------- 14.7


def _decode(extra: dict[str, object]) -> dict[str, str]:
    scripts = extra["pre_install_scripts"]
    assert isinstance(scripts, dict)
    return {str(k): base64.b64decode(str(v)).decode() for k, v in scripts.items()}


class TestEffectiveExtraSpecs:
    def test_nothing_gives_empty_dict(self):
        assert effective_extra_specs({}, RunnerConfig()) == {}

    def test_options_without_proxy_do_not_disable_updates(self):
        cfg = RunnerConfig(dockerhub_mirror=MIRROR, otel_collector_endpoint=OTEL)
        assert effective_extra_specs({}, cfg) == {}

    def test_scripts_are_base64(self):
        extra = effective_extra_specs({"pre_install.sh": "echo é\n"}, RunnerConfig())
        assert extra == {
            "pre_install_scripts": {
                "pre_install.sh": base64.b64encode("echo é\n".encode()).decode()
            }
        }

    def test_proxy_adds_aproxy_first_and_disables_updates(self):
        cfg = RunnerConfig(runner_http_proxy=PROXY)
        extra = effective_extra_specs({"pre_install.sh": "echo hi"}, cfg)
        assert extra["disable_updates"] is True
        assert set(extra) == {"disable_updates", "pre_install_scripts"}
        decoded = _decode(extra)
        assert list(decoded) == ["00-aproxy", "pre_install.sh"]
        assert decoded == {
            "00-aproxy": rt.render_aproxy_pre_install_script(cfg),
            "pre_install.sh": "echo hi",
        }

    def test_proxy_alone(self):
        cfg = RunnerConfig(runner_http_proxy=PROXY)
        extra = effective_extra_specs({}, cfg)
        assert extra["disable_updates"] is True
        assert _decode(extra) == {"00-aproxy": rt.render_aproxy_pre_install_script(cfg)}

    def test_charm_aproxy_script_replaces_a_configured_one(self):
        cfg = RunnerConfig(runner_http_proxy=PROXY)
        extra = effective_extra_specs({"a.sh": "a", "00-aproxy": "evil"}, cfg)
        decoded = _decode(extra)
        assert list(decoded) == ["00-aproxy", "a.sh"]
        assert decoded["00-aproxy"] == rt.render_aproxy_pre_install_script(cfg)

    def test_input_mapping_not_modified(self):
        scripts = {"pre_install.sh": "x"}
        effective_extra_specs(scripts, RunnerConfig(runner_http_proxy=PROXY))
        assert scripts == {"pre_install.sh": "x"}


def test_operator_braces_survive_garm_go_template_rendering():
    # GARM renders templates with Go's text/template: a literal "{{" must become an action
    # printing "{{", and nothing else in the operator's script may change.
    script = 'echo "${{ github.token }}" {{.RunnerName}}\n'
    cfg = RunnerConfig(pre_job_script=script)
    body = rt.build_template_data(b"#!/bin/bash\necho {{ .CallbackURL }}\n", cfg).decode()
    assert 'echo "${{"{{"}} github.token }}" {{"{{"}}.RunnerName}}' in body
    # The base template's own actions are GARM's and stay as they are.
    assert body.endswith("echo {{ .CallbackURL }}\n")
    assert rt.go_template_literal("a {{{ b") == 'a {{"{{"}}{ b'
    assert "{{" not in rt.render_tmate_snippet("h", 22, "r", "e")
    assert '{{"{{"}}' in rt.render_tmate_snippet("h{{x", 22, "r", "e")
