"""The facts a benchmark result is meaningless without: device, driver, versions, build."""

from __future__ import annotations

import ctypes
import datetime
import platform
import subprocess
from types import ModuleType
from typing import Any

import torch


def collect(device: torch.device, wheelops: ModuleType) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "triton": _version_of("triton"),
        "wheelops": wheelops.__version__,
        "wheelops_location": getattr(wheelops, "__file__", None),
        "wheelops_build": _wheelops_build(wheelops),
        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
    }
    if device.type == "cuda":
        facts.update(_cuda_facts(device))
    else:
        facts.update(device_name=_cpu_name(), device_type="cpu")
    return facts


def _cuda_facts(device: torch.device) -> dict[str, Any]:
    props = torch.cuda.get_device_properties(device)
    return {
        "device_type": "cuda",
        "device_name": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "multiprocessors": props.multi_processor_count,
        "memory_bytes": props.total_memory,
        "l2_cache_bytes": getattr(props, "L2_cache_size", None),
        "driver": _nvidia_smi_driver(device.index or 0),
        "driver_cuda": _driver_cuda_version(),
    }


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _wheelops_build(wheelops: ModuleType) -> dict[str, Any] | str:
    try:
        return wheelops.build_info().to_dict()
    except Exception as err:  # the facts are reported, not required
        return f"unavailable: {err}"


def _version_of(module: str) -> str | None:
    try:
        return getattr(__import__(module), "__version__", None)
    except ImportError:
        return None


def _nvidia_smi_driver(index: int) -> str | None:
    try:
        result = subprocess.run(
            ["nvidia-smi", f"--id={index}", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() or None


def _driver_cuda_version() -> str | None:
    """The CUDA version the driver supports, from libcuda (cuDriverGetVersion)."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int()
        if libcuda.cuDriverGetVersion(ctypes.byref(version)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return f"{version.value // 1000}.{version.value % 1000 // 10}"
