"""The provider record: parsing, merge, trim and how the charm stores it."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import ops
import pytest
from ops import testing

from garm import ScaleSet
from records import provider_record
from tests.charm_driver import (
    CharmDriver,
    base_state,
    configurator,
    planned_providers,
)
from tests.garm_emulator import GarmEmulator
from vocabulary.desired_state import ProviderConfig


def provider(unit: str, password: str = "record-test-password") -> ProviderConfig:  # noqa: S107
    return ProviderConfig(
        unit_name=unit,
        network="net",
        auth_url="https://keystone:5000/v3",
        username="user",
        password=password,
        project_name="proj",
        user_domain_name="Default",
        project_domain_name="Default",
        region_name="RegionOne",
    )


def live(name: str, provider_name: str | None) -> ScaleSet:
    return ScaleSet(name=name, provider_name=provider_name)


def test_canonical_json_is_sorted_and_compact():
    text = provider_record.canonical_json([provider("b-0"), provider("a-0")])
    data = json.loads(text)
    assert [p["unit_name"] for p in data] == ["a-0", "b-0"]
    assert " " not in text.replace("RegionOne", "")
    assert text == json.dumps(data, sort_keys=True, separators=(",", ":"))


def test_parse_round_trips_canonical_json():
    providers = (provider("a-0"), provider("b-1"))
    assert provider_record.parse_record(provider_record.canonical_json(providers)) == providers


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "{}",
        "[1]",
        json.dumps([{"unit_name": "a-0"}]),
        json.dumps([{**provider("a-0").as_dict(), "password": ""}]),
        json.dumps([{**provider("a-0").as_dict(), "network": 5}]),
    ],
)
def test_parse_refuses_malformed_records(text: str):
    with pytest.raises(provider_record.ProviderRecordError):
        provider_record.parse_record(text)


def test_merge_lets_relation_data_win():
    merged = provider_record.merge(
        [provider("a-0", "old"), provider("c-0")], [provider("a-0", "rotated"), provider("b-0")]
    )
    assert [p.unit_name for p in merged] == ["a-0", "b-0", "c-0"]
    assert merged[0].password == "rotated"


def test_trim_keeps_providers_named_by_relations_or_live_scalesets():
    merged = [provider("a-0"), provider("b-0"), provider("c-0")]
    kept = provider_record.trim(merged, [provider("a-0")], [live("x-12345678", "b-0")])
    assert [p.unit_name for p in kept] == ["a-0", "b-0"]


def test_trim_without_observation_keeps_everything():
    merged = (provider("a-0"), provider("b-0"))
    assert provider_record.trim(merged, [], None) == merged


def test_trim_warns_about_scalesets_without_provider(caplog: pytest.LogCaptureFixture):
    merged = [provider("a-0"), provider("b-0")]
    with caplog.at_level(logging.WARNING):
        kept = provider_record.trim(merged, [], [live("legacy", None), live("y", "b-0")])
    assert [p.unit_name for p in kept] == ["b-0"]
    assert "legacy" in caplog.text


def test_trim_to_empty_when_nothing_needs_a_provider():
    assert provider_record.trim([provider("a-0")], [], []) == ()


def test_a_missing_record_is_rebuilt_from_the_plan(caplog: pytest.LogCaptureFixture):
    planned = provider_record.canonical_json([provider("a-0"), provider("b-0")])
    rebuilt = provider_record.rebuild_missing(planned)
    assert [p.unit_name for p in rebuilt] == ["a-0", "b-0"]
    assert "rebuilt from the 2 provider(s) GARM runs with: a-0, b-0" in caplog.text


@pytest.mark.parametrize("planned", ["", "[]"], ids=["no-plan", "no-provider"])
def test_nothing_to_rebuild_says_nothing(planned: str, caplog: pytest.LogCaptureFixture):
    assert provider_record.rebuild_missing(planned) == ()
    assert caplog.text == ""


def test_an_unreadable_plan_rebuilds_nothing_and_says_so(caplog: pytest.LogCaptureFixture):
    assert provider_record.rebuild_missing('[{"unit_name": "a-0"}]') == ()
    assert "cannot be read (provider record holds an incomplete entry)" in caplog.text


# --- through the charm -----------------------------------------------------------------------


@pytest.fixture
def garm():
    with GarmEmulator(providers=[]) as emulator:
        yield emulator


def record_secret(state: testing.State) -> testing.Secret:
    return next(s for s in state.secrets if s.label == "garm-providers")


def record_units(state: testing.State) -> list[str]:
    secret = record_secret(state)
    content = secret.latest_content or secret.tracked_content
    return [p["unit_name"] for p in json.loads(content["providers"])]


def test_a_replaced_record_revision_is_removed_when_juju_says_it_is_unused(
    garm: GarmEmulator, tmp_path: Path
):
    driver = CharmDriver(garm, base_state(tmp_path))
    out = driver.run(driver.ctx.on.install())
    assert record_units(out) == []  # revision 1, written before anything is published
    out = driver.add_configurator(configurator("cfg-a", relation_id=1))
    assert record_units(out) == ["cfg-a-0"]  # revision 2
    # Revision 1 is the one just replaced: Juju announces it with secret-remove later.
    assert driver.ctx.removed_secret_revisions == []
    b = configurator("cfg-b", relation_id=2, labels="jammy", org="org-b", app_id="7")
    out = driver.add_configurator(b)
    assert record_units(out) == ["cfg-a-0", "cfg-b-0"]  # revision 3
    assert driver.ctx.removed_secret_revisions == []
    # Nothing tracks revision 1 any more: Juju says so, and the charm removes it.
    (record,) = [s for s in out.secrets if s.label == "garm-providers"]
    driver.run(driver.ctx.on.secret_remove(record, revision=1))
    assert driver.ctx.removed_secret_revisions == [1]


def test_unreadable_record_fails_the_hook(garm: GarmEmulator, tmp_path: Path):
    broken = testing.Secret(
        tracked_content={"providers": "{not json"}, label="garm-providers", owner="app"
    )
    driver = CharmDriver(garm, base_state(tmp_path, secrets={broken}))
    with pytest.raises(testing.errors.UncaughtCharmError, match="ProviderRecordError"):
        driver.run(driver.ctx.on.update_status())


def test_record_providers_published_after_pod_restart(garm: GarmEmulator, tmp_path: Path):
    stored = testing.Secret(
        tracked_content={"providers": provider_record.canonical_json([provider("gone-0")])},
        label="garm-providers",
        owner="app",
    )
    state = base_state(tmp_path, secrets={stored})
    driver = CharmDriver(garm, state)
    # No configurator and GARM unreachable: the pass cannot observe, so nothing is trimmed.
    driver.ready_timeout = 0.0
    garm.stop()
    out = driver.run(driver.ctx.on.pebble_ready(state.get_container("garm")))
    assert planned_providers(out) == ["gone-0"]
    assert record_secret(out).tracked_content == stored.tracked_content


def test_scaleset_without_provider_does_not_block_trim(garm: GarmEmulator, tmp_path: Path):
    stored = testing.Secret(
        tracked_content={"providers": provider_record.canonical_json([provider("gone-0")])},
        label="garm-providers",
        owner="app",
    )
    driver = CharmDriver(garm, base_state(tmp_path, secrets={stored}))
    garm.add_scaleset("legacy-row", org="canonical", provider_name="")
    out = driver.run(driver.ctx.on.install())
    content = record_secret(out).latest_content or record_secret(out).tracked_content
    assert json.loads(content["providers"]) == []
    assert planned_providers(out) == ["gone-0"]  # the trim reaches GARM at the next replan
    out = driver.run(driver.ctx.on.update_status())
    assert planned_providers(out) == []


# A configurator that has published nothing no longer blinds the pass: GARM is still observed
# (with no deletions), so only a failed sync is blind.
@pytest.mark.parametrize("blind", ["sync-failed"])
def test_pass_that_did_not_observe_garm_trims_nothing(
    garm: GarmEmulator, tmp_path: Path, blind: str
):
    stored = testing.Secret(
        tracked_content={"providers": provider_record.canonical_json([provider("gone-0")])},
        label="garm-providers",
        owner="app",
    )
    driver = CharmDriver(garm, base_state(tmp_path, secrets={stored}))
    cfg = configurator("cfg-a", relation_id=1)
    empty = testing.Relation("garm-configurator", remote_app_name="cfg-new", id=9)
    if blind == "sync-failed":
        garm.fail_next("GET", r"/scalesets", 500, count=10)
    else:
        driver.state = dataclasses.replace(driver.state, relations={empty})
    out = driver.add_configurator(cfg)
    assert record_units(out) == ["cfg-a-0", "gone-0"]
    assert "gone-0" in planned_providers(out)
    # Once GARM is observed again, nothing names gone-0 any more and it is trimmed.
    garm.clear_faults()
    driver.state = dataclasses.replace(
        driver.state, relations={r for r in driver.state.relations if r.id != 9}
    )
    out = driver.run(driver.ctx.on.update_status())
    assert record_units(out) == ["cfg-a-0"]


def with_plan_running(state: testing.State, *extra: ProviderConfig) -> testing.State:
    """``state`` whose plan runs GARM with ``extra`` providers beside its own."""
    container = state.get_container("garm")
    layer = container.layers["garm"].to_dict()
    environment = layer["services"]["garm"]["environment"]
    providers = provider_record.parse_record(environment["GARM_PROVIDERS_JSON"])
    environment["GARM_PROVIDERS_JSON"] = provider_record.canonical_json([*providers, *extra])
    layers = {"garm": ops.pebble.Layer(layer)}
    return dataclasses.replace(state, containers={dataclasses.replace(container, layers=layers)})


def test_plan_providers_never_join_an_existing_record(garm: GarmEmulator, tmp_path: Path):
    driver = CharmDriver(garm, base_state(tmp_path))
    driver.add_configurator(configurator("cfg-a", relation_id=1))
    driver.state = with_plan_running(driver.state, provider("cfg-x-0"))
    out = driver.run(driver.ctx.on.update_status())
    # The record is the charm's account: the plan is brought back to it.
    assert record_units(out) == ["cfg-a-0"]
    assert planned_providers(out) == ["cfg-a-0"]


def test_a_rebuilt_provider_nothing_names_is_trimmed(garm: GarmEmulator, tmp_path: Path):
    driver = CharmDriver(garm, base_state(tmp_path))
    driver.add_configurator(configurator("cfg-a", relation_id=1))
    state = with_plan_running(driver.state, provider("cfg-x-0"))
    driver.state = dataclasses.replace(
        state, secrets={s for s in state.secrets if s.label != "garm-providers"}
    )
    replans = driver.replans
    out = driver.run(driver.ctx.on.update_status())
    # Rebuilt with both, so GARM was not restarted; no relation and no live scale set names
    # cfg-x-0, so the trim drops it from the record, and the next replan from GARM.
    assert driver.replans == replans
    assert record_units(out) == ["cfg-a-0"]
    assert planned_providers(out) == ["cfg-a-0", "cfg-x-0"]
    out = driver.run(driver.ctx.on.update_status())
    assert planned_providers(out) == ["cfg-a-0"]
