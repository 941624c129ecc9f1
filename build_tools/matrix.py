"""The build matrix (wheelops/matrix.json) for nox, the Docker images and GitHub Actions.

    python -m build_tools.matrix github        # build= / test= lines for $GITHUB_OUTPUT
    python -m build_tools.matrix docker-args cu126 x86_64
    python -m build_tools.matrix image cu126 x86_64
    python -m build_tools.matrix pypi-variant  # universal

The model is wheelops/_compat/matrix.py, the only reader of matrix.json; nothing
else lists variants, toolkits, images or torch versions: nox reads this module,
the Dockerfile takes its build arguments from `docker-args`, and the workflows
take their job matrices from `github` through fromJSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys

from build_tools.compat import matrix as _model

Matrix, Variant, load = _model.Matrix, _model.Variant, _model.load
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


def test_cells(matrix: Matrix) -> list[tuple[str, str]]:
    """(variant, torch) pairs whose wheel is tested on CPU: each wheel under each of its
    torch releases, and each CUDA wheel under a CPU-only torch ("X.Y.Z+cpu"), where it
    must load its CPU library alone and work."""
    cells = [(v.name, t) for v in wheels(matrix) for t in v.torch]
    cpu_torch = f"{matrix.variant('cpu').smoke_torch}+cpu"
    cells += [(v.name, cpu_torch) for v in wheels(matrix) if has_cuda(v)]
    return cells


def github_matrices(matrix: Matrix) -> dict[str, list[dict[str, str]]]:
    """Job matrices for wheels.yml: one build per variant x platform, one CPU test per
    test cell (on x86_64), one GPU test per CUDA variant."""
    build = [
        {
            "variant": v.name,
            "platform": arch,
            "runner": RUNNERS[arch],
            "image": matrix.image(v.name, arch),
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
    parser = argparse.ArgumentParser(prog="python -m build_tools.matrix", description=__doc__)
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
