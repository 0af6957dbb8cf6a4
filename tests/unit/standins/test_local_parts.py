"""Where the tests look for real GARM and real Pebble: the variable, the cache path, or skip."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.local_parts import GARM, PEBBLE, LocalPart


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n", encoding="utf-8")
    path.chmod(0o755)
    return path


@pytest.fixture(params=[GARM, PEBBLE], ids=lambda part: part.title)
def part(request: pytest.FixtureRequest) -> LocalPart:
    return request.param


def test_variable_is_looked_at_first(part: LocalPart, tmp_path: Path) -> None:
    home = tmp_path / "home"
    _executable(home / ".cache" / "garm-charm" / "bin" / part.filename)
    named = _executable(tmp_path / "build" / part.filename)
    env = {"HOME": str(home), part.variable: str(named)}

    assert part.find(env) == named


def test_a_set_variable_naming_nothing_is_not_passed_over(part: LocalPart, tmp_path: Path) -> None:
    home = tmp_path / "home"
    _executable(home / ".cache" / "garm-charm" / "bin" / part.filename)
    missing = tmp_path / "nowhere" / part.filename
    env = {"HOME": str(home), part.variable: str(missing)}

    assert part.find(env) is None
    assert part.skip_reason(env) == (
        f"real {part.title} not found: {part.variable}={missing} is not an executable file "
        f"(build {part.upstream} outside the repositories; see docs/how-to/run-real-garm-tests.md)"
    )


def test_conventional_path_under_home_cache(part: LocalPart, tmp_path: Path) -> None:
    found = _executable(tmp_path / ".cache" / "garm-charm" / "bin" / part.filename)

    assert part.find({"HOME": str(tmp_path)}) == found


def test_conventional_path_under_xdg_cache_home(part: LocalPart, tmp_path: Path) -> None:
    _executable(tmp_path / "home" / ".cache" / "garm-charm" / "bin" / part.filename)
    found = _executable(tmp_path / "xdg" / "garm-charm" / "bin" / part.filename)
    env = {"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}

    assert part.find(env) == found


def test_relative_xdg_cache_home_is_ignored(part: LocalPart, tmp_path: Path) -> None:
    found = _executable(tmp_path / ".cache" / "garm-charm" / "bin" / part.filename)

    assert part.find({"HOME": str(tmp_path), "XDG_CACHE_HOME": "relative/cache"}) == found


def test_skip_when_nothing_is_found(part: LocalPart, tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    expected = tmp_path / ".cache" / "garm-charm" / "bin" / part.filename

    assert part.find(env) is None
    reason = part.skip_reason(env)
    assert "\n" not in reason
    assert reason.startswith(
        f"real {part.title} not found: {part.variable} unset and {expected} "
        "is not an executable file"
    )


def test_a_file_that_is_not_executable_is_not_run(part: LocalPart, tmp_path: Path) -> None:
    path = tmp_path / ".cache" / "garm-charm" / "bin" / part.filename
    path.parent.mkdir(parents=True)
    path.write_text("not a program", encoding="utf-8")

    assert part.find({"HOME": str(tmp_path)}) is None
