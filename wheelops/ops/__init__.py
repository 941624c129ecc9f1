"""The wheelops ops: one module per op, found by name (modules not starting with "_").

Each op module defines its public function(s) in ``__all__`` and a
``register()`` that adds its fake kernel and autograd formula once the native
schemas are loaded (at the first lookup of an op: _first_lookup.py). Adding an op adds a
module here; nothing else to edit.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from wheelops._compat import loader
from wheelops._damage import damaged_install
from wheelops.ops._first_lookup import Registration, register_at_first_lookup

OP_MODULES: tuple[ModuleType, ...] = tuple(
    importlib.import_module(f"{__name__}.{info.name}")
    for info in pkgutil.iter_modules(__path__)
    if not info.name.startswith("_")
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


__all__ = sorted(name for module in OP_MODULES for name in module.__all__)
globals().update({name: getattr(module, name) for module in OP_MODULES for name in module.__all__})
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
