"""torch.nn.Module wrappers of the wheelops ops: one module per wrapper, found by name.

Each module here (not starting with "_") lists its classes in ``__all__``.
Adding a wrapper adds a module; nothing else to edit.
"""

from __future__ import annotations

import importlib
import pkgutil

_MODULES = tuple(
    importlib.import_module(f"{__name__}.{info.name}")
    for info in pkgutil.iter_modules(__path__)
    if not info.name.startswith("_")
)

__all__ = sorted(name for module in _MODULES for name in module.__all__)
globals().update({name: getattr(module, name) for module in _MODULES for name in module.__all__})
