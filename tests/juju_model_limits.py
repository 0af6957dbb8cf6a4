"""Juju's and Linux's size limits, applied to ``ops.testing``'s model backend.

``ops.testing`` accepts a secret of any size and a hook-tool argument of any length; Juju and
Linux do not. While :meth:`ModelLimits.applied` is active, the mocked backend refuses what a
real controller of :attr:`ModelLimits.juju_version` refuses, with its words:

- a secret value or a secret's content over the limit of that Juju (``secret-add``,
  ``secret-set``), as ``ModelError`` carrying the hook tool's ``ERROR`` line;
- a hook-tool argument over Linux's ``MAX_ARG_STRLEN`` (``action-set``, ``juju-log``,
  ``status-set``: ops passes these as command-line arguments), as the ``OSError`` (``E2BIG``)
  the process start raises. ``relation-set`` and ``secret-set`` pass their data through stdin
  and files, so they have no such limit.

Sources (also on ``docs/reference/limits.md``): Juju's ``core/secrets/createsecret.go``
(``maxValueSizeBytes``, ``maxContentSizeBytes`` and ``encodeBase64``): 8 KiB per value and
64 KiB per secret measured on the value as given until juju/juju#20287 (released in Juju 3.6.9,
20 Aug 2025, per the 3.6 release notes), then 1 MiB on the base64 form, lowered to 1,000,000
bytes by juju/juju#20314. ``MAX_ARG_STRLEN`` is 32 pages in Linux's ``include/uapi/linux/
binfmts.h``.

The charm driver applies them in every hook it runs (unit tests, simulation, bench, faults);
the Juju unit-agent stand-in's ``secret-add`` and ``secret-set`` refuse with
:func:`secret_refusal` (so the module imports only the stdlib at its top: ops, scenario and
yaml where they are used), its model's Juju by default :func:`oldest_juju`.
"""

from __future__ import annotations

import base64
import dataclasses
import errno
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHARMCRAFT = Path(__file__).resolve().parents[1] / "charmcraft.yaml"
MAX_ARG_STRLEN = 32 * 4096  # bytes, the terminating NUL included
FIRST_1MB_JUJU = (3, 6, 9)


@dataclasses.dataclass(frozen=True)
class SecretLimits:
    """What one Juju accepts in a secret (bytes), and whether it measures the base64 form."""

    value: int
    content: int
    on_base64: bool


BEFORE_3_6_9 = SecretLimits(value=8 * 1024, content=64 * 1024, on_base64=False)
FROM_3_6_9 = SecretLimits(value=1000 * 1000, content=1000 * 1000, on_base64=True)


def minimum_juju() -> str:
    """The charm's minimum Juju, from ``assumes`` in ``charmcraft.yaml``."""
    import yaml

    meta = yaml.safe_load(CHARMCRAFT.read_text(encoding="utf-8"))
    for entry in meta.get("assumes", ()):
        if isinstance(entry, str) and entry.startswith("juju >="):
            return entry.split(">=", 1)[1].strip()
    raise AssertionError("charmcraft.yaml assumes no minimum Juju")


def oldest_juju() -> str:
    """The oldest Juju release the charm assumes: its minimum as a release (``3.6`` is 3.6.0)."""
    parts = minimum_juju().split(".")
    return ".".join([*parts, *["0"] * (3 - len(parts))])


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("-")[0].split("."))


def secret_limits(juju_version: str) -> SecretLimits:
    """The secret limits of ``juju_version``."""
    if _version(juju_version) >= FIRST_1MB_JUJU:
        return FROM_3_6_9
    return BEFORE_3_6_9


def secret_refusal(content: Mapping[str, str], juju_version: str) -> str | None:
    """The ``ERROR`` line Juju's ``secret-add``/``secret-set`` answers, or None if it fits.

    ops hands each value over as ``key#file=<path>``: Juju first checks the file's size against
    the value limit, then (from 3.6.9 on the base64 form) each value and the sum.
    """
    limits = secret_limits(juju_version)
    total = 0
    for key, value in content.items():
        raw = len(value.encode("utf-8"))
        if raw > limits.value:
            return f'ERROR secret content in file "/tmp/secret-data/{key}" too large: {raw} bytes'
        size = len(base64.b64encode(value.encode("utf-8"))) if limits.on_base64 else raw
        if size > limits.value:
            return f'ERROR base64 encoded secret content for key "{key}" too large: {size} bytes'
        total += size
    if total > limits.content:
        prefix = "base64 encoded " if limits.on_base64 else ""
        return f"ERROR {prefix}secret content too large: {total} bytes"
    return None


def check_arguments(tool: str, arguments: list[str]) -> None:
    """Raise what starting ``tool`` with ``arguments`` raises under Linux (``E2BIG``)."""
    for argument in arguments:
        if len(argument.encode("utf-8")) + 1 > MAX_ARG_STRLEN:
            raise OSError(errno.E2BIG, os.strerror(errno.E2BIG), tool)


def _action_arguments(results: dict[str, Any]) -> list[str]:
    import ops

    flat = ops.model._format_action_result_dict(results)  # pyright: ignore[reportPrivateUsage]
    return [f"{key}={value}" for key, value in flat.items()]


def _second(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The message of ``juju_log(level, message)`` or ``status_set(status, message)``."""
    return str(kwargs.get("message", args[1] if len(args) > 1 else ""))


class ModelLimits:
    """Juju's secret limits of one Juju version and Linux's argument limit, on the backend."""

    def __init__(self, juju_version: str | None = None) -> None:
        """Apply the limits of ``juju_version`` (by default the charm's minimum Juju)."""
        self.juju_version = juju_version or minimum_juju()

    @contextmanager
    def applied(self) -> Iterator[None]:
        """Wrap the mocked backend's hook tools that Juju or Linux would refuse."""
        import ops
        from scenario import mocking

        backend_class = mocking._MockModelBackend  # pyright: ignore[reportPrivateUsage]
        wrappers: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
            "secret_add": self._secret_add,
            "secret_set": self._secret_set,
            "action_set": self._argument_tool("action-set", lambda a, k: _action_arguments(a[0])),
            # ops cuts a long log message into lines of MAX_LOG_LINE_LEN characters, one
            # juju-log each: a line of wide characters can still pass the limit in bytes.
            "juju_log": self._argument_tool(
                "juju-log", lambda a, k: list(ops.model._ModelBackend.log_split(_second(a, k)))
            ),
            "status_set": self._argument_tool("status-set", lambda a, k: [_second(a, k)]),
        }
        originals = {name: getattr(backend_class, name) for name in wrappers}
        for name, wrap in wrappers.items():
            setattr(backend_class, name, wrap(originals[name]))
        try:
            yield
        finally:
            for name, original in originals.items():
                setattr(backend_class, name, original)

    def _refuse_secret(self, content: Mapping[str, str] | None) -> None:
        import ops

        refusal = secret_refusal(content or {}, self.juju_version)
        if refusal is not None:
            raise ops.ModelError(refusal)

    def _secret_add(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def secret_add(backend: Any, content: dict[str, str], *args: Any, **kwargs: Any) -> Any:
            self._refuse_secret(content)
            return original(backend, content, *args, **kwargs)

        return secret_add

    def _secret_set(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def secret_set(backend: Any, *args: Any, **kwargs: Any) -> Any:
            self._refuse_secret(kwargs.get("content"))
            return original(backend, *args, **kwargs)

        return secret_set

    @staticmethod
    def _argument_tool(
        tool: str, arguments: Callable[[tuple[Any, ...], dict[str, Any]], list[str]]
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
            def limited(backend: Any, *args: Any, **kwargs: Any) -> Any:
                check_arguments(tool, [str(a) for a in arguments(args, kwargs)])
                return original(backend, *args, **kwargs)

            return limited

        return wrap
