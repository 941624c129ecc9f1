"""The compatibility policy, row by row, over recorded fact sets (no loading, no GPU)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from wheelops._build_info import BuildInfo
from wheelops._guard import format_findings
from wheelops._policy import Severity, gpu_finding, preload_findings, worst
from wheelops._runtime_facts import Gpu, RuntimeFacts
from wheelops._variants import matrix

INDEX = matrix().index_url
TORCH_INDEX = matrix().torch_index_url

CU130_BUILD = BuildInfo(
    wheelops_version="0.1.0",
    torch_version="2.14.1+cu130",
    stable_abi_floor="2.10",
    python_floor="3.10",
    cuda_version="13.0",
    nvcc_version="13.0.88",
    cuda_toolkit_origin="PyPI",
    cuda_arch_list="7.5;8.0;8.6;9.0;10.0;12.0+PTX",
    sass_archs=("7.5", "8.0", "8.6", "9.0", "10.0", "12.0"),
    ptx_archs=("12.0",),
    compiler="c++ (GCC) 13.2.1",
    platform="linux_x86_64",
    git_commit="0" * 40,
    libraries={"cpu": "_ops_cpu.abi3.so", "cuda": "_ops_cuda.abi3.so"},
)
CPU_BUILD = replace(
    CU130_BUILD,
    cuda_version=None,
    nvcc_version=None,
    cuda_toolkit_origin=None,
    cuda_arch_list=None,
    sass_archs=(),
    ptx_archs=(),
    libraries={"cpu": "_ops_cpu.abi3.so", "cuda": None},
)
CUDA_TORCH = RuntimeFacts("3.12.3", "x86_64", "2.11.0+cu130", "13.0", None, None)


def torch_runtime(version: str, cuda: str | None = None, **other: str) -> RuntimeFacts:
    return replace(CUDA_TORCH, torch_version=version, torch_cuda=cuda, **other)


def by_check(build: BuildInfo, runtime: RuntimeFacts) -> dict:
    return {f.check: f for f in preload_findings(build, runtime)}


def test_matching_install_is_ok_on_every_line():
    findings = preload_findings(CU130_BUILD, CUDA_TORCH)
    assert [f.check for f in findings] == ["Python", "torch", "torch build", "CUDA", "platform"]
    assert worst(findings) is Severity.OK


# Python: >= the wheel's floor.
@pytest.mark.parametrize(
    ("python", "severity"), [("3.10.0", "OK"), ("3.14.1", "OK"), ("3.9.18", "FATAL")]
)
def test_python_row(python, severity):
    finding = by_check(CU130_BUILD, replace(CUDA_TORCH, python_version=python))["Python"]
    assert finding.severity is Severity[severity]
    if finding.severity is Severity.FATAL:
        assert "3.9.18" in finding.message and "3.10" in finding.message
        assert "python3.12 -m venv" in finding.fix


# torch: >= 2.10 (stable-ABI floor); older: refuse before load, say so.
@pytest.mark.parametrize(
    ("torch_version", "severity"),
    [
        ("2.10.0+cu130", "OK"),
        ("2.15.0.dev20261101+cu130", "OK"),
        ("2.9.1+cu130", "FATAL"),
        ("1.13.1+cu117", "FATAL"),
    ],
)
def test_torch_version_row(torch_version, severity):
    finding = by_check(CU130_BUILD, torch_runtime(torch_version, "13.0"))["torch"]
    assert finding.severity is Severity[severity]
    if finding.severity is Severity.FATAL:
        assert torch_version in finding.message and "2.10" in finding.message
        assert "2.14.1+cu130" in finding.message  # the torch it was built against
        label = torch_version.split("+")[1]
        assert (
            finding.fix == f'pip install --upgrade "torch>=2.10" --index-url {TORCH_INDEX}/{label}'
        )


def test_torch_missing_is_fatal_with_the_install_command():
    finding = by_check(CU130_BUILD, torch_runtime(None))["torch"]  # type: ignore[arg-type]
    assert finding.severity is Severity.FATAL
    assert finding.fix == f'pip install --upgrade "torch>=2.10" --index-url {TORCH_INDEX}/cu130'


# torch build: CPU-only torch loads the CPU library only; ROCm/XPU: CPU only, say why.
@pytest.mark.parametrize(
    ("build", "runtime", "severity", "words"),
    [
        (CU130_BUILD, torch_runtime("2.13.0+cpu"), "DEGRADED", ["CPU-only", "CPU kernels only"]),
        (CU130_BUILD, torch_runtime("2.11.0+rocm6.4", torch_hip="6.4.1"), "DEGRADED", ["ROCm"]),
        (CU130_BUILD, torch_runtime("2.11.0+xpu", torch_xpu="20250101"), "DEGRADED", ["XPU"]),
        (CPU_BUILD, CUDA_TORCH, "DEGRADED", ["cpu variant", "CUDA 13.0"]),
        (CPU_BUILD, torch_runtime("2.13.0+cpu"), "OK", []),
    ],
)
def test_torch_build_row(build, runtime, severity, words):
    finding = by_check(build, runtime)["torch build"]
    assert finding.severity is Severity[severity], finding
    for word in words:
        assert word in finding.message
    if build is CU130_BUILD and runtime.torch_kind == "cpu":
        assert finding.fix == f'pip install --upgrade "torch>=2.10" --index-url {TORCH_INDEX}/cu130'
    if build is CPU_BUILD and severity == "DEGRADED":
        assert finding.fix.endswith(f"--index-url {INDEX}/cu130")
    # No CUDA line where no CUDA library will load.
    assert ("CUDA" in by_check(build, runtime)) == (
        build is CU130_BUILD and runtime.torch_cuda is not None and not runtime.torch_hip
    )


# CUDA: same major as the build; runtime minor >= build minor.
@pytest.mark.parametrize(
    ("build_cuda", "torch_cuda", "severity", "fix_variant"),
    [
        ("13.0", "13.0", "OK", None),
        ("13.0", "13.2", "OK", None),
        ("13.2", "13.0", "FATAL", "cu130"),  # runtime older than the build
        ("13.0", "12.8", "FATAL", "cu128"),  # major mismatch
        ("12.6", "13.0", "FATAL", "cu130"),
        ("12.8", "12.9", "OK", None),
        ("13.0", "12.4", "FATAL", None),  # no variant for 12.4: install a torch for one
    ],
)
def test_cuda_row(build_cuda, torch_cuda, severity, fix_variant):
    build = replace(CU130_BUILD, cuda_version=build_cuda)
    runtime = torch_runtime(f"2.11.0+cu{torch_cuda.replace('.', '')}", torch_cuda)
    finding = by_check(build, runtime)["CUDA"]
    assert finding.severity is Severity[severity]
    if finding.severity is Severity.FATAL:
        assert build_cuda in finding.message and torch_cuda in finding.message
        # Both directions, the one that keeps the user's torch first (issue #15, bug 3).
        change_torch = (
            f"keep this wheelops and install a torch built with CUDA {build_cuda}: "
            f'pip install --upgrade "torch>=2.10" --index-url {TORCH_INDEX}/'
            f"cu{build_cuda.replace('.', '')}"
        )
        if fix_variant:
            reinstall = "pip install --force-reinstall --no-deps wheelops --index-url"
            assert finding.fix == f"{reinstall} {INDEX}/{fix_variant}; or {change_torch}"
        else:
            assert finding.fix == f"no wheelops variant is built for CUDA 12.4: {change_torch}"


def test_platform_row():
    finding = by_check(replace(CU130_BUILD, platform="linux_aarch64"), CUDA_TORCH)["platform"]
    assert finding.severity is Severity.FATAL
    assert "aarch64" in finding.message and "x86_64" in finding.message


# GPU: SASS of the same major with minor <= the device's, or PTX <= the device's.
@pytest.mark.parametrize(
    ("arch_list", "capability", "severity", "fix_words"),
    [
        ("7.5;8.0;8.6;9.0;10.0;12.0+PTX", (9, 0), "OK", []),
        ("8.0", (8, 9), "OK", []),
        ("8.0+PTX", (9, 0), "OK", []),
        ("8.0", (9, 0), "FATAL", ["cu130 variant, which covers 9.0", 'TORCH_CUDA_ARCH_LIST="9.0"']),
        ("7.5;8.0;8.6;9.0;10.0;12.0+PTX", (7, 0), "FATAL", ["cu126", f"{TORCH_INDEX}/cu126"]),
    ],
)
def test_gpu_row(arch_list, capability, severity, fix_words):
    sass = tuple(a.replace("+PTX", "") for a in arch_list.split(";"))
    ptx = tuple(a.replace("+PTX", "") for a in arch_list.split(";") if a.endswith("+PTX"))
    build = replace(CU130_BUILD, cuda_arch_list=arch_list, sass_archs=sass, ptx_archs=ptx)
    gpu = Gpu(1, "NVIDIA Test GPU", capability)
    finding = gpu_finding(build, CUDA_TORCH, gpu)
    assert finding.severity is Severity[severity]
    if finding.severity is Severity.FATAL:
        cap = f"{capability[0]}.{capability[1]}"
        assert f"cuda:1 (NVIDIA Test GPU, compute capability {cap})" in finding.message
        assert f"SASS {', '.join(sass)}" in finding.message
        for word in fix_words:
            assert word in finding.fix


def test_refusal_message_has_both_sides_and_the_fix():
    build = replace(CU130_BUILD, cuda_version="12.8")
    text = format_findings("headline", [by_check(build, CUDA_TORCH)["CUDA"]])
    assert "build: CUDA 12.8" in text and "here:  CUDA 13.0 (torch 2.11.0+cu130)" in text
    assert (
        f"fix:   pip install --force-reinstall --no-deps wheelops --index-url {INDEX}/cu130" in text
    )
    assert "WHEELOPS_SKIP_GUARD=1" in text and "python -m wheelops" in text
