"""What the loader's refusal of a library means and what fixes it: the one table of
remedies, by the cause dlerror.py reads from the loader's words. Read at the first
failure only: a load that works never imports this module or dlerror.py."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from ..facts import BuildInfo
from ..report import Finding, Status
from .context import Context, cuda_role, role_name

if TYPE_CHECKING:
    from ..dlerror import Cause, LoadFailure


class Fix(enum.Enum):
    """Which commands fix a loader failure (`fix` writes them for the build)."""

    REINSTALL = "reinstall the same wheel"
    UPGRADE_TORCH = "a torch at least the build's"
    VARIANT = "the wheelops variant of this torch, or the torch of this variant"
    CUBLAS = "a cuBLAS at least the build's, or a newer torch"
    NONE = "no command: the advice says what to change"


class Remedy(NamedTuple):
    advice: str  # appended to the failure's summary; may name {missing}, {built}, {major}
    fix: Fix


_NEWER_CUBLAS = Remedy(
    " (built with cuBLAS {built}); install cuBLAS {major} at least as new, "
    "as torch's CUDA wheels do",
    Fix.CUBLAS,
)


@cache
def remedies() -> Mapping[Cause, Remedy]:
    """Every cause of a loader failure (dlerror.Cause), its advice and its fix: the one
    table."""
    from ..dlerror import Cause

    return {
        Cause.MISSING_FILE: Remedy("", Fix.REINSTALL),
        Cause.CORRUPT_FILE: Remedy("", Fix.REINSTALL),
        Cause.MISSING_LIBRARY: Remedy("", Fix.REINSTALL),
        Cause.UNDEFINED_SYMBOL: Remedy("", Fix.REINSTALL),
        Cause.UNKNOWN: Remedy("", Fix.REINSTALL),
        Cause.TORCH_TOO_OLD: Remedy("", Fix.UPGRADE_TORCH),
        Cause.TORCH_LIBRARIES: Remedy(
            "; import torch before wheelops, or reinstall torch", Fix.UPGRADE_TORCH
        ),
        Cause.TORCH_ABI: Remedy("", Fix.VARIANT),
        Cause.CUDA_MAJOR: Remedy("", Fix.VARIANT),
        Cause.CUDA_MINOR: Remedy("", Fix.VARIANT),
        Cause.CUBLAS_MISSING: _NEWER_CUBLAS,
        Cause.CUBLAS_TOO_OLD: _NEWER_CUBLAS,
        Cause.LIBSTDCXX: Remedy(
            "; run on a system with GCC >= 13's libstdc++ (e.g. Ubuntu 24.04), or in a "
            "conda environment: conda install -c conda-forge 'libstdcxx-ng>=13'",
            Fix.NONE,
        ),
        Cause.GLIBC: Remedy(
            "; run on a system with glibc >= 2.28 (wheelops wheels are manylinux_2_28)",
            Fix.NONE,
        ),
        Cause.DEPENDENCY_DAMAGED: Remedy(
            "; replace or remove the damaged {missing} (the loader took it from "
            "LD_LIBRARY_PATH or the system's library directories, before torch's own "
            "copy); reinstalling wheelops would not help",
            Fix.NONE,
        ),
        Cause.ELF_CLASS: Remedy(
            "; use a 64-bit Python (wheelops publishes 64-bit wheels only)", Fix.NONE
        ),
    }


def load_failure(ctx: Context, build: BuildInfo, role: str, failure: LoadFailure) -> Finding:
    if ctx.override is not None and role != "cpu":  # the expert's choice comes first
        advice = (
            f"; WHEELOPS_CUDA_LIBRARY={ctx.override} asked for this library: unset it "
            "to load the library of torch's CUDA"
        )
        fix: tuple[str, ...] = ("unset WHEELOPS_CUDA_LIBRARY",)
    else:
        remedy = remedies()[failure.cause]
        values: dict[str, Any] = {"missing": failure.missing}
        if remedy.fix is Fix.CUBLAS:
            library = next(lib for lib in build.cuda_libraries if cuda_role(lib) == role)
            values.update(built=library.cublaslt_version or library.cuda_version)
            values.update(major=library.major)
        advice = remedy.advice.format(**values)
        fix = _commands(ctx, remedy.fix, build, values)
    return Finding(
        f"load {role_name(role)} library",
        Status.FATAL,
        f"wheelops {build.wheelops_version} ({build.variant}, torch {build.torch_version})",
        ctx.runtime.describe_torch(),
        f"{failure.summary}{advice}. The loader said: {failure.raw}",
        fix,
    )


def _commands(
    ctx: Context, kind: Fix, build: BuildInfo, values: Mapping[str, Any]
) -> tuple[str, ...]:
    """The commands of one kind of fix for this build."""
    if kind is Fix.REINSTALL:
        return (ctx.reinstall(build),)
    if kind is Fix.UPGRADE_TORCH:
        return (ctx.upgrade_torch(build),)
    if kind is Fix.VARIANT:
        return ctx.variant_fix(build.stable_abi_floor)
    if kind is Fix.CUBLAS:
        package = "nvidia-cublas-cu12" if values["major"] == 12 else "nvidia-cublas"
        return (f'pip install --upgrade "{package}>={values["built"]}"', ctx.upgrade_torch(build))
    return ()
