"""Compile and link a CUDA library of wheelops with a given toolkit, outside setuptools.

The universal wheel holds a CUDA library per CUDA major, each built with its
own toolkit against the one build torch's stable headers. torch's
cpp_extension compiles with one toolkit per process and refuses a toolkit
whose CUDA major differs from the build torch's, so the extra library is
built here, with the flags cpp_extension gives the main one (flags.py and
CPP_EXTENSION_NVCC_FLAGS), object files in parallel.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from build_tools import cublaslt, flags, native_sources
from build_tools.arch_list import ArchList
from build_tools.cuda_toolkit import CudaToolkit

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


def build(toolkit: CudaToolkit, archs: ArchList, output: Path, work: Path) -> Path:
    """Build csrc/ops/*.cu into the shared library `output`; objects go to `work`."""
    from torch.utils import cpp_extension  # include and library paths only: no CUDA check

    cxx = _host_compiler()
    lt = cublaslt.find(toolkit)
    work.mkdir(parents=True, exist_ok=True)
    includes = [native_sources.INCLUDE_DIR, *map(Path, cpp_extension.include_paths())]
    compile_flags = [
        "-ccbin", cxx,
        *[f"-I{p}" for p in [*includes, toolkit.include_dir, lt.include_dir]],
        *CPP_EXTENSION_NVCC_FLAGS,
        *flags.nvcc_flags(),
        *flags.device_code_flags(archs, toolkit),
    ]  # fmt: skip
    sources = native_sources.cuda_sources()
    objects = [work / f"{source.stem}.o" for source in sources]
    jobs = int(os.environ.get("MAX_JOBS") or os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        commands = [
            [str(toolkit.nvcc), "-c", str(source), "-o", str(obj), *compile_flags]
            for source, obj in zip(sources, objects, strict=True)
        ]
        list(pool.map(_run, commands))
    torch_lib = Path(cpp_extension.library_paths()[0])
    output.parent.mkdir(parents=True, exist_ok=True)
    _run([
        cxx, "-shared", *map(str, objects), "-o", str(output),
        f"-L{torch_lib}", "-lc10", "-ltorch_cpu",
        *flags.link_flags(),
        *flags.cuda_link_flags(str(toolkit.cudart_dir), toolkit.cudart_soname),
        *flags.cublaslt_link_flags(str(lt.lib_dir), lt.soname),
    ])  # fmt: skip
    return output
