"""wheelops: fused PyTorch operators in C++/CUDA, built on the LibTorch stable ABI.

Ops live in the ``torch.ops.wheelops`` namespace; this package exposes them
as plain functions (``wheelops.add``, ``wheelops.relu_scale``,
``wheelops.bias_gelu``) and modules (``wheelops.nn``). ``build_info()`` says
how this install was built; ``python -m wheelops`` whether it suits this machine.
``cmake_prefix_path`` and ``library_paths()`` serve C++ programs (README: Deploy).
"""

from wheelops._damage import PACKAGE_DIR as _PACKAGE_DIR
from wheelops._damage import DamagedInstallError, damaged_install, imported_by_doctor

# What stopped the import, kept for `python -m wheelops`, which reports it (and exits 1)
# instead of dying of it; any other importer gets it raised.
_import_error = None
__all__ = ["DamagedInstallError"]

try:
    from wheelops._compat import early as _early
    from wheelops._compat.early import CompatibilityError, UnsupportedGPUError

    _early.refuse_old_python()  # before any module that needs Python >= 3.10

    from wheelops._compat import loader as _loader
    from wheelops._compat import record as _record
    from wheelops._compat.facts import BuildInfo
    from wheelops._compat.loader import build_info, library_paths
    from wheelops._version import __version__ as _base_version

    # The installed distribution's version, local label included ("0.1.0+universal", as
    # importlib.metadata says): the label is in METADATA alone; a checkout's is "0.1.0+dev".
    __version__: str = _record.version(_loader.PACKAGE_DIR, _base_version)

    # For CMake, as torch.utils.cmake_prefix_path: find_package(wheelops) looks under it.
    cmake_prefix_path: str = str(_loader.CMAKE_PREFIX)

    _loader.load_installed(strict=not imported_by_doctor())

    if _loader.state().error is None:  # else the doctor reports the refusal: nothing to run
        from wheelops import nn, ops
        from wheelops.ops import (
            add,
            bias_gelu,
            fused_linear_gelu,
            layer_norm,
            lltm,
            normalize_volume,
            relu_scale,
            rgb_to_gray,
            rms_norm,
            silu_and_mul,
            softmax,
        )

        if _loader.loaded() is not None:
            ops.register_python_kernels_at_first_lookup()
        _record.require_modules(_loader.PACKAGE_DIR)
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
            # the ops (wheelops.ops.__all__)
            "add",
            "bias_gelu",
            "fused_linear_gelu",
            "layer_norm",
            "lltm",
            "normalize_volume",
            "relu_scale",
            "rgb_to_gray",
            "rms_norm",
            "silu_and_mul",
            "softmax",
        ]
except Exception as _err:  # a damaged module: SyntaxError, ValueError (NUL bytes), ...
    _damage = None if type(_err).__name__ == "CompatibilityError" else damaged_install(_err)
    _doctor = ("__main__.py", "_doctor_cli.py")  # what `python -m wheelops` runs
    if imported_by_doctor() and all((_PACKAGE_DIR / name).is_file() for name in _doctor):
        _import_error = _damage or _err  # else no doctor runs after this: raise it here
    elif _damage is None:  # the guard's refusal, or no file is damaged: as raised
        raise
    else:
        raise _damage from _err
