"""The two GARM backends of the conformance tests, behind the same recording proxy.

Real GARM comes from :mod:`tests.real_garm.harness`; the emulator is wrapped here so that both
are observed the same way: every call the code under test makes passes a
:class:`~tests.real_garm.proxy.RecordingProxy`, which keeps GARM's answer status too. A test
reads ``garm.requests`` / ``garm.writes()`` and the read views (``scalesets()``, ...) without
knowing which GARM answered.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Protocol, TypeVar

from tests.garm_emulator import GarmEmulator
from tests.garm_emulator.state import PROVIDER_EXECUTABLE
from tests.real_garm.proxy import API_PREFIX, RecordedCall, RecordingProxy, writes

EMULATOR = "emulator"
REAL = "real"
# How long real GARM gets for background work (its loops run every few seconds).
WAIT_TIMEOUT = 60.0
_T = TypeVar("_T")


class Settles(Protocol):
    """A backend whose background work can be let run for a moment."""

    name: str

    def settle(self) -> None:
        """Let GARM's background workers run for a moment."""
        ...


def wait_for(garm: Settles, what: str, probe: Callable[[], _T | None]) -> _T:
    """Let GARM work until ``probe`` returns something, within a bound; return that.

    The emulator's clock moves 30 s per round; real GARM gets real time, polled twice a second
    and at most :data:`WAIT_TIMEOUT`. ``what`` names the awaited state in the failure message.
    """
    deadline = time.monotonic() + WAIT_TIMEOUT
    while True:
        found = probe()
        if found is not None and found is not False:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{garm.name} GARM: timed out waiting for {what}")
        garm.settle()


@contextmanager
def proxied_emulator(providers: Sequence[str] = ()) -> Iterator[ProxiedEmulator]:
    """A started emulator with ``providers`` loaded, behind its proxy; both stopped after."""
    proxied = ProxiedEmulator(GarmEmulator(providers=list(providers)).start())
    try:
        yield proxied
    finally:
        proxied.stop()


class ProxiedEmulator:
    """The emulator with the real-GARM harness's surface."""

    name = EMULATOR
    # What the emulated GARM names as its provider in faults: the image's shim.
    provider_executable = PROVIDER_EXECUTABLE

    def __init__(self, emulator: GarmEmulator) -> None:
        """Put a recording proxy in front of a started emulator."""
        self.emulator = emulator
        self.proxy = RecordingProxy(emulator.port).start()
        self.admin: tuple[str, str] | None = None

    def stop(self) -> None:
        """Stop the proxy and the emulator."""
        self.proxy.stop()
        self.emulator.stop()

    @property
    def base_url(self) -> str:
        """The proxy's address."""
        return self.proxy.base_url

    @property
    def url(self) -> str:
        """The API base URL, through the proxy."""
        return self.proxy.base_url + API_PREFIX

    @property
    def requests(self) -> list[RecordedCall]:
        """Every call received through the proxy, oldest first."""
        return self.proxy.calls

    def writes(self) -> list[RecordedCall]:
        """The calls that change state, login excepted."""
        return writes(self.proxy.calls)

    def clear_requests(self) -> None:
        """Forget the recorded calls."""
        self.proxy.clear()

    def bootstrap(self, username: str, password: str, urls: bool = True) -> str:
        """First-run and controller URLs, directly in the emulator's state."""
        self.admin = (username, password)
        return self.emulator.bootstrap(username=username, password=password, urls=urls)

    def replan(self, environment: Mapping[str, str]) -> None:
        """Load the providers of a new service environment, as a restarted GARM would."""
        self.emulator.replan(environment)

    def restart(self) -> None:
        """A new GARM process with the providers it runs with (as real GARM's ``restart``)."""
        self.emulator.restart(self.emulator.providers)

    def settle(self) -> None:
        """Run GARM's background work: 30 s on the emulator's simulated clock."""
        self.emulator.advance(timedelta(seconds=30))

    def endpoints(self) -> list[dict[str, Any]]:
        """The GitHub endpoints as GARM lists them."""
        return self.emulator.endpoints()

    def credentials(self) -> list[dict[str, Any]]:
        """The credentials as GARM lists them."""
        return self.emulator.credentials()

    def organizations(self) -> list[dict[str, Any]]:
        """The organisations as GARM lists them."""
        return self.emulator.organizations()

    def repositories(self) -> list[dict[str, Any]]:
        """The repositories as GARM lists them."""
        return self.emulator.repositories()

    def scalesets(self) -> list[dict[str, Any]]:
        """The scale sets as GARM lists them."""
        return self.emulator.scalesets()

    def scaleset_by_name(self, name: str) -> dict[str, Any] | None:
        """The named scale set, or None."""
        return self.emulator.scaleset_by_name(name)

    def instances(self, scaleset_name: str | None = None) -> list[dict[str, Any]]:
        """Runners of one scale set, or of all."""
        return self.emulator.instances(scaleset_name)

    def providers(self) -> list[str]:
        """Names of the loaded providers."""
        return self.emulator.providers

    def controller(self) -> dict[str, Any]:
        """The controller information."""
        return self.emulator.controller()
