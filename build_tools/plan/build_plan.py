"""Decide what to build: the CPU library always; CUDA libraries when torch is a CUDA build.

WHEELOPS_VARIANT (a variant of src/wheelops/matrix.json, set by the nox build and
cibuildwheel) decides it: cpu builds the CPU library only; a CUDA variant
requires a build torch and toolkit of exactly its CUDA version; universal
builds a CUDA library for each of its parts (the one of the build torch's
CUDA with its toolkit, the others with theirs, e.g. CUDA 12.4 from Debian's
archive, see cuda12_toolkit.py). Without it,
WHEELOPS_CUDA=auto (default) builds CUDA kernels exactly when the build torch
is a CUDA build, and then requires the matched toolkit; =1 requires CUDA;
=0 builds the CPU library only.

WHEELOPS_TARGET_PLATFORM (set by `nox -s build -- universal --platform aarch64`) names
a platform the universal variant cross-builds for (its "cross" entry in the matrix): all
its libraries are then built by build_tools/compile/builder.py with
that platform's compiler, torch and CUDA runtime (build_tools/plan/cross_target.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from build_tools.plan import matrix
from build_tools.plan.arch_list import ArchList, arch_list_for
from build_tools.plan.cross_target import CrossTarget
from build_tools.plan.cuda_toolkit import CudaToolkit, ToolkitError, find_toolkit

TARGET_PLATFORM_ENV = "WHEELOPS_TARGET_PLATFORM"


@dataclass(frozen=True)
class BuildPlan:
    torch_version: str
    toolkit: CudaToolkit | None  # the build torch's CUDA: built by setuptools
    archs: ArchList | None
    variant: str | None = None  # WHEELOPS_VARIANT
    # CUDA libraries of other majors (universal): built by build_tools/compile/builder.py
    other_cuda: tuple[tuple[CudaToolkit, ArchList], ...] = ()
    # A cross build: every library is built outside setuptools, for this platform.
    target: CrossTarget | None = None


def plan_build() -> BuildPlan:
    import torch

    mode = os.environ.get("WHEELOPS_CUDA", "auto").strip().lower()
    if mode not in ("auto", "0", "1"):
        raise SystemExit(f"WHEELOPS_CUDA must be auto, 0 or 1 (got {mode!r})")
    torch_cuda = torch.version.cuda if getattr(torch.version, "hip", None) is None else None
    variant = _requested_variant()
    target = os.environ.get(TARGET_PLATFORM_ENV, "").strip()
    if target and target != matrix.this_platform():
        if variant is None or target not in variant.cross:
            raise SystemExit(
                f'{TARGET_PLATFORM_ENV}={target}: only a variant with a "cross" entry for '
                f"{target} in src/wheelops/matrix.json is cross-built (WHEELOPS_VARIANT="
                f"{variant.name if variant else ''})"
            )
        return _cross_plan(variant, target, torch.__version__)
    if variant is not None and variant.parts:
        return _universal_plan(variant, torch.__version__, torch_cuda)
    if variant is not None:
        if variant.cuda and (torch_cuda or "").split(".")[:2] != variant.cuda.split("."):
            raise SystemExit(
                f"WHEELOPS_VARIANT={variant.name} builds with CUDA {variant.cuda}, but the build "
                f"torch {torch.__version__} is built for CUDA {torch_cuda}: prepare the "
                f"environment with `python -m build_tools.plan.build_env {variant.name}`"
            )
        mode = "1" if variant.cuda else "0"
    if mode == "0" or (mode == "auto" and torch_cuda is None):
        return BuildPlan(torch.__version__, None, None, variant.name if variant else None)
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
    return BuildPlan(torch.__version__, toolkit, archs, variant.name if variant else None)


def _universal_plan(
    variant: matrix.Variant, torch_version: str, torch_cuda: str | None
) -> BuildPlan:
    model = matrix.load()
    parts = [model.variant(name) for name in variant.parts]
    own = [p for p in parts if p.cuda and torch_cuda and p.cuda == torch_cuda]
    if not own:
        raise SystemExit(
            f"WHEELOPS_VARIANT={variant.name} builds its {', '.join(variant.parts)} libraries "
            f"with a build torch of one of their CUDA releases; torch {torch_version} has "
            f"CUDA {torch_cuda}: prepare it with "
            f"`python -m build_tools.plan.build_env {variant.name}`"
        )
    from build_tools.plan import cuda12_toolkit

    try:
        others = []
        for part in parts:
            if part is own[0]:
                continue
            if part.toolkit_source != "debian":
                raise ToolkitError(f"{part.name}: no toolkit provider for {part.toolkit_source}")
            archs = arch_list_for(part.cuda or "", part.arch_list)
            others.append((cuda12_toolkit.provide(), archs))
        toolkit, archs = prepare_cuda_build(own[0].cuda or "", own[0].arch_list)
    except ToolkitError as err:
        raise SystemExit(f"wheelops build: {err}") from err
    return BuildPlan(torch_version, toolkit, archs, variant.name, tuple(others))


def _cross_plan(variant: matrix.Variant, platform: str, torch_version: str) -> BuildPlan:
    """Every part's CUDA library with its own toolkit and this platform's arch list."""
    from build_tools.plan import cross_target, cuda12_toolkit

    model = matrix.load()
    try:
        target = cross_target.provide(platform)
        libraries = []
        for part in (model.variant(name) for name in variant.parts):
            cuda = part.cuda or ""
            spec = variant.part_arch_list(part.name, platform) or part.arch_list
            toolkit = (
                cuda12_toolkit.provide() if part.toolkit_source == "debian" else find_toolkit(cuda)
            )
            libraries.append((toolkit, arch_list_for(cuda, spec)))
    except ToolkitError as err:
        raise SystemExit(f"wheelops build: {err}") from err
    if target.torch_version != torch_version.split("+")[0]:
        raise SystemExit(
            f"wheelops build: the {platform} torch is {target.torch_version}, the build torch "
            f"{torch_version}: make build_tools/plan/cross_target.py pin the matrix's build torch"
        )
    return BuildPlan(torch_version, None, None, variant.name, tuple(libraries), target)


def _requested_variant() -> matrix.Variant | None:
    name = os.environ.get("WHEELOPS_VARIANT", "").strip()
    return matrix.load().variant(name) if name else None


def prepare_cuda_build(
    torch_cuda: str, fallback_arch_list: str | None = None
) -> tuple[CudaToolkit, ArchList]:
    """The matched toolkit and the arch list (TORCH_CUDA_ARCH_LIST, else the fallback,
    else the default). Nothing is exported: build_tools/compile/builder.py puts both into its
    commands (flags.device_code_flags)."""
    return find_toolkit(torch_cuda), arch_list_for(torch_cuda, fallback_arch_list)
