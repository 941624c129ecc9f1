"""Facts, no decisions: how this install was built, what this process runs.

The build facts are one typed record (BuildInfo) with one reader and one writer,
used by the build (build_tools writes them) and the runtime (the guard reads
them); reading them loads no native code and imports no torch. Runtime facts
never initialise CUDA (import wheelops must not create a context); the GPU and
driver facts, which do, are probes.py's, read only by the doctor and at the first
CUDA call.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import platform
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .elf import host_machine
from .versions import variant_name

BUILD_INFO_FILE = "_build_info.json"
SCHEMA_VERSION = 2


@dataclass(frozen=True)
class CudaLibraryInfo:
    """One CUDA library of the build: its file, toolkit and GPU code."""

    file: str  # "_ops_cuda13.abi3.so"
    cuda_version: str  # CUDA release of its toolkit: "13.0"
    nvcc_version: str
    toolkit_origin: str  # "PyPI", "CUDA_HOME", "Debian trixie ..."
    arch_list: str  # TORCH_CUDA_ARCH_LIST as built
    sass_archs: tuple[str, ...]  # archs with machine code
    ptx_archs: tuple[str, ...]  # archs with PTX, JIT-compiled for newer GPUs
    # The cuBLAS(Lt) headers it was built and linked against, "13.1.1" (major.minor.patch,
    # as cublasLtGetVersion encodes it); None: a build from before it linked cuBLASLt.
    cublaslt_version: str | None = None

    @property
    def major(self) -> int:
        return int(self.cuda_version.split(".")[0])


@dataclass(frozen=True)
class BuildInfo:
    """What the build was: versions, its libraries (toolkit, GPU archs), compiler, platform."""

    wheelops_version: str
    torch_version: str  # the torch the libraries were compiled against
    stable_abi_floor: str  # the oldest torch they load in (TORCH_TARGET_VERSION)
    python_floor: str
    compiler: str
    platform: str
    git_commit: str
    cpu_library: str  # "_ops_cpu.abi3.so": every op schema and CPU kernel
    cuda_libraries: tuple[CudaLibraryInfo, ...] = ()  # one per CUDA major at most
    built_as: str | None = None  # the matrix variant the build was for; None: from the CUDA
    cxx_runtime: str | None = None  # "libstdc++.so.6 (shared)"
    dev_mode: bool = False  # built by build_tools.dev (dev mode) rather than by a wheel build
    # Each native library's sha256 (hex) as the build wrote it, by file name: its identity
    # where no RECORD is installed (a vendored copy, a Docker COPY of the package alone).
    # None: built before the build recorded them.
    library_sha256: dict[str, str] | None = None

    @property
    def variant(self) -> str:
        """The variant this build belongs to: "cpu", "cu130", "universal", ..."""
        if self.built_as:
            return self.built_as
        versions = [lib.cuda_version for lib in self.cuda_libraries]
        return variant_name(versions[0] if len(versions) == 1 else None)

    def cuda_library(self, major: int) -> CudaLibraryInfo | None:
        return next((lib for lib in self.cuda_libraries if lib.major == major), None)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "schema_version": SCHEMA_VERSION}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BuildInfo:
        known = set(cls.__dataclass_fields__)
        values = {k: v for k, v in data.items() if k in known}
        values["cuda_libraries"] = tuple(
            CudaLibraryInfo(
                **{
                    **lib,
                    "sass_archs": tuple(lib["sass_archs"]),
                    "ptx_archs": tuple(lib["ptx_archs"]),
                }
            )
            for lib in values.get("cuda_libraries") or ()
        )
        return cls(**values)


def write_build_info(info: BuildInfo, path: Path) -> None:
    path.write_text(json.dumps(info.to_dict(), indent=2, sort_keys=True) + "\n")


@dataclass(frozen=True)
class UnreadableBuildInfo:
    """Build facts that cannot be read: nothing says what the libraries need."""

    path: str
    state: str  # "missing", "unreadable (JSONDecodeError: ...)"
    checkout: bool  # a source checkout with nothing built (no libraries either)


def read_build_info(path: Path, checkout: bool = False) -> BuildInfo | UnreadableBuildInfo:
    if not path.exists():
        return UnreadableBuildInfo(str(path), "missing", checkout)
    try:
        return BuildInfo.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, AttributeError) as err:
        return UnreadableBuildInfo(str(path), f"unreadable ({type(err).__name__}: {err})", False)


@dataclass(frozen=True)
class RuntimeFacts:
    """This process (or a C++ program's LibTorch): what the build facts are compared with."""

    python_version: str | None  # None: a C++ program (it links LibTorch, not Python)
    machine: str
    torch_version: str | None  # None: torch is not installed
    torch_cuda: str | None  # the CUDA runtime torch ships (torch.version.cuda)
    torch_hip: str | None
    torch_xpu: str | None
    # A Jetson's L4T release (/etc/nv_tegra_release's first line), None elsewhere.
    l4t: str | None = None

    @property
    def torch_kind(self) -> str:
        """One of "missing", "cuda", "rocm", "xpu" or "cpu"."""
        if self.torch_version is None:
            return "missing"
        if self.torch_hip:
            return "rocm"
        if self.torch_cuda:
            return "cuda"
        if self.torch_xpu:
            return "xpu"
        return "cpu"

    def describe_torch(self) -> str:
        kind = self.torch_kind
        if kind == "missing":
            return "no torch installed"
        extra = {
            "cuda": f"CUDA {self.torch_cuda}",
            "rocm": f"ROCm {self.torch_hip}",
            "xpu": f"XPU {self.torch_xpu}",
            "cpu": "CPU-only",
        }[kind]
        return f"torch {self.torch_version} ({extra})"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "torch_kind": self.torch_kind}


_this_process: RuntimeFacts | None = None


def this_process() -> RuntimeFacts:
    """This process's facts, collected once (torch does not change under a running process)."""
    global _this_process
    if _this_process is None:
        _this_process = collect()
    return _this_process


def collect() -> RuntimeFacts:
    torch_version = torch_cuda = torch_hip = torch_xpu = None
    if importlib.util.find_spec("torch") is not None:
        import torch

        torch_version = torch.__version__
        torch_cuda = torch.version.cuda
        torch_hip = getattr(torch.version, "hip", None)
        torch_xpu = getattr(torch.version, "xpu", None)
    return RuntimeFacts(
        python_version=platform.python_version(),
        machine=host_machine(),
        torch_version=torch_version,
        torch_cuda=torch_cuda,
        torch_hip=torch_hip,
        torch_xpu=torch_xpu,
        l4t=l4t_release(),
    )


L4T_RELEASE_FILE = Path("/etc/nv_tegra_release")


def l4t_release(path: Path = L4T_RELEASE_FILE) -> str | None:
    """The L4T release of a Jetson ("R36 (release), REVISION: 4.3"), else None."""
    try:
        first = path.read_text(errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return None
    return first.lstrip("# ").split(", GCID")[0].strip() or None


def other_installs(package_dir: Path) -> list[str]:
    """Every other wheelops package on sys.path, described: the one imported shadows them
    (or, from a source tree in the current directory, shadows an installed wheel)."""
    found: list[str] = []
    for entry in sys.path:
        candidate = Path(entry or ".").resolve() / "wheelops"
        if candidate == package_dir or not (candidate / "__init__.py").is_file():
            continue
        dist_infos = sorted(candidate.parent.glob("wheelops-*.dist-info"))
        what = (
            f"installed ({dist_infos[0].name.removesuffix('.dist-info')})"
            if dist_infos
            else "no dist-info: a source tree or a copy"
        )
        description = f"{candidate} ({what})"
        if description not in found:
            found.append(description)
    return found


def torch_install(root: Path) -> RuntimeFacts:
    """The facts of a Torch that a C++ program builds against, read from its files without
    running it: a pip torch's ``version.py`` (``<site-packages>/torch``), else a LibTorch
    archive's ``build-version`` (``2.10.0+cu128``). Raises ValueError naming what is missing."""
    version_py, build_version = root / "version.py", root / "build-version"
    if version_py.is_file():
        values = _assignments(version_py.read_text())
        version = values.get("__version__")
        if not isinstance(version, str):
            raise ValueError(f"{version_py} names no __version__")
        cuda, hip, xpu = (values.get(k) for k in ("cuda", "hip", "xpu"))
    elif build_version.is_file():
        version = build_version.read_text().strip()
        cuda, hip, xpu = _label_runtime(version)
    else:
        raise ValueError(
            f"{root} is not a Torch install: it has neither version.py (pip's torch) nor "
            "build-version (LibTorch)"
        )
    return RuntimeFacts(
        python_version=None,
        machine=host_machine(),
        torch_version=version,
        torch_cuda=cuda if isinstance(cuda, str) else None,
        torch_hip=hip if isinstance(hip, str) else None,
        torch_xpu=xpu if isinstance(xpu, str) else None,
    )


def _assignments(source: str) -> dict[str, object]:
    """`name = constant` and `name: T = constant` of a module, read without running it."""
    values: dict[str, object] = {}
    for node in ast.parse(source).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            values[target.id] = value.value
    return values


def _label_runtime(version: str) -> tuple[str | None, str | None, str | None]:
    """(cuda, hip, xpu) from a LibTorch version's label: +cu128 -> CUDA 12.8."""
    label = version.partition("+")[2]
    if label.startswith("cu") and label[2:].isdigit() and len(label) >= 5:
        digits = label[2:]
        return f"{digits[:-1]}.{digits[-1]}", None, None
    if label.startswith("rocm"):
        return None, label.removeprefix("rocm"), None
    return None, None, "xpu" if label == "xpu" else None
