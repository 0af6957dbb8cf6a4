"""A clock for the code under test that moves only when that code sleeps, and its sleeps."""

from __future__ import annotations


class SleepClock:
    """Monotonic seconds, moved only by :meth:`sleep`; the sleeps are kept in order.

    Called, or through :meth:`monotonic`, it reads the time: pass it where the code takes a
    ``clock`` callable, or patch a module's ``time.monotonic`` with :meth:`monotonic`.
    """

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def monotonic(self) -> float:
        """The time now."""
        return self.now

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass, at once."""
        self.sleeps.append(seconds)
        self.now += seconds
