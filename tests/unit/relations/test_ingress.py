"""Ingress requirer: published request and external base URL."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import ops
import pytest
from ops import testing

from relations.ingress import (
    INGRESS_RELATION,
    PodAddress,
    external_base_url,
    publish_ingress_request,
)

META: dict[str, Any] = {
    "name": "garm",
    "requires": {
        "ingress": {"interface": "ingress", "limit": 1},
        "postgresql": {"interface": "postgresql_client", "limit": 1},
    },
}

FALLBACK = "http://garm.test-model.svc.cluster.local:8080"

RESULTS: list[str] = []


class IngressCharm(ops.CharmBase):
    def __init__(self, framework: ops.Framework):
        super().__init__(framework)
        self.pod = PodAddress(self)
        framework.observe(self.on[INGRESS_RELATION].relation_changed, self._handle)
        framework.observe(self.on[INGRESS_RELATION].relation_broken, self._handle)
        framework.observe(self.on.update_status, self._handle)

    def _handle(self, _: ops.EventBase) -> None:
        publish_ingress_request(self, self.pod)
        RESULTS.append(external_base_url(self))


@pytest.fixture(autouse=True)
def _clear_results():
    RESULTS.clear()


def _ctx() -> testing.Context[IngressCharm]:
    return testing.Context(IngressCharm, meta=META)


def _run(state: testing.State, relation: testing.Relation | None = None) -> testing.State:
    ctx = _ctx()
    event = (
        ctx.on.relation_changed(relation, remote_unit=0) if relation else ctx.on.update_status()
    )
    return ctx.run(event, state)


def _state(relation: testing.Relation, *, leader: bool, ip: str | None = "10.1.2.3"):
    addresses = [testing.BindAddress([testing.Address(ip)])] if ip else []
    return testing.State(
        leader=leader,
        model=testing.Model(name="test-model"),
        relations=[relation],
        networks={testing.Network(INGRESS_RELATION, bind_addresses=addresses)},
    )


def test_leader_publishes_app_and_unit_data():
    relation = testing.Relation(INGRESS_RELATION, interface="ingress")
    out = _run(_state(relation, leader=True), relation)

    published = out.get_relation(relation.id)
    assert {key: json.loads(value) for key, value in published.local_app_data.items()} == {
        "model": "test-model",
        "name": "garm",
        "port": 8080,
        "strip-prefix": False,
        "redirect-https": False,
        "scheme": "http",
    }
    # JSON encoding on the wire, not Python reprs.
    assert published.local_app_data["strip-prefix"] == "false"
    assert published.local_app_data["scheme"] == '"http"'
    assert published.local_unit_data["host"] == json.dumps(
        "garm-0.garm-endpoints.test-model.svc.cluster.local"
    )
    assert published.local_unit_data["ip"] == json.dumps("10.1.2.3")


def test_non_leader_writes_only_unit_data():
    relation = testing.Relation(INGRESS_RELATION, interface="ingress")
    out = _run(_state(relation, leader=False), relation)

    published = out.get_relation(relation.id)
    assert dict(published.local_app_data) == {}
    assert json.loads(published.local_unit_data["host"]) == (
        "garm-0.garm-endpoints.test-model.svc.cluster.local"
    )
    assert json.loads(published.local_unit_data["ip"]) == "10.1.2.3"


def test_unknown_pod_ip_is_published_as_null():
    relation = testing.Relation(INGRESS_RELATION, interface="ingress")
    out = _run(_state(relation, leader=True, ip=None), relation)

    assert out.get_relation(relation.id).local_unit_data["ip"] == "null"


def _with_ip(state: testing.State, ip: str | None) -> testing.State:
    addresses = [testing.BindAddress([testing.Address(ip)])] if ip else []
    network = testing.Network(INGRESS_RELATION, bind_addresses=addresses)
    return dataclasses.replace(state, networks={network})


def test_the_pod_address_is_read_once_a_pod():
    relation = testing.Relation(INGRESS_RELATION, interface="ingress")
    starting = _run(_state(relation, leader=True, ip=None), relation)
    first = _run(_with_ip(starting, "10.1.2.3"))
    # Juju would answer the same for the pod's life; another answer shows it was not asked.
    same_pod = _run(_with_ip(first, "10.9.9.9"))
    new_pod = _run(dataclasses.replace(_with_ip(first, "10.9.9.9"), stored_states=frozenset()))

    def ip(out: testing.State) -> str:
        return json.loads(out.get_relation(relation.id).local_unit_data["ip"])

    assert (ip(first), ip(same_pod), ip(new_pod)) == ("10.1.2.3", "10.1.2.3", "10.9.9.9")


def test_a_request_this_pod_wrote_is_not_read_back_until_the_relation_or_pod_changes():
    relation = testing.Relation(INGRESS_RELATION, interface="ingress")
    first = _run(_state(relation, leader=True), relation)
    # Only this unit writes these databags; a value it did not write shows it was not read back.
    written = first.get_relation(relation.id)
    edited = dataclasses.replace(written, local_unit_data={"host": '"x"', "ip": '"x"'})
    edited_state = dataclasses.replace(first, relations={edited})
    same_pod = _run(edited_state).get_relation(relation.id)
    new_pod = _run(dataclasses.replace(edited_state, stored_states=frozenset()))
    assert same_pod.local_unit_data["host"] == '"x"'
    assert new_pod.get_relation(relation.id).local_unit_data["host"] == json.dumps(
        "garm-0.garm-endpoints.test-model.svc.cluster.local"
    )


def test_publish_overwrites_stale_values():
    relation = testing.Relation(
        INGRESS_RELATION,
        interface="ingress",
        local_app_data={"port": "1234", "name": '"old"'},
        local_unit_data={"ip": '"10.9.9.9"'},
    )
    out = _run(_state(relation, leader=True), relation)

    published = out.get_relation(relation.id)
    assert published.local_app_data["port"] == "8080"
    assert published.local_app_data["name"] == '"garm"'
    assert published.local_unit_data["ip"] == '"10.1.2.3"'


def test_without_relation_nothing_is_written_and_fallback_is_used():
    out = _run(testing.State(leader=True, model=testing.Model(name="test-model")))

    assert out.relations == frozenset()
    assert RESULTS == [FALLBACK]


def test_relation_being_removed_falls_back():
    relation = testing.Relation(
        INGRESS_RELATION,
        interface="ingress",
        remote_app_data={"ingress": '{"url": "https://garm.example.com"}'},
    )
    ctx = _ctx()
    ctx.run(ctx.on.relation_broken(relation), _state(relation, leader=True))

    assert RESULTS == [FALLBACK]


@pytest.mark.parametrize(
    "answer",
    [
        '{"url": "https://garm.example.com/prefix"}',
        '{"url": "https://garm.example.com/prefix/"}',
        '{"url": "https://garm.example.com/prefix//"}',
    ],
)
def test_provider_url_is_the_base_without_trailing_slash(answer: str):
    relation = testing.Relation(
        INGRESS_RELATION, interface="ingress", remote_app_data={"ingress": answer}
    )
    _run(_state(relation, leader=True), relation)

    assert RESULTS == ["https://garm.example.com/prefix"]


def test_non_leader_reads_provider_url_too():
    relation = testing.Relation(
        INGRESS_RELATION,
        interface="ingress",
        remote_app_data={"ingress": '{"url": "http://10.0.0.5/garm"}'},
    )
    _run(_state(relation, leader=False), relation)

    assert RESULTS == ["http://10.0.0.5/garm"]


@pytest.mark.parametrize(
    "remote_app_data",
    [
        {},
        {"ingress": ""},
        {"ingress": "not json"},
        {"ingress": '"https://garm.example.com"'},
        {"ingress": "[]"},
        {"ingress": "{}"},
        {"ingress": '{"url": 42}'},
        {"ingress": '{"url": ""}'},
        {"ingress": '{"url": "garm.example.com"}'},
        {"ingress": '{"url": "ftp://garm.example.com"}'},
        {"ingress": '{"url": "https://"}'},
        {"ingress": json.dumps({"url": "https://garm.example.com/x\nInjected: 1"})},
        {"ingress": '{"url": "http://[::1"}'},
    ],
    ids=[
        "absent",
        "empty",
        "not-json",
        "json-string",
        "json-list",
        "no-url",
        "url-not-string",
        "url-empty",
        "no-scheme",
        "bad-scheme",
        "no-host",
        "newline",
        "unparsable",
    ],
)
def test_unusable_provider_answer_falls_back(remote_app_data: dict[str, str]):
    relation = testing.Relation(
        INGRESS_RELATION, interface="ingress", remote_app_data=remote_app_data
    )
    _run(_state(relation, leader=True), relation)

    assert RESULTS == [FALLBACK]
