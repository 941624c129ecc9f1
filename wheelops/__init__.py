"""wheelops: fused PyTorch operators in C++/CUDA, built on the LibTorch stable ABI.

Ops live in the ``torch.ops.wheelops`` namespace; this package exposes them
as plain functions (``wheelops.add``, ``wheelops.relu_scale``,
``wheelops.bias_gelu``) and modules (``wheelops.nn``). ``build_info()`` says
how this install was built; ``python -m wheelops`` whether it suits this machine.
``cmake_prefix_path`` and ``library_paths()`` serve C++ programs (README: Deploy).
"""

from wheelops._compat import loader as _loader
from wheelops._compat.facts import BuildInfo
from wheelops._compat.loader import (
    CompatibilityError,
    UnsupportedGPUError,
    build_info,
    library_paths,
)
from wheelops._version import __version__

# For CMake, as torch.utils.cmake_prefix_path: find_package(wheelops) looks under it.
cmake_prefix_path: str = str(_loader.CMAKE_PREFIX)

_loader.load_installed(strict=not _loader.imported_by_doctor())

from wheelops import nn, ops  # noqa: E402
from wheelops.ops import *  # noqa: E402,F403

if _loader.loaded() is not None:
    ops.register_python_kernels()

__all__ = [
    "BuildInfo",
    "CompatibilityError",
    "UnsupportedGPUError",
    "__version__",
    "build_info",
    "cmake_prefix_path",
    "library_paths",
    "nn",
    "ops",
    *ops.__all__,
]
