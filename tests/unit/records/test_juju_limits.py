"""Juju's and Linux's limits: the test model enforces them, and the charm fits them.

The limits and their sources (``docs/reference/limits.md``):

- Juju's ``core/secrets/createsecret.go``: before Juju 3.6.9, 8 KiB per secret value and 64 KiB
  per secret, measured on the value as the hook tool receives it; from 3.6.9 (juju/juju#20287,
  listed in the 3.6.9 release notes; 1,000,000 bytes since juju/juju#20314) on the base64 form;
- Linux's ``MAX_ARG_STRLEN`` (32 pages, ``include/uapi/linux/binfmts.h``): one argument of a
  process, hence of ``action-set``, ``juju-log`` and ``status-set``, at most 128 KiB with its
  NUL, else ``E2BIG``.
"""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import ops
import pytest
from ops import testing

from charm_pass.actions import split_result
from records import juju_limits, provider_record
from tests.charm_driver import (
    CharmDriver,
    base_state,
    configurator,
    planned_providers,
    record_secrets,
    recorded_providers,
)
from tests.garm_emulator import GarmEmulator
from tests.juju_model_limits import (
    MAX_ARG_STRLEN,
    ModelLimits,
    check_arguments,
    minimum_juju,
    secret_refusal,
)
from tests.limits_sweep import deploy
from vocabulary.desired_state import ProviderConfig

OLD, NEW = "3.4", "3.6.9"


# --- the limits the test model enforces ------------------------------------------------------


def test_before_3_6_9_a_value_over_8_kib_is_refused_as_given():
    assert secret_refusal({"value": "x" * 8192}, OLD) is None
    # Measured on the value ops writes to the file, not its base64 form (10,924 bytes).
    assert secret_refusal({"value": "\u00e9" * 4096}, OLD) is None
    refusal = secret_refusal({"value": "x" * 8193}, OLD)
    assert refusal == 'ERROR secret content in file "/tmp/secret-data/value" too large: 8193 bytes'


def test_before_3_6_9_a_secret_over_64_kib_is_refused():
    eight = {f"key-{n}": "x" * 8192 for n in range(8)}
    assert secret_refusal(eight, OLD) is None
    assert secret_refusal({**eight, "key-8": "x"}, OLD) == (
        "ERROR secret content too large: 65537 bytes"
    )


def test_from_3_6_9_values_and_content_are_measured_in_base64_against_1_mb():
    # 750,000 bytes are 1,000,000 in base64; three more bytes are four more.
    assert secret_refusal({"value": "x" * 750_000}, NEW) is None
    assert secret_refusal({"value": "x" * 750_003}, NEW) == (
        'ERROR base64 encoded secret content for key "value" too large: 1000004 bytes'
    )
    assert secret_refusal({"one": "x" * 400_000, "two": "x" * 400_000}, NEW) == (
        "ERROR base64 encoded secret content too large: 1066672 bytes"
    )
    assert secret_refusal({"value": "x" * 8193}, NEW) is None


def test_an_argument_over_max_arg_strlen_is_refused_with_e2big():
    assert MAX_ARG_STRLEN == 128 * 1024 == juju_limits.MAX_ARG_STRLEN
    check_arguments("action-set", ["x" * (MAX_ARG_STRLEN - 1)])  # the NUL makes 128 KiB
    with pytest.raises(OSError, match="Argument list too long") as caught:
        check_arguments("action-set", ["x" * MAX_ARG_STRLEN])
    assert caught.value.errno == errno.E2BIG


def test_the_driver_deploys_on_the_charms_minimum_juju(tmp_path: Path):
    with GarmEmulator(providers=[]) as garm:
        driver = CharmDriver(garm, base_state(tmp_path))
    assert driver.ctx.juju_version == driver.limits.juju_version == minimum_juju()


class _Writer(ops.CharmBase):
    """Writes what the test's event asks, through ops as a charm would."""

    size = 0

    def __init__(self, framework: ops.Framework) -> None:
        super().__init__(framework)
        framework.observe(self.on.install, self._secret)
        framework.observe(self.on.update_status, self._status)
        framework.observe(self.on.config_changed, self._log)
        framework.observe(self.on["report"].action, self._action)

    def _secret(self, _: ops.EventBase) -> None:
        self.app.add_secret({"value": "x" * self.size})

    def _status(self, _: ops.EventBase) -> None:
        self.unit.status = ops.ActiveStatus("x" * self.size)

    def _log(self, _: ops.EventBase) -> None:
        logging.getLogger(__name__).warning("\u00e9" * self.size)

    def _action(self, event: ops.ActionEvent) -> None:
        event.set_results({"table": "x" * self.size})


def _run(event: str, size: int, juju_version: str = OLD) -> None:
    _Writer.size = size
    ctx = testing.Context(
        _Writer,
        meta={"name": "writer"},
        actions={"report": {}},
        juju_version=juju_version,
    )
    with ModelLimits(juju_version).applied():
        if event == "action":
            ctx.run(ctx.on.action("report"), testing.State(leader=True))
        else:
            ctx.run(getattr(ctx.on, event)(), testing.State(leader=True))


@pytest.mark.parametrize(
    ("event", "small", "large", "error"),
    [
        ("install", 8192, 8193, "secret content in file"),
        ("update_status", 100_000, 140_000, "Argument list too long"),
        ("action", 100_000, 140_000, "Argument list too long"),
        # ops cuts a log message into lines of 131,071 characters: in bytes, é is two.
        ("config_changed", 60_000, 70_000, "Argument list too long"),
    ],
)
def test_the_backend_refuses_through_ops(event: str, small: int, large: int, error: str):
    _run(event, small)
    with pytest.raises(testing.errors.UncaughtCharmError, match=error):
        _run(event, large)


# --- the charm fits them ---------------------------------------------------------------------


@pytest.mark.parametrize("count", [20, 200])
def test_deployments_converge_on_the_minimum_juju(tmp_path: Path, count: int):
    with GarmEmulator(providers=[]) as garm:
        driver = deploy(garm, tmp_path, count, minimum_juju())
        results = driver.run_action("scaleset-status")
    assert driver.state.unit_status == testing.ActiveStatus("")
    assert len(planned_providers(driver.state)) == count
    secrets = record_secrets(driver.state)
    assert len(secrets) > 1 if count == 200 else len(secrets) == 1
    assert all(secret_refusal(content, minimum_juju()) is None for content in secrets)
    assert results["count"] == count


def _provider(unit: str, password: str = "limits-test-password") -> ProviderConfig:  # noqa: S107
    return ProviderConfig(
        unit_name=unit,
        network=f"{unit}-net",
        auth_url="https://keystone.example:5000/v3",
        username=f"{unit}-user",
        password=password,
        project_name=f"{unit}_project",
        user_domain_name="Default",
        project_domain_name="Default",
        region_name="RegionOne",
    )


def test_a_single_value_record_is_read_and_relaid_keeping_every_provider(tmp_path: Path):
    # What a charm before the split wrote: one value of up to 8 KiB under "providers".
    old = [_provider(f"old-cfg-{n:02d}-0") for n in range(25)]
    text = provider_record.canonical_json(old)
    assert 4096 < len(text) <= 8192
    stored = testing.Secret(
        tracked_content={"providers": text}, label="garm-providers", owner="app"
    )
    with GarmEmulator(providers=[]) as garm:
        driver = CharmDriver(garm, base_state(tmp_path, secrets={stored}))
        driver.ready_timeout = 0.0
        garm.stop()  # GARM unreachable: nothing may be trimmed, everything must stay
        out = driver.run(driver.ctx.on.update_status())
    secrets = record_secrets(out)
    assert recorded_providers(out) == [p.unit_name for p in old]
    assert len(secrets[0]) == 2  # relaid into values of at most 4 KiB
    assert planned_providers(out) == [p.unit_name for p in old]


def test_a_provider_too_large_for_a_value_is_left_out_and_named(tmp_path: Path):
    big = configurator(
        "cfg-big", relation_id=2, org="org-big", extra={"openstack_network": "n" * 9000}
    )
    small = configurator("cfg-a", relation_id=1)
    state = base_state(
        tmp_path,
        relations={big.relation, small.relation},
        secrets={*big.secrets, *small.secrets},
    )
    with GarmEmulator(providers=[]) as garm:
        driver = CharmDriver(garm, state)
        out = driver.run(driver.ctx.on.install())
    assert planned_providers(out) == ["cfg-a-0"]
    assert isinstance(out.unit_status, testing.BlockedStatus)
    assert (
        "1 provider(s) left out of GARM (over 8,192 bytes each, Juju's limit on one secret value"
        " before 3.6.9),"
        " first cfg-big-0; 1 kept" in out.unit_status.message
    )


def test_past_the_environment_limit_garm_keeps_the_providers_it_has():
    # Providers of about 3 KiB (long passwords): 500 pass 1.5 MB of provider list.
    recorded = [_provider(f"b{n:03d}-0", "p" * 3000) for n in range(400)]
    newcomers = [_provider(f"a{n:03d}-0", "p" * 3000) for n in range(100)]
    merged = provider_record.merge(recorded, newcomers)
    admission = provider_record.admit(recorded, merged)
    # Every recorded provider stays, though the newcomers sort first; newcomers fill the rest.
    assert set(recorded) <= set(admission.providers)
    size = len(provider_record.canonical_json(admission.providers))
    assert juju_limits.PROVIDERS_ENV_BYTES - 3100 < size <= juju_limits.PROVIDERS_ENV_BYTES
    admitted = len(admission.providers) - 400
    assert admission.left_out == tuple(p.unit_name for p in newcomers[admitted:])
    assert "the list would pass 1,500,000 bytes, Linux's limit on GARM's environment" in (
        admission.notice()
    )
    assert admission.notice().endswith(f"; {len(admission.providers)} kept")
    # Every secret of the record still fits the oldest Juju.
    layout = provider_record.record_layout(admission.providers)
    assert all(secret_refusal(content, OLD) is None for content in layout)


def test_past_the_environment_limit_a_fresh_deployment_takes_what_fits():
    merged = [_provider(f"a{n:03d}-0", "p" * 3000) for n in range(500)]
    admission = provider_record.admit((), merged)
    assert admission.providers == tuple(merged[: len(admission.providers)])
    assert 450 < len(admission.providers) < 500


def test_a_long_table_is_cut_between_rows_within_the_argument_limit():
    table = "\n".join(["HEADER"] + [f"row-{n:05d} " + "x" * 90 for n in range(3000)])
    results = split_result("scalesets", table)
    parts = results["scalesets-parts"]
    assert isinstance(parts, int) and parts > 2
    pieces = [results["scalesets"], *(results[f"scalesets-{n}"] for n in range(2, parts + 1))]
    assert "\n".join(str(p) for p in pieces) == table
    check_arguments("action-set", [f"scalesets-{n}={p}" for n, p in enumerate(pieces)])
    assert split_result("scalesets", "HEADER\nrow") == {"scalesets": "HEADER\nrow"}


def test_scaleset_status_answers_with_2000_scale_sets(tmp_path: Path):
    cfg = configurator("cfg-a", relation_id=1)
    state = base_state(tmp_path, relations={cfg.relation}, secrets=set(cfg.secrets))
    with GarmEmulator(providers=[]) as garm:
        driver = CharmDriver(garm, state)
        driver.run(driver.ctx.on.install())
        for number in range(2000):
            garm.add_scaleset(
                f"legacy-scaleset-{number:04d}-of-a-long-gone-configurator",
                org="canonical",
                provider_name="cfg-a-0",
            )
        results = driver.run_action("scaleset-status")
    assert results["count"] == 2001
    assert results["scalesets-parts"] >= 2
    assert results["scalesets"].startswith("LOGICAL")


def _labels(state: testing.State) -> list[str]:
    return sorted(s.label for s in state.secrets if s.label and s.label.startswith("garm-"))


def test_a_record_that_shrinks_removes_the_secrets_it_no_longer_needs(tmp_path: Path):
    departed = [_provider(f"gone-{n:03d}-0") for n in range(200)]
    layout = provider_record.record_layout(departed)
    assert len(layout) == 2
    stored = {
        testing.Secret(tracked_content=content, label=provider_record.record_label(i), owner="app")
        for i, content in enumerate(layout)
    }
    cfg = configurator("cfg-a", relation_id=1)
    state = base_state(tmp_path, relations={cfg.relation}, secrets={*stored, *cfg.secrets})
    with GarmEmulator(providers=[]) as garm:
        driver = CharmDriver(garm, state)
        out = driver.run(driver.ctx.on.install())
    # No live scale set names a departed provider: trimmed, and garm-providers-2 removed.
    assert recorded_providers(out) == ["cfg-a-0"]
    assert "garm-providers-2" not in _labels(out)


def test_a_record_that_grows_reuses_a_continuation_left_behind(tmp_path: Path):
    cfgs = [configurator(f"cfg-{n:03d}", relation_id=n + 1, org=f"org-{n}") for n in range(200)]
    # A record of one value, and a continuation whose removal failed in an earlier hook.
    stored = {
        testing.Secret(tracked_content={"providers": "[]"}, label="garm-providers", owner="app"),
        testing.Secret(tracked_content={"providers": "[]"}, label="garm-providers-2", owner="app"),
    }
    state = base_state(
        tmp_path,
        relations={c.relation for c in cfgs},
        secrets={*stored, *(s for c in cfgs for s in c.secrets)},
    )
    with GarmEmulator(providers=[]) as garm:
        driver = CharmDriver(garm, state)
        driver.run(driver.ctx.on.install())
        driver.continue_passes()  # the unit's record of 200 configurators fills in 10 hooks
        out = driver.state
    assert recorded_providers(out) == sorted(f"cfg-{n:03d}-0" for n in range(200))
    labels = _labels(out)
    assert labels.count("garm-providers-2") == 1
    assert len(record_secrets(out)) >= 2


def test_a_record_missing_one_of_its_secrets_fails_the_hook(tmp_path: Path):
    layout = provider_record.record_layout([_provider(f"gone-{n:03d}-0") for n in range(200)])
    assert layout[0]["secrets"] == "2"
    first = testing.Secret(tracked_content=layout[0], label="garm-providers", owner="app")
    with GarmEmulator(providers=[]) as garm:
        driver = CharmDriver(garm, base_state(tmp_path, secrets={first}))
        # Publishing half a record would restart GARM without the other half's providers.
        with pytest.raises(testing.errors.UncaughtCharmError, match="misses its secret 2"):
            driver.run(driver.ctx.on.update_status())
