"""The CUDA 12 toolkit for the universal wheel: NVIDIA's CUDA 12.4.1 as Debian packages it.

PyPI has no CUDA 12 nvcc (its nvcc wheels hold only ptxas), and the build
must not use whatever nvcc a machine has. Debian's archive (suite trixie,
non-free and main) packages NVIDIA's 12.4.1 binaries; with the runtime and
crt headers from PyPI that is a complete compiler for the CUDA 12 library:

    python -m build_tools.plan.cuda12_toolkit     # fetch (once), assemble, print its root

Every file is pinned by exact version and sha256 and fetched only when the
universal build asks; the assembled root is cached (WHEELOPS_TOOLKIT_CACHE,
default ~/.cache/wheelops/toolkits). The machine's apt setup is never touched:
the .deb files are read as archives (ar + tar) in Python.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from build_tools.plan.cuda_toolkit import CudaToolkit, ToolkitError, nvcc_version

RELEASE = "12.4"
DEBIAN_ARCHIVE = os.environ.get("WHEELOPS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
ORIGIN = (
    "Debian trixie nvidia-cuda-toolkit 12.4.131~12.4.1-2 + PyPI CUDA 12.4 headers"
    " + PyPI cuBLAS 12.4.5.8"
)


@dataclass(frozen=True)
class Pinned:
    name: str  # the package, as its registry names it
    version: str
    location: str  # Debian: the pool path; PyPI: the wheel's file name
    sha256: str
    size: int


# From trixie's Packages indexes (main, non-free; amd64).
DEBS = (
    Pinned(
        "nvidia-cuda-toolkit",
        "12.4.131~12.4.1-2",
        "pool/non-free/n/nvidia-cuda-toolkit/nvidia-cuda-toolkit_12.4.131~12.4.1-2_amd64.deb",
        "cd5fe85aee38d108b315f408a688641478f2402622a10c677478eb7a6c4e5319",
        87240108,
    ),
    Pinned(
        "libcudart12",
        "12.4.127~12.4.1-2",
        "pool/non-free/n/nvidia-cuda-toolkit/libcudart12_12.4.127~12.4.1-2_amd64.deb",
        "361b3721cf84bf068e111ff013c819de61cb475268b0d38db99839471f1b4130",
        176216,
    ),
    # torch's headeronly/util/complex.h includes thrust.
    Pinned(
        "libcu++-dev",
        "2.3.2-2",
        "pool/main/c/cccl/libcu++-dev_2.3.2-2_all.deb",
        "30e911c1909265591b5ea793df0e49e56bed631238b68b3e75c97590c4985686",
        765284,
    ),
    Pinned(
        "libcub-dev",
        "2.3.2-2",
        "pool/main/c/cccl/libcub-dev_2.3.2-2_all.deb",
        "4a7e7c24ef2994140e47dba59507db60e281f968f17c18cf1cadc9c27c17c26b",
        290612,
    ),
    Pinned(
        "libthrust-dev",
        "2.3.2-2",
        "pool/main/c/cccl/libthrust-dev_2.3.2-2_all.deb",
        "61fe44b65834efad9b079452ebec7396d4b37712d251421f4218b3bc652a3147",
        419852,
    ),
)
# The runtime headers (include/) and nvcc's crt headers (include/crt), from PyPI; and
# cuBLAS 12.4 (headers, libcublasLt.so.12 to link: fused_linear_gelu's GEMMs), the oldest
# CUDA 12 cuBLAS this library asks of torch's (12.6 and newer in every CUDA 12 torch wheelops
# supports), never shipped in the wheel.
WHEELS = (
    Pinned(
        "nvidia-cuda-runtime-cu12",
        "12.4.127",
        "nvidia_cuda_runtime_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl",
        "64403288fa2136ee8e467cdc9c9427e0434110899d07c779f25b5c068934faa5",
        883737,
    ),
    Pinned(
        "nvidia-cuda-nvcc-cu12",
        "12.4.131",
        "nvidia_cuda_nvcc_cu12-12.4.131-py3-none-manylinux2014_x86_64.whl",
        "e4c9a35435c3b0e36c6397c5696334c9ea6650e524736cbd1c5d345ea099bb04",
        22265199,
    ),
    Pinned(
        "nvidia-cublas-cu12",
        "12.4.5.8",
        "nvidia_cublas_cu12-12.4.5.8-py3-none-manylinux2014_x86_64.whl",
        "2fc8da60df463fdefa81e323eef2e36489e1c94335b5358bcb38360adf75ac9b",
        363438805,
    ),
)
TOOLS = ("nvcc", "ptxas", "fatbinary", "cudafe++", "nvlink", "cuobjdump", "nvprune", "bin2c")
# nvcc finds its parts relative to its own folder (Debian's profile uses /usr paths).
PROFILE = """\
TOP = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES += "-I$(TOP)/include" $(_SPACE_)
LIBRARIES =+ $(_SPACE_) "-L$(TOP)/lib64"
CUDAFE_FLAGS +=
PTXAS_FLAGS +=
"""


def cache_dir() -> Path:
    root = os.environ.get("WHEELOPS_TOOLKIT_CACHE") or Path.home() / ".cache/wheelops/toolkits"
    return Path(root)


def _verified(path: Path, pin: Pinned) -> bool:
    if not path.is_file() or path.stat().st_size != pin.size:
        return False
    return hashlib.sha256(path.read_bytes()).hexdigest() == pin.sha256


def _fetch_deb(pin: Pinned, downloads: Path) -> Path:
    path = downloads / Path(pin.location).name
    if _verified(path, pin):
        return path
    url = f"{DEBIAN_ARCHIVE}/{pin.location}"
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            path.write_bytes(response.read())
    except OSError as err:
        raise ToolkitError(
            f"could not fetch {pin.name} {pin.version} from {url}: {err}. The CUDA 12 library "
            "needs Debian's archive (WHEELOPS_DEBIAN_MIRROR names a mirror; a snapshot of "
            "trixie, e.g. https://snapshot.debian.org/archive/debian/20261121T000000Z, "
            "still holds this version)"
        ) from None
    if not _verified(path, pin):
        raise ToolkitError(
            f"{url} is not the pinned {pin.name} {pin.version} (sha256 {pin.sha256})"
        )
    return path


def fetch_wheels(
    pins: tuple[Pinned, ...],
    downloads: Path,
    platforms: tuple[str, ...] = ("manylinux2014_x86_64",),
    python_version: str = "3.10",
) -> list[Path]:
    """The pinned wheels, hash-checked by pip, in `downloads` (fetched where missing)."""
    paths = [downloads / pin.location for pin in pins]
    if all(_verified(p, pin) for p, pin in zip(paths, pins, strict=True)):
        return paths
    requirements = downloads / "requirements.txt"
    requirements.write_text(
        "".join(f"{pin.name}=={pin.version} --hash=sha256:{pin.sha256}\n" for pin in pins)
    )
    download = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    wheels_for = [
        *[f"--platform={name}" for name in platforms],
        f"--python-version={python_version}",
    ]
    pinned = ["--require-hashes", "-r", str(requirements), "-d", str(downloads)]
    done = subprocess.run([*download, *wheels_for, *pinned], capture_output=True, text=True)
    if done.returncode != 0:
        names = ", ".join(f"{pin.name}=={pin.version}" for pin in pins)
        raise ToolkitError(
            f"could not fetch {names} from the package index:\n{done.stderr[-2000:]}"
        )
    return paths


def deb_data(deb: Path) -> tarfile.TarFile:
    """The data.tar.* member of a .deb (an ar archive), opened."""
    blob = deb.read_bytes()
    if not blob.startswith(b"!<arch>\n"):
        raise ToolkitError(f"{deb} is not a Debian package")
    offset = 8
    while offset + 60 <= len(blob):
        name = blob[offset : offset + 16].decode().strip().rstrip("/")
        size = int(blob[offset + 48 : offset + 58].decode().strip())
        if name.startswith("data.tar"):
            data = blob[offset + 60 : offset + 60 + size]
            return tarfile.open(fileobj=io.BytesIO(data))  # xz, gz or plain: detected
        offset += 60 + size + (size % 2)
    raise ToolkitError(f"{deb} has no data.tar member")


def _assemble(root: Path, debs: list[Path], wheels: list[Path]) -> None:
    staging = root.with_name(root.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    unpacked = staging / "unpacked"
    for deb in debs:
        with deb_data(deb) as data:
            data.extractall(unpacked, filter="tar")
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(unpacked)
    usr, home = unpacked / "usr", staging / "cuda"
    (home / "bin").mkdir(parents=True)
    shutil.copy2(usr / "lib/nvidia-cuda-toolkit/bin/nvcc", home / "bin/nvcc")  # the ELF
    for tool in TOOLS[1:]:
        shutil.copy2(usr / "bin" / tool, home / "bin" / tool)
    shutil.copytree(usr / "lib/nvidia-cuda-toolkit/bin/crt", home / "bin/crt")
    (home / "bin/nvcc.profile").write_text(PROFILE)
    (home / "nvvm/bin").mkdir(parents=True)
    shutil.copy2(usr / "lib/nvidia-cuda-toolkit/bin/cicc", home / "nvvm/bin/cicc")
    shutil.copytree(usr / "lib/nvidia-cuda-toolkit/libdevice", home / "nvvm/libdevice")
    include = home / "include"
    shutil.copytree(unpacked / "nvidia/cuda_runtime/include", include)
    shutil.copytree(unpacked / "nvidia/cuda_nvcc/include", include, dirs_exist_ok=True)
    shutil.copytree(unpacked / "nvidia/cublas/include", include, dirs_exist_ok=True)
    for headers in ("cub", "cuda", "nv", "thrust"):
        shutil.copytree(usr / "include" / headers, include / headers, dirs_exist_ok=True)
    (home / "lib64").mkdir()
    for library in (usr / "lib/x86_64-linux-gnu").glob("libcudart.so.12*"):
        shutil.copy2(library, home / "lib64" / library.name, follow_symlinks=False)
    shutil.copy2(unpacked / "nvidia/cublas/lib/libcublasLt.so.12", home / "lib64")
    shutil.rmtree(root, ignore_errors=True)
    home.rename(root)
    shutil.rmtree(staging)


def provide() -> CudaToolkit:
    """The CUDA 12.4 toolkit, fetched and assembled once; ToolkitError says what failed."""
    if platform.machine() not in ("x86_64", "AMD64"):
        raise ToolkitError(
            f"the CUDA 12 toolkit is pinned for x86_64 only (this machine: {platform.machine()})"
        )
    root = cache_dir() / f"cuda-{RELEASE}-debian"
    stamp = root / ".wheelops-complete"
    # A root assembled from other pins (before cuBLAS joined them) is assembled again.
    if not stamp.is_file() or stamp.read_text().strip() != ORIGIN:
        downloads = cache_dir() / "downloads"
        downloads.mkdir(parents=True, exist_ok=True)
        debs = [_fetch_deb(pin, downloads) for pin in DEBS]
        _assemble(root, debs, fetch_wheels(WHEELS, downloads))
        stamp.write_text(ORIGIN + "\n")
    version = nvcc_version(root / "bin/nvcc")
    if not version.startswith(RELEASE + "."):
        raise ToolkitError(f"{root}/bin/nvcc is CUDA {version}, not {RELEASE}: delete {root}")
    return CudaToolkit(
        home=root,
        nvcc=root / "bin/nvcc",
        version=version,
        include_dir=root / "include",
        cudart_dir=root / "lib64",
        cudart_soname="libcudart.so.12",
        origin=ORIGIN,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m build_tools.plan.cuda12_toolkit", description=__doc__
    )
    parser.parse_args(argv)
    try:
        toolkit = provide()
    except ToolkitError as err:
        raise SystemExit(f"wheelops build: {err}") from None
    print(f"CUDA {toolkit.version} at {toolkit.home} ({toolkit.origin})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
