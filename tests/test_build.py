"""The build: its facts, the stable-ABI-only sources, and the native libraries' links."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import wheelops
from wheelops._compat import loader
from wheelops._compat.facts import CudaLibraryInfo, this_process

REPO = Path(__file__).resolve().parent.parent
PACKAGE_DIR = Path(wheelops.__file__).resolve().parent


def _cuda_libraries() -> list[tuple[CudaLibraryInfo, Path]]:
    """Each CUDA library of the build, with its file (loaded or not)."""
    libs = loader.loaded()
    assert libs is not None
    info = wheelops.build_info()
    if not info.cuda_libraries:
        pytest.skip("this build has no CUDA library (built without CUDA)")
    folder = (libs.cuda or libs.cpu).parent
    return [(lib, folder / lib.file) for lib in info.cuda_libraries]


def test_build_info_describes_this_build():
    info = wheelops.build_info()
    # the code's version (the distribution's, wheelops.__version__, adds the wheel's label)
    assert info.wheelops_version == wheelops.__version__.partition("+")[0]
    assert info.stable_abi_floor == "2.10"
    assert info.python_floor == "3.10"
    assert re.match(r"\d+\.\d+", info.torch_version)
    libs = loader.loaded()
    assert libs is not None and info.cpu_library == libs.cpu.name
    majors = [lib.major for lib in info.cuda_libraries]
    assert len(set(majors)) == len(majors)  # one library per CUDA major at most
    for lib in info.cuda_libraries:
        assert lib.file == f"_ops_cuda{lib.major}.abi3.so" or info.dev_mode
        assert lib.sass_archs and set(lib.ptx_archs) <= set(lib.sass_archs)
        assert lib.arch_list.replace("+PTX", "").split(";") == list(lib.sass_archs)


def test_build_info_readable_without_torch_or_native_code():
    if wheelops.build_info().dev_mode:
        pytest.skip("dev-mode facts live in the jit cache, not in the package")
    # As CMake imports it (wheelopsConfig.cmake): the core folder as a package of its own.
    facts = PACKAGE_DIR / "_build_info.json"
    script = (
        "import pathlib, sys\n"
        "from _compat import facts\n"
        f"info = facts.read_build_info(pathlib.Path({str(facts)!r}))\n"
        "assert 'torch' not in sys.modules and 'wheelops' not in sys.modules\n"
        "print(info.wheelops_version, info.torch_version)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_DIR)}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.split()[0] == wheelops.__version__.partition("+")[0]


def test_import_does_not_initialise_cuda():
    script = "import wheelops, torch; print(torch.cuda.is_initialized())"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


FORBIDDEN_INCLUDE = re.compile(
    r"#\s*include\s*[<\"](ATen/|c10/|torch/extension\.h|torch/torch\.h|torch/csrc/api/|"
    r"torch/python\.h|pybind11|Python\.h)"
)


def test_sources_use_only_the_stable_abi():
    sources = [p for p in (REPO / "csrc").rglob("*") if p.suffix in {".h", ".cuh", ".cpp", ".cu"}]
    assert sources, "no csrc/ next to the tests"
    offenders = [
        f"{p.relative_to(REPO)}:{n}: {line.strip()}"
        for p in sources
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if FORBIDDEN_INCLUDE.search(line)
    ]
    assert not offenders, "non-stable-ABI includes:\n" + "\n".join(offenders)


def _needed(library: Path) -> list[str]:
    if shutil.which("readelf") is None:
        pytest.skip("readelf (binutils) is not installed")
    out = subprocess.run(
        ["readelf", "-d", str(library)], capture_output=True, text=True, check=True
    )
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out.stdout)


def test_cuda_library_links_no_cuda_parts_of_torch():
    for info, path in _cuda_libraries():
        needed = _needed(path)
        assert not [lib for lib in needed if "torch_cuda" in lib or "c10_cuda" in lib], needed
        assert "libtorch_python.so" not in needed
        cudart = [lib for lib in needed if lib.startswith("libcudart.so.")]
        assert cudart == [f"libcudart.so.{info.major}"]


def test_cpu_library_links_no_cuda():
    libs = loader.loaded()
    assert libs is not None
    needed = _needed(libs.cpu)
    assert not [lib for lib in needed if "cuda" in lib or "torch_python" in lib], needed


def test_the_cuda_library_of_torchs_major_is_the_one_loaded():
    libs = loader.loaded()
    runtime = this_process()
    for info, path in _cuda_libraries():
        assert path.exists()
        wanted = runtime.torch_kind == "cuda" and runtime.torch_cuda.split(".")[0] == str(
            info.major
        )
        assert (libs.cuda == path) == wanted, (libs.cuda, path)
        # The other major's library is never mapped into the process.
        mapped = Path("/proc/self/maps").read_text()
        assert (str(path) in mapped) == wanted
    if runtime.torch_kind != "cuda":
        assert libs.cuda is None
        assert "is CPU-only, so wheelops loads its CPU kernels only" in libs.cuda_not_loaded_because


def _cuobjdump() -> str | None:
    """PyPI's nvidia-cuda-cuobjdump (nox's test sessions install it), else a toolkit's (on
    PATH or in CUDA_HOME, as on the GPU machine)."""
    spec = importlib.util.find_spec("nvidia")
    folders = (spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        for found in sorted(Path(folder).glob("cu*/bin/cuobjdump")):
            return str(found)
    home = os.environ.get("CUDA_HOME")
    candidate = Path(home) / "bin" / "cuobjdump" if home else None
    return shutil.which("cuobjdump") or (
        str(candidate) if candidate and candidate.is_file() else None
    )


@pytest.mark.skipif(
    _cuobjdump() is None or not wheelops.build_info().cuda_libraries,
    reason="no cuobjdump (pip install nvidia-cuda-cuobjdump), or a build without CUDA",
)
def test_cuda_library_holds_the_archs_it_claims():
    cuobjdump = _cuobjdump()
    assert cuobjdump is not None
    for info, library in _cuda_libraries():

        def listed(kind: str, library: Path = library) -> set[str]:
            out = subprocess.run(
                [cuobjdump, f"--list-{kind}", str(library)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            # sm_75 -> 7.5, sm_100 -> 10.0, sm_120 -> 12.0
            found = re.findall(r"sm_(\d+)(\d)a?\b", out)
            return {f"{major}.{minor}" for major, minor in found}

        assert listed("elf") == set(info.sass_archs)
        assert listed("ptx") == set(info.ptx_archs)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.gpu
def test_cuda_kernels_registered():
    x = torch.ones(3, device="cuda")
    assert wheelops.add(x, x).device.type == "cuda"
