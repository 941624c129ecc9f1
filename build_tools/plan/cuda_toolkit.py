"""Find the CUDA toolkit that matches the build torch, and refuse any other.

A build never takes whatever nvcc is on PATH or in /usr/local/cuda: the
toolkit is either named explicitly with CUDA_HOME (the Docker images do this)
or is the PyPI toolkit (`cuda-toolkit[nvcc,cudart,crt,nvvm,cccl]`, pinned to
torch's CUDA) installed next to torch. Either way its nvcc must report the
same major.minor as torch.version.cuda.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

# The test sessions read each CUDA library's SASS and PTX with it (tests/test_build.py).
# A reader, not a build input: a newer cuobjdump reads older libraries of either major.
CUOBJDUMP_REQUIREMENT = "nvidia-cuda-cuobjdump==13.4.92"

PIP_INSTALL_HINT = (
    'pip install "cuda-toolkit[nvcc,cudart,crt,nvvm,cccl]=={cuda}.*"'
    "  (in the environment that builds, next to torch)"
)


class ToolkitError(RuntimeError):
    """No CUDA toolkit that matches the build torch."""


@dataclass(frozen=True)
class CudaToolkit:
    home: Path
    nvcc: Path
    version: str  # full nvcc version, e.g. "13.0.88"
    include_dir: Path
    cudart_dir: Path
    cudart_soname: str  # e.g. "libcudart.so.13"
    origin: str  # "CUDA_HOME" or "PyPI"

    @property
    def release(self) -> str:
        return ".".join(self.version.split(".")[:2])


def nvcc_version(nvcc: Path) -> str:
    out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=True)
    match = re.search(r"V(\d+\.\d+\.\d+)", out.stdout)
    if not match:
        raise ToolkitError(f"cannot read the version of {nvcc}:\n{out.stdout}")
    return match.group(1)


def _pypi_toolkit_home(cuda_major: str) -> Path | None:
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        home = Path(location) / f"cu{cuda_major}"
        if (home / "bin" / "nvcc").is_file():
            return home
    return None


def _cudart(home: Path, cuda_major: str) -> tuple[Path, str]:
    soname = f"libcudart.so.{cuda_major}"
    for sub in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
        if (home / sub / soname).exists():
            return home / sub, soname
    raise ToolkitError(f"{home} has no {soname}: install the toolkit's cudart component")


def find_toolkit(torch_cuda: str) -> CudaToolkit:
    """The toolkit for a torch built with CUDA `torch_cuda` ("13.0"), or ToolkitError."""
    major = torch_cuda.split(".")[0]
    explicit = os.environ.get("CUDA_HOME")
    if explicit:
        home, origin = Path(explicit), "CUDA_HOME"
        if not (home / "bin" / "nvcc").is_file():
            raise ToolkitError(f"CUDA_HOME={explicit} has no bin/nvcc")
    else:
        found = _pypi_toolkit_home(major)
        if found is None:
            raise ToolkitError(
                f"no CUDA {torch_cuda} toolkit found for this torch (built with CUDA "
                f"{torch_cuda}). Install the matched one: "
                + PIP_INSTALL_HINT.format(cuda=torch_cuda)
                + ", or point CUDA_HOME at a CUDA "
                f"{torch_cuda} toolkit. nvcc on PATH is never used implicitly."
            )
        home, origin = found, "PyPI"
    nvcc = home / "bin" / "nvcc"
    version = nvcc_version(nvcc)
    release = ".".join(version.split(".")[:2])
    if release != torch_cuda:
        raise ToolkitError(
            f"the CUDA toolkit at {home} ({origin}) is CUDA {release}, but torch was built "
            f"with CUDA {torch_cuda}; a wheelops variant is built with exactly its torch's "
            "toolkit. Fix: " + PIP_INSTALL_HINT.format(cuda=torch_cuda)
        )
    include_dir = home / "include"
    cudart_dir, soname = _cudart(home, major)
    return CudaToolkit(home, nvcc, version, include_dir, cudart_dir, soname, origin)
