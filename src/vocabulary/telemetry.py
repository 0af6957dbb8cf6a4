"""Trace spans for the charm's own work, through the OpenTelemetry API only (no Juju).

With the ``charm-tracing`` relation, ``ops.tracing`` installs the tracer provider and ships
the spans to Tempo; without it every span is a no-op. A span carries names and counts only:
never a request body, a relation databag or a secret.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from opentelemetry import trace

TRACER_NAME = "garm-charm"

_P = ParamSpec("_P")
_R = TypeVar("_R")


def tracer() -> trace.Tracer:
    """The charm's tracer (looked up each time, so a provider set later is used)."""
    return trace.get_tracer(TRACER_NAME)


def traced(name: str) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Run the decorated function inside a span called ``name``."""

    def decorate(func: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(func)
        def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            with tracer().start_as_current_span(name):
                return func(*args, **kwargs)

        return wrapper

    return decorate
