"""Real broken shared libraries and installed-package copies for the guard's tests.

Each library is compiled on the fly (or cut from a real one) so that the
loader fails for real, with its own words.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import wheelops
from wheelops._compat import loader
from wheelops._compat.facts import this_process

MISSING_C10_SYMBOL = "c10::detail::wheelops_test_removed(long)"

_SOURCES = {
    # A library built against a torch whose C++ ABI had this function.
    "missing_c10_symbol": (
        "namespace c10 { namespace detail { void wheelops_test_removed(long); } }\n"
        'extern "C" void wheelops_test_entry() { c10::detail::wheelops_test_removed(1); }\n'
    ),
    "cudart12_stub": 'extern "C" int wheelops_test_cudart_stub() { return 12; }\n',
    "needs_cudart12": (
        'extern "C" int wheelops_test_cudart_stub();\n'
        'extern "C" int wheelops_test_entry() { return wheelops_test_cudart_stub(); }\n'
    ),
    "dependency": 'extern "C" int wheelops_test_dependency() { return 1; }\n',
    "needs_dependency": (
        'extern "C" int wheelops_test_dependency();\n'
        'extern "C" int wheelops_test_entry() { return wheelops_test_dependency(); }\n'
    ),
}
DAMAGED_DEPENDENCY = "libwheelops_test_dependency.so.1"


def compiler() -> str:
    found = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
    if found is None:
        pytest.skip("needs a C++ compiler to build the broken libraries")
    return found


def build_broken_libraries(directory: Path) -> dict[str, Path]:
    """missing_c10_symbol.so, needs_cudart12.so (its NEEDED libcudart.so.12 deleted), and
    needs_dependency.so, whose dependency in damaged_dependency_dir is truncated."""
    cxx = compiler()
    for name, source in _SOURCES.items():
        (directory / f"{name}.cpp").write_text(source)
    run = [cxx, "-shared", "-fPIC"]
    subprocess.run(
        [*run, "missing_c10_symbol.cpp", "-o", "missing_c10_symbol.so"], cwd=directory, check=True
    )
    subprocess.run(
        [*run, "cudart12_stub.cpp", "-Wl,-soname,libcudart.so.12", "-o", "libcudart.so.12"],
        cwd=directory,
        check=True,
    )
    subprocess.run(
        [*run, "needs_cudart12.cpp", "-L.", "-l:libcudart.so.12", "-o", "needs_cudart12.so"],
        cwd=directory,
        check=True,
    )
    (directory / "libcudart.so.12").unlink()  # the runtime the library was linked to is gone
    dependency = directory / "damaged" / DAMAGED_DEPENDENCY
    dependency.parent.mkdir()
    subprocess.run(
        [*run, "dependency.cpp", f"-Wl,-soname,{DAMAGED_DEPENDENCY}", "-o", str(dependency)],
        cwd=directory,
        check=True,
    )
    links = [f"-L{dependency.parent}", f"-l:{DAMAGED_DEPENDENCY}"]
    subprocess.run(
        [*run, "needs_dependency.cpp", *links, "-o", "needs_dependency.so"],
        cwd=directory,
        check=True,
    )
    # Found on LD_LIBRARY_PATH, but damaged. (Cut in half instead, it would pass the
    # loader's header read and die of SIGBUS when mapped: issue #19's territory.)
    dependency.write_bytes(b"not an ELF library " * 20)
    return {
        "missing_c10_symbol": directory / "missing_c10_symbol.so",
        "needs_cudart12": directory / "needs_cudart12.so",
        "needs_dependency": directory / "needs_dependency.so",
        "damaged_dependency_dir": dependency.parent,
    }


def truncated(source: Path, target: Path) -> Path:
    data = source.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    return target


def patched(source: Path, target: Path, offset: int, value: bytes) -> Path:
    """A copy of a real library with its ELF header changed (class, machine)."""
    data = bytearray(source.read_bytes())
    data[offset : offset + len(value)] = value
    target.write_bytes(bytes(data))
    return target


def installed_copy(root: Path) -> Path:
    """A faithful copy of the loaded package, as a wheel installs it, under root/.

    Works in dev mode too: the libraries built by build_tools.dev are copied in
    under their wheel names with their build facts.
    """
    libs = loader.loaded()
    assert libs is not None
    package = root / "wheelops"
    shutil.copytree(
        Path(wheelops.__file__).parent,
        package,
        ignore=shutil.ignore_patterns("*.so", "__pycache__", "_build_info.json"),
    )
    info = wheelops.build_info()
    shutil.copy(libs.cpu, package / "_ops_cpu.abi3.so")
    cuda = []
    for lib in info.cuda_libraries:
        source = libs.cuda if info.dev_mode and libs.cuda else libs.cpu.parent / lib.file
        name = f"_ops_cuda{lib.major}.abi3.so"
        shutil.copy(source, package / name)
        cuda.append(replace(lib, file=name))
    hashes = {
        name: hashlib.sha256((package / name).read_bytes()).hexdigest()
        for name in ["_ops_cpu.abi3.so", *(lib.file for lib in cuda)]
    }
    facts = replace(
        info,
        dev_mode=False,
        cpu_library="_ops_cpu.abi3.so",
        cuda_libraries=tuple(cuda),
        library_sha256=hashes,
    )
    write_facts(package, facts.to_dict())
    return package


def served_library(package: Path) -> str:
    """The library a fault breaks: the CUDA one that would load here, else the CPU one."""
    runtime = this_process()
    info = wheelops.build_info()
    if runtime.torch_kind == "cuda" and runtime.torch_cuda:
        major = int(runtime.torch_cuda.split(".")[0])
        if info.cuda_library(major) is not None:
            return f"_ops_cuda{major}.abi3.so"
    return "_ops_cpu.abi3.so"


def with_cuda_version(facts: dict, cuda_version: str) -> dict:
    """Facts whose one CUDA library (the served one) claims another CUDA release."""
    served = served_library(Path())
    libraries = [lib for lib in facts["cuda_libraries"] if lib["file"] == served]
    assert libraries, "needs a CUDA library that loads here"
    return {**facts, "cuda_libraries": [{**libraries[0], "cuda_version": cuda_version}]}


def read_facts(package: Path) -> dict:
    return json.loads((package / "_build_info.json").read_text())


def write_facts(package: Path, facts: dict) -> None:
    (package / "_build_info.json").write_text(json.dumps(facts, indent=2))


def built_into(package: Path, name: str, library: Path) -> None:
    """`library` in the package as `name`, as if the build had made it: its sha256 in the
    build facts, so that the guard meets what loading it does, not a changed file."""
    data = library.read_bytes()
    (package / name).write_bytes(data)
    facts = read_facts(package)
    facts["library_sha256"] = {
        **(facts.get("library_sha256") or {}),
        name: hashlib.sha256(data).hexdigest(),
    }
    write_facts(package, facts)


def run_python(
    package: Path,
    *args: str,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Python with only this copy of wheelops importable, from outside any checkout."""
    environment = {k: v for k, v in os.environ.items() if k != "WHEELOPS_SKIP_GUARD"}
    environment["PYTHONPATH"] = str(package.parent)
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, *args],
        cwd=package.parent,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
