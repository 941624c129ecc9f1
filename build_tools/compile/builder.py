"""The one builder of csrc/: every native library of wheelops, for any (CUDA toolkit and
arch list or none, target platform or this machine, wheel or dev mode), is compiled and
linked here and nowhere else.

`build(Library(...))` assembles a compile command per source (an object each) and the link
command, runs the compiles MAX_JOBS (else one per core) at a time, and skips what is up to
date: an object whose stamp (its .cmd beside it) holds this very command and that is newer
than every file its last compile read, as the compiler listed them in its depfile (its .d
beside it: g++ -MMD, nvcc -MD), or, where that list is absent or unreadable, than its
source and every csrc/ header; a library newer than its objects, linked by this very
command. Its callers are thin: setuptools' build_ext (extensions.py) for the wheel's
libraries, that of the build torch's CUDA major and the others' (universal) and a
cross-built platform's alike, and dev mode (build_tools/dev.py) into its JIT cache.
The flags are flags.py's and what torch's BuildExtension added, never the build Python's
own CFLAGS (setuptools gave the CPU library those, -fwrapv among them): a library that
does not link Python takes nothing from how that Python was configured.

Not here: the optional accelerator's commands (accelerator.py). It is not csrc/: it is
built per torch version against that version's own headers, outside the stable ABI, and
links libtorch_python through soname stubs; it shares no source, flag or target with these.
It shares the machinery: its commands are Jobs (object_jobs), run by run_jobs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from build_tools.compile import cublaslt, cutlass, flags, native_sources
from build_tools.plan.arch_list import ArchList
from build_tools.plan.cuda_toolkit import CudaToolkit

if TYPE_CHECKING:
    from build_tools.plan.cross_target import CrossTarget

# What torch.utils.cpp_extension adds to every nvcc command (COMMON_NVCC_FLAGS and the
# -fPIC of its BuildExtension), kept so that the libraries compile as they did through it.
CPP_EXTENSION_NVCC_FLAGS = [
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
    "-Xcompiler",
    "-fPIC",
]
# The depfile options: g++ lists the headers it read but the system's (-MMD); nvcc (CUDA
# 12.4 and 13) has only the every-header form (-MD). Either writes one make rule, `-MF` it.
HOST_DEPFILE = "-MMD"
NVCC_DEPFILE = "-MD"


def extension_defines(name: str) -> list[str]:
    """The defines torch's BuildExtension gives a py_limited_api extension's every compile
    (csrc/ reads none of them; torch's headers read TORCH_API_INCLUDE_EXTENSION_H)."""
    major, minor = map(int, flags.PYTHON_FLOOR.split("."))
    return [
        "-DTORCH_API_INCLUDE_EXTENSION_H",
        f"-DPy_LIMITED_API=0x{major:02x}{minor:02x}0000",  # our floor (torch: its own, 3.10)
        f"-DTORCH_EXTENSION_NAME={name}",
    ]


@dataclass(frozen=True)
class Library:
    """One native library to build: `name` is its module name (_ops_cpu, _ops_cuda13)."""

    name: str
    output: Path
    work: Path  # its objects and their command stamps
    toolkit: CudaToolkit | None = None  # None: the CPU library (csrc/**/*.cpp)
    archs: ArchList | None = None  # with a toolkit: the arch list of its device code
    target: CrossTarget | None = None  # None: this machine, with the build torch
    line_info: bool = False  # dev mode: -lineinfo (flags.nvcc_flags says why not a wheel's)


def cuda_module(toolkit: CudaToolkit) -> str:
    """_ops_cuda13: a CUDA library is named by its CUDA major, one per major at most."""
    return f"_ops_cuda{toolkit.release.split('.')[0]}"


@dataclass(frozen=True)
class Job:
    """One command of a build (a compile or the link) and what it makes."""

    command: list[str]
    output: Path
    inputs: tuple[Path, ...]  # what makes `output` stale when newer
    stamp: Path  # holds the command that last made `output`
    slow: bool = False  # started before the others (a CUTLASS object takes minutes)
    depfile: Path | None = None  # what the last run read, as the compiler listed it

    def up_to_date(self) -> bool:
        """`output` was made by this very command, after every input last changed (dev mode
        loads often; a CUTLASS object takes minutes). The inputs: the depfile's list, else
        (absent or unreadable) `inputs`; a listed file that is gone makes it stale."""
        stamp = self.stamp
        if not (self.output.is_file() and stamp.is_file()):
            return False
        if stamp.read_text() != "\0".join(self.command):
            return False
        listed = read_depfile(self.depfile) if self.depfile else None
        inputs = listed or self.inputs
        try:
            newest = max((p.stat().st_mtime for p in inputs), default=0)
        except FileNotFoundError:
            return False
        return self.output.stat().st_mtime > newest

    def run(self) -> None:
        done = subprocess.run(self.command, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(
                f"wheelops build failed:\n{' '.join(self.command)}\n{done.stdout}{done.stderr}"
            )
        self.stamp.write_text("\0".join(self.command))


def read_depfile(depfile: Path) -> tuple[Path, ...] | None:
    """The files of the make rule a compiler wrote (`x.o: x.cpp a.h \\` lines; g++ escapes
    a space in a name as `\\ ` and a `$` as `$$`); None where the file is absent or holds no
    rule with at least one file."""
    try:
        text = depfile.read_text()
    except (OSError, UnicodeDecodeError):
        return None
    words = re.findall(r"(?:\\.|[^\s\\])+", text.replace("\\\n", " "))
    colon = next((i for i, word in enumerate(words) if word.endswith(":")), None)
    if colon is None:
        return None
    files = [re.sub(r"\\(.)", r"\1", word).replace("$$", "$") for word in words[colon + 1 :]]
    return tuple(Path(name) for name in files if not name.endswith(":")) or None


def host_compiler() -> str:
    """The C++ compiler for this machine: CXX, else c++ (as setuptools and torch pick it)."""
    name = os.environ.get("CXX", "c++")
    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"wheelops build: no C++ compiler {name!r} (set CXX)")
    return found


@dataclass(frozen=True)
class _Host:
    """What the host side of a library is compiled with and linked against."""

    cxx: str
    torch_includes: list[Path]
    torch_lib: Path


def _host(target: CrossTarget | None) -> _Host:
    if target is not None:
        return _Host(str(target.cxx), list(target.torch_include_dirs), target.torch_lib_dir)
    from torch.utils import cpp_extension  # include and library paths only: no CUDA check

    includes = list(map(Path, cpp_extension.include_paths()))
    return _Host(host_compiler(), includes, Path(cpp_extension.library_paths()[0]))


def _headers() -> tuple[Path, ...]:
    return (*native_sources.CSRC.rglob("*.h"), *native_sources.CSRC.rglob("*.cuh"))


def object_jobs(
    compiler: str,
    sources: Sequence[Path],
    work: Path,
    compile_flags: list[str],
    headers: Sequence[Path],
    depfile_flag: str = HOST_DEPFILE,
    slow: bool = False,
) -> list[Job]:
    """A job per source: its object (named by stem) in `work`, with its depfile; `headers`:
    what the source may include, for the check where the depfile is missing."""

    def job(source: Path, obj: Path) -> Job:
        depfile = obj.with_suffix(".d")
        flags = [depfile_flag, "-MF", str(depfile), *compile_flags]
        command = [compiler, "-c", str(source), "-o", str(obj), *flags]
        return Job(command, obj, (source, *headers), obj.with_suffix(".o.cmd"), slow, depfile)

    return [job(source, work / f"{source.stem}.o") for source in sources]


def cpu_jobs(library: Library, host: _Host) -> list[Job]:
    """csrc/**/*.cpp: schemas and CPU kernels."""
    includes = [native_sources.INCLUDE_DIR, *host.torch_includes]
    compile_flags = [
        "-fPIC",
        *extension_defines(library.name),
        *[f"-I{p}" for p in includes],
        *flags.cxx_flags(),
    ]
    sources = native_sources.cpu_sources()
    return object_jobs(host.cxx, sources, library.work, compile_flags, _headers())


def _nvcc_flags(library: Library, host: _Host, toolkit: CudaToolkit) -> list[str]:
    """What every nvcc command of a library shares (its device code flags aside)."""
    lt = cublaslt.find(toolkit)
    includes = [native_sources.INCLUDE_DIR, *host.torch_includes, toolkit.include_dir]
    return [
        "-ccbin",
        host.cxx,
        *[f"-I{p}" for p in [*includes, lt.include_dir]],
        *CPP_EXTENSION_NVCC_FLAGS,
        *extension_defines(library.name),
        *flags.nvcc_flags(line_info=library.line_info),
    ]


def cuda_jobs(library: Library, host: _Host) -> list[Job]:
    """csrc/**/*.cu: the sources for every arch of the list, then (linked last, compiled
    first) the sm_90a ones for that arch alone, where the list has 9.0."""
    toolkit, archs = library.toolkit, library.archs
    assert toolkit is not None and archs is not None, "a CUDA library has a toolkit and archs"
    shared = _nvcc_flags(library, host, toolkit)
    nvcc, work, headers = str(toolkit.nvcc), library.work, _headers()
    sm90a = []
    if flags.has_sm90a(archs):
        sm90a_flags = [*shared, f"-I{cutlass.include_dir()}", *flags.sm90a_code_flags(toolkit)]
        sources = native_sources.sm90a_sources()
        sm90a = object_jobs(nvcc, sources, work, sm90a_flags, headers, NVCC_DEPFILE, slow=True)
    device = [*flags.device_code_flags(archs, toolkit), *([flags.SM90A_DEFINE] if sm90a else [])]
    sources = native_sources.cuda_sources()
    others = object_jobs(nvcc, sources, work, [*shared, *device], headers, NVCC_DEPFILE)
    return [*others, *sm90a]


def _cuda_link_flags(library: Library, toolkit: CudaToolkit) -> list[str]:
    """The CUDA runtime and cuBLASLt of the library's major, each linked by soname: the
    toolkit's, or a cross-built platform's own (whose cuBLASLt must be the headers')."""
    lt = cublaslt.find(toolkit)
    major = toolkit.release.split(".")[0]
    cudart_dir, cublaslt_dir = str(toolkit.cudart_dir), str(lt.lib_dir)
    target = library.target
    if target is not None:
        cudart_dir = cublaslt_dir = str(target.cuda_lib_dir(major))
        if target.cublaslt_version(major) != lt.version:
            raise SystemExit(
                f"wheelops build: the {target.machine} cuBLAS {target.cublaslt_version(major)} "
                f"is not the toolkit's headers' {lt.version} (build_tools/plan/cross_target.py)"
            )
    return [
        *flags.cuda_link_flags(cudart_dir, toolkit.cudart_soname),
        *flags.cublaslt_link_flags(cublaslt_dir, lt.soname),
    ]


def link_job(library: Library, host: _Host, objects: list[Path]) -> Job:
    """A shared library of `objects` on torch's core libraries (-z defs: nothing else)."""
    torch_core = [
        f"-L{host.torch_lib}",
        f"-Wl,-rpath-link,{host.torch_lib}",
        "-lc10",
        "-ltorch_cpu",
    ]
    cuda = _cuda_link_flags(library, library.toolkit) if library.toolkit else []
    files = [*map(str, objects), "-o", str(library.output)]
    command = [host.cxx, "-shared", *files, *torch_core, *flags.link_flags(), *cuda]
    # The stamp stays with the objects: the output's folder is the package's.
    return Job(command, library.output, tuple(objects), library.work / "link.cmd")


def jobs(library: Library) -> tuple[list[Job], Job]:
    """The compile jobs and the link job of `library`: every command the build runs."""
    host = _host(library.target)
    compiles = cuda_jobs(library, host) if library.toolkit else cpu_jobs(library, host)
    return compiles, link_job(library, host, [job.output for job in compiles])


def _max_jobs() -> int:
    return int(os.environ.get("MAX_JOBS") or os.cpu_count() or 1)


def run_jobs(
    compiles: list[Job], link: Job, verbose: bool = False, workers: int | None = None
) -> Path:
    """Run the stale compiles (`workers`, else MAX_JOBS, at a time; the slow ones first),
    then the link where anything changed; the link's output."""
    for job in [*compiles, link]:
        job.stamp.parent.mkdir(parents=True, exist_ok=True)
        job.output.parent.mkdir(parents=True, exist_ok=True)
    stale = [job for job in compiles if not job.up_to_date()]
    relink = bool(stale) or not link.up_to_date()
    if verbose:
        for job in [*stale, *([link] if relink else [])]:
            print(" ".join(job.command), flush=True)
    with ThreadPoolExecutor(max_workers=workers or _max_jobs()) as pool:
        list(pool.map(Job.run, sorted(stale, key=lambda job: not job.slow)))
    if relink:
        link.run()
    return link.output


def build(library: Library, verbose: bool = False) -> Path:
    """Compile and link `library` (only what is stale); its output."""
    return run_jobs(*jobs(library), verbose=verbose)
