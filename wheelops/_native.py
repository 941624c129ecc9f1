"""Load the native libraries: the CPU one always, the CUDA one only under a CUDA torch.

The CPU library defines every op schema and its CPU kernels; the CUDA library
adds CUDA kernels to the same ops. Python kernels (fake tensors, autograd)
are registered once the schemas exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

PACKAGE_DIR = Path(__file__).resolve().parent
CPU_LIBRARY = "_ops_cpu"
CUDA_LIBRARY = "_ops_cuda"


@dataclass(frozen=True)
class NativeLibraries:
    cpu: Path
    cuda: Path | None
    cuda_not_loaded_because: str | None  # why a CUDA library present was not loaded


_loaded: NativeLibraries | None = None


def find_library(directory: Path, stem: str) -> Path | None:
    matches = sorted(directory.glob(f"{stem}*.so"))
    return matches[0] if matches else None


def torch_has_cuda() -> bool:
    """A CUDA build of torch (not CPU-only, ROCm or XPU)."""
    return torch.version.cuda is not None and getattr(torch.version, "hip", None) is None


def _load(path: Path) -> None:
    try:
        torch.ops.load_library(str(path))
    except OSError as err:
        raise ImportError(f"wheelops: cannot load {path.name}: {err}") from err


def load_libraries(cpu: Path, cuda: Path | None) -> NativeLibraries:
    """Load `cpu`, then `cuda` when torch can use it, and register the Python kernels."""
    global _loaded
    if _loaded is not None:
        raise RuntimeError(f"wheelops native libraries are already loaded from {_loaded.cpu}")
    _load(cpu)
    reason = None
    if cuda is not None and not torch_has_cuda():
        reason = f"torch {torch.__version__} is not a CUDA build"
        cuda = None
    if cuda is not None:
        _load(cuda)
    _loaded = NativeLibraries(cpu=cpu, cuda=cuda, cuda_not_loaded_because=reason)
    from wheelops.ops import register_python_kernels

    register_python_kernels()
    return _loaded


def load_installed() -> NativeLibraries | None:
    """Load the libraries next to the package; None in an unbuilt source checkout."""
    cpu = find_library(PACKAGE_DIR, CPU_LIBRARY)
    if cpu is None:
        return None
    return load_libraries(cpu, find_library(PACKAGE_DIR, CUDA_LIBRARY))


def loaded() -> NativeLibraries | None:
    return _loaded


def require(op: str) -> None:
    """Raise a clear error when an op is called before any library is loaded."""
    if _loaded is None:
        raise RuntimeError(
            f"wheelops.{op}: the wheelops native libraries are not built. In a source "
            "checkout run `python -m wheelops.jit` (or call wheelops.jit.load()); "
            "otherwise reinstall with `pip install --force-reinstall wheelops`."
        )


def require_cuda_kernels(op: str, tensor: torch.Tensor) -> None:
    if tensor.is_cuda and (_loaded is None or _loaded.cuda is None):
        raise RuntimeError(
            f"wheelops.{op}: got a CUDA tensor, but this wheelops build has no CUDA "
            "kernels (it was built without CUDA). Install the CUDA variant: "
            "`pip install --force-reinstall wheelops`."
        )
