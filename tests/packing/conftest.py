"""Pytest hooks of the packed-charm tests: the pods are collected first."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the tests marked ``pod`` to the front, keeping each group's order.

    A pod runs for minutes and the story's is the longest test of ``tox -e pack``: under
    ``--dist worksteal`` the pods start at once and the short tests behind them are taken by
    whichever worker is free, so none waits behind a pod and none delays one.
    """
    items.sort(key=lambda item: item.get_closest_marker("pod") is None)
