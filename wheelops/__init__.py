"""wheelops: fused PyTorch operators in C++/CUDA, built on the LibTorch stable ABI.

Ops live in the ``torch.ops.wheelops`` namespace; this package exposes them
as plain functions (``wheelops.add``, ``wheelops.relu_scale``,
``wheelops.bias_gelu``) and modules (``wheelops.nn``). ``build_info()`` says
how this install was built; ``python -m wheelops`` whether it suits this machine.
"""

import sys

from wheelops._build_info import BuildInfo, build_info
from wheelops._guard import CompatibilityError, UnsupportedGPUError
from wheelops._version import __version__

from wheelops import _native  # isort: skip


def _run_as_doctor() -> bool:
    """`python -m wheelops`: the doctor reports a refusal instead of dying of it."""
    argv, i = getattr(sys, "orig_argv", [])[1:], 0
    while i < len(argv):
        arg = argv[i]
        if arg == "-m":
            return argv[i + 1 : i + 2] == ["wheelops"]
        if arg.startswith("-m"):
            return arg == "-mwheelops"
        if arg in ("-X", "-W"):
            i += 2  # an option with a separate value
        elif arg.startswith("-") and not arg.startswith("-c"):
            i += 1
        else:
            return False  # -c, or a script: what follows is its own
    return False


_native.load_installed(strict=not _run_as_doctor())

from wheelops import nn, ops  # noqa: E402
from wheelops.ops import *  # noqa: E402,F403

if _native.loaded() is not None:
    ops.register_python_kernels()

__all__ = [
    "BuildInfo",
    "CompatibilityError",
    "UnsupportedGPUError",
    "__version__",
    "build_info",
    "nn",
    "ops",
    *ops.__all__,
]
