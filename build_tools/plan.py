"""Decide what to build: the CPU library always; the CUDA library when torch is a CUDA build.

WHEELOPS_VARIANT (a variant of wheelops/matrix.json, set by the nox build and
cibuildwheel) decides it: cpu builds the CPU library only; a CUDA variant
requires a build torch and toolkit of exactly its CUDA version. Without it,
WHEELOPS_CUDA=auto (default) builds CUDA kernels exactly when the build torch
is a CUDA build, and then requires the matched toolkit; =1 requires CUDA;
=0 builds the CPU library only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from build_tools import matrix
from build_tools.arch_list import ArchList, arch_list_for
from build_tools.cuda_toolkit import CudaToolkit, ToolkitError, find_toolkit


@dataclass(frozen=True)
class BuildPlan:
    torch_version: str
    toolkit: CudaToolkit | None
    archs: ArchList | None


def plan_build() -> BuildPlan:
    import torch

    mode = os.environ.get("WHEELOPS_CUDA", "auto").strip().lower()
    if mode not in ("auto", "0", "1"):
        raise SystemExit(f"WHEELOPS_CUDA must be auto, 0 or 1 (got {mode!r})")
    torch_cuda = torch.version.cuda if getattr(torch.version, "hip", None) is None else None
    variant = _requested_variant()
    if variant is not None:
        if variant.cuda and (torch_cuda or "").split(".")[:2] != variant.cuda.split("."):
            raise SystemExit(
                f"WHEELOPS_VARIANT={variant.name} builds with CUDA {variant.cuda}, but the build "
                f"torch {torch.__version__} is built for CUDA {torch_cuda}: prepare the "
                f"environment with `python -m build_tools.build_env {variant.name}`"
            )
        mode = "1" if variant.cuda else "0"
    if mode == "0" or (mode == "auto" and torch_cuda is None):
        return BuildPlan(torch.__version__, None, None)
    if torch_cuda is None:
        raise SystemExit(
            f"WHEELOPS_CUDA=1 but the build torch {torch.__version__} is not a CUDA build; "
            "install a CUDA torch in the build environment"
        )
    try:
        toolkit, archs = prepare_cuda_build(torch_cuda)
    except ToolkitError as err:
        raise SystemExit(
            f"wheelops build: {err}\n(or set WHEELOPS_CUDA=0 for a CPU-only build)"
        ) from err
    return BuildPlan(torch.__version__, toolkit, archs)


def _requested_variant() -> matrix.Variant | None:
    name = os.environ.get("WHEELOPS_VARIANT", "").strip()
    return matrix.load().variant(name) if name else None


def prepare_cuda_build(
    torch_cuda: str, fallback_arch_list: str | None = None
) -> tuple[CudaToolkit, ArchList]:
    """The matched toolkit and the arch list (TORCH_CUDA_ARCH_LIST, else the fallback,
    else the default), exported for torch.utils.cpp_extension, which reads CUDA_HOME
    when first imported and TORCH_CUDA_ARCH_LIST when it compiles."""
    toolkit = find_toolkit(torch_cuda)
    archs = arch_list_for(torch_cuda, fallback_arch_list)
    os.environ["CUDA_HOME"] = str(toolkit.home)
    os.environ["TORCH_CUDA_ARCH_LIST"] = archs.spec
    return toolkit, archs
