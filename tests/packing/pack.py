"""`tox -e pack`: the charm packed with charmcraft's own code, as `charmcraft pack` packs it.

charmcraft itself refuses a host that is not Ubuntu ("Package backend 'apt' is not supported on
this environment"), so this runs its pieces directly, in the order its pack command runs them:

1. the project read as charmcraft reads it (its preprocessing and its project model);
2. the `charm` part built through craft-parts with charmcraft's plugins registered: the charm
   plugin's build commands (its charm builder: the tree linked with `.jujuignore` applied,
   `dispatch` and hooks written, the venv installed by pip in the mode `charmcraft.yaml` picks),
   on Python 3.12 as on the Ubuntu 24.04 base, with the plugin's build packages and its build
   environment; Rust is kept off `PATH`, as on a builder that never installed it;
3. the files charmcraft adds to the prime directory (`metadata.yaml`, `config.yaml`,
   `actions.yaml` from `charmcraft.yaml`; `manifest.yaml` with the linters' attributes);
4. charmcraft's linters on the prime directory, then its zip.

Only the glue between those pieces is ours (charmcraft's `PackageService` holds it behind
services this host cannot start): which files, in which order. Prints one line per step and the
linters' results; exits non-zero when a step fails or a linter reports an error or an
unexplained warning.

    python -m tests.packing.pack [--project-dir DIR] [--work-dir DIR] [--output DIR]
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
# The base's Python: Ubuntu 24.04 runs 3.12, and the charm's venv is built for it.
BASE_PYTHON = (3, 12)
BASE = "ubuntu@24.04"
ARCH = "amd64"
# Linter warnings explained in docs/reference/packing.md, by linter name; none today.
EXPLAINED_WARNINGS: frozenset[str] = frozenset()
RUST_TOOLS = ("cargo", "rustc", "rustup")


@dataclass(frozen=True)
class Packed:
    """What a pack produced: the prime directory, the charm file and the linters' results."""

    prime_dir: Path
    charm_file: Path
    lint: tuple[tuple[str, str, str, str], ...]  # (type, name, result, text)

    def attribute(self, name: str) -> str:
        """The result of one attribute checker (`framework`, `language`)."""
        return next(
            result for kind, n, result, _ in self.lint if kind == "attribute" and n == name
        )

    def problems(self) -> list[str]:
        """Linter errors, and warnings no document explains."""
        return [
            f"{name}: {result}: {text}"
            for kind, name, result, text in self.lint
            if kind == "lint"
            and (result == "errors" or (result == "warnings" and name not in EXPLAINED_WARNINGS))
        ]


def main(argv: Sequence[str] | None = None) -> int:
    """Pack the charm; print the steps and the linters; exit 1 on any problem."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project-dir", type=Path, default=REPO)
    parser.add_argument("--work-dir", type=Path, default=REPO / "build" / "pack")
    parser.add_argument("--output", type=Path, default=REPO)
    args = parser.parse_args(argv)
    if sys.version_info[:2] != BASE_PYTHON:
        print(
            f"PACK NOT RUN: the charm is packed on Python {'.'.join(map(str, BASE_PYTHON))} "
            f"(the Ubuntu 24.04 base's), and this is {sys.version.split()[0]}; "
            "give tox a 3.12 (GARM_PY312 or python3.12 on PATH)"
        )
        return 0
    packed = pack(args.project_dir.resolve(), args.work_dir.resolve(), args.output.resolve())
    for kind, name, result, text in packed.lint:
        print(f"  lint {kind:9} {name:18} {result:14} {text.splitlines()[0] if text else ''}")
    problems = packed.problems()
    for problem in problems:
        print(f"PACK PROBLEM: {problem}")
    print(f"packed {packed.charm_file} ({packed.charm_file.stat().st_size:,} bytes)")
    return 1 if problems else 0


def pack(project_dir: Path, work_dir: Path, output_dir: Path) -> Packed:
    """Build, add charmcraft's files, lint and zip; returns what was packed."""
    from charmcraft import linters, utils

    project = load_project(project_dir)
    prime_dir = build(project_dir, work_dir, project.parts["charm"])
    started_at = datetime.datetime.now(tz=datetime.UTC).isoformat()
    write_package_files(project, project_dir, prime_dir, lint_results=[])
    results = [checker().get_result(prime_dir) for checker in linters.CHECKERS]
    write_package_files(project, project_dir, prime_dir, results, started_at)
    charm_file = output_dir / f"{project.name}_{ARCH}.charm"
    charm_file.unlink(missing_ok=True)
    utils.build_zip(charm_file, prime_dir)
    lint = tuple((r.check_type.value, r.name, r.result, r.text or "") for r in results)
    return Packed(prime_dir=prime_dir, charm_file=charm_file, lint=lint)


def load_project(project_dir: Path) -> Any:
    """`charmcraft.yaml` through charmcraft's preprocessing into its project model."""
    from charmcraft import parts, preprocess
    from charmcraft.models.project import CharmcraftProject

    parts.setup_parts()
    data = yaml.safe_load((project_dir / "charmcraft.yaml").read_text(encoding="utf-8"))
    preprocess.add_default_parts(data)
    preprocess.add_config(project_dir, data)
    preprocess.add_actions(project_dir, data)
    preprocess.add_metadata(project_dir, data)
    return CharmcraftProject.unmarshal(data)


def build(project_dir: Path, work_dir: Path, part: dict[str, Any]) -> Path:
    """The `charm` part through craft-parts to its prime step; returns the prime directory."""
    from charmcraft import parts
    from craft_parts import LifecycleManager, Step

    shutil.rmtree(work_dir, ignore_errors=True)
    work_dir.mkdir(parents=True)
    os.environ["PATH"] = builder_path(work_dir / "bin")
    use_apt_get()
    spec = parts.process_part_config(part)
    previous = Path.cwd()
    os.chdir(project_dir)
    try:
        lcm = LifecycleManager(
            {"parts": {"charm": spec}},
            application_name="charmcraft",
            work_dir=work_dir,
            cache_dir=work_dir / "cache",
            base=BASE,
            project_name="garm",
            ignore_local_sources=["*.charm", "build"],
        )
        actions = lcm.plan(Step.PRIME)
        with lcm.action_executor() as executor:
            for action in actions:
                print(f"pack: {action.step.name.lower()} {action.part_name}", flush=True)
                executor.execute([action])
        return lcm.project_info.prime_dir
    finally:
        os.chdir(previous)


def use_apt_get() -> None:
    """craft-parts' package backend for this host: the build packages through `apt-get`.

    craft-parts' Debian backend needs python-apt, which exists only as the system Python's
    Debian package, not for this interpreter; without it craft-parts refuses the host. The charm
    plugin's build packages are installed with `apt-get` instead (root; what is installed
    already is left alone). Stage packages, which would need the real backend, the charm has none.
    """
    import subprocess

    from craft_parts import packages
    from craft_parts.packages.base import DummyRepository

    class AptGet(DummyRepository):
        @classmethod
        def install_packages(cls, package_names: list[str], **_: Any) -> list[str]:
            missing = [name for name in package_names if not installed(name)]
            if missing:
                print(f"pack: apt-get install {' '.join(missing)}", flush=True)
                subprocess.run(["apt-get", "update", "-qq"], check=True)
                subprocess.run(
                    ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
                    check=True,
                    env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
                )
            return sorted(package_names)

    def installed(name: str) -> bool:
        status = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", name], capture_output=True, text=True, check=False
        )
        return status.stdout.endswith("installed")

    packages._get_repository_for_platform = lambda: AptGet


def builder_path(bin_dir: Path) -> str:
    """`PATH` for the build: `python3` is this 3.12, and no directory holds a Rust tool.

    The charm builder creates the charm's venv with the `python3` on `PATH`, as on the base where
    that is 3.12. A builder has no Rust unless a build package brings it, and none does.
    """
    bin_dir.mkdir(parents=True, exist_ok=True)
    python3 = bin_dir / "python3"
    python3.unlink(missing_ok=True)
    python3.symlink_to(Path(getattr(sys, "_base_executable", sys.executable)).resolve())
    kept = [
        entry
        for entry in os.environ.get("PATH", "").split(os.pathsep)
        if entry and not any((Path(entry) / tool).exists() for tool in RUST_TOOLS)
    ]
    return os.pathsep.join([str(bin_dir), *kept])


def write_package_files(
    project: Any,
    project_dir: Path,
    prime_dir: Path,
    lint_results: Sequence[Any],
    started_at: str = "",
) -> None:
    """The files charmcraft's package service writes into the prime directory.

    `metadata.yaml`, `config.yaml` and `actions.yaml` are `charmcraft.yaml`'s sections in
    charmcraft's models; `manifest.yaml` names charmcraft, the base and the attribute checkers'
    results (the linters read the first three, so they are written before linting too).
    """
    from charmcraft import models, utils
    from charmcraft.models import lint
    from charmcraft.models.manifest import Attribute, Manifest
    from charmcraft.models.metadata import CharmMetadata

    del project_dir
    marshalled = project.marshal()
    files = {
        "metadata.yaml": yaml.safe_dump(
            CharmMetadata.from_charm(project).marshal(), sort_keys=True
        ),
        "config.yaml": yaml.safe_dump(marshalled["config"], sort_keys=True),
        "actions.yaml": yaml.safe_dump(marshalled["actions"], sort_keys=True),
    }
    if started_at:
        manifest = Manifest(
            charmcraft_started_at=started_at,
            analysis={
                "attributes": [
                    Attribute(name=r.name, result=r.result)
                    for r in lint_results
                    if r.check_type == lint.CheckType.ATTRIBUTE
                ]
            },
            bases=[models.Base.from_str_and_arch(project.base, [ARCH])],
        )
        files["manifest.yaml"] = utils.dump_yaml(
            manifest.model_dump(mode="json", by_alias=True, exclude_unset=False, exclude_none=True)
        )
    for name, content in files.items():
        (prime_dir / name).write_text(content, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
