"""The packed charm's clock moved ahead, for a story that must let days pass (stdlib only).

Owns the one change the unit-agent stand-in can make to the charm's process: installed as
``sitecustomize.py`` in a directory put on ``PYTHONPATH`` by the agent's ``python3`` (only once
a story asked for it, :attr:`tests.juju_agent.agent.UnitAgent.clock_shift`), it has
``reconcile.scalesets.reconciler`` read ``datetime.now`` that many seconds
(``JUJU_STANDIN_CLOCK_SHIFT``) ahead: what :meth:`tests.simulate_backends.RealStoryGarm.
shift_charm_clock` does in the ``ops.testing`` driver's process.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from datetime import datetime, timedelta, tzinfo
from types import ModuleType
from typing import Any

SHIFT_ENV = "JUJU_STANDIN_CLOCK_SHIFT"
MODULE = "reconcile.scalesets.reconciler"


class _Shifted(datetime):
    shift = timedelta(0)

    @classmethod
    def now(cls, tz: tzinfo | None = None) -> datetime:  # type: ignore[override]
        return datetime.now(tz) + cls.shift


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original = loader.exec_module  # type: ignore[attr-defined]

        def exec_module(module: ModuleType) -> None:
            original(module)
            module.datetime = _Shifted  # type: ignore[attr-defined]

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Shift the reconciler's clock by ``JUJU_STANDIN_CLOCK_SHIFT`` seconds, if set."""
    seconds = os.environ.get(SHIFT_ENV)
    if seconds:
        _Shifted.shift = timedelta(seconds=float(seconds))
        sys.meta_path.insert(0, _Finder())


install()
