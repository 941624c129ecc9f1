"""Facts that only the doctor probes, and the first CUDA call on a device: the GPUs, the
driver, the cuBLASLt in the process, glibc, the C++ compilers. Import never reads them (a
GPU's facts initialise CUDA, a compiler probe builds a library), nor imports this module.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from struct import error as struct_error
from typing import Any

from .links import link_facts, private_cxx_runtime


@dataclass(frozen=True)
class Gpu:
    """One CUDA device, as torch sees it (read at its first CUDA use, never at import)."""

    index: int
    name: str
    capability: tuple[int, int]

    @property
    def capability_text(self) -> str:
        return f"{self.capability[0]}.{self.capability[1]}"


def gpu(index: int) -> Gpu:
    """One GPU's facts (initialises CUDA; never called at import)."""
    import torch

    return Gpu(index, torch.cuda.get_device_name(index), torch.cuda.get_device_capability(index))


def visible_gpus() -> list[Gpu]:
    """The GPUs torch sees (initialises CUDA; never called at import)."""
    import torch

    if torch.version.cuda is None or not torch.cuda.is_available():
        return []
    return [gpu(i) for i in range(torch.cuda.device_count())]


def cuda_driver_version() -> str | None:
    """The installed driver's CUDA version, e.g. "13.0" (asks libcuda; no context)."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    version = ctypes.c_int()
    if libcuda.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return None
    return f"{version.value // 1000}.{version.value % 1000 // 10}"


def cublaslt_loaded(major: int) -> str | None:
    """The version of the libcublasLt.so.<major> already in this process (torch's CUDA
    build loads its own), e.g. "13.1.0"; None where none is loaded. Loads nothing."""
    try:
        library = ctypes.CDLL(f"libcublasLt.so.{major}", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        get_version = library.cublasLtGetVersion
    except (OSError, AttributeError):
        return None
    get_version.restype = ctypes.c_size_t
    version = int(get_version())
    return f"{version // 10000}.{version // 100 % 100}.{version % 100}"


def glibc_version() -> str | None:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (ValueError, OSError):
        return None


@dataclass(frozen=True)
class CompilerProbe:
    """How a C++ compiler links shared libraries, learnt by building one that throws."""

    compiler: str  # as named: $CXX, or g++
    path: str | None  # where it resolves on PATH; None: not found
    runtime: str  # "shared", "private" (its own copy of libstdc++), "unknown" (no probe)
    detail: str = ""  # what the private copy holds, or why the probe failed

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# A throw needs the C++ exception runtime and no header: a compiler that links it
# statically defines __cxa_throw in the probe. (Including <stdexcept> tripled the compile,
# 1 s of the doctor's 1.4 after torch's import.)
_PROBE_SOURCE = 'extern "C" void wheelops_probe(int x) { if (x) throw x; }\n'


def probe_compiler(compiler: str) -> CompilerProbe:
    """Build a tiny shared library that throws with `compiler` and read what it links (a
    fraction of a second; the doctor calls it, never import)."""
    path = shutil.which(compiler)
    if path is None:
        return CompilerProbe(compiler, None, "unknown", "not found on PATH")
    with tempfile.TemporaryDirectory() as scratch:
        source, library = Path(scratch, "probe.cpp"), Path(scratch, "probe.so")
        source.write_text(_PROBE_SOURCE)
        try:
            done = subprocess.run(
                [path, "-shared", "-fPIC", "-o", str(library), str(source)],
                capture_output=True,
                text=True,
                timeout=60,
            )
            if done.returncode != 0:
                return CompilerProbe(compiler, path, "unknown", done.stderr.strip()[-300:])
            private = private_cxx_runtime(link_facts(library))
        except (OSError, subprocess.SubprocessError, ValueError, struct_error) as err:
            return CompilerProbe(compiler, path, "unknown", f"{type(err).__name__}: {err}")
    return CompilerProbe(compiler, path, "private" if private else "shared", " and ".join(private))


def torch_cxx_compiler() -> str:
    """The compiler torch builds C++ with at run time (AOTInductor packages, the CPU code of
    torch.compile, cpp_extension): $CXX, else g++, as torch._inductor.config reads it."""
    return os.environ.get("CXX") or "g++"


def cxx_compilers() -> list[CompilerProbe]:
    """torch's compiler first; where it carries a private C++ runtime, the other g++/c++ on
    PATH (and /usr/bin's) that link the shared one: the CXX that would work."""
    first = probe_compiler(torch_cxx_compiler())
    if first.runtime != "private":
        return [first]
    seen, found = {first.path}, [first]
    for name in ("g++", "c++", "clang++"):
        for directory in [*os.environ.get("PATH", "").split(os.pathsep), "/usr/bin"]:
            candidate = Path(directory or ".", name)
            if str(candidate) in seen or not os.access(candidate, os.X_OK):
                continue
            seen.add(str(candidate))
            probe = probe_compiler(str(candidate))
            if probe.runtime == "shared":
                found.append(probe)
    return found


def nvidia_wheels() -> list[str]:
    """The installed distributions named nvidia-* (their names, as pip lists them). A
    distribution whose METADATA cannot be read (wheelops' own, damaged, included: its own
    finding names it) is skipped: this probe must not stop the doctor."""
    import importlib.metadata

    names = set()
    for dist in importlib.metadata.distributions():
        try:
            name = dist.metadata["Name"] or ""
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if name.lower().startswith("nvidia"):
            names.add(name)
    return sorted(names)
