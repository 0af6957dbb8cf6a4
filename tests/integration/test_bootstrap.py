"""Deploy garm alone on a real Juju controller: workload plan, first-run, credentials, metrics.

Run with ``tox -e integration`` after packing the charm::

    charmcraft pack                       # writes garm_amd64.charm in the repo root
    GARM_CHARM_FILE=./garm_amd64.charm GARM_IMAGE=<registry>/garm:<tag> tox -e integration

``GARM_IMAGE`` is an OCI image with ``/usr/local/bin/garm``,
``/usr/local/bin/garm-provider-openstack``, ``/usr/local/bin/garm-provider-openstack-shim``,
``python3`` and the garm-agent binaries with their manifest under ``/opt/garm-agent``
(``rockcraft.yaml``). The current Juju controller must
have a Kubernetes cloud; each test module gets its own temporary model.
"""

from __future__ import annotations

import jubilant

from tests.integration import helpers
from tests.integration.helpers import AdminCredentials


def test_deploy_alone_waits_for_configurator(juju: jubilant.Juju, garm: str) -> None:
    status = juju.status()

    assert helpers.app_message(status, garm) == ("waiting", helpers.WAITING_CONFIGURATOR)
    unit = status.apps[garm].units[helpers.UNIT]
    assert unit.leader
    assert unit.workload_status.current == "waiting"
    assert unit.workload_status.message == helpers.WAITING_CONFIGURATOR


def test_pebble_plan_runs_garm_on_sqlite(juju: jubilant.Juju, garm: str) -> None:
    plan = helpers.pebble_plan(juju)
    service = plan.get("services", {}).get("garm", {})
    environment = {str(k): str(v) for k, v in (service.get("environment") or {}).items()}
    # Compare scalars only, so a failing assert cannot print the environment.
    backend = environment.get("GARM_DB_BACKEND")
    db_file = environment.get("GARM_SQLITE_DB_FILE")
    providers = environment.get("GARM_PROVIDERS_JSON")
    postgres_keys = sorted(key for key in environment if key.startswith("POSTGRESQL_DB_"))
    check = plan.get("checks", {}).get("garm-alive", {})

    assert service.get("command") == "python3 /opt/garm-charm/garm_entrypoint.py"
    assert service.get("startup") == "enabled"
    assert backend == "sqlite3"
    assert db_file == "/var/lib/garm/garm.db"
    assert providers == "[]"
    assert postgres_keys == []
    assert check.get("level") == "alive"
    assert check.get("http", {}).get("url") == "http://127.0.0.1:8080/metrics"


def test_garm_service_is_running(juju: jubilant.Juju, garm: str) -> None:
    output = helpers.in_garm_container(
        juju, "PEBBLE_SOCKET=/charm/container/pebble.socket /charm/bin/pebble services garm"
    )
    rows = [line.split() for line in output.splitlines()[1:] if line.strip()]

    assert [row[:3] for row in rows] == [["garm", "enabled", "active"]]


def test_first_run_is_done(juju: jubilant.Juju, garm: str) -> None:
    answer = helpers.garm_get(juju, "/api/v1/controller-info")
    error = answer.body.get("error") if isinstance(answer.body, dict) else None

    # GARM checks init first: 409 urls_required or 401 both mean the admin user exists, while
    # 409 init_required would mean first-run never happened.
    initialised = answer.status == 401 or (answer.status, error) == (409, "urls_required")
    assert initialised, f"controller-info answered {answer.status} {error!r}"


def test_get_credentials_returns_the_admin(juju: jubilant.Juju, admin: AdminCredentials) -> None:
    # Derive facts first, so that a failing assert cannot print the password.
    length = len(admin.password)
    classes = [
        any(c.islower() for c in admin.password),
        any(c.isupper() for c in admin.password),
        any(c.isdigit() for c in admin.password),
        any(not c.isalnum() for c in admin.password),
    ]

    assert admin.username == "admin"
    assert length == 20
    assert classes == [True, True, True, True]
    assert admin.email == "admin@garm.local"
    assert admin.full_name == "GARM Admin"


def test_admin_credentials_log_in_to_garm(juju: jubilant.Juju, admin: AdminCredentials) -> None:
    status, token_received = helpers.garm_login(juju, admin)
    wrong = AdminCredentials(admin.username, admin.password + "x", admin.email, admin.full_name)
    wrong_status, wrong_token = helpers.garm_login(juju, wrong)

    assert (status, token_received) == (200, True)
    assert (wrong_status, wrong_token) == (401, False)


def test_admin_session_reads_the_controller(juju: jubilant.Juju, admin: AdminCredentials) -> None:
    answer = helpers.garm_get(juju, "/api/v1/controller", admin)
    body = answer.body if isinstance(answer.body, dict) else {}
    model = juju.model

    assert answer.status == 200
    # With no ingress the charm points GARM at the in-cluster service address.
    base = f"http://{helpers.APP}.{model}.svc.cluster.local:8080"
    assert body.get("metadata_url") == f"{base}/api/v1/metadata"
    assert body.get("callback_url") == f"{base}/api/v1/callbacks"
    assert body.get("webhook_url") == f"{base}/webhooks"
    assert body.get("agent_url") == f"{base}/agent"


def test_metrics_answer_without_auth(juju: jubilant.Juju, garm: str) -> None:
    answer = helpers.garm_get(juju, "/metrics")

    assert answer.status == 200
    assert isinstance(answer.body, str)
    assert "# TYPE" in answer.body


def test_charmed_template_exists_without_debug_ssh(
    juju: jubilant.Juju, admin: AdminCredentials
) -> None:
    templates = helpers.templates_by_name(juju, admin)

    assert helpers.CHARMED_TEMPLATE in templates
    charmed = helpers.template_body(juju, admin, templates[helpers.CHARMED_TEMPLATE])
    base = helpers.template_body(juju, admin, templates[helpers.BASE_TEMPLATE])
    assert charmed == base
    assert "TMATE_SERVER_HOST=" not in charmed


def test_get_credentials_is_stable(juju: jubilant.Juju, admin: AdminCredentials) -> None:
    again = helpers.get_admin_credentials(juju)
    same_password = again.password == admin.password

    # The secret is created once; a second read must not regenerate the password.
    assert again.username == admin.username
    assert same_password, "the admin password changed between two get-credentials runs"


def test_garm_holds_the_garm_agent_the_image_ships(
    juju: jubilant.Juju, admin: AdminCredentials
) -> None:
    image = helpers.probe(juju, "agent-image")
    manifest = image["manifest"]
    tools = manifest["tools"]
    stored = helpers.garm_get(juju, "/api/v1/tools/garm-agent", admin)
    held = {
        (t.get("os_type"), t.get("os_arch")): (t.get("sha256sum"), t.get("version"))
        for t in (stored.body.get("results") if isinstance(stored.body, dict) else None) or []
    }

    # The rock's part built both architectures, and the manifest's digests are the files'.
    assert [(t["os_type"], t["os_arch"]) for t in tools] == [
        ("linux", "amd64"),
        ("linux", "arm64"),
    ]
    assert {t["path"]: t["sha256"] for t in tools} == image["digests"]
    # The amd64 build runs here and reports the pinned version the manifest names.
    assert image["version"] == [0, manifest["version"] + "\n"]
    # The charm uploaded exactly those binaries to GARM, with that version.
    assert stored.status == 200
    assert held == {
        (t["os_type"], t["os_arch"]): (t["sha256"], manifest["version"]) for t in tools
    }
