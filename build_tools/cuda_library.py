"""Compile and link a CUDA library of wheelops with a given toolkit, outside setuptools.

The universal wheel holds a CUDA library per CUDA major, each built with its
own toolkit against the one build torch's stable headers. torch's
cpp_extension compiles with one toolkit per process and refuses a toolkit
whose CUDA major differs from the build torch's, so the extra library is
built here, with the flags cpp_extension gives the main one (flags.py and
CPP_EXTENSION_NVCC_FLAGS), object files in parallel. For a cross-built platform
(build_tools/cross_target.py) every CUDA library is built here: nvcc hands the host
side to the cross compiler, and it links that platform's torch and CUDA runtime.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from build_tools import cublaslt, flags, native_sources
from build_tools.arch_list import ArchList
from build_tools.cuda_toolkit import CudaToolkit

if TYPE_CHECKING:
    from build_tools.cross_target import CrossTarget

# What torch.utils.cpp_extension adds to every nvcc command (COMMON_NVCC_FLAGS), so that
# both CUDA libraries compile alike.
CPP_EXTENSION_NVCC_FLAGS = [
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
    "-Xcompiler",
    "-fPIC",
]


def _host_compiler() -> str:
    name = os.environ.get("CXX", "c++")
    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"wheelops build: no C++ compiler {name!r} (set CXX)")
    return found


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"wheelops build failed:\n{' '.join(command)}\n{done.stdout}{done.stderr}")


def run_parallel(commands: Iterable[list[str]]) -> None:
    """Run compile commands, MAX_JOBS (else one per core) at a time."""
    jobs = int(os.environ.get("MAX_JOBS") or os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(_run, commands))


def link(cxx: str, objects: list[Path], output: Path, torch_lib: Path, extra: list[str]) -> None:
    """A shared library of `objects` on torch's core libraries (-z defs: nothing else)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    _run([
        cxx, "-shared", *map(str, objects), "-o", str(output),
        f"-L{torch_lib}", f"-Wl,-rpath-link,{torch_lib}", "-lc10", "-ltorch_cpu",
        *flags.link_flags(), *extra,
    ])  # fmt: skip


def build(
    toolkit: CudaToolkit,
    archs: ArchList,
    output: Path,
    work: Path,
    target: CrossTarget | None = None,
) -> Path:
    """Build csrc/ops/*.cu into the shared library `output`; objects go to `work`."""
    from torch.utils import cpp_extension  # include and library paths only: no CUDA check

    lt = cublaslt.find(toolkit)
    major = toolkit.release.split(".")[0]
    if target is None:
        cxx = _host_compiler()
        torch_includes = list(map(Path, cpp_extension.include_paths()))
        torch_lib = Path(cpp_extension.library_paths()[0])
        cudart_dir, cublaslt_dir = str(toolkit.cudart_dir), str(lt.lib_dir)
    else:
        cxx = str(target.cxx)
        torch_includes, torch_lib = target.torch_include_dirs, target.torch_lib_dir
        cudart_dir = cublaslt_dir = str(target.cuda_lib_dir(major))
        if target.cublaslt_version(major) != lt.version:
            raise SystemExit(
                f"wheelops build: the {target.machine} cuBLAS {target.cublaslt_version(major)} "
                f"is not the toolkit's headers' {lt.version} (build_tools/cross_target.py)"
            )
    work.mkdir(parents=True, exist_ok=True)
    includes = [native_sources.INCLUDE_DIR, *torch_includes]
    compile_flags = [
        "-ccbin", cxx,
        *[f"-I{p}" for p in [*includes, toolkit.include_dir, lt.include_dir]],
        *CPP_EXTENSION_NVCC_FLAGS,
        *flags.nvcc_flags(),
        *flags.device_code_flags(archs, toolkit),
    ]  # fmt: skip
    sources = native_sources.cuda_sources()
    objects = [work / f"{source.stem}.o" for source in sources]
    run_parallel(
        [str(toolkit.nvcc), "-c", str(source), "-o", str(obj), *compile_flags]
        for source, obj in zip(sources, objects, strict=True)
    )
    link(cxx, objects, output, torch_lib, [
        *flags.cuda_link_flags(cudart_dir, toolkit.cudart_soname),
        *flags.cublaslt_link_flags(cublaslt_dir, lt.soname),
    ])  # fmt: skip
    return output
