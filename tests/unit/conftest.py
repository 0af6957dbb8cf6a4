"""Shared pytest fixtures for the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from garm import GarmClient
from reconcile.scalesets import sweep, worker_starts
from tests.garm_emulator import DEFAULT_ADMIN_PASSWORD, GarmEmulator
from tests.log_secrets import register_secret
from tests.sleep_clock import SleepClock

EMULATOR_PROVIDERS = ["garm-configurator-0"]
register_secret(DEFAULT_ADMIN_PASSWORD)
ADMIN_USERNAME = "admin"
ADMIN_PASSWORD = DEFAULT_ADMIN_PASSWORD


@pytest.fixture
def emulator() -> Iterator[GarmEmulator]:
    """A started, fresh GARM emulator (not initialised) with one provider."""
    garm = GarmEmulator(providers=list(EMULATOR_PROVIDERS))
    garm.start()
    try:
        yield garm
    finally:
        garm.stop()


@pytest.fixture
def garm() -> Iterator[GarmEmulator]:
    """A started GARM emulator with no provider loaded: the charm's replans load them."""
    emulator = GarmEmulator(providers=[])
    emulator.start()
    try:
        yield emulator
    finally:
        emulator.stop()


@pytest.fixture
def ready_emulator(emulator: GarmEmulator) -> GarmEmulator:
    """The emulator after first-run as admin, with the controller URLs set."""
    emulator.bootstrap(username=ADMIN_USERNAME, password=ADMIN_PASSWORD, urls=True)
    return emulator


@pytest.fixture
def client(ready_emulator: GarmEmulator) -> Iterator[GarmClient]:
    """The charm's GARM client, logged in to the bootstrapped emulator."""
    with GarmClient(ready_emulator.url) as garm_client:
        garm_client.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        yield garm_client


@pytest.fixture(autouse=True)
def no_disable_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The emulator runs no message listener, so nothing races a delete after a disable.

    The settle is real GARM's (``reconcile.scalesets.sweep``); the real-GARM tests keep it.
    """
    monkeypatch.setattr(sweep, "DISABLE_SETTLE", 0.0)


@pytest.fixture
def gate_clock(monkeypatch: pytest.MonkeyPatch) -> SleepClock:
    """The worker gate's sleeps and clock (``reconcile.scalesets.worker_starts``), one fake."""
    fake = SleepClock()
    monkeypatch.setattr(worker_starts, "_pause", fake.sleep)
    monkeypatch.setattr(worker_starts, "_monotonic", fake)
    return fake
