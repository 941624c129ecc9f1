"""cuBLASLt for a CUDA library: its headers, the library to link, and its version.

Each CUDA library of wheelops links its own major's cuBLASLt (libcublasLt.so.12 or
.so.13), the one PyTorch's CUDA wheels install (nvidia-cublas-cu12 / nvidia-cublas) and
load before wheelops; the wheel never carries it (build_tools/package/repair.py excludes it).
The headers and the library to link against come with the toolkit the library is built
with: the PyPI CUDA 13 toolkit (`cuda-toolkit[...,cublas]`, the cuBLAS that torch's own
pin brings), the assembled CUDA 12.4 toolkit (build_tools/plan/cuda12_toolkit.py adds the
pinned nvidia-cublas-cu12 wheel) or CUDA_HOME. The version read from its headers is a
build fact (CudaLibraryInfo.cublaslt_version).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from build_tools.plan.cuda_toolkit import CudaToolkit, ToolkitError

LIBRARY_DIRS = ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib")
PIP_HINT = {
    "12": "nvidia-cublas-cu12 (build_tools/plan/cuda12_toolkit.py pins it for the universal wheel)",
    "13": 'cuda-toolkit[cublas] (pip install "cuda-toolkit[cublas]==<the toolkit release>")',
}


@dataclass(frozen=True)
class CublasLt:
    include_dir: Path
    lib_dir: Path
    soname: str  # libcublasLt.so.13
    version: str  # from cublas_api.h: "13.1.1" (major.minor.patch, as cublasLtGetVersion)


def header_version(include_dir: Path) -> str:
    """major.minor.patch of the cuBLAS headers in `include_dir` (CUBLAS_VER_*)."""
    text = (include_dir / "cublas_api.h").read_text(errors="replace")
    parts = []
    for name in ("MAJOR", "MINOR", "PATCH"):
        match = re.search(rf"#define\s+CUBLAS_VER_{name}\s+(\d+)", text)
        if match is None:
            raise ToolkitError(f"{include_dir / 'cublas_api.h'} has no CUBLAS_VER_{name}")
        parts.append(match.group(1))
    return ".".join(parts)


def find(toolkit: CudaToolkit) -> CublasLt:
    """The cuBLASLt that comes with `toolkit`, or ToolkitError saying what to install."""
    major = toolkit.release.split(".")[0]
    soname = f"libcublasLt.so.{major}"
    include_dir = toolkit.include_dir
    lib_dir = next(
        (toolkit.home / d for d in LIBRARY_DIRS if (toolkit.home / d / soname).exists()), None
    )
    if not (include_dir / "cublasLt.h").is_file() or lib_dir is None:
        raise ToolkitError(
            f"the CUDA {toolkit.release} toolkit at {toolkit.home} has no cuBLASLt "
            f"(include/cublasLt.h and {soname}), which fused_linear_gelu links: install "
            f"{PIP_HINT.get(major, 'the toolkit cuBLAS component')}"
        )
    version = header_version(include_dir)
    if version.split(".")[0] != major:
        raise ToolkitError(
            f"the cuBLAS headers in {include_dir} are {version}, not CUDA {major}'s cuBLAS"
        )
    return CublasLt(include_dir, lib_dir, soname, version)
