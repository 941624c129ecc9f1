"""The build facts written into the package (wheelops/_build_info.json).

They are the runtime's own typed record (BuildInfo in src/wheelops/_compat/facts.py),
written with its writer, so the build cannot write what the guard cannot read.
"""

from __future__ import annotations

import os
import subprocess
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from build_tools import PACKAGE_DIR, ROOT
from build_tools.compat import facts as _facts
from build_tools.compat import record as _record
from build_tools.compile import cublaslt
from build_tools.compile.flags import PYTHON_FLOOR, STABLE_ABI_FLOOR
from build_tools.plan.arch_list import ArchList
from build_tools.plan.cuda_toolkit import CudaToolkit

BUILD_INFO_FILE = _facts.BUILD_INFO_FILE


def _first_line(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.splitlines()[0].strip() if out else "unknown"


def git_commit() -> str:
    if os.environ.get("WHEELOPS_GIT_COMMIT"):
        return os.environ["WHEELOPS_GIT_COMMIT"]
    commit = _first_line(["git", "-C", str(ROOT), "rev-parse", "HEAD"])
    if commit == "unknown":
        return commit
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return commit + ("-dirty" if dirty else "")


def wheelops_version() -> str:
    # src/wheelops/_version.py holds one assignment; read it without importing the package.
    text = (PACKAGE_DIR / "_version.py").read_text()
    return text.split("=", 1)[1].strip().strip("\"'")


def compiler(command: str | None = None) -> str:
    """The C++ compiler's path and version: `command` (a cross compiler), else the one
    setuptools and torch's JIT pick."""
    command = command or os.environ.get("CXX", "c++")
    return f"{command}: {_first_line([command, '--version'])}"


@dataclass(frozen=True)
class BuiltCudaLibrary:
    file: str  # its file name in the package
    toolkit: CudaToolkit
    archs: ArchList


def cuda_library_info(built: BuiltCudaLibrary) -> _facts.CudaLibraryInfo:
    return _facts.CudaLibraryInfo(
        file=built.file,
        cuda_version=built.toolkit.release,
        nvcc_version=built.toolkit.version,
        toolkit_origin=built.toolkit.origin,
        arch_list=built.archs.spec,
        sass_archs=tuple(built.archs.sass),
        ptx_archs=tuple(built.archs.ptx),
        cublaslt_version=cublaslt.find(built.toolkit).version,
    )


def _release(built: BuiltCudaLibrary) -> tuple[int, ...]:
    return tuple(int(part) for part in built.toolkit.release.split("."))


def collect(
    torch_version: str,
    cpu_library: str,
    cuda_libraries: list[BuiltCudaLibrary],
    cxx_runtime: str,
    libraries: Sequence[Path],
    built_as: str | None = None,
    dev_mode: bool = False,
    cross: tuple[str, str] | None = None,
    package: Path | None = None,
) -> _facts.BuildInfo:
    """`libraries`: every native library built, as the package will hold them (their
    sha256 is recorded by path in `package`, the accelerators' _accel/torch2_11_0/...;
    by file name where `package` is None or does not hold them). `cross`: (platform,
    compiler) of a cross build; else this machine's."""
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return _facts.BuildInfo(
        wheelops_version=wheelops_version(),
        torch_version=torch_version,
        stable_abi_floor=STABLE_ABI_FLOOR,
        python_floor=PYTHON_FLOOR,
        compiler=compiler(cross[1] if cross else None),
        platform=cross[0] if cross else platform,
        git_commit=git_commit(),
        cpu_library=cpu_library,
        cuda_libraries=tuple(
            cuda_library_info(lib) for lib in sorted(cuda_libraries, key=_release)
        ),
        built_as=built_as,
        cxx_runtime=cxx_runtime,
        dev_mode=dev_mode,
        library_sha256={
            _in_package(p, package): _record.sha256_of(p).hexdigest() for p in libraries
        },
    )


def _in_package(library: Path, package: Path | None) -> str:
    if package is not None and library.is_relative_to(package):
        return library.relative_to(package).as_posix()
    return library.name


def write(facts: _facts.BuildInfo, directory: Path) -> Path:
    """Write `facts` (from collect) into a package directory with the runtime's writer."""
    path = directory / BUILD_INFO_FILE
    _facts.write_build_info(facts, path)
    return path
