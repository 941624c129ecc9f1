"""A platform the universal wheel is cross-built for on x86_64 (aarch64: GH200, GB200, DGX
Spark), and the pinned inputs its host code links against.

Device code does not depend on the host: each CUDA library's kernels come from the same
toolkits as on x86_64 (nvcc runs here), with `-ccbin` naming the cross compiler for the
host side. Host code is compiled by Debian's cross compiler (g++-aarch64-linux-gnu:
installed, else its bookworm packages fetched and unpacked into the cache)
against the aarch64 torch wheel's own headers and linked, with -z defs, against its
libc10/libtorch_cpu and the aarch64 libcudart/libcublasLt of NVIDIA's runtime wheels,
by soname (never shipped: build_tools/package/repair.py excludes them):

    python -m build_tools.plan.cross_target aarch64   # fetch (once), unpack, print the root

Every wheel is pinned by version and sha256 (pip checks them); the unpacked root is
cached beside the toolkits (WHEELOPS_TOOLKIT_CACHE).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from build_tools.plan.cuda12_toolkit import Pinned, cache_dir, fetch_wheels
from build_tools.plan.cuda_toolkit import ToolkitError

# Wheel tags pip may take for these pins (torch: manylinux_2_28; NVIDIA: 2014 and 2_27).
PIP_PLATFORMS = {
    "aarch64": (
        "manylinux_2_28_aarch64",
        "manylinux_2_27_aarch64",
        "manylinux_2_17_aarch64",
        "manylinux2014_aarch64",
    )
}
PIP_PYTHON = "3.11"  # the torch wheel's tag: headers and libraries are the same in each
COMPILERS = {"aarch64": "aarch64-linux-gnu-g++"}
# The torch whose headers and core libraries the host code is built against: the build
# torch of the universal wheel, its aarch64 build (PyPI's is the CUDA 13.0 one).
TORCH = {
    "aarch64": Pinned(
        "torch",
        "2.14.1",
        "torch-2.14.1-cp311-cp311-manylinux_2_28_aarch64.whl",
        "ef1276fd07adb8d463ac402a24ea7482e45c9a42df8ebdac211aa757779200ba",
        453982557,
    ),
}
# Per CUDA major: the runtime and cuBLAS wheels whose libcudart / libcublasLt the CUDA
# library links (the versions the x86_64 toolkits' headers are: build_tools/compile/cublaslt.py).
CUDA_RUNTIME = {
    "aarch64": {
        "12": (
            Pinned(
                "nvidia-cuda-runtime-cu12",
                "12.4.127",
                "nvidia_cuda_runtime_cu12-12.4.127-py3-none-manylinux2014_aarch64.whl",
                "961fe0e2e716a2a1d967aab7caee97512f71767f852f67432d572e36cb3a11f3",
                894177,
            ),
            Pinned(
                "nvidia-cublas-cu12",
                "12.4.5.8",
                "nvidia_cublas_cu12-12.4.5.8-py3-none-manylinux2014_aarch64.whl",
                "0f8aa1706812e00b9f19dfe0cdb3999b092ccb8ca168c0db5b8ea712456fd9b3",
                363333771,
            ),
        ),
        "13": (
            Pinned(
                "nvidia-cuda-runtime",
                "13.0.96",
                "nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_aarch64"
                ".manylinux_2_17_aarch64.whl",
                "ef9bcbe90493a2b9d810e43d249adb3d02e98dd30200d86607d8d02687c43f55",
                2261060,
            ),
            Pinned(
                "nvidia-cublas",
                "13.1.1.3",
                "nvidia_cublas-13.1.1.3-py3-none-manylinux_2_27_aarch64.whl",
                "b7a210458267ac818974c53038fbec2e969d5c99f305ab15c72522fa9f001dd5",
                542848918,
            ),
        ),
    }
}
TORCH_LIBRARIES = ("libc10.so", "libtorch_cpu.so")  # all the libraries link of torch's


@dataclass(frozen=True)
class CrossTarget:
    machine: str  # "aarch64"
    cxx: Path  # the cross compiler
    root: Path  # the unpacked inputs
    torch_version: str

    @property
    def wheel_platform(self) -> str:
        """bdist_wheel's tag before repair (auditwheel makes it manylinux_2_28_...)."""
        return f"linux_{self.machine}"

    @property
    def torch_include_dirs(self) -> list[Path]:
        include = self.root / "torch" / "include"
        return [include, include / "torch" / "csrc" / "api" / "include"]

    @property
    def torch_lib_dir(self) -> Path:
        return self.root / "torch" / "lib"

    def cuda_lib_dir(self, major: str) -> Path:
        """Where this platform's libcudart.so.<major> and libcublasLt.so.<major> are."""
        return self.root / f"cuda{major}"

    def cublaslt_version(self, major: str) -> str:
        """major.minor.patch of the cuBLAS wheel linked (its version's first three parts)."""
        cublas = next(p for p in CUDA_RUNTIME[self.machine][major] if "cublas" in p.name)
        return ".".join(cublas.version.split(".")[:3])


def _pins(machine: str) -> tuple[Pinned, ...]:
    return (TORCH[machine], *(p for pins in CUDA_RUNTIME[machine].values() for p in pins))


def _origin(machine: str) -> str:
    return " + ".join(f"{p.name} {p.version} ({p.sha256[:12]})" for p in _pins(machine))


def _unpack(root: Path, machine: str, wheels: dict[str, Path]) -> None:
    staging = root.with_name(root.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    with zipfile.ZipFile(wheels["torch"]) as archive:
        members = [
            name
            for name in archive.namelist()
            if name.startswith("torch/include/")
            or name in {f"torch/lib/{lib}" for lib in TORCH_LIBRARIES}
        ]
        archive.extractall(staging, members)
    for major, pins in CUDA_RUNTIME[machine].items():
        wanted = (f"libcudart.so.{major}", f"libcublasLt.so.{major}")
        (staging / f"cuda{major}").mkdir(parents=True)
        for pin in pins:
            with zipfile.ZipFile(wheels[pin.name]) as archive:
                for name in archive.namelist():
                    if Path(name).name in wanted:
                        target = staging / f"cuda{major}" / Path(name).name
                        target.write_bytes(archive.read(name))
        missing = [lib for lib in wanted if not (staging / f"cuda{major}" / lib).is_file()]
        if missing:
            raise ToolkitError(f"the CUDA {major} wheels for {machine} lack {missing}")
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)


def compiler(machine: str) -> Path:
    """The cross g++: PATH's (Debian's g++-aarch64-linux-gnu, installed), else Debian's
    packages of it fetched into the cache (build_tools/plan/debian_packages.py: nothing is
    installed) behind a script that gives it its folder as --sysroot."""
    name = COMPILERS[machine]
    found = shutil.which(name)
    if found is not None:
        return Path(found)
    triple = name.removesuffix("-g++")
    root = cache_dir() / f"cross-gcc-{machine}"
    stamp = root / ".wheelops-complete"
    if not stamp.is_file():
        from build_tools.plan import debian_packages
        from build_tools.plan.cuda12_toolkit import deb_data

        staging = root.with_name(root.name + ".staging")
        shutil.rmtree(staging, ignore_errors=True)
        # The cross packages only: the host libraries they need come with the host's
        # own compiler (gmp, mpfr, mpc, isl) and binutils.
        debs = debian_packages.fetch(
            "amd64", (f"g++-{triple}",), staging / "debs", only=rf"{triple}|-cross$"
        )
        for deb in debs:
            with deb_data(deb) as data:
                data.extractall(staging / "sysroot", filter="tar")
        shutil.rmtree(staging / "debs")
        shutil.rmtree(root, ignore_errors=True)
        staging.rename(root)
        stamp.write_text("\n".join(d.name for d in debs) + "\n")
    _write_wrappers(root, triple)  # every time: a cache unpacked by an older wrapper is mended
    cxx = root / "bin" / name
    _check_compiles(cxx, f"install Debian's g++-{triple} instead")
    return cxx


def _write_wrappers(root: Path, triple: str) -> None:
    """bin/<triple>-{g++,gcc}: the unpacked compiler with its folder as --sysroot. The cross
    binutils it runs (as, ld) are x86_64 programs that link libopcodes/libbfd of their own
    (libopcodes-2.40-arm64.so), unpacked to usr/lib/x86_64-linux-gnu beside them, where the
    loader never looks: the wrapper names that folder (a machine with Debian's cross binutils
    installed has them on the loader's path, which hid this)."""
    libs = root / "sysroot" / "usr" / "lib" / "x86_64-linux-gnu"
    for tool in ("g++", "gcc"):
        wrapper = root / "bin" / f"{triple}-{tool}"
        wrapper.parent.mkdir(parents=True, exist_ok=True)
        wrapper.write_text(
            f'#!/bin/sh\nLD_LIBRARY_PATH="{libs}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"\n'
            f"export LD_LIBRARY_PATH\n"
            f'exec "{root}/sysroot/usr/bin/{triple}-{tool}" --sysroot="{root}/sysroot" "$@"\n'
        )
        wrapper.chmod(0o755)


def _check_compiles(cxx: Path, advice: str) -> None:
    """Compile and assemble one line with `cxx`, or ToolkitError with its own error: `--version`
    alone runs neither the assembler nor the linker, which is where an unpacked toolchain
    fails (a library of its binutils not found)."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "probe.cpp"
        source.write_text("int wheelops_probe(int x) { return x + 1; }\n")
        try:
            probe = [str(cxx), "-shared", "-fPIC", str(source), "-o", str(Path(tmp) / "probe.so")]
            subprocess.run(probe, capture_output=True, text=True, check=True)
        except OSError as err:
            raise ToolkitError(f"{cxx} does not run here ({err}); {advice}") from None
        except subprocess.CalledProcessError as err:
            raise ToolkitError(
                f"{cxx} cannot build a shared library here: {err.stderr.strip()}; {advice}"
            ) from None


def provide(machine: str) -> CrossTarget:
    """The cross compiler and the unpacked pinned inputs for `machine`, or ToolkitError."""
    if machine not in TORCH:
        raise ToolkitError(f"no cross build for {machine} (only for {', '.join(TORCH)})")
    cxx = compiler(machine)
    root = cache_dir() / f"{machine}-target"
    stamp = root / ".wheelops-complete"
    if not stamp.is_file() or stamp.read_text().strip() != _origin(machine):
        downloads = cache_dir() / "downloads"
        downloads.mkdir(parents=True, exist_ok=True)
        pins = _pins(machine)
        paths = fetch_wheels(pins, downloads, PIP_PLATFORMS[machine], PIP_PYTHON)
        _unpack(root, machine, {p.name: path for p, path in zip(pins, paths, strict=True)})
        stamp.write_text(_origin(machine) + "\n")
    return CrossTarget(machine, cxx, root, TORCH[machine].version)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m build_tools.plan.cross_target", description=__doc__
    )
    parser.add_argument("machine", choices=sorted(TORCH))
    args = parser.parse_args(argv)
    try:
        target = provide(args.machine)
    except ToolkitError as err:
        raise SystemExit(f"wheelops build: {err}") from None
    print(f"{args.machine}: {target.cxx}, torch {target.torch_version} at {target.root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
