"""Explain why the dynamic loader refused a library, from its real dlerror text.

torch.ops.load_library replaces that text with "Could not load this library";
ctypes keeps it. The text is classified into a cause that says which side is
wrong (this wheel, torch, the CUDA runtime, the system's C/C++ runtime) with
mangled C++ symbols demangled.
"""

from __future__ import annotations

import ctypes
import enum
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

_MISSING_LIBRARY = re.compile(r"^(?P<lib>[^:\s]+): cannot open shared object file")
_UNDEFINED_SYMBOL = re.compile(r"undefined symbol: (?P<symbol>\S+)")
_VERSION_NOT_FOUND = re.compile(
    r"version [`'\"]?(?P<version>(?P<family>GLIBCXX|CXXABI|GLIBC)_[\d.]+)[`'\"]? not found"
    r"(?: \(required by (?P<by>[^)]+)\))?"
)
_CUDA_LIBRARY = re.compile(
    r"^lib(cudart|cublas|cublasLt|cufft|curand|cusparse|cusolver|nvrtc)"
    r"\.so\.(?P<major>\d+)"
)
_TORCH_LIBRARY = re.compile(r"^lib(torch|c10|shm)\w*\.so")
# The loader names the file it could not read, ours or one of our dependencies.
_DAMAGED_FILE = re.compile(
    r"^(?P<file>[^:]+): (?:invalid ELF header|file too short|cannot read file data)"
)
_TORCH_NAMESPACES = ("c10::", "at::", "torch::", "caffe2::", "aoti::")
_STABLE_SHIM_PREFIXES = ("aoti_torch_", "torch_")


class Cause(str, enum.Enum):
    """Why the loader refused a library: which side is wrong. The values are stable
    identifiers (the doctor's JSON prints them); rules/load_failure.py holds each one's
    advice and fix."""

    MISSING_FILE = "missing-file"  # the library itself is not there
    CORRUPT_FILE = "corrupt-file"  # the library itself is not a complete ELF file
    DEPENDENCY_DAMAGED = "dependency-damaged"  # a library it needs is a damaged copy
    MISSING_LIBRARY = "missing-library"  # a library it needs is not found
    CUDA_MAJOR = "cuda-major"  # it needs another CUDA major's runtime
    CUDA_MINOR = "cuda-minor"  # the CUDA runtime is older than the build's
    CUBLAS_MISSING = "cublas-missing"  # cuBLAS(Lt) of its CUDA major is not found
    CUBLAS_TOO_OLD = "cublas-too-old"  # the cuBLAS loaded lacks a function it calls
    TORCH_LIBRARIES = "torch-libraries"  # torch's own libraries are not found
    TORCH_ABI = "torch-abi"  # it calls torch's unstable C++ ABI of another release
    TORCH_TOO_OLD = "torch-too-old"  # torch lacks a stable-ABI function it calls
    GLIBC = "glibc"  # the system's C library is older than the build's
    LIBSTDCXX = "libstdcxx"  # the C++ runtime is older than the build's
    ELF_CLASS = "elf-class"  # another word size than this Python
    UNDEFINED_SYMBOL = "undefined-symbol"  # a symbol nothing loaded provides
    UNKNOWN = "unknown"  # the loader's words match nothing above: they are shown as said

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class LoadFailure:
    """What the loader said about one library, classified."""

    cause: Cause  # see classify(); the identifier's text is accepted too
    summary: str  # one sentence naming the cause and both sides
    raw: str  # the loader's own words
    missing: str | None = None  # the missing library or (demangled) symbol

    def __post_init__(self) -> None:
        object.__setattr__(self, "cause", Cause(self.cause))


def dlopen_error(path: Path) -> str | None:
    """The loader's message for `path` (None if it loads): what dlerror() says."""
    try:
        ctypes.CDLL(str(path))
    except OSError as err:
        return str(err)
    return None


@cache
def _demangler() -> Any:  # the ctypes function, or None without libstdc++
    try:
        fn = ctypes.CDLL("libstdc++.so.6").__cxa_demangle
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    return fn


def demangle(symbol: str) -> str:
    """A C++ symbol in source form (_ZN3c104impl3fooEl -> c10::impl::foo(long)).

    C symbols, and anything libstdc++ cannot demangle, come back unchanged.
    """
    fn = _demangler()
    if fn is None or not symbol.startswith("_Z"):
        return symbol
    status = ctypes.c_int(-1)
    pointer = fn(symbol.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not pointer:
        return symbol
    try:
        return ctypes.string_at(pointer).decode(errors="replace")
    finally:
        ctypes.CDLL(None).free(ctypes.c_void_p(pointer))


def classify(
    path: Path,
    text: str,
    *,
    build_torch: str,
    runtime_torch: str | None,
    build_cuda: str | None,
    runtime_cuda: str | None,
) -> LoadFailure:
    """Turn a dlerror text into a LoadFailure; unknown texts keep the raw words."""
    name = path.name
    missing = _MISSING_LIBRARY.search(text)
    if missing:
        lib = missing.group("lib")
        if lib == str(path) or Path(lib).name == name:
            return LoadFailure(Cause.MISSING_FILE, f"{name} is missing from the package", text, lib)
        cuda = _CUDA_LIBRARY.match(Path(lib).name)
        if cuda and cuda.group(1).startswith("cublas"):
            return LoadFailure(
                Cause.CUBLAS_MISSING,
                f"{name} needs {lib}, the GEMM library of cuBLAS {cuda.group('major')}, which "
                "the loader cannot find (torch's CUDA wheels install it)",
                text,
                lib,
            )
        if cuda:
            needed = cuda.group("major")
            if runtime_cuda is None:
                side = f"torch {runtime_torch} has no CUDA runtime (it is not a CUDA build)"
            else:
                side = f"torch {runtime_torch} brings CUDA {runtime_cuda}"
            return LoadFailure(
                Cause.CUDA_MAJOR,
                f"{name} needs {lib}, the CUDA {needed} runtime, and {side}: "
                f"this library was built for CUDA {needed}",
                text,
                lib,
            )
        if _TORCH_LIBRARY.match(Path(lib).name):
            return LoadFailure(
                Cause.TORCH_LIBRARIES,
                f"{name} needs {lib} from torch, which the loader cannot find: torch "
                f"{runtime_torch} is incomplete, or wheelops was loaded before torch",
                text,
                lib,
            )
        return LoadFailure(
            Cause.MISSING_LIBRARY,
            f"{name} needs {lib}, which is not installed or not on the loader's path",
            text,
            lib,
        )
    undefined = _UNDEFINED_SYMBOL.search(text)
    if undefined:
        symbol = demangle(undefined.group("symbol"))
        if symbol.startswith(_TORCH_NAMESPACES):
            return LoadFailure(
                Cause.TORCH_ABI,
                f"{name} calls {symbol}, which torch {runtime_torch} does not have: it was "
                f"built against torch {build_torch} with torch's C++ ABI, which changes "
                "between torch releases",
                text,
                symbol,
            )
        if symbol.startswith(_STABLE_SHIM_PREFIXES):
            return LoadFailure(
                Cause.TORCH_TOO_OLD,
                f"{name} calls {symbol}, a stable-ABI function that torch {runtime_torch} "
                f"does not have yet (built against torch {build_torch})",
                text,
                symbol,
            )
        if symbol.startswith("cublas"):
            return LoadFailure(
                Cause.CUBLAS_TOO_OLD,
                f"{name} calls {symbol}, which the cuBLAS loaded here does not have: it is "
                "older than the cuBLAS the library was built with",
                text,
                symbol,
            )
        if symbol.startswith("cuda") or symbol.startswith("cu"):
            return LoadFailure(
                Cause.CUDA_MINOR,
                f"{name} calls {symbol}, which the CUDA {runtime_cuda} runtime of torch "
                f"{runtime_torch} does not have (built with CUDA {build_cuda})",
                text,
                symbol,
            )
        return LoadFailure(
            Cause.UNDEFINED_SYMBOL,
            f"{name} calls {symbol}, which nothing loaded provides",
            text,
            symbol,
        )
    version = _VERSION_NOT_FOUND.search(text)
    if version:
        family, needed = version.group("family"), version.group("version")
        runtime = "C library (glibc)" if family == "GLIBC" else "C++ runtime (libstdc++)"
        return LoadFailure(
            Cause.GLIBC if family == "GLIBC" else Cause.LIBSTDCXX,
            f"{name} needs {needed}, and this system's {runtime} is older than the one "
            "it was built with",
            text,
            needed,
        )
    if "wrong ELF class" in text:
        return LoadFailure(
            Cause.ELF_CLASS, f"{name} is for another word size than this Python", text
        )
    damaged = _DAMAGED_FILE.search(text)
    if damaged:
        file = damaged.group("file")
        if Path(file).name != name:  # a dependency: blame the file the loader named
            return LoadFailure(
                Cause.DEPENDENCY_DAMAGED,
                f"{name} needs {Path(file).name}, and the loader found a damaged copy of it "
                f"at {file} (not a complete ELF library); the wheelops library is intact",
                text,
                file,
            )
        return LoadFailure(
            Cause.CORRUPT_FILE, f"{name} is damaged (not a complete ELF library)", text
        )
    return LoadFailure(Cause.UNKNOWN, f"the loader refused {name}", text)
