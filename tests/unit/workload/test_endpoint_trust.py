"""The CA bundles GARM's process trusts, before and after a pass (``workload.endpoint_trust``)."""

from __future__ import annotations

import base64
import logging
import textwrap
from pathlib import Path

import pytest

from tests.real_garm.tls_front import make_certificates
from vocabulary.desired_state import EndpointSpec
from workload.endpoint_trust import after_pass, before_pass, from_environment, to_environment

A, B = "a.example.com", "b.example.com"


@pytest.fixture(scope="module")
def cas(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    made: list[str] = []
    for name in ("one", "two"):
        directory: Path = tmp_path_factory.mktemp(name)
        made.append(make_certificates(directory)[0].read_text().strip())
    return made[0], made[1]


def spec(name: str, bundle: str = "") -> EndpointSpec:
    return EndpointSpec(name, f"https://{name}", bundle, source="cfg")


def reencoded(bundle: str) -> str:
    """The bundle as GARM gives it back: the same certificate, other line lengths."""
    body = "".join(bundle.splitlines()[1:-1])
    lines = textwrap.wrap(base64.b64encode(base64.b64decode(body)).decode(), 76)
    return "\n".join(["-----BEGIN CERTIFICATE-----", *lines, "-----END CERTIFICATE-----", ""])


def test_before_a_pass_published_bundles_win_and_departed_ones_stay(cas: tuple[str, str]):
    one, two = cas
    planned = {A: one, B: one}
    # A is published with another CA; B's configurator has left.
    assert before_pass(planned, [spec(A, two)]) == {A: two, B: one}
    # A published without a bundle: GARM's process no longer trusts one for it.
    assert before_pass(planned, [spec(A)]) == {B: one}
    assert before_pass({}, [spec(A, one), spec(B)]) == {A: one}


def test_after_a_pass_a_departed_bundle_leaves_with_its_endpoint(cas: tuple[str, str]):
    one, two = cas
    applied = {A: one, B: two}
    assert after_pass(applied, [spec(A, one)], {A: one, B: two}) is None
    assert after_pass(applied, [spec(A, one)], {A: one}) == {A: one}
    assert after_pass({A: one}, [], {}) == {}


def test_after_a_pass_an_endpoint_garm_holds_gets_its_bundle_back(cas: tuple[str, str]):
    one, _ = cas
    # A replaced pod starts with no plan; GARM still holds the departed configurator's endpoint.
    assert after_pass({}, [], {B: reencoded(one)}) == {B: reencoded(one)}


def test_a_bundle_garm_reencoded_is_the_same_bundle(cas: tuple[str, str]):
    one, two = cas
    assert reencoded(one) != one
    assert after_pass({B: one}, [], {B: reencoded(one)}) is None
    assert after_pass({B: one}, [], {B: reencoded(two)}) == {B: reencoded(two)}


def test_the_service_variables_round_trip_in_pieces(cas: tuple[str, str]):
    one, two = cas
    bundles = {A: one * 200, B: two}
    environment = to_environment(bundles)
    assert sorted(environment) == ["GARM_GITHUB_CA_BUNDLES", "GARM_GITHUB_CA_BUNDLES_1"]
    assert from_environment(environment) == bundles
    assert to_environment({}) == {}
    assert from_environment({}) == {}


def test_an_unreadable_plan_variable_counts_as_none(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING)
    assert from_environment({"GARM_GITHUB_CA_BUNDLES": "{"}) == {}
    assert "cannot be read" in caplog.text
