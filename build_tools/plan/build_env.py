"""Prepare the running Python to build a variant: its build torch and its exact CUDA toolkit.

    python -m build_tools.plan.build_env cu130     # nox -s build, and cibuildwheel's before-build

cpu:      the CPU-only build torch (the CPU library builds against any torch >= the
          floor, and the CPU build is a fraction of the CUDA one's download).
pypi:     (CUDA 13) the build torch from the default registry, checked to be built
          for the variant's CUDA, and `cuda-toolkit[...]` pinned to the matrix's
          release, which must equal torch's own pin.
image:    (CUDA 12) only inside the variant's Docker image, whose toolkit is in
          CUDA_HOME; the torch for that CUDA comes from PyTorch's index. Anywhere
          else: refuse, and say how to run the build in the image.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys

from build_tools.compile import cutlass
from build_tools.plan import installer, torch_install
from build_tools.plan import matrix as build_matrix

# cublas: the headers and libcublasLt.so.13 fused_linear_gelu links (the cuBLAS torch's own
# cuda-toolkit pin already installs, so nothing new is downloaded).
TOOLKIT_COMPONENTS = "nvcc,cudart,crt,nvvm,cccl,cublas"
BUILD_REQUIREMENTS = ["setuptools>=77", "wheel", "packaging"]
IMAGE_VARIANT_ENV = "WHEELOPS_IMAGE_VARIANT"  # set by docker/Dockerfile


def _toolkit_pin() -> str | None:
    """The cuda-toolkit release the installed torch pins, read from its metadata."""
    pins = [
        r.split("==", 1)[1].split(";")[0].strip()
        for r in importlib.metadata.requires("torch") or []
        if r.startswith("cuda-toolkit") and "==" in r
    ]
    return pins[0] if pins else None


def refusal(variant: build_matrix.Variant, matrix: build_matrix.Matrix) -> str:
    image = matrix.image(variant.name, build_matrix.this_platform())
    return (
        f"{variant.name} needs the CUDA {variant.toolkit} toolkit, which comes only from its "
        "build image (the PyPI CUDA 12 wheels carry no nvcc driver). Build there:\n"
        f"  docker build -f docker/Dockerfile $(python -m build_tools.plan.matrix docker-args "
        f"{variant.name}) -t {image} .\n"
        f"  docker run --rm -v $PWD:/src -w /src {image} python -m nox -s build -- {variant.name}"
    )


def prepare(name: str) -> None:
    matrix = build_matrix.load()
    try:
        variant = matrix.variant(name)
    except KeyError as err:
        raise SystemExit(err.args[0]) from None
    if variant.parts:  # universal: the part built by setuptools sets torch and its toolkit
        own = next(
            matrix.variant(n) for n in variant.parts if matrix.variant(n).toolkit_source == "pypi"
        )
        prepare(own.name)
        from build_tools.plan import cuda12_toolkit  # fetched now, so a failure shows up first

        for name in variant.parts:
            if matrix.variant(name).toolkit_source == "debian":
                try:
                    toolkit = cuda12_toolkit.provide()
                except cuda12_toolkit.ToolkitError as err:
                    raise SystemExit(f"wheelops build: {err}") from None
                print(f"CUDA {toolkit.version} for {name}: {toolkit.home} ({toolkit.origin})")
        return
    if variant.toolkit_source == "image" and os.environ.get(IMAGE_VARIANT_ENV) != variant.name:
        raise SystemExit(refusal(variant, matrix))
    installer.install(*BUILD_REQUIREMENTS)
    # CUDA 13: the default registry's torch is that build (PyPI's default); checked there.
    version, cuda = torch_install.install(
        variant.name, variant.build_torch, default_registry=variant.toolkit_source == "pypi"
    )
    if variant.toolkit_source == "pypi":
        from packaging.version import Version  # installed above, with the build requirements

        pin = _toolkit_pin()
        if pin is not None and Version(pin) != Version(variant.toolkit or "0"):
            raise SystemExit(
                f"torch {version} pins cuda-toolkit {pin}, the matrix says {variant.name} "
                f"uses {variant.toolkit}: make them agree in src/wheelops/matrix.json"
            )
        installer.install(f"cuda-toolkit[{TOOLKIT_COMPONENTS}]=={variant.toolkit}")
    # The sm_90a kernels' headers only (build_tools/compile/cutlass.py): --no-deps, for its
    # Python side's needs would change the build's.
    if variant.toolkit:
        installer.install("--no-deps", cutlass.REQUIREMENT)
    print(
        f"build environment for {variant.name}: torch {version} (CUDA {cuda}), toolkit "
        f"{variant.toolkit} from {variant.toolkit_source}; setuptools "
        f"{importlib.metadata.version('setuptools')}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m build_tools.plan.build_env", description=__doc__
    )
    parser.add_argument("variant", nargs="?", default=os.environ.get("WHEELOPS_VARIANT"))
    args = parser.parse_args(argv)
    if not args.variant:
        parser.error("name a variant (or set WHEELOPS_VARIANT)")
    prepare(args.variant)
    return 0


if __name__ == "__main__":
    sys.exit(main())
