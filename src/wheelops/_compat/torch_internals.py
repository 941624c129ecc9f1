"""Facts, no decisions: the torch internals wheelops' autograd layer uses, as this torch has
them, and what WHEELOPS_AUTOGRAD asks for. Probed once per process.

The fast autograd layer (wheelops/ops/_autograd_fast.py) reaches below torch's public
API for speed: a kernel applied below the torch.func transforms, the op run straight
below autograd. Any torch release may rename one of these; then the ops take the layer
built on public APIs only (wheelops/ops/_autograd_public.py). `INTERNALS` names every
internal the fast layer touches (a test reads that module and checks it uses no other);
each is looked up by its path, as the fast layer reaches it.
"""

from __future__ import annotations

import importlib
import os
from functools import cache
from typing import NamedTuple

AUTOGRAD_ENV = "WHEELOPS_AUTOGRAD"  # "public": the public-API layer, whatever torch has
PUBLIC = "public"

# Dotted paths from `torch`; OpOverload's attributes are looked up on one of aten's.
INTERNALS = (
    "torch._C.DispatchKeySet",
    "torch._C._AutoDispatchBelowAutograd",
    "torch._C._after_autograd_keyset",
    "torch._C._any_requires_grad",
    "torch._C._has_torch_function",
    "torch._C._functorch.maybe_current_level",
    "torch._C.is_grad_enabled",
    "torch._functorch.utils.enable_single_level_autograd_function",
    "torch.autograd.forward_ad._current_level",
    "torch.autograd.forward_ad._set_fwd_grad_enabled",
    "torch.autograd.function._SingleLevelFunction",
    "torch.ops.aten.add.Tensor._op",
    "torch.ops.aten.add.Tensor._schema",
    "torch.ops.aten.add.Tensor.redispatch",
)


# A NamedTuple: a frozen dataclass costs import ~0.4 ms to create, more than the probe.
class AutogradFacts(NamedTuple):
    """What the autograd layer may stand on here."""

    torch_version: str
    missing: tuple[str, ...]  # entries of INTERNALS this torch lacks
    requested: str | None  # WHEELOPS_AUTOGRAD as set (None: unset or empty)
    # The optional C++ accelerator's state, as wheelops/ops/_accel.py says it ("loaded for
    # torch ...", "off (...)", "absent for torch ...", "refused (...)"); None: not asked
    # (import never asks: only the doctor, after the ops' first use).
    accelerator: str | None = None


def has(path: str) -> bool:
    """Whether `path` (a dotted path from torch) resolves: the longest importable module
    prefix, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                found = getattr(found, name)
        except (AttributeError, RuntimeError):  # torch.ops raises RuntimeError for no op
            return False
        return True
    return False


@cache
def facts() -> AutogradFacts:
    """This process's facts (torch must be importable); the variable is read once."""
    import torch

    requested = os.environ.get(AUTOGRAD_ENV, "").strip() or None
    missing = tuple(path for path in INTERNALS if not has(path))
    return AutogradFacts(torch.__version__, missing, requested)
