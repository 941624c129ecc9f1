"""wheelops: fused PyTorch operators in C++/CUDA, built on the LibTorch stable ABI.

Ops live in the ``torch.ops.wheelops`` namespace; this package exposes them
as plain functions (``wheelops.add``, ``wheelops.relu_scale``,
``wheelops.bias_gelu``) and modules (``wheelops.nn``). ``build_info()`` says
how this install was built.
"""

from wheelops._build_info import BuildInfo, build_info
from wheelops._version import __version__

from wheelops import _native  # isort: skip

_native.load_installed()

from wheelops import nn, ops  # noqa: E402
from wheelops.ops import *  # noqa: E402,F403

__all__ = ["BuildInfo", "__version__", "build_info", "nn", "ops", *ops.__all__]
