"""This process against the build, before any dlopen: Python, torch, the kind of torch
build (CPU, CUDA, ROCm, XPU), and the platform."""

from __future__ import annotations

from ..early import python_rule
from ..facts import BuildInfo
from ..report import Finding, Status
from ..versions import version_tuple
from .context import Context

# JetPack 7 (L4T R38, Jetson Thor) moved Jetson to the SBSA CUDA platform of the servers.
L4T_SBSA_MAJOR = 38


def _l4t_major(release: str) -> int:
    """36 for "R36 (release), REVISION: 4.3"; 0 where unreadable (taken as older)."""
    digits = "".join(c for c in release.split()[0] if c.isdigit()) if release.split() else ""
    return int(digits) if digits else 0


def python(ctx: Context, build: BuildInfo) -> Finding:
    floor, here = build.python_floor, ctx.runtime.python_version
    wanted = f">= {floor}"
    if here is None:
        message = "a C++ program loads the libraries without Python"
        return Finding("Python", Status.OK, wanted, "none (a C++ program)", message)
    refused = python_rule(here, floor)
    if refused is None:
        message = f"Python {here} is supported (>= {floor})"
        return Finding("Python", Status.OK, wanted, here, message)
    message, fix = refused
    return Finding("Python", Status.FATAL, wanted, here, message, fix)


def torch(ctx: Context, build: BuildInfo) -> Finding:
    floor, here = build.stable_abi_floor, ctx.runtime.torch_version
    wanted = f">= {floor} (built against {build.torch_version})"
    if here is None:
        message = f"torch is not installed; wheelops needs torch >= {floor}"
    elif version_tuple(here) < version_tuple(floor):
        message = (
            f"torch {here} is older than {floor}, the oldest torch whose stable ABI "
            f"wheelops uses (built against torch {build.torch_version}); no wheelops "
            "variant serves it"
        )
    else:
        message = f"torch {here} is at or above the stable-ABI floor {floor}"
        return Finding("torch", Status.OK, wanted, here, message)
    fix = (ctx.upgrade_torch(build),)
    return Finding("torch", Status.FATAL, wanted, here or "not installed", message, fix)


def torch_build(ctx: Context, build: BuildInfo) -> Finding:
    kind = ctx.runtime.torch_kind
    cuda = ", ".join(lib.cuda_version for lib in build.cuda_libraries)
    ours = f"CUDA {cuda} + CPU" if cuda else "CPU only"
    theirs = ctx.runtime.describe_torch()

    def finding(status: Status, message: str, *fix: str) -> Finding:
        return Finding("torch build", status, ours, theirs, message, fix)

    if kind == "missing":
        return finding(Status.FATAL, "torch is not installed")
    if not build.cuda_libraries:
        if kind == "cuda":
            return finding(
                Status.DEGRADED,
                f"this is the cpu variant of wheelops: it runs CPU tensors only, and "
                f"{theirs} can use a GPU",
                *ctx.variant_fix(build.stable_abi_floor),
            )
        return finding(Status.OK, "CPU kernels for CPU tensors")
    if kind == "cuda":
        return finding(Status.OK, "CPU and CUDA kernels")
    if kind == "cpu":
        return finding(
            Status.DEGRADED,
            f"{theirs} is CPU-only, so wheelops loads its CPU kernels only; CUDA tensors "
            "need a CUDA build of torch",
            ctx.change_torch(build, build.cuda_libraries[-1]),
        )
    name = "XPU" if kind == "xpu" else "ROCm"
    return finding(
        Status.DEGRADED,
        f"{theirs}: wheelops has no {name} kernels, so it runs CPU tensors only (no "
        "wheelops variant targets it)",
    )


def platform(ctx: Context, build: BuildInfo) -> Finding:
    built_for = build.platform.split("_", 1)[-1] if "_" in build.platform else build.platform
    here = ctx.runtime.machine
    l4t = ctx.runtime.l4t
    if built_for == here == "aarch64" and l4t and _l4t_major(l4t) < L4T_SBSA_MAJOR:
        return Finding(
            "platform",
            Status.DEGRADED,
            build.platform,
            f"{here}, Jetson (L4T {l4t})",
            "this wheelops is built for aarch64 servers (SBSA: GH200, GB200, DGX Spark); a "
            "Jetson with L4T before JetPack 7 is a different CUDA platform, never built or "
            "tested for: the CPU kernels work, its CUDA library may not load or run there",
        )
    if built_for in (here, "any"):
        return Finding("platform", Status.OK, build.platform, here, "same machine")
    message = f"this wheelops was built for {built_for}; this machine is {here}"
    return Finding("platform", Status.FATAL, build.platform, here, message, (ctx.reinstall(build),))
