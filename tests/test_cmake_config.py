"""find_package(wheelops) (issue #18): the installed package's CMake config chooses the
libraries for the Torch a C++ program builds against, with the guard's own rules.

Each case configures a tiny CMake project against a fake Torch (a version.py, as a pip
torch has, or LibTorch's build-version): the choice must follow `evaluate`, and a refusal
must fail the configure naming both sides.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import wheelops
from wheelops._compat.facts import torch_install

CMAKE = shutil.which("cmake")
needs_cmake = pytest.mark.skipif(CMAKE is None, reason="no cmake on PATH (nox installs it)")
BUILD = wheelops.build_info()
PROJECT = """
cmake_minimum_required(VERSION 3.18)
project(probe NONE)
{torch}
find_package(wheelops REQUIRED)
get_target_property(defs wheelops::wheelops INTERFACE_COMPILE_DEFINITIONS)
message(STATUS "CPU=${{wheelops_CPU_LIBRARY}}")
message(STATUS "CUDA=${{wheelops_CUDA_LIBRARY}}")
message(STATUS "DEFS=${{defs}}")
"""


def fake_torch(root: Path, version: str, cuda: str | None, libtorch: bool = False) -> Path:
    """A Torch install as find_package(Torch) leaves it: Torch_DIR under share/cmake."""
    (root / "share" / "cmake" / "Torch").mkdir(parents=True)
    if libtorch:
        (root / "build-version").write_text(version + "\n")
    else:
        (root / "version.py").write_text(
            "from typing import Optional\n"
            f"__version__ = {version!r}\ncuda: Optional[str] = {cuda!r}\nhip = None\n"
        )
    return root


def configure(tmp_path: Path, torch_root: Path | None) -> subprocess.CompletedProcess[str]:
    torch = (
        f'set(TORCH_FOUND TRUE)\nset(Torch_DIR "{torch_root}/share/cmake/Torch")'
        if torch_root
        else ""
    )
    source = tmp_path / "project"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(PROJECT.format(torch=torch))
    assert CMAKE is not None
    prefix = f"-DCMAKE_PREFIX_PATH={wheelops.cmake_prefix_path}"
    return subprocess.run(
        [CMAKE, "-S", source, "-B", tmp_path / "build", prefix],
        capture_output=True,
        text=True,
        timeout=120,
    )


def said(done: subprocess.CompletedProcess[str]) -> str:
    """CMake's messages with its line wrapping undone."""
    return " ".join(done.stderr.split())


def chosen(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line.removeprefix("-- ") for line in done.stdout.splitlines()]
    names = ("CPU", "CUDA", "DEFS")
    return dict(line.split("=", 1) for line in lines if line.split("=")[0] in names)


def test_the_prefix_holds_the_config():
    config = Path(wheelops.cmake_prefix_path) / "wheelops" / "wheelopsConfig.cmake"
    assert config.is_file()
    assert (Path(wheelops.__file__).parent / "include" / "wheelops" / "load_libraries.h").is_file()


@needs_cmake
def test_cpu_torch_gets_the_cpu_library(tmp_path):
    done = configure(tmp_path, fake_torch(tmp_path / "torch", "2.13.0+cpu", None))
    libraries = chosen(done)
    assert Path(libraries["CPU"]).name == BUILD.cpu_library
    assert Path(libraries["CPU"]).is_file()
    assert libraries["CUDA"] == ""
    assert libraries["DEFS"] == f'WHEELOPS_LIBRARIES="{libraries["CPU"]}"'
    if BUILD.cuda_libraries:  # degraded, as import is: the CUDA kernels go unused
        assert "is CPU-only, so wheelops loads its CPU kernels only" in said(done)


@needs_cmake
@pytest.mark.parametrize("cuda", [lib.cuda_version for lib in BUILD.cuda_libraries] or ["13.0"])
def test_cuda_torch_gets_the_library_of_its_cuda_major(tmp_path, cuda):
    """Each CUDA library for a torch of its CUDA; a cpu build serves CPU tensors only."""
    label = "cu" + cuda.replace(".", "")
    done = configure(tmp_path, fake_torch(tmp_path / "torch", f"2.14.1+{label}", cuda))
    libraries = chosen(done)
    library = BUILD.cuda_library(int(cuda.split(".")[0]))
    if library is None:
        assert libraries["CUDA"] == ""
        assert "this is the cpu variant of wheelops" in said(done)
        return
    assert Path(libraries["CUDA"]).name == library.file
    assert libraries["DEFS"] == f'WHEELOPS_LIBRARIES="{libraries["CPU"]}:{libraries["CUDA"]}"'


@needs_cmake
def test_torch_older_than_the_floor_fails_the_configure_naming_both(tmp_path):
    done = configure(tmp_path, fake_torch(tmp_path / "torch", "2.9.0+cpu", None))
    assert done.returncode != 0
    assert f"torch 2.9.0+cpu is older than {BUILD.stable_abi_floor}" in said(done)
    assert f"build: >= {BUILD.stable_abi_floor}" in said(done)
    assert "here: 2.9.0+cpu" in said(done)


@needs_cmake
def test_cuda_major_without_a_library_fails_or_degrades_as_import_does(tmp_path):
    done = configure(tmp_path, fake_torch(tmp_path / "torch", "2.14.1+cu118", "11.8"))
    if BUILD.cuda_libraries:
        assert done.returncode != 0
        built = ", ".join(lib.cuda_version for lib in BUILD.cuda_libraries)
        assert f"wheelops was built with CUDA {built}" in said(done)
        assert "brings the CUDA 11.8 runtime" in said(done)
    else:
        assert chosen(done)["CUDA"] == ""
        assert "this is the cpu variant of wheelops" in said(done)


@needs_cmake
def test_find_package_before_torch_says_so(tmp_path):
    done = configure(tmp_path, None)
    assert done.returncode != 0
    assert "call find_package(Torch) before find_package(wheelops)" in said(done)


def test_libtorch_build_version_is_read(tmp_path):
    facts = torch_install(fake_torch(tmp_path / "t", "2.10.0+cu128", None, libtorch=True))
    read = (facts.torch_version, facts.torch_cuda, facts.python_version)
    assert read == ("2.10.0+cu128", "12.8", None)
    cpu = torch_install(fake_torch(tmp_path / "c", "2.11.0+cpu", None, libtorch=True))
    assert cpu.torch_kind == "cpu"


def test_a_folder_that_is_no_torch_is_named(tmp_path):
    with pytest.raises(ValueError, match="is not a Torch install"):
        torch_install(tmp_path)
