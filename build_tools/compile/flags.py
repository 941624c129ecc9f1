"""Compiler and linker flags of the two native libraries (wheel build and dev mode alike)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from build_tools.plan.arch_list import ArchList
    from build_tools.plan.cuda_toolkit import CudaToolkit

STABLE_ABI_FLOOR = "2.10"
TORCH_TARGET_VERSION = "0x020a000000000000"  # torch 2.10: the libraries load in any torch >= 2.10
PYTHON_FLOOR = "3.10"
PY_LIMITED_API = "cp310"

_COMMON = ["-O3", "-std=c++17", f"-DTORCH_TARGET_VERSION={TORCH_TARGET_VERSION}"]
# Keeps the libraries on glibc 2.28 symbols wherever they are built (see the header).
_GLIBC_COMPAT = ["-include", "wheelops/glibc_compat.h"]


def cxx_flags() -> list[str]:
    return [*_COMMON, *_GLIBC_COMPAT, "-fvisibility=hidden", "-fvisibility-inlines-hidden", "-Wall"]


def nvcc_flags(line_info: bool = False) -> list[str]:
    """`line_info` (dev mode): source lines for compute-sanitizer and Nsight. Not in a
    wheel: -lineinfo embeds each kernel's PTX text and line tables in every SASS image,
    62% of an sm_90 image (issue 36: 9.8 of 15.6 MB); without it the tools still name the
    kernel and its SASS offset."""
    # USE_CUDA exposes the CUDA part of torch's C shim (the current-stream call).
    return [
        *_COMMON,
        *_GLIBC_COMPAT,
        "-DUSE_CUDA",
        "-Xcompiler",
        "-fvisibility=hidden",
        *(["-lineinfo"] if line_info else []),
    ]


def cxx_runtime_link_flags() -> list[str]:
    # The shared libstdc++ and unwinder, whatever the compiler's defaults: a copy
    # linked into the library is half-interposed by torch's and crashes on the
    # first throw that formats a number. Named by file, before the compiler's own
    # runtime libraries, so they satisfy every reference even where the compiler's
    # directories hold only the static archives (the GPU machine's /opt/gcc puts
    # such a directory first), and a static archive added later has nothing to
    # give. build_tools/compile/cxx_runtime.py checks the result.
    return ["-Wl,--push-state,-Bdynamic,-l:libstdc++.so.6,-l:libgcc_s.so.1,--pop-state"]


def link_flags() -> list[str]:
    # -z defs: every symbol must resolve at link time against torch's core
    # libraries and the CUDA runtime, so an accidental libtorch_cuda/c10_cuda
    # dependency fails the build instead of a user's import. --strip-debug: the -g of
    # Python's own CFLAGS (setuptools compiles with them) left 8 of the CPU library's
    # 8.9 MB as DWARF; the symbol table stays (backtraces name the functions).
    return ["-Wl,-z,defs", "-Wl,--strip-debug", *cxx_runtime_link_flags()]


def cublaslt_link_flags(lib_dir: str, soname: str) -> list[str]:
    # By soname (libcublasLt.so.13), as cudart: the one torch's CUDA wheels install and
    # load before wheelops; never bundled (build_tools/package/repair.py excludes it).
    return [f"-L{lib_dir}", f"-l:{soname}"]


def cuda_link_flags(cudart_dir: str, cudart_soname: str) -> list[str]:
    # Link the soname exactly (libcudart.so.13): PyPI toolkits ship no
    # unversioned libcudart.so, and the soname is what the loader will look for.
    return [f"-L{cudart_dir}", f"-l:{cudart_soname}"]


def gencode_flags(archs: ArchList) -> list[str]:
    """SASS for each arch, PTX for the +PTX ones (as TORCH_CUDA_ARCH_LIST means them).
    Given to nvcc, they also keep torch.utils.cpp_extension from adding its own (it adds
    none where the flags name an arch), so TORCH_CUDA_ARCH_LIST need not be exported."""
    out = []
    for arch in archs.sass:
        number = arch.replace(".", "")
        out.append(f"-gencode=arch=compute_{number},code=sm_{number}")
    for arch in archs.ptx:
        number = arch.replace(".", "")
        out.append(f"-gencode=arch=compute_{number},code=compute_{number}")
    return out


# The driver a compressed fatbin needs (DESIGN.md 9, issue 36). `-compress-all` compresses
# the SASS too (by default fatbinary compresses only PTX), with the LZ4 ("speed") scheme
# every CUDA 12 driver reads (>= 525.60.13, the CUDA 12 floor the guard states; PyTorch's
# CUDA 12 wheels ship it so). `--compress-mode=size` (nvcc >= 12.8) needs a driver of CUDA
# 12.4 or newer (>= 550.54.14, NVIDIA's nvcc guide), which would raise the CUDA 12
# library's floor, so CUDA 12 keeps LZ4; every CUDA 13 driver (>= 580) reads it, so CUDA 13
# takes it, as PyTorch's CUDA 13 wheels do. Either way a library needs no newer driver
# than its CUDA major already does.


def fatbin_flags(toolkit: CudaToolkit) -> list[str]:
    """How the device code of a library built with `toolkit` is packed (see above)."""
    size_mode = int(toolkit.release.split(".")[0]) >= 13
    return ["-Xfatbin=-compress-all", *(["--compress-mode=size"] if size_mode else [])]


def device_code_flags(archs: ArchList, toolkit: CudaToolkit) -> list[str]:
    """The device code of a CUDA library: which archs (gencode_flags) and how it is packed
    (fatbin_flags). builder.py takes every CUDA library's, wheel and dev mode alike, from
    here."""
    return [*gencode_flags(archs), *fatbin_flags(toolkit)]


# The define by which a library's other sources know the sm_90a kernels are linked in.
SM90A_DEFINE = "-DWHEELOPS_SM90A_KERNELS"


def has_sm90a(archs: ArchList) -> bool:
    """Whether the library carries the sm_90a kernels: where its list has 9.0's SASS (an
    sm_90a image runs on exactly the GPUs an sm_90 one does)."""
    return "9.0" in archs.sass


def sm90a_code_flags(toolkit: CudaToolkit) -> list[str]:
    """The device code of an sm_90a source (native_sources.sm90a_sources): that arch alone,
    packed as the library's; NDEBUG, or CUTLASS's device asserts are calls that serialize
    the wgmma pipeline (ptxas warns C7510)."""
    return ["-gencode=arch=compute_90a,code=sm_90a", *fatbin_flags(toolkit), "-DNDEBUG"]
