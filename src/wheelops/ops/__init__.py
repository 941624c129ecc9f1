"""The wheelops ops: one module per op (modules not starting with "_"), each imported below
by name, so that readers, IDEs and type checkers find where `wheelops.<op>` is defined.

Each op module defines its public function(s) in ``__all__`` and a ``register()`` that
adds its fake kernel and autograd formula once the native schemas are loaded (at the first
lookup of an op: _first_lookup.py). Adding an op adds a module here, its import line below
and its names in ``__all__`` (tests/test_op_surface.py holds these to the folder).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from wheelops._compat import loader
from wheelops._damage import damaged_install
from wheelops.ops._first_lookup import Registration, register_at_first_lookup
from wheelops.ops.add import add
from wheelops.ops.bias_gelu import bias_gelu
from wheelops.ops.fused_linear_gelu import fused_linear_gelu
from wheelops.ops.layer_norm import layer_norm
from wheelops.ops.lltm import lltm
from wheelops.ops.normalize_volume import normalize_volume
from wheelops.ops.relu_scale import relu_scale
from wheelops.ops.rgb_to_gray import rgb_to_gray
from wheelops.ops.rms_norm import rms_norm
from wheelops.ops.silu_and_mul import silu_and_mul
from wheelops.ops.softmax import softmax

__all__ = [
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

# The op modules, whose register() the registration runs: each public function's own.
OP_MODULES: tuple[ModuleType, ...] = tuple(
    dict.fromkeys(sys.modules[globals()[name].__module__] for name in __all__)
)


def _until_built(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """In a checkout with nothing built, `torch.ops.wheelops.<op>` does not exist: the
    function says what to do (README troubleshooting) instead of an AttributeError from
    torch, and works once `build_tools.dev.load()` has built and loaded the ops."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        loader.require(name)
        return function(*args, **kwargs)

    return call


if loader.loaded() is None:
    globals().update({name: _until_built(name, globals()[name]) for name in __all__})


def _register_every_op() -> None:
    for module in OP_MODULES:
        try:
            module.register()
        except Exception as err:  # a damaged op module (truncated: no register), say
            damaged = damaged_install(err)
            if damaged is None:
                raise
            raise damaged from None


# The one registration, whichever route reaches it first: an op's first lookup or
# register_python_kernels. A flag of its own here, set when the loop ends, let a direct call
# register every op twice: its first op lookup ran the registration again inside it (#42).
_registration = Registration(_register_every_op)


def register_python_kernels() -> None:
    """Register every op's fake kernel, autograd formula and vmap rule (once per process)."""
    _registration.run(torch.ops.wheelops)


def register_python_kernels_at_first_lookup() -> None:
    """Once the native schemas are loaded: register the Python kernels when an op is first
    looked up (_first_lookup.py says why that is before anything can need them)."""
    register_at_first_lookup(torch.ops.wheelops, _registration)
