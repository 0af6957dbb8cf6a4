"""The Juju adapter of the desired state (``CharmState.from_charm``) and the problems' summary."""

from __future__ import annotations

import ops
import ops.testing
import pytest

from charm_pass.charm_state import CharmState, describe_problems, with_tmate_relays
from records.configurator_record import ConfiguratorRecord
from tests.unit.configurator_data import (
    FULL,
    PASSWORD,
    PRIVATE_KEY,
    SCALESET,
    SSH,
    no_secret_in_logs,  # noqa: F401 - autouse
    warnings,
)
from vocabulary.desired_state import (
    InputProblem,
    ScalesetSpec,
)
from vocabulary.runner_options import RunnerConfig
from vocabulary.tmate_relay import DebugSshConnection, TmateRelay

# --- describe_problems ------------------------------------------------------------------------


def test_describe_problems() -> None:
    first = InputProblem("garm-configurator/1", "max_runner is not an integer")
    second = InputProblem("garm-configurator/2", "invalid keys: labels")
    third = InputProblem("cfg-b/0", "neither org nor repo is set")
    assert describe_problems([]) == ""
    assert describe_problems([first]) == (
        "invalid data from garm-configurator/1 (max_runner is not an integer)"
    )
    assert describe_problems([first, second, third]) == (
        "invalid data from garm-configurator/1 (max_runner is not an integer); +2 more"
    )


# --- Juju adapter through ops.testing ---------------------------------------------------------

CAPTURED: list[CharmState] = []

META = {
    "name": "garm",
    "requires": {
        "garm-configurator": {"interface": "garm_configurator_v0"},
        "debug-ssh": {"interface": "debug-ssh"},
        "ingress": {"interface": "ingress", "limit": 1},
    },
}


class StateProbeCharm(ops.CharmBase):
    """A minimal charm that records the CharmState it reads."""

    def __init__(self, framework: ops.Framework) -> None:
        super().__init__(framework)
        self.record = ConfiguratorRecord(self)
        framework.observe(self.on.update_status, self._on_update_status)

    def _on_update_status(self, _: ops.EventBase) -> None:
        CAPTURED.append(CharmState.from_charm(self, self.record.read()))


def run_probe(state: ops.testing.State) -> CharmState:
    CAPTURED.clear()
    ctx = ops.testing.Context(StateProbeCharm, meta=META)
    ctx.run(ctx.on.update_status(), state)
    (captured,) = CAPTURED
    return captured


def test_from_charm_reads_relations_and_secrets(caplog: pytest.LogCaptureFixture) -> None:
    password = ops.testing.Secret(tracked_content={"value": PASSWORD})
    key = ops.testing.Secret(tracked_content={"value": PRIVATE_KEY})
    leader_data = {
        **FULL,
        "openstack_password_secret_uri": password.id,
        "github_private_key_secret_uri": key.id,
    }
    follower_data = {**SCALESET, "image_id": "follower-image"}
    configurator = ops.testing.Relation(
        endpoint="garm-configurator",
        remote_app_name="garm-configurator",
        remote_units_data={1: follower_data, 0: leader_data},
    )
    tmate = ops.testing.Relation(
        endpoint="debug-ssh",
        remote_app_name="tmate",
        remote_units_data={0: {**SSH, "host": "z.example"}, 1: {**SSH, "host": "a.example"}},
    )
    state = run_probe(
        ops.testing.State(relations=[configurator, tmate], secrets=[password, key], leader=True)
    )

    assert state.configurator_relation_count == 1
    assert state.unpublished_relation_ids == ()
    assert state.problems == ()
    (provider,) = state.providers
    assert provider.unit_name == "garm-configurator-0"
    assert provider.password == PASSWORD
    (credential,) = state.credentials
    assert credential.key.pem() == PRIVATE_KEY
    assert [e.entity_name for e in state.entities] == ["canonical"]
    (spec,) = state.scalesets
    assert spec.image == "img-123"
    assert [c.host for c in state.debug_ssh] == ["a.example", "z.example"]
    assert warnings(caplog) == []


def test_from_charm_relations_without_data_are_unpublished() -> None:
    empty = ops.testing.Relation(
        endpoint="garm-configurator", remote_app_name="cfg-a", remote_units_data={}
    )
    juju_only = ops.testing.Relation(endpoint="garm-configurator", remote_app_name="cfg-b")
    published = ops.testing.Relation(
        endpoint="garm-configurator",
        remote_app_name="cfg-c",
        remote_units_data={0: {"name": "small"}},
    )
    state = run_probe(ops.testing.State(relations=[published, juju_only, empty]))
    assert state.configurator_relation_count == 3
    assert state.unpublished_relation_ids == tuple(sorted([empty.id, juju_only.id]))
    # The published unit has a name but nothing else: the spec is skipped with a problem.
    assert state.scalesets == ()
    assert [p.source for p in state.problems] == ["cfg-c/0"]


def test_from_charm_without_relations() -> None:
    state = run_probe(ops.testing.State(model=ops.testing.Model(name="garm-model")))
    in_cluster = "http://garm.garm-model.svc.cluster.local:8080"
    assert state == CharmState((), (), (), (), (), 0, (), (), external_url=in_cluster)


def test_from_charm_unreadable_secrets_are_named(caplog: pytest.LogCaptureFixture) -> None:
    no_value = ops.testing.Secret(tracked_content={"other": PRIVATE_KEY})
    data = {
        **FULL,
        "openstack_password_secret_uri": "secret:cvh7kchv0000000000missing",
        "github_private_key_secret_uri": no_value.id,
    }
    configurator = ops.testing.Relation(
        endpoint="garm-configurator",
        remote_app_name="garm-configurator",
        remote_units_data={0: data},
    )
    state = run_probe(ops.testing.State(relations=[configurator], secrets=[no_value]))

    assert state.providers == ()
    assert state.credentials == ()
    assert state.scalesets == ()
    assert state.held.scalesets == {"small"}
    assert state.prune  # what is held is known by name: the other configurators go on
    lines = warnings(caplog)
    assert any("secret:cvh7kchv0000000000missing" in w for w in lines)
    assert any(no_value.id in w and "value" in w for w in lines)
    assert {p.reason for p in state.problems} == {
        "provider fields missing: password",
        "GitHub private key secret is unreadable",
    }


def test_from_charm_collects_debug_ssh_problems() -> None:
    tmate = ops.testing.Relation(
        endpoint="debug-ssh",
        remote_app_name="tmate",
        remote_units_data={0: {**SSH, "port": "70000"}},
    )
    state = run_probe(ops.testing.State(relations=[tmate]))
    assert state.debug_ssh == ()
    assert state.problems == (InputProblem("tmate/0", "debug-ssh port is not in 1..65535"),)
    assert state.configurator_relation_count == 0


# --- the tmate relay --------------------------------------------------------------------------


def _spec(name: str, source: str, proxy: str = "") -> ScalesetSpec:
    return ScalesetSpec(
        name=name,
        provider_name=f"{source}-0",
        image="noble",
        flavor="small",
        os_arch="amd64",
        min_idle_runners=0,
        max_runners=1,
        entity_type="organization",
        entity_name="canonical",
        runner_config=RunnerConfig(runner_http_proxy=proxy),
        source=source,
    )


TMATE_SERVER = DebugSshConnection("tmate.example", 22, "r", "e", unit_name="tmate/0")


def test_tmate_relays_go_to_scale_sets_with_a_proxy_and_refusals_once_per_configurator(
    caplog: pytest.LogCaptureFixture,
) -> None:
    specs = [
        _spec("a", "cfg-a", "http://squid:3128"),
        _spec("b", "cfg-b"),
        _spec("c1", "cfg-c", "https://user:hunter2@squid:3128"),
        _spec("c2", "cfg-c", "https://user:hunter2@squid:3128"),
    ]
    relayed, problems = with_tmate_relays(specs, TMATE_SERVER)
    assert [s.tmate_relay is not None for s in relayed] == [True, False, False, False]
    assert relayed[0].tmate_relay == TmateRelay.through("http://squid:3128", TMATE_SERVER)
    assert relayed[1:] == tuple(specs[1:])
    reason = "runner_http_proxy cannot carry the tmate relay: not an http:// proxy"
    assert problems == (InputProblem("cfg-c", reason),)
    assert warnings(caplog) == [
        f"no tmate relay ({reason}, from cfg-c): runners are told the tmate server's own address"
    ]
    assert "hunter2" not in caplog.text


def test_a_tmate_host_the_relay_cannot_reach_names_the_tmate_unit() -> None:
    server = DebugSshConnection("tmate example", 22, "r", "e", unit_name="tmate/0")
    specs = [_spec("a", "cfg-a", "http://squid:3128"), _spec("b", "cfg-b", "squid:3128")]
    relayed, problems = with_tmate_relays(specs, server)
    assert relayed == tuple(specs)
    assert [(p.source, p.reason) for p in problems] == [
        (
            "tmate/0",
            "the tmate relay cannot reach the debug-ssh host: not a DNS name or IP address",
        )
    ]
