"""Compile and link a CUDA library of wheelops with a given toolkit, outside setuptools.

The universal wheel holds a CUDA library per CUDA major, each built with its
own toolkit against the one build torch's stable headers. torch's
cpp_extension compiles with one toolkit per process and refuses a toolkit
whose CUDA major differs from the build torch's, so the extra library is
built here, with the flags cpp_extension gives the main one (flags.py and
CPP_EXTENSION_NVCC_FLAGS), object files in parallel. For a cross-built platform
(build_tools/plan/cross_target.py) every CUDA library is built here: nvcc hands the host
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

from build_tools.compile import cublaslt, cutlass, flags, native_sources
from build_tools.plan.arch_list import ArchList
from build_tools.plan.cuda_toolkit import CudaToolkit

if TYPE_CHECKING:
    from build_tools.plan.cross_target import CrossTarget

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
    torch_core = [f"-L{torch_lib}", f"-Wl,-rpath-link,{torch_lib}", "-lc10", "-ltorch_cpu"]
    files = [*map(str, objects), "-o", str(output)]
    _run([cxx, "-shared", *files, *torch_core, *flags.link_flags(), *extra])


def _nvcc_flags(cxx: str, toolkit: CudaToolkit, torch_includes: list[Path]) -> list[str]:
    """What every nvcc command of a library shares (its device code flags aside)."""
    lt = cublaslt.find(toolkit)
    includes = [native_sources.INCLUDE_DIR, *torch_includes, toolkit.include_dir, lt.include_dir]
    include_flags = [f"-I{p}" for p in includes]
    return ["-ccbin", cxx, *include_flags, *CPP_EXTENSION_NVCC_FLAGS, *flags.nvcc_flags()]


def sm90a_sources(archs: ArchList) -> list[Path]:
    """The sm_90a sources a library of this arch list links: all of them where the list has
    9.0 (flags.has_sm90a), else none."""
    return native_sources.sm90a_sources() if flags.has_sm90a(archs) else []


def sm90a_commands(
    toolkit: CudaToolkit, archs: ArchList, work: Path, cxx: str, torch_includes: list[Path]
) -> list[tuple[list[str], Path]]:
    """The nvcc command and object of each sm_90a source (none where the list lacks 9.0);
    CUTLASS's headers are found only when there is one to compile."""
    sources = sm90a_sources(archs)
    if not sources:
        return []
    work.mkdir(parents=True, exist_ok=True)
    shared = _nvcc_flags(cxx, toolkit, torch_includes)
    compile_flags = [*shared, f"-I{cutlass.include_dir()}", *flags.sm90a_code_flags(toolkit)]
    objects = [work / f"{source.stem}.o" for source in sources]
    return [
        ([str(toolkit.nvcc), "-c", str(source), "-o", str(obj), *compile_flags], obj)
        for source, obj in zip(sources, objects, strict=True)
    ]


def compile_sm90a(
    toolkit: CudaToolkit, archs: ArchList, work: Path, torch_includes: list[Path]
) -> list[Path]:
    """Compile the sm_90a sources for a library built elsewhere (setuptools, dev mode):
    their objects, to link into it (with flags.SM90A_DEFINE on its other sources)."""
    commands = sm90a_commands(toolkit, archs, work, _host_compiler(), torch_includes)
    run_parallel(command for command, obj in commands if not _up_to_date(command, obj))
    for command, obj in commands:
        obj.with_suffix(".cmd").write_text("\0".join(command))
    return [obj for _, obj in commands]


def _up_to_date(command: list[str], obj: Path) -> bool:
    """An object compiled by this very command, after every source file changed (dev mode
    loads often; a CUTLASS object takes minutes)."""
    stamp = obj.with_suffix(".cmd")
    if not (obj.is_file() and stamp.is_file() and stamp.read_text() == "\0".join(command)):
        return False
    headers = [*native_sources.CSRC.rglob("*.h"), *native_sources.CSRC.rglob("*.cuh")]
    inputs = [*headers, *native_sources.sm90a_sources()]
    return obj.stat().st_mtime > max(p.stat().st_mtime for p in inputs)


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
                f"is not the toolkit's headers' {lt.version} (build_tools/plan/cross_target.py)"
            )
    work.mkdir(parents=True, exist_ok=True)
    sm90a = sm90a_commands(toolkit, archs, work, cxx, torch_includes)
    compile_flags = [
        *_nvcc_flags(cxx, toolkit, torch_includes),
        *flags.device_code_flags(archs, toolkit),
        *([flags.SM90A_DEFINE] if sm90a else []),
    ]
    sources = native_sources.cuda_sources()
    objects = [work / f"{source.stem}.o" for source in sources]
    nvcc = str(toolkit.nvcc)
    per_file = [
        [nvcc, "-c", str(source), "-o", str(obj), *compile_flags]
        for source, obj in zip(sources, objects, strict=True)
    ]
    run_parallel([*(command for command, _ in sm90a), *per_file])  # the longest first
    cuda_libraries = [
        *flags.cuda_link_flags(cudart_dir, toolkit.cudart_soname),
        *flags.cublaslt_link_flags(cublaslt_dir, lt.soname),
    ]
    link(cxx, [*objects, *(obj for _, obj in sm90a)], output, torch_lib, cuda_libraries)
    return output
