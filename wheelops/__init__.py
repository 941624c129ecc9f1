"""wheelops: fused PyTorch operators in C++/CUDA, built on the LibTorch stable ABI.

Ops live in the ``torch.ops.wheelops`` namespace; this package exposes them
as plain functions (``wheelops.add``, ``wheelops.relu_scale``,
``wheelops.bias_gelu``) and modules (``wheelops.nn``). ``build_info()`` says
how this install was built; ``python -m wheelops`` whether it suits this machine.
``cmake_prefix_path`` and ``library_paths()`` serve C++ programs (README: Deploy).
"""

from wheelops._damage import DamagedInstallError, damaged_install

try:
    from wheelops._compat import loader as _loader
    from wheelops._compat import record as _record
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

    from wheelops import nn, ops
    from wheelops.ops import *  # noqa: F403

    if _loader.loaded() is not None:
        ops.register_python_kernels()
    _record.require_modules(_loader.PACKAGE_DIR)
except Exception as _err:  # a damaged module: SyntaxError, ValueError (NUL bytes), ...
    _damage = None if type(_err).__name__ == "CompatibilityError" else damaged_install(_err)
    if _damage is None:  # the guard's refusal, or no file is damaged: as raised
        raise
    raise _damage from _err

__all__ = [
    "BuildInfo",
    "CompatibilityError",
    "DamagedInstallError",
    "UnsupportedGPUError",
    "__version__",
    "build_info",
    "cmake_prefix_path",
    "library_paths",
    "nn",
    "ops",
    *ops.__all__,
]
