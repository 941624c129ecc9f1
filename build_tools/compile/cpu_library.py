"""Compile and link the CPU library for a cross-built platform, outside setuptools.

setuptools and torch.utils.cpp_extension compile for the machine they run on; for a
platform the universal wheel is cross-built for (build_tools/plan/cross_target.py) the CPU
library is built here, with the flags they give it natively (flags.cxx_flags,
flags.link_flags) and the defines torch's BuildExtension adds, against that platform's
torch headers and core libraries.
"""

from __future__ import annotations

from pathlib import Path

from build_tools.compile import cuda_library, flags, native_sources
from build_tools.plan.cross_target import CrossTarget

# What torch's BuildExtension adds to a py_limited_api extension's compile commands.
CPP_EXTENSION_DEFINES = [
    "-DTORCH_API_INCLUDE_EXTENSION_H",
    "-DPy_LIMITED_API=0x030a0000",
    "-DTORCH_EXTENSION_NAME=_ops_cpu",
]


def build(target: CrossTarget, output: Path, work: Path) -> Path:
    """Build csrc/ops/*.cpp into the shared library `output`; objects go to `work`."""
    work.mkdir(parents=True, exist_ok=True)
    includes = [native_sources.INCLUDE_DIR, *target.torch_include_dirs]
    compile_flags = [
        "-fPIC",
        *CPP_EXTENSION_DEFINES,
        *[f"-I{p}" for p in includes],
        *flags.cxx_flags(),
    ]
    sources = native_sources.cpu_sources()
    objects = [work / f"{source.stem}.o" for source in sources]
    cuda_library.run_parallel(
        [str(target.cxx), "-c", str(source), "-o", str(obj), *compile_flags]
        for source, obj in zip(sources, objects, strict=True)
    )
    cuda_library.link(str(target.cxx), objects, output, target.torch_lib_dir, [])
    return output
