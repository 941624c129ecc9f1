"""CUDA: torch's runtime against the CUDA libraries of the build (same major, minor not
older, or the expert's override), the driver against torch's runtime, and whether the
library that serves holds a kernel image each GPU can run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..archs import describe, kernel_for
from ..facts import BuildInfo, CudaLibraryInfo, RuntimeFacts
from ..report import Finding, Status
from ..versions import version_tuple
from .context import Context

if TYPE_CHECKING:  # the doctor's and a GPU's first use: not import
    from ..matrix import Matrix
    from ..probes import Gpu

UNSET_OVERRIDE = ("unset WHEELOPS_CUDA_LIBRARY",)


def cuda(ctx: Context, build: BuildInfo) -> Finding | None:
    """For a CUDA torch and a build with CUDA libraries: one of torch's CUDA major, its
    runtime minor >= the library's build minor (or the expert's override)."""
    runtime = ctx.runtime
    if not build.cuda_libraries or runtime.torch_kind != "cuda":
        return None
    assert runtime.torch_cuda is not None
    theirs = version_tuple(runtime.torch_cuda)
    library = ctx.chosen_cuda(build)
    built = ", ".join(lib.cuda_version for lib in build.cuda_libraries)
    here = f"CUDA {runtime.torch_cuda} (torch {runtime.torch_version})"
    if ctx.override_invalid or ctx.override is not None:
        return _override(ctx, library, built, here)
    if library is None:
        nearest = build.cuda_libraries[-1]
        ours = f"CUDA {built} (needs a {nearest.major}.x runtime, >= {nearest.cuda_version})"
        message = (
            f"wheelops was built with CUDA {built} and torch {runtime.torch_version} "
            f"brings the CUDA {runtime.torch_cuda} runtime: CUDA {nearest.major} libraries "
            f"cannot run on a CUDA {theirs[0]} runtime"
        )
    else:
        nearest = library
        ours = (
            f"CUDA {library.cuda_version} (needs the {library.major}.x runtime, "
            f">= {library.cuda_version})"
        )
        if theirs[1] >= version_tuple(library.cuda_version)[1]:
            message = f"the CUDA runtime matches the CUDA {library.cuda_version} library"
            return Finding("CUDA", Status.OK, ours, here, message)
        message = (
            f"wheelops was built with CUDA {library.cuda_version}, newer than the CUDA "
            f"{runtime.torch_cuda} runtime of torch {runtime.torch_version}, which may "
            "lack functions the build calls"
        )
    # Both directions where both exist, the one that keeps the user's torch first.
    change_torch = ctx.change_torch(build, nearest)
    fitting = ctx.matrix.variants_for_torch_cuda(runtime.torch_cuda)
    if fitting:
        message += (
            f". Fix: install the {fitting[0].name} variant of wheelops, or keep this "
            f"wheelops and install a torch built with CUDA {nearest.cuda_version}"
        )
        fix: tuple[str, ...] = (ctx.matrix.install_command(fitting[0].name), change_torch)
    else:
        message += (
            f". No wheelops variant is built for CUDA {runtime.torch_cuda}: keep this "
            f"wheelops and install a torch built with CUDA {nearest.cuda_version}"
        )
        fix = (change_torch,)
    return Finding("CUDA", Status.FATAL, ours, here, message, fix)


def _override(ctx: Context, library: CudaLibraryInfo | None, built: str, here: str) -> Finding:
    """WHEELOPS_CUDA_LIBRARY, as set: refused, or the library it names, loaded on trust."""
    if ctx.override_invalid:
        message = (
            f"WHEELOPS_CUDA_LIBRARY={str(ctx.cuda_override)!r} is not a CUDA major "
            f"wheelops builds libraries for ({' or '.join(ctx.override_values)})"
        )
        return Finding("CUDA", Status.FATAL, f"CUDA {built}", here, message, UNSET_OVERRIDE)
    if library is None:
        message = (
            f"WHEELOPS_CUDA_LIBRARY={ctx.override} asks for a CUDA {ctx.override} library, "
            f"and this build has CUDA {built} only"
        )
        return Finding("CUDA", Status.FATAL, f"CUDA {built}", here, message, UNSET_OVERRIDE)
    needs = [f"libcudart.so.{library.major}"]
    if library.cublaslt_version is not None:
        needs.append(f"libcublasLt.so.{library.major}")
    message = (
        f"WHEELOPS_CUDA_LIBRARY={ctx.override} chooses the CUDA {library.cuda_version} "
        f"library under torch's CUDA {ctx.runtime.torch_cuda} runtime, as an expert asked; it "
        f"loads only where its runtime and cuBLASLt ({', '.join(needs)}) are on the loader's "
        "path"
    )
    ours = f"CUDA {library.cuda_version} (override)"
    return Finding("CUDA", Status.DEGRADED, ours, here, message, UNSET_OVERRIDE)


def driver(torch_cuda: str, driver: str | None) -> Finding:
    needed = version_tuple(torch_cuda)[0]
    wanted = f"CUDA {torch_cuda} runtime (torch)"
    if driver is None:
        return Finding(
            "CUDA driver",
            Status.DEGRADED,
            wanted,
            "no NVIDIA driver (libcuda.so.1) found",
            "no NVIDIA driver is installed, so no GPU can be used; CPU tensors work",
        )
    if version_tuple(driver)[0] < needed:
        return Finding(
            "CUDA driver",
            Status.DEGRADED,
            wanted,
            f"driver for CUDA {driver}",
            f"the NVIDIA driver supports CUDA {driver}, older than the CUDA {torch_cuda} "
            "runtime of torch, so no GPU can be used; CPU tensors work. Update the NVIDIA "
            f"driver to one for CUDA {needed}.x ({'>= 580' if needed >= 13 else '>= 525'} "
            "on Linux)",
        )
    return Finding("CUDA driver", Status.OK, wanted, f"driver for CUDA {driver}", "ok")


def gpu_finding(
    build: BuildInfo, library: CudaLibraryInfo, runtime: RuntimeFacts, matrix: Matrix, gpu: Gpu
) -> Finding:
    """Whether the CUDA library that serves holds a kernel image this GPU can run. A GPU it
    cannot run on degrades the install (CPU tensors and other GPUs work); its first launch
    there raises."""
    check = f"GPU cuda:{gpu.index}"
    holds = describe(library.sass_archs, library.ptx_archs)
    device = f"{gpu.name}, compute capability {gpu.capability_text}"
    runs = kernel_for(library.sass_archs, library.ptx_archs, gpu.capability)
    if runs:
        return Finding(check, Status.OK, holds, device, f"runs {runs}")
    message = (
        f"cuda:{gpu.index} ({device}) cannot run this wheelops build: it holds {holds}. "
        "SASS runs only on GPUs of its major version with an equal or higher minor, "
        "PTX only on GPUs of at least its capability"
    )
    cap = gpu.capability_text
    fix = []
    here = [
        v for v in matrix.variants_for_torch_cuda(runtime.torch_cuda) if v.runs_on(gpu.capability)
    ]
    elsewhere = [v for v in matrix.variants if v.cuda and v.runs_on(gpu.capability)]
    if here:
        message += f"; the {here[0].name} variant covers {cap}"
        fix.append(matrix.install_command(here[0].name))
    elif elsewhere:
        v = elsewhere[-1]
        message += (
            f"; no wheelops variant for CUDA {runtime.torch_cuda} covers {cap}, the {v.name} "
            f"variant does, with a CUDA {v.cuda} torch"
        )
        floor = build.stable_abi_floor
        fix.append(
            f"{matrix.torch_install_command(v.name, floor)} && {matrix.install_command(v.name)}"
        )
    if runtime.torch_cuda and version_tuple(runtime.torch_cuda)[0] == 13:
        message += "; or build for this GPU from source"
        fix.append(matrix.source_build_command(cap))
    if not fix:
        message += f"; no published wheelops variant covers compute capability {cap}"
    return Finding(check, Status.DEGRADED, holds, device, message, tuple(fix))
