"""The compatibility policy: build facts vs this process, as findings with fixes.

Pure decisions over recorded facts (BuildInfo, RuntimeFacts, a GPU's
capability, a loader message); nothing here loads a library or touches a GPU,
so every rule is tested with recorded fact sets. See DESIGN.md's policy table.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from wheelops import _variants
from wheelops._archs import describe, kernel_for
from wheelops._build_info import BuildInfo
from wheelops._loader_errors import LoadFailure
from wheelops._runtime_facts import Gpu, RuntimeFacts
from wheelops._variants import version_tuple


class Severity(enum.IntEnum):
    OK = 0
    DEGRADED = 1  # works, with less than the build offers (e.g. CPU kernels only)
    FATAL = 2  # cannot serve this machine (or this GPU)

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Finding:
    check: str  # what was compared: "Python", "torch", "CUDA", "GPU cuda:0", ...
    severity: Severity
    build: str  # the build's side
    runtime: str  # this machine's side
    message: str  # names the cause and both sides
    fix: str | None = None  # a command (or, where none exists, what would serve)

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "severity": str(self.severity),
            "build": self.build,
            "runtime": self.runtime,
            "message": self.message,
            "fix": self.fix,
        }


def worst(findings: list[Finding]) -> Severity:
    return max((f.severity for f in findings), default=Severity.OK)


def _torch_label(torch_version: str) -> str | None:
    """The local version label of a torch wheel names its index: 2.9.0+cu126 -> cu126."""
    _, plus, label = torch_version.partition("+")
    return label if plus and label.startswith(("cu", "cpu", "rocm", "xpu")) else None


def _upgrade_torch(runtime: RuntimeFacts, build: BuildInfo) -> str:
    """Upgrade torch from the index the running one came from (its CUDA stays)."""
    floor = build.stable_abi_floor
    if runtime.torch_version is not None:
        return _variants.torch_install_command(_torch_label(runtime.torch_version), floor)
    return _variants.torch_install_command(build.variant, floor)


def variant_fix(runtime: RuntimeFacts) -> str:
    """Install the wheelops variant whose libraries load beside this torch."""
    if runtime.torch_kind == "cuda":
        fitting = _variants.variants_for_torch_cuda(runtime.torch_cuda)
        if fitting:
            return _variants.install_command(fitting[0].name)
        default = _variants.matrix().default_variant
        return (
            f"no wheelops variant is built for CUDA {runtime.torch_cuda} (the variants: "
            f"{', '.join(v.name for v in _variants.matrix().variants)}); install a torch "
            f"for one of them, then its wheelops: {_variants.torch_install_command(default)} "
            f"&& {_variants.install_command(default)}"
        )
    return _variants.install_command("cpu")


def python_finding(build: BuildInfo, runtime: RuntimeFacts) -> Finding:
    floor = build.python_floor
    ok = version_tuple(runtime.python_version) >= version_tuple(floor)
    return Finding(
        "Python",
        Severity.OK if ok else Severity.FATAL,
        f">= {floor}",
        runtime.python_version,
        f"Python {runtime.python_version} is supported (>= {floor})"
        if ok
        else f"Python {runtime.python_version} is older than {floor}, the oldest wheelops supports",
        None
        if ok
        else f"use Python >= {floor}: python3.12 -m venv .venv && . .venv/bin/activate && "
        "pip install wheelops",
    )


def torch_finding(build: BuildInfo, runtime: RuntimeFacts) -> Finding:
    wanted = f">= {build.stable_abi_floor} (built against {build.torch_version})"
    if runtime.torch_version is None:
        return Finding(
            "torch",
            Severity.FATAL,
            wanted,
            "not installed",
            f"torch is not installed; wheelops needs torch >= {build.stable_abi_floor}",
            _upgrade_torch(runtime, build),
        )
    floor = build.stable_abi_floor
    if version_tuple(runtime.torch_version) < version_tuple(floor):
        return Finding(
            "torch",
            Severity.FATAL,
            wanted,
            runtime.torch_version,
            f"torch {runtime.torch_version} is older than {floor}, the oldest torch "
            f"whose stable ABI wheelops uses (built against torch {build.torch_version}); "
            "no wheelops variant serves it",
            _upgrade_torch(runtime, build),
        )
    return Finding(
        "torch",
        Severity.OK,
        wanted,
        runtime.torch_version,
        f"torch {runtime.torch_version} is at or above the stable-ABI floor {floor}",
    )


def torch_build_finding(build: BuildInfo, runtime: RuntimeFacts) -> Finding:
    kind = runtime.torch_kind
    ours = f"CUDA {build.cuda_version} + CPU" if build.cuda_version else "CPU only"
    theirs = runtime.describe_torch()
    if build.cuda_version is None:
        if kind == "cuda":
            return Finding(
                "torch build",
                Severity.DEGRADED,
                ours,
                theirs,
                f"this is the cpu variant of wheelops: it runs CPU tensors only, and "
                f"{theirs} can use a GPU",
                variant_fix(runtime),
            )
        return Finding("torch build", Severity.OK, ours, theirs, "CPU kernels for CPU tensors")
    if kind == "cuda":
        return Finding("torch build", Severity.OK, ours, theirs, "CPU and CUDA kernels")
    if kind == "cpu":
        return Finding(
            "torch build",
            Severity.DEGRADED,
            ours,
            theirs,
            f"{theirs} is CPU-only, so wheelops loads its CPU kernels only; CUDA tensors "
            "need a CUDA build of torch",
            _variants.torch_install_command(build.variant, build.stable_abi_floor),
        )
    if kind in ("rocm", "xpu"):
        return Finding(
            "torch build",
            Severity.DEGRADED,
            ours,
            theirs,
            f"{theirs}: wheelops has no {kind.upper() if kind == 'xpu' else 'ROCm'} "
            "kernels, so it runs CPU tensors only (no wheelops variant targets it)",
            None,
        )
    return Finding("torch build", Severity.FATAL, ours, theirs, "torch is not installed")


def cuda_finding(build: BuildInfo, runtime: RuntimeFacts) -> Finding | None:
    """Only for a CUDA build under a CUDA torch: same major, runtime minor >= build minor."""
    if build.cuda_version is None or runtime.torch_kind != "cuda":
        return None
    assert runtime.torch_cuda is not None
    ours, theirs = version_tuple(build.cuda_version), version_tuple(runtime.torch_cuda)
    sides = (
        f"CUDA {build.cuda_version} (needs the {ours[0]}.x runtime, >= {build.cuda_version})",
        f"CUDA {runtime.torch_cuda} (torch {runtime.torch_version})",
    )
    if ours[0] != theirs[0]:
        message = (
            f"wheelops was built with CUDA {build.cuda_version} and torch "
            f"{runtime.torch_version} brings the CUDA {runtime.torch_cuda} runtime: "
            f"CUDA {ours[0]} libraries cannot run on a CUDA {theirs[0]} runtime"
        )
    elif theirs[1] < ours[1]:
        message = (
            f"wheelops was built with CUDA {build.cuda_version}, newer than the CUDA "
            f"{runtime.torch_cuda} runtime of torch {runtime.torch_version}, which may "
            "lack functions the build calls"
        )
    else:
        return Finding("CUDA", Severity.OK, *sides, "the CUDA runtime matches the build")
    # Both directions where both exist, the one that keeps the user's torch first.
    change_torch = (
        f"keep this wheelops and install a torch built with CUDA {build.cuda_version}: "
        + _variants.torch_install_command(build.variant, build.stable_abi_floor)
    )
    if _variants.variants_for_torch_cuda(runtime.torch_cuda):
        fix = f"{variant_fix(runtime)}; or {change_torch}"
    else:
        fix = f"no wheelops variant is built for CUDA {runtime.torch_cuda}: {change_torch}"
    return Finding("CUDA", Severity.FATAL, *sides, message, fix)


def platform_finding(build: BuildInfo, runtime: RuntimeFacts) -> Finding:
    built_for = build.platform.split("_", 1)[-1] if "_" in build.platform else build.platform
    if built_for in (runtime.machine, "any"):
        return Finding("platform", Severity.OK, build.platform, runtime.machine, "same machine")
    return Finding(
        "platform",
        Severity.FATAL,
        build.platform,
        runtime.machine,
        f"this wheelops was built for {built_for}; this machine is {runtime.machine}",
        _variants.install_command(build.variant),
    )


def preload_findings(build: BuildInfo, runtime: RuntimeFacts) -> list[Finding]:
    """Everything decidable before any dlopen (DESIGN decision 5)."""
    findings = [
        python_finding(build, runtime),
        torch_finding(build, runtime),
        torch_build_finding(build, runtime),
        cuda_finding(build, runtime),
        platform_finding(build, runtime),
    ]
    return [f for f in findings if f is not None]


def library_file_finding(build: BuildInfo, role: str, problem: str) -> Finding:
    """A library file that the loader must not be handed (missing, truncated, foreign)."""
    if "32-bit" in problem:
        fix = "use a 64-bit Python (wheelops publishes 64-bit wheels only)"
    else:
        fix = _variants.install_command(build.variant)
    return Finding(
        f"{role} library",
        Severity.FATAL,
        "a complete 64-bit ELF library for " + build.platform,
        problem,
        f"the wheelops {role} library cannot be loaded: {problem}",
        fix,
    )


def load_failure_finding(
    build: BuildInfo, runtime: RuntimeFacts, role: str, failure: LoadFailure
) -> Finding:
    cause = failure.cause
    if cause in ("torch-too-old",):
        fix = _upgrade_torch(runtime, build)
    elif cause in ("glibc", "libstdcxx"):
        fix = (
            "in a conda environment: conda install -c conda-forge 'libstdcxx-ng>=13'; "
            "otherwise run on a system with glibc >= 2.28 and GCC >= 13's libstdc++ "
            "(e.g. Ubuntu 24.04)"
            if cause == "libstdcxx"
            else "run on a system with glibc >= 2.28 (wheelops wheels are manylinux_2_28)"
        )
    elif cause == "dependency-damaged":
        fix = (
            f"replace or remove the damaged {failure.missing} (the loader took it from "
            "LD_LIBRARY_PATH or the system's library directories, before torch's own copy); "
            "reinstalling wheelops would not help"
        )
    elif cause == "elf-class":
        fix = "use a 64-bit Python (wheelops publishes 64-bit wheels only)"
    elif cause == "torch-libraries":
        fix = f"import torch before wheelops, or reinstall torch: {_upgrade_torch(runtime, build)}"
    elif cause in ("torch-abi", "cuda-major", "cuda-minor") and runtime.torch_kind == "cuda":
        fix = variant_fix(runtime)
    elif cause == "cuda-major" and runtime.torch_kind != "cuda":
        fix = _variants.install_command("cpu")
    else:
        fix = _variants.install_command(build.variant)
    return Finding(
        f"load {role} library",
        Severity.FATAL,
        f"wheelops {build.wheelops_version} ({build.variant}, torch {build.torch_version})",
        runtime.describe_torch(),
        f"{failure.summary}. The loader said: {failure.raw}",
        fix,
    )


def gpu_finding(build: BuildInfo, runtime: RuntimeFacts, gpu: Gpu) -> Finding:
    """Whether the build holds a kernel image this GPU can run."""
    check = f"GPU cuda:{gpu.index}"
    holds = describe(build.sass_archs, build.ptx_archs)
    device = f"{gpu.name}, compute capability {gpu.capability_text}"
    runs = kernel_for(build.sass_archs, build.ptx_archs, gpu.capability)
    if runs:
        return Finding(check, Severity.OK, holds, device, f"runs {runs}")
    message = (
        f"cuda:{gpu.index} ({device}) cannot run this wheelops build: it holds {holds}. "
        "SASS runs only on GPUs of its major version with an equal or higher minor, "
        "PTX only on GPUs of at least its capability"
    )
    return Finding(check, Severity.FATAL, holds, device, message, gpu_fix(runtime, gpu))


def gpu_fix(runtime: RuntimeFacts, gpu: Gpu) -> str:
    cap = gpu.capability_text
    here = [
        v
        for v in _variants.variants_for_torch_cuda(runtime.torch_cuda)
        if v.runs_on(gpu.capability)
    ]
    options = []
    if here:
        options.append(
            f"install the {here[0].name} variant, which covers {cap}: "
            + _variants.install_command(here[0].name)
        )
    else:
        elsewhere = [v for v in _variants.matrix().variants if v.runs_on(gpu.capability)]
        if elsewhere:
            v = elsewhere[-1]
            options.append(
                f"no wheelops variant for CUDA {runtime.torch_cuda} covers {cap}; the "
                f"{v.name} variant does, with a CUDA {v.cuda} torch: "
                f"{_variants.torch_install_command(v.name)} && {_variants.install_command(v.name)}"
            )
    if runtime.torch_cuda and version_tuple(runtime.torch_cuda)[0] == 13:
        options.append("build for this GPU from source: " + _variants.source_build_command(cap))
    if not options:
        return f"no published wheelops variant covers compute capability {cap}"
    return "; or ".join(options)
