"""The one containment policy (ADR 0009), shown for every kind of object the charm writes.

Each case injects one fault on one object's call in the emulator. An outage, a 401, one of
GARM's 409 gates (``init_required``: GARM on PostgreSQL answers it while its database server
restarts) or an answer that is not GARM's shape ends the pass (the error leaves the
reconciler); another 4xx is that object's refusal and a 5xx its failure, both contained: the
pass goes on, and an object the status reports gets a BLOCKED (4xx) or WAITING "will retry"
(5xx) notice.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from garm import (
    GarmClient,
    GarmConnectionError,
    GarmNotReadyError,
    GarmProtocolError,
    GarmUnauthorizedError,
)
from reconcile.charmed_template import CharmedTemplateError, apply_charmed_template
from reconcile.credentials import CredentialReconciler
from reconcile.entities import EntityReconciler
from reconcile.scalesets.reconciler import ScalesetReconciler
from tests.garm_emulator import GarmEmulator
from tests.unit.reconcile.scalesets.test_reconciler import (
    CREDENTIAL,
    ORG,
    _orphan_template,  # pyright: ignore[reportPrivateUsage]
    make_spec,
)
from tests.unit.reconcile.test_credentials import _spec as credential_spec  # pyright: ignore
from vocabulary.desired_state import EntitySpec
from vocabulary.notices import Notice, Severity


@pytest.fixture
def garm(ready_emulator: GarmEmulator, client: GarmClient) -> GarmEmulator:
    """The emulator with a managed credential and an organisation using it."""
    CredentialReconciler(client).ensure([credential_spec()])
    client.create_organization(ORG, CREDENTIAL, "0" * 64)
    return ready_emulator


@pytest.fixture
def reconciler(garm: GarmEmulator, client: GarmClient) -> ScalesetReconciler:
    return ScalesetReconciler(client, clock=lambda: garm.now)


Act = Callable[[GarmEmulator, GarmClient, ScalesetReconciler], list[Notice]]


@dataclass(frozen=True)
class Case:
    method: str
    path: str
    act: Act
    subject: str | None  # None: the object has no notice of its own (retried, logged)


def _credentials(_: GarmEmulator, client: GarmClient, __: ScalesetReconciler) -> list[Notice]:
    reconciler = CredentialReconciler(client)
    reconciler.ensure([credential_spec(app_id=7)])
    return reconciler.notices


def _entities(_: GarmEmulator, client: GarmClient, __: ScalesetReconciler) -> list[Notice]:
    reconciler = EntityReconciler(client, CredentialReconciler(client).listed)
    reconciler.ensure([EntitySpec("organization", "org-new", CREDENTIAL, source="cfg")])
    return reconciler.notices


def _charmed_template(_: GarmEmulator, client: GarmClient, __: ScalesetReconciler) -> list[Notice]:
    # Contained: the charm waits with the error's words and leaves the scale sets untouched.
    with contextlib.suppress(CharmedTemplateError):
        apply_charmed_template(client, [])
    return []


def _scaleset(_: GarmEmulator, __: GarmClient, scalesets: ScalesetReconciler) -> list[Notice]:
    return scalesets.reconcile([make_spec()]).notices


def _orphan(with_template: bool = False, with_runner: bool = False) -> Act:
    def act(garm: GarmEmulator, _: GarmClient, scalesets: ScalesetReconciler) -> list[Notice]:
        template = _orphan_template(garm) if with_template else None
        garm.add_scaleset("gone-0000aaaa", org=ORG, template_id=template)
        if with_runner:
            garm.add_instance("gone-0000aaaa")
        return [n for n in scalesets.reconcile([]).notices if n.severity is not Severity.PROGRESS]

    return act


def _credential_deletion(
    garm: GarmEmulator, client: GarmClient, __: ScalesetReconciler
) -> list[Notice]:
    reconciler = CredentialReconciler(client)
    reconciler.ensure([credential_spec(app_id=8)])
    reconciler = CredentialReconciler(client)
    reconciler.prune([], {CREDENTIAL})
    return reconciler.notices


CASES = {
    "credentials": Case("POST", "/github/credentials", _credentials, None),
    "entities": Case("POST", "/organizations", _entities, "cfg"),
    "charmed-template": Case("POST", "/templates", _charmed_template, None),
    "scale-sets": Case("POST", r"/organizations/[^/]+/scalesets", _scaleset, "my-scaleset"),
    "custom-templates": Case("DELETE", r"/templates/\d+", _orphan(with_template=True), None),
    "runners": Case("DELETE", r"/instances/[^/]+", _orphan(with_runner=True), None),
    "deletions": Case("DELETE", r"/github/credentials/\d+", _credential_deletion, None),
}


def _faulted(garm: GarmEmulator, case: Case) -> bool:
    pattern = re.compile(case.path)
    return any(r.method == case.method and pattern.fullmatch(r.path) for r in garm.requests)


PASS_ENDING = {
    "outage": (GarmConnectionError, lambda g, m, p: g.drop_next(m, p)),
    "401": (GarmUnauthorizedError, lambda g, m, p: g.fail_next(m, p, 401)),
    # GARM's words while its PostgreSQL server is down (measured, tox -e faults).
    "init_required": (
        GarmNotReadyError,
        lambda g, m, p: g.fail_next(m, p, 409, error="init_required", details="Missing superuser"),
    ),
    "urls_required": (
        GarmNotReadyError,
        lambda g, m, p: g.fail_next(
            m,
            p,
            409,
            error="urls_required",
            details="Missing required URLs. Make sure you update the metadata and callback URLs",
        ),
    ),
    "wrong-shape": (GarmProtocolError, lambda g, m, p: g.garble_next(m, p)),
}


@pytest.mark.parametrize("fault", sorted(PASS_ENDING))
@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_pass_ending_failure_leaves_the_reconciler(
    garm: GarmEmulator,
    client: GarmClient,
    reconciler: ScalesetReconciler,
    kind: str,
    fault: str,
) -> None:
    case = CASES[kind]
    error, inject = PASS_ENDING[fault]
    if kind == "runners" and fault == "401":
        # Without the bypass GARM relays GitHub's refusal as a 401: both calls must say it.
        garm.fail_next(case.method, case.path, 401, count=2)
    else:
        inject(garm, case.method, case.path)
    with pytest.raises(error):
        case.act(garm, client, reconciler)
    assert _faulted(garm, case)


@pytest.mark.parametrize(
    ("status", "severity"), [(400, Severity.BLOCKED), (500, Severity.WAITING)]
)
@pytest.mark.parametrize("kind", sorted(CASES))
def test_one_objects_failure_is_contained(
    garm: GarmEmulator,
    client: GarmClient,
    reconciler: ScalesetReconciler,
    kind: str,
    status: int,
    severity: Severity,
) -> None:
    case = CASES[kind]
    garm.fail_next(case.method, case.path, status)
    notices = case.act(garm, client, reconciler)
    assert _faulted(garm, case), "the injected failure was never reached"
    if case.subject is None:
        return
    assert [(n.severity, n.subject) for n in notices] == [(severity, case.subject)]
    assert (f"({status}); will retry" in notices[0].text) is (severity is Severity.WAITING)


def test_a_refused_credential_needs_the_operator_whatever_the_status(
    garm: GarmEmulator,
    client: GarmClient,
    reconciler: ScalesetReconciler,
) -> None:
    # GARM answers a damaged App key with a 500: for credentials a 5xx is a refusal too.
    garm.fail_next("POST", "/github/credentials", 500)
    notices = _credentials(garm, client, reconciler)
    assert [n.severity for n in notices] == [Severity.BLOCKED]
