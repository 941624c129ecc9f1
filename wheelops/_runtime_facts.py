"""What this process runs: Python, torch and its build kind, CUDA runtime, machine.

`collect()` never initialises CUDA (import wheelops must not create a context);
the GPU and driver facts, which do, are read only by the doctor and at the
first CUDA call.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import platform
from dataclasses import asdict, dataclass
from typing import Any

from wheelops._elf import host_machine


@dataclass(frozen=True)
class RuntimeFacts:
    python_version: str
    machine: str
    torch_version: str | None  # None: torch is not installed
    torch_cuda: str | None  # the CUDA runtime torch ships (torch.version.cuda)
    torch_hip: str | None
    torch_xpu: str | None

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
    )


@dataclass(frozen=True)
class Gpu:
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


def glibc_version() -> str | None:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (ValueError, OSError):
        return None
