"""The build matrix (src/wheelops/matrix.json) for nox, the Docker images and GitHub Actions.

    python -m build_tools.plan.matrix github        # build= / test= lines for $GITHUB_OUTPUT
    python -m build_tools.plan.matrix docker-args cu126 x86_64
    python -m build_tools.plan.matrix image cu126 x86_64
    python -m build_tools.plan.matrix pypi-variant  # universal

The model is src/wheelops/_compat/matrix.py's, extended here with what only the build and
CI read (toolkits, compilers, images, platforms, torch releases), over the same data
that module alone reads from matrix.json; nothing else lists variants, toolkits, images
or torch versions: nox reads this module, the Dockerfile takes its build arguments from
`docker-args`, and the workflows take their job matrices from `github` through fromJSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any, cast

from build_tools.compat import matrix as _model


@dataclass(frozen=True, kw_only=True)
class Variant(_model.Variant):
    """A row of matrix.json with the build's fields: the runtime's Variant and these."""

    toolkit: str | None  # the exact CUDA toolkit release the variant is built with
    toolkit_source: str | None  # "pypi" (toolkit wheels), "image" (the image's), "debian"
    host_compiler: str  # the manylinux gcc-toolset the image compiles with
    build_torch: str
    torch: tuple[str, ...]  # torch releases the wheel is tested against
    smoke_torch: str | None  # the one torch a quick run tests against
    platforms: tuple[str, ...]
    # torch releases a quick run tests (none: smoke_torch); "newest": PyPI's newest, resolved
    # when the run starts (build_tools/plan/torch_install.py)
    quick_torch: tuple[str, ...] = ()
    # Platforms built on x86_64 by cross-compilation (build_tools/plan/cross_target.py) and run
    # here under emulation (build_tools/package/emulation.py): each with its parts' arch lists
    # there and the torch releases its CPU path is tested with, emulated:
    # {"aarch64": {"arch_lists": {"cu130": "8.0;...+PTX"}, "torch": ["2.10.0", ...]}}
    cross: dict[str, dict[str, Any]] = field(default_factory=dict, hash=False)

    def part_arch_list(self, part: str, platform: str) -> str | None:
        """A part's arch list in this wheel on `platform` (None: the part's own)."""
        return self.cross.get(platform, {}).get("arch_lists", {}).get(part)

    def cross_torch(self, platform: str) -> tuple[str, ...]:
        """The torch releases a cross-built platform's wheel is tested with, emulated."""
        return tuple(self.cross.get(platform, {}).get("torch", ()))


@dataclass(frozen=True, kw_only=True)
class Matrix(_model.Matrix):
    """matrix.json with the build's fields: the runtime's Matrix and these."""

    variants: tuple[Variant, ...]  # the build's rows (the runtime's field, retyped)
    published_index_url: str  # the index as matrix.json publishes it (no override)
    manylinux: str
    python: str
    image_repository: str

    def variant(self, name: str) -> Variant:
        return cast(Variant, super().variant(name))

    def image(self, variant: str, arch: str) -> str:
        """The build image of a variant on a platform."""
        return f"{self.image_repository}:{variant}-{arch}"

    def manylinux_tag(self, arch: str) -> str:
        return f"{self.manylinux}_{arch}"

    def base_image(self, arch: str) -> str:
        return f"quay.io/pypa/{self.manylinux}_{arch}"

    def default_arch_list(self, cuda_version: str) -> str:
        """The list of this CUDA release's variant, else of the newest variant of its major
        that is not newer (a 13.2 toolkit builds what 13.0 does)."""
        major, minor = _model.version_tuple(cuda_version)
        fitting = [
            v
            for v in self.variants
            if v.arch_list and v.cuda_major_minor
            if v.cuda_major_minor[0] == major and v.cuda_major_minor[1] <= minor
        ]
        fitting.sort(key=lambda v: v.cuda_major_minor or (0, 0), reverse=True)
        if not fitting:
            raise RuntimeError(
                f"the matrix ({_model.MATRIX_FILE.name}) has no variant for CUDA "
                f"{cuda_version}; set TORCH_CUDA_ARCH_LIST"
            )
        assert fitting[0].arch_list is not None
        return fitting[0].arch_list


def torch_floor(matrix: Matrix) -> str:
    """The oldest torch any variant is tested with ("2.10.0"): the one every wheel serves."""

    def release(version: str) -> tuple[int, ...]:
        return tuple(int(part) for part in version.split("+")[0].split("."))

    return min((t for v in matrix.variants for t in v.torch), key=release)


def load(path: Path = _model.MATRIX_FILE) -> Matrix:
    """The build's model of matrix.json, refusing a key neither model knows (a typo)."""
    data = _model.read(path)
    known = {f.name for f in fields(Variant)}
    for name, row in data["variants"].items():
        unknown = set(row) - known
        if unknown:
            raise ValueError(f"{path.name}: variant {name!r} has unknown keys {sorted(unknown)}")
    return _model.model_of(
        data,
        Matrix,
        Variant,
        published_index_url=data["index_url"].rstrip("/"),
        manylinux=data["manylinux"],
        python=data["python"],
        image_repository=data["image_repository"],
    )


@cache
def matrix() -> Matrix:
    return load()


# GitHub-hosted runners per platform (aarch64 natively, not under emulation).
RUNNERS = {"x86_64": "ubuntu-24.04", "aarch64": "ubuntu-24.04-arm"}
# The CPU test jobs run on x86_64; a self-hosted runner with this label runs the GPU job.
GPU_RUNNER_LABEL = "gpu-h100"


def this_platform() -> str:
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def docker_build_args(matrix: Matrix, variant: str, arch: str) -> dict[str, str]:
    v = matrix.variant(variant)
    return {
        "BASE_IMAGE": matrix.base_image(arch),
        "VARIANT": v.name,
        "CUDA_VERSION": v.cuda or "",
        "CUDA_TOOLKIT": v.toolkit if v.toolkit_source == "image" else "",
        # "12-6" for the RPM names of NVIDIA's repository (cuda-minimal-build-12-6).
        "CUDA_PACKAGE_SUFFIX": (v.cuda or "").replace(".", "-")
        if v.toolkit_source == "image"
        else "",
        "GCC_TOOLSET": v.host_compiler.removeprefix("gcc-toolset-"),
        "PYTHON_TAG": "cp{0}-cp{0}".format(matrix.python.replace(".", "")),
    }


def wheels(matrix: Matrix) -> list[Variant]:
    """The variants built as wheels of their own: the index's and the universal one (not
    a part that exists only inside it, such as cu124)."""
    return [v for v in matrix.variants if v.index or v.parts]


def has_cuda(v: Variant) -> bool:
    return bool(v.cuda or v.parts)


# What a cell under a CPU-only torch runs in a --quick run that has a CUDA-carrying row
# (build_tools/run/rows.py tests_of_cell; the README's matrix table says so): what differs
# by wheel and by torch build: packaging, build facts, which library loads, the guard, the
# doctor, damage, the printed fixes, the hook that defers the ops' registration (it leans on
# how torch's op namespace resolves names); and one op.
WHEEL_TESTS = tuple(
    f"tests/test_{name}.py"
    for name in (
        "build",
        "distribution",
        "sbom",
        "policy",
        "guard_loading",
        "doctor_reports",
        "damaged_install",
        "fixes_cure",
        "first_lookup",
        "add",
    )
)
WHEEL_TESTS_SAID = "the loading, guard, doctor, damage, fix and first-lookup tests, one op"


def e2e_torches(matrix: Matrix, v: Variant, quick: bool) -> list[str]:
    """The torch releases `nox -s e2e` tests a variant's wheel with on this platform: all
    of its own (a quick run: its quick ones and smoke_torch), and for a CUDA wheel the CPU
    variant's smoke torch's CPU-only build too ("2.13.0+cpu")."""
    # A quick run: its quick_torch (universal: the stable-ABI floor and the newest on PyPI,
    # the ends of what it serves), else its smoke_torch.
    torches = (list(v.quick_torch) or [v.smoke_torch or ""]) if quick else list(v.torch)
    if has_cuda(v):
        torches.append(f"{matrix.variant('cpu').smoke_torch}+cpu")
    return [t for t in torches if t]


def test_cells(matrix: Matrix) -> list[tuple[str, str]]:
    """(variant, torch) pairs whose wheel is tested on CPU: each wheel under each of its
    torch releases, and each CUDA wheel under a CPU-only torch ("X.Y.Z+cpu"), where it
    must load its CPU library alone and work."""
    cells = [(v.name, t) for v in wheels(matrix) for t in v.torch]
    cpu_torch = f"{matrix.variant('cpu').smoke_torch}+cpu"
    cells += [(v.name, cpu_torch) for v in wheels(matrix) if has_cuda(v)]
    return cells


def github_matrices(matrix: Matrix) -> dict[str, list[dict[str, str]]]:
    """Job matrices for wheels.yml: one build per variant x platform (in its image with
    cibuildwheel, or cross-built by `nox -s build repair -- VARIANT-PLATFORM`), one CPU
    test per test cell (on x86_64), one GPU test per CUDA variant."""
    build = [
        {
            "variant": v.name,
            "platform": arch,
            "runner": RUNNERS[arch],
            "image": matrix.image(v.name, arch),
            "cross": False,
        }
        if arch not in v.cross
        else {  # cross-built on x86_64 by nox (its "cross" entry): no image, no cibuildwheel
            "variant": v.name,
            "platform": arch,
            "runner": RUNNERS["x86_64"],
            "target": f"{v.name}-{arch}",
            "cross": True,
        }
        for v in wheels(matrix)
        for arch in v.platforms
    ]
    test = [{"variant": variant, "torch": torch} for variant, torch in test_cells(matrix)]
    gpu = [
        {"variant": v.name, "torch": v.smoke_torch, "runner": GPU_RUNNER_LABEL}
        for v in wheels(matrix)
        if has_cuda(v)
    ]
    return {"build": build, "test": test, "gpu": gpu}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m build_tools.plan.matrix", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("github", help="job matrices as name=<json> lines for $GITHUB_OUTPUT")
    sub.add_parser("pypi-variant", help="the variant whose wheels PyPI gets, unlabelled")
    for name in ("docker-args", "image"):
        p = sub.add_parser(name)
        p.add_argument("variant")
        p.add_argument("platform", nargs="?", default=this_platform())
    args = parser.parse_args(argv)
    matrix = load()
    if args.command == "github":
        for name, rows in github_matrices(matrix).items():
            print(f"{name}={json.dumps({'include': rows}, separators=(',', ':'))}")
    elif args.command == "pypi-variant":
        print(matrix.pypi_variant)
    elif args.command == "docker-args":
        for key, value in docker_build_args(matrix, args.variant, args.platform).items():
            print(f"--build-arg={key}={value}")
    else:
        print(matrix.image(args.variant, args.platform))
    return 0


if __name__ == "__main__":
    sys.exit(main())
