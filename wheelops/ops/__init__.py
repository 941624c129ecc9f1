"""The wheelops ops: one module per op, found by name (modules not starting with "_").

Each op module defines its public function(s) in ``__all__`` and a
``register()`` that adds its fake kernel and autograd formula once the native
schemas are loaded. Adding an op adds a module here; nothing else to edit.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

OP_MODULES: tuple[ModuleType, ...] = tuple(
    importlib.import_module(f"{__name__}.{info.name}")
    for info in pkgutil.iter_modules(__path__)
    if not info.name.startswith("_")
)

__all__ = sorted(name for module in OP_MODULES for name in module.__all__)
globals().update({name: getattr(module, name) for module in OP_MODULES for name in module.__all__})

_registered = False


def register_python_kernels() -> None:
    """Register every op's fake kernel and autograd formula (once)."""
    global _registered
    if _registered:
        return
    for module in OP_MODULES:
        module.register()
    _registered = True
