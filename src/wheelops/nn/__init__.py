"""torch.nn.Module wrappers of the wheelops ops: one module per wrapper (modules not
starting with "_"), each class imported below by name.

Each module here lists its classes in ``__all__``. Adding a wrapper adds a module, its
import line below and its names in ``__all__`` (tests/test_op_surface.py holds these to
the folder).
"""

from __future__ import annotations

from wheelops.nn.bias_gelu import BiasGELU
from wheelops.nn.layer_norm import LayerNorm
from wheelops.nn.linear_gelu import LinearGELU
from wheelops.nn.lltm import LLTM
from wheelops.nn.rms_norm import RMSNorm
from wheelops.nn.silu_and_mul import SiluAndMul
from wheelops.nn.softmax import Softmax

__all__ = [
    "LLTM",
    "BiasGELU",
    "LayerNorm",
    "LinearGELU",
    "RMSNorm",
    "SiluAndMul",
    "Softmax",
]
