"""Tests of the scaleset reconciler against the GARM emulator through the real client."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from garm import (
    CreateCredentialParams,
    GarmApiError,
    GarmClient,
    GarmConnectionError,
    GarmUnauthorizedError,
    GithubApp,
    ScaleSet,
)
from reconcile.scalesets import sweep
from reconcile.scalesets.names import (
    LABEL_HASH_LENGTH,
    MAX_SCALESET_NAME_LENGTH,
    Generations,
    dedupe_specs,
    target_scaleset_name,
)
from reconcile.scalesets.placement import placed_scaleset_name
from reconcile.scalesets.progress import progress_notices
from reconcile.scalesets.reconciler import ScalesetReconciler
from reconcile.scalesets.retirement import DRAIN_DEADLINE, Handover, Phase, ScalesetProgress
from reconcile.scalesets.runners import MAX_JOB_RUNTIME
from reconcile.scalesets.table import format_scaleset_table, scaleset_status_rows
from reconcile.writes import Writes
from tests.garm_emulator import (
    CONSOLIDATION_INTERVAL,
    SYSTEM_TEMPLATE_BODY,
    SYSTEM_TEMPLATE_ID,
    GarmEmulator,
)
from tests.garm_emulator.state import ScaleSetRow
from tests.rsa_keys import pkcs1_pem
from tests.unit.conftest import ADMIN_PASSWORD, ADMIN_USERNAME, EMULATOR_PROVIDERS
from vocabulary.desired_state import EntityKey, ScalesetSpec
from vocabulary.notices import summarise
from vocabulary.runner_options import RunnerConfig
from vocabulary.runner_template import build_template_data

PROVIDER = EMULATOR_PROVIDERS[0]
ORG = "canonical"
REPO = "canonical/garm"
CREDENTIAL = "app-1-2"
LABELS = ("linux", "x64")
LIVE = "my-scaleset-18515357"  # my-scaleset with labels linux,x64
NEW_LABELS = ("self-hosted", "x64", "jammy")
NEW_LIVE = "my-scaleset-e73f260d"
THIRD_LABELS: tuple[str, ...] = ()
THIRD_LIVE = "my-scaleset-e3b0c442"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def make_spec(**overrides: Any) -> ScalesetSpec:
    values: dict[str, Any] = {
        "name": "my-scaleset",
        "provider_name": PROVIDER,
        "image": "ubuntu-24.04",
        "flavor": "small",
        "os_arch": "amd64",
        "min_idle_runners": 1,
        "max_runners": 3,
        "entity_type": "organization",
        "entity_name": ORG,
        "labels": LABELS,
    }
    values.update(overrides)
    return ScalesetSpec(**values)


@pytest.fixture
def client(ready_emulator: GarmEmulator) -> Iterator[GarmClient]:
    with GarmClient(ready_emulator.url) as garm_client:
        garm_client.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        yield garm_client


@pytest.fixture
def garm(ready_emulator: GarmEmulator, client: GarmClient) -> GarmEmulator:
    """The emulator with a credential, an organisation and a repository, request log empty."""
    seed_credential_and_entities(client)
    ready_emulator.clear_requests()
    return ready_emulator


def seed_credential_and_entities(client: GarmClient) -> None:
    """The credential, the organisation and the repository every test here runs on."""
    client.create_credential(
        CreateCredentialParams(
            name=CREDENTIAL,
            description="Managed by garm",
            endpoint="github.com",
            app=GithubApp(app_id=1, installation_id=2, private_key_bytes=_b64(pkcs1_pem())),
        )
    )
    client.create_organization(ORG, CREDENTIAL, "0" * 64)
    owner, _, name = REPO.partition("/")
    client.create_repository(owner, name, CREDENTIAL, "0" * 64)


@pytest.fixture
def reconciler(garm: GarmEmulator, client: GarmClient) -> ScalesetReconciler:
    return ScalesetReconciler(client, clock=lambda: garm.now)


def row(garm: GarmEmulator, name: str) -> ScaleSetRow:
    found = garm.state.scaleset_by_name(name)
    assert found is not None, f"no scaleset {name}"
    return found


def calls(garm: GarmEmulator, method: str, path_regex: str) -> list[Any]:
    return [r for r in garm.requests if r.method == method and re.fullmatch(path_regex, r.path)]


def names(garm: GarmEmulator) -> set[str]:
    return {s["name"] for s in garm.scalesets()}


def settle(garm: GarmEmulator, ticks: int = 2) -> None:
    for _ in range(ticks):
        garm.advance(timedelta(seconds=30))


# --- naming -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "live"),
    [
        ([], "my-scaleset-e3b0c442"),
        (["linux", "x64"], "my-scaleset-18515357"),
        (["x64", "linux"], "my-scaleset-18515357"),
        (["self-hosted", "x64", "jammy"], "my-scaleset-e73f260d"),
        (["jammy", "self-hosted", "x64"], "my-scaleset-e73f260d"),
    ],
)
def test_naming_examples(labels: list[str], live: str) -> None:
    assert target_scaleset_name("my-scaleset", labels) == live


def test_duplicate_label_changes_the_hash() -> None:
    assert target_scaleset_name("s", ["x64", "x64"]) != target_scaleset_name("s", ["x64"])


def test_long_names_keep_the_label_hash_and_stay_distinct() -> None:
    logical = "a" * 50 + "-team-one-scaleset"
    sibling = "a" * 50 + "-team-two-scaleset"
    live = target_scaleset_name(logical, LABELS)
    label_digest = hashlib.sha256(b"linux,x64").hexdigest()[:LABEL_HASH_LENGTH]
    name_digest = hashlib.sha256(logical.encode()).hexdigest()[:8]
    assert len(live) == MAX_SCALESET_NAME_LENGTH == 55 + 1 + 8
    assert live == f"{logical[:46]}-{name_digest}-{label_digest}"
    assert target_scaleset_name(sibling, LABELS) != live
    assert Generations([live]).of(logical) == [live]
    assert Generations([live]).of(sibling) == []


def test_name_of_55_characters_is_kept_and_56_is_truncated() -> None:
    exact = "b" * 55
    assert target_scaleset_name(exact, []) == f"{exact}-e3b0c442"
    longer = "b" * 56
    live = target_scaleset_name(longer, [])
    assert len(live) == 64
    assert live.startswith("b" * 46 + "-")
    assert live != target_scaleset_name(exact, [])


def test_generations_are_only_the_hash_suffixed_names_of_the_base() -> None:
    names = [
        LIVE,
        NEW_LIVE,
        "my-scaleset",  # legacy bare name is an orphan
        "my-scaleset-1851535",
        "my-scaleset-ABCDEF12",
        "other-18515357",
        "axb-18515357",
    ]
    generations = Generations(names)
    assert sorted(generations.of("my-scaleset")) == sorted([LIVE, NEW_LIVE])
    assert generations.of("a.b") == []
    assert generations.family("my-scaleset", "my-scaleset-00000000") == sorted(
        [LIVE, NEW_LIVE, "my-scaleset-00000000"]
    )


def test_sibling_logical_name_never_joins_the_family() -> None:
    sibling = "my-scaleset-1a2b3c4d"
    sibling_live = target_scaleset_name(sibling, LABELS)
    assert sibling_live.startswith("my-scaleset-1a2b3c4d-")
    generations = Generations([LIVE, sibling_live])
    assert generations.of("my-scaleset") == [LIVE]
    assert generations.of(sibling) == [sibling_live]


def test_dedupe_keeps_first_and_warns_only_when_different(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = make_spec()
    same = make_spec()
    other = make_spec(image="other")
    with caplog.at_level(logging.WARNING):
        assert dedupe_specs([first, same]) == [first]
    assert not caplog.records
    with caplog.at_level(logging.WARNING):
        kept = dedupe_specs([first, make_spec(name="b"), other])
    assert kept == [first, make_spec(name="b")]
    assert kept[0] is first
    assert any("exactly one scaleset" in r.getMessage() for r in caplog.records)


# --- create -----------------------------------------------------------------------------------


def test_create_body_follows_the_matrix(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    spec = make_spec(
        labels=("x64", "linux"),
        runner_group="ci",
        pre_install_scripts={"10-setup": "echo héllo\n"},
        min_idle_runners=2,
    )
    result = reconciler.reconcile([spec])

    (create,) = calls(garm, "POST", r"/organizations/[^/]+/scalesets")
    assert create.body == {
        "name": LIVE,
        "provider_name": PROVIDER,
        "image": "ubuntu-24.04",
        "flavor": "small",
        "os_type": "linux",
        "os_arch": "amd64",
        "max_runners": 3,
        "min_idle_runners": 2,
        "enabled": True,
        "labels": ["linux", "x64"],
        "github-runner-group": "ci",
        "extra_specs": {"pre_install_scripts": {"10-setup": _b64("echo héllo\n")}},
    }
    assert [s.name for s in result.live] == [LIVE]
    assert result.live[0].id == row(garm, LIVE).id
    assert result.progress == []


def test_create_leaves_unset_optionals_out(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    reconciler.reconcile([make_spec(min_idle_runners=0)])
    (create,) = calls(garm, "POST", r"/organizations/[^/]+/scalesets")
    for key in ("github-runner-group", "extra_specs", "template_id", "runner_prefix"):
        assert key not in create.body
    assert create.body["min_idle_runners"] == 0


def test_create_on_a_repository_uses_its_endpoint(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    reconciler.reconcile([make_spec(entity_type="repository", entity_name=REPO)])
    repo_id = garm.repositories()[0]["id"]
    assert [r.path for r in garm.writes()] == [f"/repositories/{repo_id}/scalesets"]
    assert garm.scaleset_by_name(LIVE)["repo_name"] == REPO


def test_create_references_the_charmed_template(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    charmed = garm.add_template("github_linux_charmed", b"#!/bin/bash\necho charmed\n")
    reconciler.reconcile([make_spec(template_id=charmed["id"])])
    (create,) = calls(garm, "POST", r"/organizations/[^/]+/scalesets")
    assert create.body["template_id"] == charmed["id"]
    assert row(garm, LIVE).template_id == charmed["id"]


def test_runner_options_get_their_own_template_on_the_charmed_base(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    charmed_body = b"#!/bin/bash\necho charmed\n"
    charmed = garm.add_template("github_linux_charmed", charmed_body)
    cfg = RunnerConfig(dockerhub_mirror="https://mirror.example")
    reconciler.reconcile([make_spec(template_id=charmed["id"], runner_config=cfg)])

    custom = garm.template_by_name(f"github_linux-{LIVE}")
    assert custom is not None
    assert garm.template_body(f"github_linux-{LIVE}") == build_template_data(charmed_body, cfg)
    assert custom["description"] == f"Runner template for scaleset {LIVE}"
    assert row(garm, LIVE).template_id == custom["id"]
    # The template is written before the scale set that references it.
    assert [(r.method, r.path.split("/")[1]) for r in garm.writes()] == [
        ("POST", "templates"),
        ("POST", "organizations"),
    ]


def test_runner_options_fall_back_to_the_system_template(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    cfg = RunnerConfig(pre_job_script="echo hi")
    reconciler.reconcile([make_spec(template_id=0, runner_config=cfg)])
    assert garm.template_body(f"github_linux-{LIVE}") == build_template_data(
        SYSTEM_TEMPLATE_BODY, cfg
    )


def test_missing_base_template_uses_garm_default(
    garm: GarmEmulator, reconciler: ScalesetReconciler, caplog: pytest.LogCaptureFixture
) -> None:
    with garm.state.lock:
        del garm.state.templates[SYSTEM_TEMPLATE_ID]
    with caplog.at_level(logging.WARNING):
        reconciler.reconcile([make_spec(runner_config=RunnerConfig(pre_job_script="x"))])
    assert "template_id" not in calls(garm, "POST", r"/organizations/.*")[0].body
    assert calls(garm, "POST", "/templates") == []
    assert any("base template" in r.getMessage() for r in caplog.records)


def test_runner_proxy_adds_aproxy_script_and_disables_updates(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    cfg = RunnerConfig(runner_http_proxy="http://proxy.internal:3128")
    reconciler.reconcile([make_spec(runner_config=cfg, pre_install_scripts={"x": "echo x"})])
    (create,) = calls(garm, "POST", r"/organizations/[^/]+/scalesets")
    extra = create.body["extra_specs"]
    assert extra["disable_updates"] is True
    assert sorted(extra["pre_install_scripts"]) == ["00-aproxy", "x"]
    script = base64.b64decode(extra["pre_install_scripts"]["00-aproxy"]).decode()
    assert "proxy.internal:3128" in script


# --- update -----------------------------------------------------------------------------------


def _base_update(spec: ScalesetSpec) -> dict[str, Any]:
    return {
        "enabled": True,
        "image": spec.image,
        "flavor": spec.flavor,
        "max_runners": spec.max_runners,
        "min_idle_runners": spec.min_idle_runners,
    }


def _only_write(garm: GarmEmulator) -> Any:
    writes = garm.writes()
    assert len(writes) == 1, writes
    return writes[0]


@pytest.mark.parametrize(
    ("field_name", "value"),
    [
        ("image", "ubuntu-22.04"),
        ("flavor", "large"),
        ("max_runners", 7),
        ("min_idle_runners", 0),
        ("enabled", False),
    ],
)
def test_drift_of_a_plain_field_updates_in_place(
    garm: GarmEmulator, reconciler: ScalesetReconciler, field_name: str, value: object
) -> None:
    spec = make_spec()
    reconciler.reconcile([spec])
    setattr(row(garm, LIVE), field_name, value)
    garm.clear_requests()

    reconciler.reconcile([spec])

    write = _only_write(garm)
    assert (write.method, write.path) == ("PUT", f"/scalesets/{row(garm, LIVE).id}")
    assert write.body == _base_update(spec)
    garm.clear_requests()
    reconciler.reconcile([spec])
    assert garm.writes() == []


def test_disabled_scaleset_reads_back_without_enabled_and_is_reenabled(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    spec = make_spec()
    reconciler.reconcile([spec])
    row(garm, LIVE).enabled = False
    assert "enabled" not in garm.scaleset_by_name(LIVE)
    garm.clear_requests()
    reconciler.reconcile([spec])
    assert _only_write(garm).body["enabled"] is True
    assert row(garm, LIVE).enabled is True


def test_zero_min_idle_is_omitted_and_does_not_trigger_an_update(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    spec = make_spec(min_idle_runners=0)
    reconciler.reconcile([spec])
    assert "min_idle_runners" not in garm.scaleset_by_name(LIVE)
    garm.clear_requests()
    reconciler.reconcile([spec])
    assert garm.writes() == []


def test_runner_group_change_and_clearing(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    spec = make_spec(runner_group="ci")
    reconciler.reconcile([spec])
    garm.clear_requests()
    reconciler.reconcile([replace(spec, runner_group="gpu")])
    assert _only_write(garm).body == {**_base_update(spec), "runner_group": "gpu"}

    garm.clear_requests()
    reconciler.reconcile([replace(spec, runner_group="")])
    # GARM ignores "" on update: going back to no group names GARM's default group.
    assert _only_write(garm).body == {**_base_update(spec), "runner_group": "Default"}
    assert garm.scaleset_by_name(LIVE)["github-runner-group"] == "Default"
    garm.clear_requests()
    reconciler.reconcile([replace(spec, runner_group="")])
    assert garm.writes() == []


def test_extra_specs_update_is_base64_and_clearing_sends_empty_object(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    spec = make_spec()
    reconciler.reconcile([spec])
    with_script = replace(spec, pre_install_scripts={"10-a": "echo ü"})
    garm.clear_requests()
    reconciler.reconcile([with_script])
    assert _only_write(garm).body == {
        **_base_update(spec),
        "extra_specs": {"pre_install_scripts": {"10-a": _b64("echo ü")}},
    }
    garm.clear_requests()
    reconciler.reconcile([with_script])
    assert garm.writes() == []

    reconciler.reconcile([spec])
    body = garm.writes()[-1].body
    assert body == {**_base_update(spec), "extra_specs": {}}
    # GARM keeps the raw JSON, so it lists an empty object back.
    assert garm.scaleset_by_name(LIVE).get("extra_specs") == {}
    garm.clear_requests()
    reconciler.reconcile([spec])
    assert garm.writes() == []


def test_disable_updates_drift_triggers_update(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    spec = make_spec(pre_install_scripts={"a": "echo a"})
    reconciler.reconcile([spec])
    wanted = {"pre_install_scripts": {"a": _b64("echo a")}}
    row(garm, LIVE).extra_specs = json.dumps({**wanted, "disable_updates": True})
    garm.clear_requests()
    reconciler.reconcile([spec])
    assert _only_write(garm).body == {**_base_update(spec), "extra_specs": wanted}


def test_pre_install_script_drift_triggers_update(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    spec = make_spec(pre_install_scripts={"a": "echo a"})
    reconciler.reconcile([spec])
    row(garm, LIVE).extra_specs = json.dumps({"pre_install_scripts": {"a": _b64("echo b")}})
    garm.clear_requests()
    reconciler.reconcile([spec])
    assert _only_write(garm).body["extra_specs"] == {"pre_install_scripts": {"a": _b64("echo a")}}


def test_template_id_change_and_zero_leaves_garms_choice(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    charmed = garm.add_template("github_linux_charmed", b"#!/bin/bash\n")
    spec = make_spec()
    reconciler.reconcile([spec])
    garm.clear_requests()
    reconciler.reconcile([replace(spec, template_id=charmed["id"])])
    assert _only_write(garm).body == {**_base_update(spec), "template_id": charmed["id"]}

    # 0 leaves the template to GARM: real GARM refuses 0 as an id (404), so nothing is sent.
    garm.clear_requests()
    reconciler.reconcile([spec])
    assert garm.writes() == []
    assert garm.scaleset_by_name(LIVE)["template_id"] == charmed["id"]


def test_runner_option_change_rewrites_template_in_place(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    spec = make_spec(runner_config=RunnerConfig(dockerhub_mirror="https://one.example"))
    reconciler.reconcile([spec])
    template_id = row(garm, LIVE).template_id
    garm.clear_requests()
    cfg = RunnerConfig(dockerhub_mirror="https://two.example")
    reconciler.reconcile([replace(spec, runner_config=cfg)])
    write = _only_write(garm)
    assert (write.method, write.path) == ("PUT", f"/templates/{template_id}")
    assert garm.template_body(f"github_linux-{LIVE}") == build_template_data(
        SYSTEM_TEMPLATE_BODY, cfg
    )
    assert row(garm, LIVE).template_id == template_id


def test_dropping_runner_options_reverts_template_then_deletes_it(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    charmed = garm.add_template("github_linux_charmed", b"#!/bin/bash\n")
    spec = make_spec(template_id=charmed["id"], runner_config=RunnerConfig(pre_job_script="x"))
    reconciler.reconcile([spec])
    custom_id = row(garm, LIVE).template_id
    garm.clear_requests()
    reconciler.reconcile([replace(spec, runner_config=RunnerConfig())])
    assert [(r.method, r.path) for r in garm.writes()] == [
        ("PUT", f"/scalesets/{row(garm, LIVE).id}"),
        ("DELETE", f"/templates/{custom_id}"),
    ]
    assert garm.writes()[0].body["template_id"] == charmed["id"]
    assert garm.template_by_name(f"github_linux-{LIVE}") is None


def test_label_mismatch_on_live_scaleset_warns_and_updates_the_rest(
    garm: GarmEmulator, reconciler: ScalesetReconciler, caplog: pytest.LogCaptureFixture
) -> None:
    spec = make_spec()
    reconciler.reconcile([spec])
    row(garm, LIVE).labels = ["hand-edited"]
    row(garm, LIVE).image = "drifted"
    garm.clear_requests()
    with caplog.at_level(logging.WARNING):
        reconciler.reconcile([spec])
    assert any("immutable" in r.getMessage() for r in caplog.records)
    assert _only_write(garm).body == _base_update(spec)


def test_converged_pass_over_fifty_scalesets_writes_nothing(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    specs = [
        make_spec(
            name=f"set-{i:02d}",
            min_idle_runners=i % 2,
            runner_group="ci" if i % 3 == 0 else "",
            pre_install_scripts={"a": "echo a"} if i % 4 == 0 else {},
            runner_config=RunnerConfig(dockerhub_mirror="https://m.example")
            if i % 10 == 0
            else RunnerConfig(),
        )
        for i in range(50)
    ]
    reconciler.reconcile(specs)
    assert len(garm.scalesets()) == 50
    settle(garm)
    garm.clear_requests()
    result = reconciler.reconcile(specs)
    assert garm.writes() == []
    assert result.progress == []
    assert len(result.live) == 50


def test_dedupe_applies_to_reconcile(
    garm: GarmEmulator, reconciler: ScalesetReconciler, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        reconciler.reconcile([make_spec(image="first"), make_spec(image="second")])
    assert names(garm) == {LIVE}
    assert row(garm, LIVE).image == "first"
    assert any("exactly one scaleset" in r.getMessage() for r in caplog.records)


def test_sibling_logical_names_coexist(garm: GarmEmulator, reconciler: ScalesetReconciler) -> None:
    specs = [make_spec(), make_spec(name="my-scaleset-1a2b3c4d")]
    reconciler.reconcile(specs)
    reconciler.reconcile(specs)
    assert names(garm) == {LIVE, target_scaleset_name("my-scaleset-1a2b3c4d", LABELS)}
    assert all(s.get("enabled") is True for s in garm.scalesets())


# --- blue/green replacement -------------------------------------------------------------------


def _running_generation(garm: GarmEmulator, reconciler: ScalesetReconciler) -> ScalesetSpec:
    spec = make_spec(runner_config=RunnerConfig(pre_job_script="echo job"))
    reconciler.reconcile([spec])
    settle(garm)
    assert [i["status"] for i in garm.instances(LIVE)] == ["running"]
    garm.clear_requests()
    return spec


def test_replacement_timeline(garm: GarmEmulator, reconciler: ScalesetReconciler) -> None:
    spec = _running_generation(garm, reconciler)
    old_id = row(garm, LIVE).id
    old_template = garm.template_by_name(f"github_linux-{LIVE}")
    assert old_template is not None
    changed = replace(spec, labels=NEW_LABELS)

    first = reconciler.reconcile([changed])
    assert first.progress == [ScalesetProgress("my-scaleset", LIVE, NEW_LIVE, 0, Handover.PENDING)]
    assert summarise(progress_notices(first.progress)) == "my-scaleset: creating replacement"
    assert row(garm, LIVE).enabled is True
    assert row(garm, NEW_LIVE).labels == sorted(NEW_LABELS)
    assert {s.name for s in first.live} == {LIVE, NEW_LIVE}

    garm.clear_requests()
    second = reconciler.reconcile([changed])
    assert second.progress == [ScalesetProgress("my-scaleset", LIVE, NEW_LIVE, 1)]
    assert summarise(progress_notices(second.progress)) == "my-scaleset: draining 1 runner"
    (retire,) = calls(garm, "PUT", rf"/scalesets/{old_id}")
    assert retire.body == {"enabled": False, "min_idle_runners": 0, "max_runners": 0}
    assert "enabled" not in garm.scaleset_by_name(LIVE)

    settle(garm)  # the idle runner of the disabled generation goes away
    assert garm.instances(LIVE) == []
    garm.clear_requests()
    third = reconciler.reconcile([changed])
    assert third.progress == []
    assert summarise(progress_notices(third.progress)) == ""
    assert names(garm) == {NEW_LIVE}
    assert garm.template_by_name(f"github_linux-{LIVE}") is None
    assert garm.template_by_name(f"github_linux-{NEW_LIVE}") is not None
    deletes = [(r.method, r.path) for r in garm.writes() if r.method == "DELETE"]
    assert deletes == [
        ("DELETE", f"/scalesets/{old_id}"),
        ("DELETE", f"/templates/{old_template['id']}"),
    ]
    assert {s.name for s in third.live} == {NEW_LIVE}


def test_busy_runner_holds_the_predecessor_until_its_job_ends(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    spec = _running_generation(garm, reconciler)
    (runner,) = [i["name"] for i in garm.instances(LIVE)]
    garm.mark_busy(runner)
    changed = replace(spec, labels=NEW_LABELS)
    reconciler.reconcile([changed])
    reconciler.reconcile([changed])
    for _ in range(3):
        settle(garm)
        result = reconciler.reconcile([changed])
        assert result.progress == [ScalesetProgress("my-scaleset", LIVE, NEW_LIVE, 1)]
    assert calls(garm, "DELETE", r"/instances/.*") == []
    garm.finish_job(runner)
    # GARM does not listen to a disabled scale set: the runner stays busy until its
    # consolidation loop notices the job ended.
    settle(garm, 1)
    assert reconciler.reconcile([changed]).progress == [
        ScalesetProgress("my-scaleset", LIVE, NEW_LIVE, 1)
    ]
    garm.advance(CONSOLIDATION_INTERVAL)
    settle(garm, 1)
    assert reconciler.reconcile([changed]).progress == []
    assert names(garm) == {NEW_LIVE}


def test_label_revert_mid_drain_reenables_the_old_generation(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    spec = _running_generation(garm, reconciler)
    garm.mark_busy(garm.instances(LIVE)[0]["name"])
    changed = replace(spec, labels=NEW_LABELS)
    reconciler.reconcile([changed])
    reconciler.reconcile([changed])
    assert row(garm, LIVE).enabled is False

    garm.clear_requests()
    reverted = reconciler.reconcile([spec])
    assert reverted.progress == [
        ScalesetProgress("my-scaleset", NEW_LIVE, LIVE, 0, Handover.PENDING)
    ]
    assert row(garm, LIVE).enabled is True
    assert row(garm, LIVE).max_runners == spec.max_runners
    assert row(garm, NEW_LIVE).enabled is True  # not disabled in the re-enabling pass
    assert names(garm) == {LIVE, NEW_LIVE}

    next_pass = reconciler.reconcile([spec])
    assert [p.retiring_name for p in next_pass.progress] == [NEW_LIVE]
    assert next_pass.progress[0].handover is Handover.DONE
    assert row(garm, NEW_LIVE).enabled is False
    assert names(garm) == {LIVE, NEW_LIVE}
    # The newer generation never got a runner: the pass after it is disabled deletes it.
    assert reconciler.reconcile([spec]).progress == []
    assert names(garm) == {LIVE}


def test_two_label_changes_mid_drain_retire_both(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    spec = _running_generation(garm, reconciler)
    garm.mark_busy(garm.instances(LIVE)[0]["name"])
    second_spec = replace(spec, labels=NEW_LABELS)
    reconciler.reconcile([second_spec])
    reconciler.reconcile([second_spec])
    settle(garm)
    third_spec = replace(spec, labels=THIRD_LABELS)

    first = reconciler.reconcile([third_spec])
    assert {(p.retiring_name, p.handover) for p in first.progress} == {
        (LIVE, Handover.PENDING),
        (NEW_LIVE, Handover.PENDING),
    }
    assert names(garm) == {LIVE, NEW_LIVE, THIRD_LIVE}

    second = reconciler.reconcile([third_spec])
    assert {p.retiring_name for p in second.progress} == {LIVE, NEW_LIVE}
    assert all(p.handover is Handover.DONE for p in second.progress)
    assert all(p.replacement_name == THIRD_LIVE for p in second.progress)
    assert row(garm, NEW_LIVE).enabled is False
    assert summarise(progress_notices(second.progress)).startswith("my-scaleset: draining")

    garm.finish_job(garm.instances(LIVE)[0]["name"])
    garm.advance(CONSOLIDATION_INTERVAL)  # GARM notices the job end on a disabled scale set
    for _ in range(3):
        settle(garm)
        last = reconciler.reconcile([third_spec])
    assert last.progress == []
    assert names(garm) == {THIRD_LIVE}


def test_failed_retire_reports_failed_and_tries_the_fallback(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    spec = _running_generation(garm, reconciler)
    changed = replace(spec, labels=NEW_LABELS)
    reconciler.reconcile([changed])
    old_id = row(garm, LIVE).id
    garm.clear_requests()
    garm.fail_next("PUT", rf"/scalesets/{old_id}", 400, count=2)

    result = reconciler.reconcile([changed])

    assert result.progress == [ScalesetProgress("my-scaleset", LIVE, NEW_LIVE, 0, Handover.FAILED)]
    assert summarise(progress_notices(result.progress)) == "my-scaleset: retiring predecessor"
    assert [r.body for r in calls(garm, "PUT", rf"/scalesets/{old_id}")] == [
        {"enabled": False, "min_idle_runners": 0, "max_runners": 0},
        {"enabled": False, "min_idle_runners": 0},
    ]
    assert row(garm, LIVE).enabled is True
    assert reconciler.reconcile([changed]).progress[0].handover is Handover.DONE


def test_retire_fallback_without_max_runners_succeeds(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    spec = _running_generation(garm, reconciler)
    changed = replace(spec, labels=NEW_LABELS)
    reconciler.reconcile([changed])
    garm.fail_next("PUT", rf"/scalesets/{row(garm, LIVE).id}", 400)
    result = reconciler.reconcile([changed])
    assert result.progress == [ScalesetProgress("my-scaleset", LIVE, NEW_LIVE, 1)]
    assert row(garm, LIVE).enabled is False
    assert row(garm, LIVE).max_runners == spec.max_runners


def test_unreadable_runner_count_reads_as_one(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    spec = make_spec(min_idle_runners=0)
    reconciler.reconcile([spec])
    changed = replace(spec, labels=NEW_LABELS)
    reconciler.reconcile([changed])
    reconciler.reconcile([changed])  # disables the predecessor, which has no runners
    old_id = row(garm, LIVE).id
    garm.fail_next("GET", rf"/scalesets/{old_id}/instances", 500)
    garm.clear_requests()
    result = reconciler.reconcile([changed])
    assert result.progress == [ScalesetProgress("my-scaleset", LIVE, NEW_LIVE, 1)]
    assert LIVE in names(garm)
    assert calls(garm, "DELETE", r"/scalesets/\d+") == []
    assert reconciler.reconcile([changed]).progress == []
    assert names(garm) == {NEW_LIVE}


def _predecessor_with_runners(
    garm: GarmEmulator, reconciler: ScalesetReconciler, disabled_ago: timedelta
) -> tuple[ScalesetSpec, list[str]]:
    """A predecessor disabled ``disabled_ago`` with an idle, a busy and a booting runner."""
    spec = make_spec(min_idle_runners=0)
    changed = replace(spec, labels=NEW_LABELS)
    garm.add_scaleset(
        LIVE,
        org=ORG,
        enabled=False,
        labels=list(LABELS),
        max_runners=0,
        updated_at=garm.now - disabled_ago,
    )
    idle = garm.add_instance(LIVE, "running", "idle")["name"]
    busy = garm.add_instance(LIVE, "running", "idle")["name"]
    garm.mark_busy(busy)
    booting = garm.add_instance(LIVE, "creating", "pending")["name"]
    reconciler.reconcile([changed])  # creates the replacement
    garm.clear_requests()
    return changed, [idle, busy, booting]


def test_drain_before_the_deadline_removes_nothing(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    changed, _ = _predecessor_with_runners(garm, reconciler, DRAIN_DEADLINE - timedelta(hours=1))
    result = reconciler.reconcile([changed])
    assert result.progress == [ScalesetProgress("my-scaleset", LIVE, NEW_LIVE, 3)]
    assert summarise(progress_notices(result.progress)) == "my-scaleset: draining 3 runners"
    assert calls(garm, "DELETE", r"/instances/.*") == []


def test_deadline_passed_removes_only_idle_runners(
    garm: GarmEmulator, reconciler: ScalesetReconciler, caplog: pytest.LogCaptureFixture
) -> None:
    changed, (idle, busy, booting) = _predecessor_with_runners(
        garm, reconciler, DRAIN_DEADLINE + timedelta(minutes=1)
    )
    with caplog.at_level(logging.INFO):
        result = reconciler.reconcile([changed])
    assert result.progress == [ScalesetProgress("my-scaleset", LIVE, NEW_LIVE, 3)]
    deletes = calls(garm, "DELETE", r"/instances/.*")
    assert [(r.path, r.query["forceRemove"]) for r in deletes] == [(f"/instances/{idle}", "false")]
    assert garm.instance(busy) is not None
    assert garm.instance(booting) is not None
    assert any(r.levelno == logging.ERROR and booting in r.getMessage() for r in caplog.records)
    assert any(
        r.levelno == logging.WARNING and "deadline" in r.getMessage() for r in caplog.records
    )


def test_deadline_reached_by_advancing_the_clock(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    spec = _running_generation(garm, reconciler)
    (runner,) = [i["name"] for i in garm.instances(LIVE)]
    garm.mark_busy(runner)
    changed = replace(spec, labels=NEW_LABELS)
    reconciler.reconcile([changed])
    reconciler.reconcile([changed])  # predecessor disabled now
    garm.advance(DRAIN_DEADLINE - timedelta(minutes=5))
    garm.mark_busy(runner)  # still running a (fresh) job
    garm.clear_requests()
    reconciler.reconcile([changed])
    assert calls(garm, "DELETE", r"/instances/.*") == []

    garm.advance(timedelta(minutes=10))
    reconciler.reconcile([changed])
    assert calls(garm, "DELETE", r"/instances/.*") == []  # the job is fresh: still busy

    # Once the job has gone silent past the maximum job runtime, the runner is removed.
    garm.advance(MAX_JOB_RUNTIME + timedelta(minutes=1))
    garm.clear_requests()
    reconciler.reconcile([changed])
    assert [r.path for r in calls(garm, "DELETE", r"/instances/.*")] == [f"/instances/{runner}"]


def test_gated_spec_never_advances_retirement(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    spec = _running_generation(garm, reconciler)
    reconciler.reconcile([replace(spec, labels=NEW_LABELS)])
    garm.clear_requests()
    gated = replace(spec, labels=NEW_LABELS, provider_name="not-loaded")
    result = reconciler.reconcile([gated])
    assert result.progress == []
    assert garm.writes() == []
    assert row(garm, LIVE).enabled is True


# --- orphan sweep -----------------------------------------------------------------------------


def test_legacy_bare_name_is_swept_while_replacement_is_created(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    garm.add_scaleset("my-scaleset", org=ORG, labels=list(LABELS))
    result = reconciler.reconcile([make_spec()])
    assert names(garm) == {LIVE}
    assert {s.name for s in result.live} == {LIVE}


def _orphan_template(garm: GarmEmulator) -> int:
    return garm.add_template("github_linux-gone-0000aaaa", b"#!/bin/bash\n")["id"]


def test_orphan_with_runners_is_disabled_drained_then_deleted(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    garm.add_scaleset(
        "gone-0000aaaa", org=ORG, min_idle_runners=1, template_id=_orphan_template(garm)
    )
    orphan_id = row(garm, "gone-0000aaaa").id
    settle(garm)
    (runner,) = [i["name"] for i in garm.instances("gone-0000aaaa")]
    garm.clear_requests()

    first = reconciler.reconcile([])
    assert [(r.method, r.path) for r in garm.writes()] == [
        ("PUT", f"/scalesets/{orphan_id}"),
        ("DELETE", f"/instances/{runner}"),
    ]
    assert garm.writes()[0].body == {"enabled": False, "min_idle_runners": 0}
    assert garm.writes()[1].query == {"forceRemove": "false", "bypassGHUnauthorized": "false"}
    assert {s.name for s in first.live} == {"gone-0000aaaa"}
    assert garm.template_by_name("github_linux-gone-0000aaaa") is not None  # outlives for now

    settle(garm, 1)
    garm.clear_requests()
    second = reconciler.reconcile([])
    template_delete = calls(garm, "DELETE", r"/templates/\d+")
    scaleset_delete = calls(garm, "DELETE", rf"/scalesets/{orphan_id}")
    assert len(template_delete) == 1
    assert len(scaleset_delete) == 1
    writes = garm.writes()
    assert writes.index(scaleset_delete[0]) < writes.index(template_delete[0])
    assert names(garm) == set()
    assert garm.template_by_name("github_linux-gone-0000aaaa") is None
    assert second.live == []


def test_no_sweep_while_configurator_input_is_invalid(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    garm.add_scaleset("gone-0000aaaa", org=ORG, min_idle_runners=1)
    settle(garm)
    garm.clear_requests()

    result = reconciler.reconcile([], prune=False)

    assert garm.writes() == []
    assert {s.name for s in result.live} == {"gone-0000aaaa"}
    assert garm.scaleset_by_name("gone-0000aaaa")["enabled"] is True


def test_orphan_busy_runner_is_left_unless_stale(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    garm.add_scaleset("gone-0000aaaa", org=ORG)
    busy = garm.add_instance("gone-0000aaaa")["name"]
    garm.mark_busy(busy)
    queued = garm.add_instance("gone-0000aaaa")["name"]
    with garm.state.lock:
        garm.state.set_job(garm.state.instances[queued], "queued")
    reconciler.reconcile([])
    assert calls(garm, "DELETE", r"/instances/.*") == []
    assert "gone-0000aaaa" in names(garm)

    stale = garm.now - MAX_JOB_RUNTIME - timedelta(minutes=1)
    for name in (busy, queued):
        inst = garm.state.instances[name]
        inst.updated_at = stale
        assert inst.job is not None
        inst.job["updated_at"] = stale
    garm.clear_requests()
    reconciler.reconcile([])
    assert sorted(r.path for r in calls(garm, "DELETE", r"/instances/.*")) == sorted(
        [f"/instances/{busy}", f"/instances/{queued}"]
    )


def test_draining_orphan_is_disabled_once_not_on_every_pass(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    garm.add_scaleset("gone-0000aaaa", org=ORG, min_idle_runners=1)
    orphan_id = row(garm, "gone-0000aaaa").id
    busy = garm.add_instance("gone-0000aaaa")["name"]
    garm.mark_busy(busy)
    reconciler.reconcile([])
    assert calls(garm, "PUT", rf"/scalesets/{orphan_id}") != []

    garm.clear_requests()
    again = reconciler.reconcile([])

    assert garm.writes() == []
    assert {s.name for s in again.live} == {"gone-0000aaaa"}


def test_active_runner_without_a_job_is_left(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    # Scale-set runners can report "active" before GARM has recorded their job.
    garm.add_scaleset("gone-0000aaaa", org=ORG)
    garm.add_instance("gone-0000aaaa", "running", "active")
    reconciler.reconcile([])
    assert calls(garm, "DELETE", r"/instances/.*") == []
    assert "gone-0000aaaa" in names(garm)


def test_go_zero_timestamps_never_read_as_expired(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    # Go always sends a time.Time; an unset one is year 1, which is unknown, not ancient.
    zero = datetime(1, 1, 1, tzinfo=UTC)
    garm.add_scaleset("gone-0000aaaa", org=ORG)
    busy = garm.add_instance("gone-0000aaaa", "running", "active", updated_at=zero)["name"]
    queued = garm.add_instance("gone-0000aaaa")["name"]
    with garm.state.lock:
        garm.state.set_job(garm.state.instances[queued], "in_progress")
        job = garm.state.instances[queued].job
        assert job is not None
        job["updated_at"] = zero
    reconciler.reconcile([])
    assert calls(garm, "DELETE", r"/instances/.*") == []
    assert {i["name"] for i in garm.instances("gone-0000aaaa")} == {busy, queued}


def test_predecessor_with_zero_updated_at_is_never_past_its_deadline(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    changed, (idle, _busy, _booting) = _predecessor_with_runners(
        garm, reconciler, DRAIN_DEADLINE + timedelta(days=30)
    )
    with garm.state.lock:
        row = garm.state.scaleset_by_name(LIVE)
        assert row is not None
        row.updated_at = datetime(1, 1, 1, tzinfo=UTC)
    garm.clear_requests()
    reconciler.reconcile([changed])
    assert calls(garm, "DELETE", r"/instances/.*") == []
    assert garm.instance(idle) is not None


def test_runner_in_undeletable_status_is_left_in_place(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    garm.add_scaleset("gone-0000aaaa", org=ORG)
    garm.add_instance("gone-0000aaaa", "creating", "pending")
    reconciler.reconcile([])
    assert calls(garm, "DELETE", r"/instances/.*") == []
    assert calls(garm, "DELETE", r"/scalesets/\d+") == []


def test_stuck_pending_delete_with_provider_fault_is_forced(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    garm.add_scaleset("gone-0000aaaa", org=ORG)
    stuck = garm.add_instance("gone-0000aaaa", "pending_delete", "terminated")["name"]
    plain = garm.add_instance("gone-0000aaaa", "pending_delete", "terminated")["name"]
    garm.refuse_provider("DeleteInstance", "failed to run command: failed to delete server")
    garm.tick()  # the provider refuses the deletes: GARM records a fault on each
    garm.state.instances[plain].provider_fault = None
    forced = garm.add_instance("gone-0000aaaa", "pending_force_delete", "terminated")["name"]
    garm.clear_requests()

    reconciler.reconcile([])

    force_by_runner = {
        r.path.removeprefix("/instances/"): r.query["forceRemove"]
        for r in calls(garm, "DELETE", r"/instances/.*")
    }
    assert force_by_runner == {stuck: "true", forced: "true", plain: "false"}


def test_github_unauthorized_runner_delete_is_retried_with_bypass(
    garm: GarmEmulator, reconciler: ScalesetReconciler, caplog: pytest.LogCaptureFixture
) -> None:
    garm.add_scaleset("gone-0000aaaa", org=ORG)
    runner = garm.add_instance("gone-0000aaaa")["name"]
    garm.set_github_unauthorized(runner)
    with caplog.at_level(logging.WARNING):
        reconciler.reconcile([])
    queries = [r.query for r in calls(garm, "DELETE", rf"/instances/{runner}")]
    assert queries == [
        {"forceRemove": "false", "bypassGHUnauthorized": "false"},
        {"forceRemove": "false", "bypassGHUnauthorized": "true"},
    ]
    assert garm.instance(runner)["status"] == "pending_delete"
    assert any("GitHub" in r.getMessage() for r in caplog.records)


def test_runner_already_gone_is_fine(
    garm: GarmEmulator, reconciler: ScalesetReconciler, caplog: pytest.LogCaptureFixture
) -> None:
    garm.add_scaleset("gone-0000aaaa", org=ORG)
    runner = garm.add_instance("gone-0000aaaa")["name"]
    garm.fail_next("DELETE", rf"/instances/{runner}", 404)
    with caplog.at_level(logging.INFO):
        result = reconciler.reconcile([])
    assert {s.name for s in result.live} == {"gone-0000aaaa"}
    gone = [r for r in caplog.records if "already gone" in r.getMessage()]
    assert [r.levelno for r in gone] == [logging.INFO]
    assert not [
        r for r in caplog.records if r.levelno >= logging.WARNING and runner in r.getMessage()
    ]


def test_template_outlives_a_failed_scaleset_delete(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    garm.add_scaleset("gone-0000aaaa", org=ORG, template_id=_orphan_template(garm))
    garm.fail_next("DELETE", r"/scalesets/\d+", 500)
    result = reconciler.reconcile([])
    assert "gone-0000aaaa" in names(garm)
    assert calls(garm, "DELETE", r"/templates/\d+") == []
    assert garm.template_by_name("github_linux-gone-0000aaaa") is not None
    assert {s.name for s in result.live} == {"gone-0000aaaa"}

    reconciler.reconcile([])
    assert names(garm) == set()
    assert garm.template_by_name("github_linux-gone-0000aaaa") is None


def test_failed_template_delete_is_contained(
    garm: GarmEmulator, reconciler: ScalesetReconciler, caplog: pytest.LogCaptureFixture
) -> None:
    garm.add_scaleset("gone-0000aaaa", org=ORG, template_id=_orphan_template(garm))
    garm.fail_next("DELETE", r"/templates/\d+", 500)
    with caplog.at_level(logging.WARNING):
        result = reconciler.reconcile([])
    assert names(garm) == set()
    assert result.live == []
    assert garm.template_by_name("github_linux-gone-0000aaaa") is not None
    assert any("will retry" in r.getMessage() for r in caplog.records)


def test_failed_orphan_disable_defers_the_delete(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    garm.add_scaleset("gone-0000aaaa", org=ORG)
    garm.fail_next("PUT", r"/scalesets/\d+", 500)
    reconciler.reconcile([])
    assert calls(garm, "GET", r"/scalesets/\d+/instances") == []
    assert calls(garm, "DELETE", r"/scalesets/\d+") == []
    assert row(garm, "gone-0000aaaa").enabled is True


def test_nameless_scaleset_is_never_deleted(
    garm: GarmEmulator, reconciler: ScalesetReconciler, caplog: pytest.LogCaptureFixture
) -> None:
    garm.add_scaleset("", org=ORG)
    with caplog.at_level(logging.WARNING):
        result = reconciler.reconcile([])
    assert garm.writes() == []
    assert len(result.live) == 1
    assert any("without a name" in r.getMessage() for r in caplog.records)


# --- error policy -----------------------------------------------------------------------------


def test_per_spec_api_error_is_contained_and_reported(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    garm.add_scaleset("gone-0000aaaa", org=ORG)
    garm.fail_next("POST", r"/organizations/[^/]+/scalesets", 500)
    garm.fail_next("PUT", r"/scalesets/\d+", 400)
    garm.add_scaleset(target_scaleset_name("c", LABELS), org=ORG, labels=list(LABELS))
    result = reconciler.reconcile(
        [make_spec(name="a"), make_spec(name="b"), make_spec(name="c", image="other")]
    )
    # a: create failed (retried); b: created; c: update refused; the orphan is swept anyway.
    assert names(garm) == {target_scaleset_name("b", LABELS), target_scaleset_name("c", LABELS)}
    assert [str(n) for n in result.notices] == [
        "a: GARM failed on it (500); will retry",
        "c: GARM refused it (400)",
    ]
    assert {s.name for s in result.live} == names(garm)


def test_a_scaleset_moved_to_another_entity_is_replaced(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    garm.add_organization("elsewhere")
    garm.add_scaleset(LIVE, org="elsewhere", labels=list(LABELS), image="old")
    runner = garm.add_instance(LIVE)["name"]
    garm.mark_busy(runner)
    spec = make_spec()
    moved = placed_scaleset_name(spec)
    assert moved != LIVE and moved.startswith("my-scaleset-")
    # Pass 1: the replacement is created on the new entity; the old one is not updated.
    result = reconciler.reconcile([spec])
    assert names(garm) == {LIVE, moved}
    assert row(garm, moved).enabled is True
    assert row(garm, LIVE).image == "old"
    assert [p.phase for p in result.progress] == [Phase.CREATING_REPLACEMENT]
    # Pass 2: the old one is disabled; its busy runner stays until its job ends.
    result = reconciler.reconcile([spec])
    assert row(garm, LIVE).enabled is False
    assert garm.instance(runner) is not None
    assert [p.phase for p in result.progress] == [Phase.DRAINING]
    garm.finish_job(runner)
    garm.advance(CONSOLIDATION_INTERVAL)
    for _ in range(3):
        reconciler.reconcile([spec])
        garm.advance(timedelta(seconds=30))
    # Gone: and the label name does not come back while the moved generation lives.
    assert names(garm) == {moved}
    assert reconciler.reconcile([spec]).progress == []
    assert names(garm) == {moved}


def test_a_scaleset_moved_to_another_provider_is_replaced(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    # The configurator's leader unit was removed: its new leader names its own provider.
    garm.add_scaleset(LIVE, org=ORG, provider_name="garm-configurator-9", labels=list(LABELS))
    spec = make_spec()
    reconciler.reconcile([spec])
    reconciler.reconcile([spec])
    moved = placed_scaleset_name(spec)
    assert row(garm, moved).provider_name == PROVIDER
    assert row(garm, LIVE).enabled is False


def test_a_name_taken_by_a_foreign_scaleset_is_left_alone(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    spec = make_spec()
    garm.add_organization("elsewhere")
    # Someone made both names by hand on another entity: neither is the charm's to update.
    garm.add_scaleset(LIVE, org="elsewhere", labels=list(LABELS), image="old")
    garm.add_scaleset(placed_scaleset_name(spec), org="elsewhere", labels=list(LABELS))
    garm.clear_requests()
    result = reconciler.reconcile([spec])
    assert garm.writes() == []
    assert [str(n) for n in result.notices] == [
        f"my-scaleset: name {placed_scaleset_name(spec)} is taken on another provider or entity"
    ]


@pytest.mark.parametrize(("live_repo", "same"), [("Canonical/GARM", True), ("other/garm", False)])
def test_a_repository_scaleset_matches_on_owner_and_name(
    garm: GarmEmulator, reconciler: ScalesetReconciler, live_repo: str, same: bool
) -> None:
    garm.add_scaleset(LIVE, repo=live_repo, labels=list(LABELS), image="old")
    garm.add_repository(*REPO.split("/"))
    result = reconciler.reconcile([make_spec(entity_type="repository", entity_name=REPO)])
    if same:
        assert [r.method for r in garm.writes()] == ["PUT"]
        assert row(garm, LIVE).image == "ubuntu-24.04"
        assert result.notices == []
    else:
        # Another owner's repository of the same name is another entity: a replacement is
        # created on the spec's repository, and the live one is left as it is this pass.
        spec = make_spec(entity_type="repository", entity_name=REPO)
        assert [r.method for r in garm.writes()] == ["POST"]
        assert row(garm, placed_scaleset_name(spec)).enabled is True
        assert row(garm, LIVE).image == "old"
        assert result.notices == []


def test_connection_error_aborts_before_the_sweep(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    garm.add_scaleset("gone-0000aaaa", org=ORG)
    garm.drop_next("POST", r"/organizations/[^/]+/scalesets")
    with pytest.raises(GarmConnectionError):
        reconciler.reconcile([make_spec(name="a"), make_spec(name="b")])
    assert [r.method for r in garm.writes()] == ["POST"]
    assert row(garm, "gone-0000aaaa").enabled is True


def test_unauthorized_aborts_before_the_sweep(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    garm.add_scaleset("gone-0000aaaa", org=ORG)
    garm.add_instance("gone-0000aaaa")
    garm.fail_next("GET", "/organizations", 401)
    with pytest.raises(GarmUnauthorizedError):
        reconciler.reconcile([make_spec()])
    assert garm.writes() == []


@pytest.mark.parametrize("path", ["/providers", "/scalesets"])
def test_pass_start_listing_errors_propagate(
    garm: GarmEmulator, reconciler: ScalesetReconciler, path: str
) -> None:
    garm.add_scaleset("gone-0000aaaa", org=ORG)
    garm.fail_next("GET", path, 500)
    with pytest.raises(GarmApiError):
        reconciler.reconcile([make_spec()])
    assert garm.writes() == []


def test_connection_error_during_retirement_is_raised(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    spec = _running_generation(garm, reconciler)
    changed = replace(spec, labels=NEW_LABELS)
    reconciler.reconcile([changed])
    garm.drop_next("PUT", rf"/scalesets/{row(garm, LIVE).id}")
    with pytest.raises(GarmConnectionError):
        reconciler.reconcile([changed])


def test_unbuildable_spec_is_an_error_and_does_not_stop_others(
    garm: GarmEmulator, reconciler: ScalesetReconciler, caplog: pytest.LogCaptureFixture
) -> None:
    broken = make_spec(name="broken", max_runners="three")
    with caplog.at_level(logging.ERROR):
        reconciler.reconcile([broken, make_spec()])
    assert names(garm) == {LIVE}
    assert any(r.levelno == logging.ERROR and "broken" in r.getMessage() for r in caplog.records)


# --- gates and live ---------------------------------------------------------------------------


def test_provider_gate_protects_the_family(
    garm: GarmEmulator, reconciler: ScalesetReconciler, caplog: pytest.LogCaptureFixture
) -> None:
    garm.add_scaleset(LIVE, org=ORG, labels=list(LABELS), provider_name="cfg-old-0")
    with caplog.at_level(logging.WARNING):
        result = reconciler.reconcile([make_spec(provider_name="cfg-old-0")])
    assert garm.writes() == []
    assert names(garm) == {LIVE}
    assert {s.name for s in result.live} == {LIVE}
    assert any("cfg-old-0" in r.getMessage() for r in caplog.records)


def test_entity_gate_protects_the_family(
    garm: GarmEmulator, reconciler: ScalesetReconciler, caplog: pytest.LogCaptureFixture
) -> None:
    garm.add_scaleset(NEW_LIVE, org="elsewhere", labels=list(NEW_LABELS))
    spec = make_spec(entity_name="not-registered")
    with caplog.at_level(logging.WARNING):
        reconciler.reconcile(
            [spec, make_spec(name="r", entity_type="repository", entity_name="x/y")]
        )
    assert garm.writes() == []
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "not-registered" in messages
    assert "x/y" in messages


def test_live_is_observed_minus_deleted_plus_created(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    keep = target_scaleset_name("keep", LABELS)
    garm.add_scaleset(keep, org=ORG, labels=list(LABELS), provider_name="")
    garm.add_scaleset("gone-0000aaaa", org=ORG)
    result = reconciler.reconcile([make_spec(name="keep"), make_spec(name="new")])
    live = {s.name: s for s in result.live}
    assert set(live) == {keep, target_scaleset_name("new", LABELS)}
    assert live[keep].provider_name is None  # kept; the charm warns about it
    assert all(isinstance(s, ScaleSet) for s in result.live)


# --- scaleset-status action -------------------------------------------------------------------


def _listed(**fields: Any) -> ScaleSet:
    return ScaleSet.model_validate({"provider_name": PROVIDER, **fields})


def test_status_rows_cover_every_phase() -> None:
    desired = [
        make_spec(name="steady"),
        make_spec(name="my-scaleset", labels=NEW_LABELS),
        make_spec(name="new", labels=NEW_LABELS),
        make_spec(name="back"),
    ]
    scalesets = [
        _listed(id=1, name=target_scaleset_name("steady", LABELS), enabled=True),
        _listed(id=2, name=LIVE),  # disabled: no enabled key
        _listed(id=3, name=NEW_LIVE, enabled=True),
        _listed(id=4, name=THIRD_LIVE, enabled=True),
        _listed(id=5, name=target_scaleset_name("new", LABELS), enabled=True),
        _listed(id=6, name=target_scaleset_name("back", LABELS)),
        _listed(id=7, name=target_scaleset_name("back", NEW_LABELS), enabled=True),
        _listed(id=8, name="legacy", enabled=True),
    ]
    counts = {LIVE: 2, THIRD_LIVE: 0, "legacy": 1}
    rows = scaleset_status_rows(desired, scalesets, counts)
    phases = {(r.logical, r.scaleset): (r.phase, r.enabled) for r in rows}
    assert phases == {
        ("back", target_scaleset_name("back", LABELS)): ("re-enabling", False),
        ("back", target_scaleset_name("back", NEW_LABELS)): ("creating replacement", True),
        ("my-scaleset", LIVE): ("draining 2 runners", False),
        ("my-scaleset", THIRD_LIVE): ("retiring predecessor", True),
        ("my-scaleset", NEW_LIVE): ("active", True),
        ("new", target_scaleset_name("new", LABELS)): ("creating replacement", True),
        ("steady", target_scaleset_name("steady", LABELS)): ("active", True),
        ("-", "legacy"): ("orphaned", True),
    }
    assert rows[-1].scaleset == "legacy"
    assert [r.logical for r in rows[:-1]] == sorted(r.logical for r in rows[:-1])


def test_status_awaiting_deletion_and_unknown_counts() -> None:
    desired = [make_spec(labels=NEW_LABELS)]
    scalesets = [_listed(name=LIVE), _listed(name=NEW_LIVE, enabled=True)]
    (old, _new) = scaleset_status_rows(desired, scalesets, {LIVE: 0})
    assert old.phase == "awaiting deletion"
    (old, new) = scaleset_status_rows(desired, scalesets, {})
    assert old.phase == "draining ? runners"
    assert new.cells()[4] == "?"


HEADER = ("LOGICAL", "SCALESET", "ENABLED", "PHASE", "RUNNERS", "PROVIDER", "SCALING")


def test_status_table_is_fixed_width() -> None:
    desired = [make_spec()]
    scalesets = [_listed(name=LIVE, enabled=True), ScaleSet.model_validate({"name": "x"})]
    rows = scaleset_status_rows(desired, scalesets, {LIVE: 12, "x": 0})
    table = format_scaleset_table(rows).splitlines()
    assert table[0].split() == [*HEADER]
    assert table[1].split() == ["my-scaleset", LIVE, "true", "active", "12", PROVIDER, "ok"]
    assert table[2].split() == ["-", "x", "false", "orphaned", "0", "-", "ok"]
    starts = [
        line.index(word) for line, word in zip(table, ["ENABLED", "true", "false"], strict=True)
    ]
    assert len(set(starts)) == 1
    assert format_scaleset_table([]).split() == [*HEADER]


def test_status_rows_from_the_emulator_listing(
    garm: GarmEmulator, reconciler: ScalesetReconciler, client: GarmClient
) -> None:
    spec = _running_generation(garm, reconciler)
    changed = replace(spec, labels=NEW_LABELS)
    reconciler.reconcile([changed])
    reconciler.reconcile([changed])
    garm.clear_requests()
    listing = client.list_scalesets()
    counts = {s.name or "": len(client.list_scaleset_instances(s.id or 0)) for s in listing}
    rows = scaleset_status_rows([changed], listing, counts)
    assert [(r.scaleset, r.phase) for r in rows] == [
        (LIVE, "draining 1 runner"),
        (NEW_LIVE, "active"),
    ]
    assert garm.writes() == []


def test_organisation_looked_up_once_per_pass(
    garm: GarmEmulator, reconciler: ScalesetReconciler
) -> None:
    specs = [make_spec(name=f"set-{n}") for n in range(5)]
    reconciler.reconcile(specs)
    assert len(calls(garm, "GET", r"/organizations")) == 1
    assert len(names(garm)) == 5


def test_each_orphan_is_deleted_once_garm_settled_after_its_own_disable(
    garm: GarmEmulator, reconciler: ScalesetReconciler, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GARM stops a disabled scale set's listener in its own time; a delete that overtakes
    # that stop crashes GARM (reconcile.scalesets.sweep): each delete waits for the settle
    # after its own disable, while the next disable may run.
    for number in range(5):
        garm.add_scaleset(f"gone-{number}-0000aaaa", org=ORG)
    garm.clear_requests()
    waits: list[float] = []
    monkeypatch.setattr(sweep, "DISABLE_SETTLE", 3.0)
    monkeypatch.setattr(sweep.time, "sleep", waits.append)

    reconciler.reconcile([])

    order = [(r.method, r.path) for r in garm.writes() if re.fullmatch(r"/scalesets/\d+", r.path)]
    assert sorted(method for method, _ in order) == ["DELETE"] * 5 + ["PUT"] * 5
    for index, (method, path) in enumerate(order):
        if method == "DELETE":
            assert ("PUT", path) in order[:index]
    assert len(waits) == 5
    assert all(2.5 < wait <= 3.0 for wait in waits)
    assert names(garm) == set()


def test_no_settle_when_every_orphan_was_disabled_before(
    garm: GarmEmulator, reconciler: ScalesetReconciler, monkeypatch: pytest.MonkeyPatch
) -> None:
    garm.add_scaleset("gone-0000aaaa", org=ORG, enabled=False)
    waits: list[float] = []
    monkeypatch.setattr(sweep, "DISABLE_SETTLE", 3.0)
    monkeypatch.setattr(sweep.time, "sleep", waits.append)

    reconciler.reconcile([])

    assert waits == []
    assert names(garm) == set()


def test_a_scale_set_goes_as_soon_as_its_own_entity_is_done(
    garm: GarmEmulator, client: GarmClient
) -> None:
    # The entity step runs beside the scale sets (ADR 0015): a scale set waits for its own
    # entity's object only. The repository's object here is done only once the organisation's
    # scale set exists; waiting for every entity first would never get there.
    on_org = make_spec(name="on-org")
    on_repo = make_spec(name="on-repo", entity_type="repository", entity_name=REPO)
    waited: list[EntityKey] = []
    settled: list[bool] = []
    started: list[bool] = []

    class Entities:
        def created(self, key: EntityKey) -> str | None:
            waited.append(key)
            if key == on_repo.entity_key:
                deadline = time.monotonic() + 5
                while not any(name.startswith("on-org-") for name in names(garm)):
                    assert time.monotonic() < deadline, "the organisation's scale set waited"
                    time.sleep(0.005)
            return None

        def settled(self) -> None:
            settled.append(len(names(garm)) == 2)

        def start(self) -> None:
            started.append(len(calls(garm, "GET", r"/scalesets")) == 1)

    reconciler = ScalesetReconciler(client, writes=Writes(size=2), entities=Entities())
    reconciler.reconcile([on_repo, on_org])

    assert {name.split("-")[1] for name in names(garm)} == {"org", "repo"}
    assert on_repo.entity_key in waited
    # The entity step started after the pass's reads; every create was done before the
    # deletions' wait.
    assert started == [True]
    assert settled == [True]
