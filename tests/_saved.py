"""What autograd keeps for the backward, read the same way whichever autograd layer serves
(the Python Functions' ``grad_fn.saved_tensors``, the C++ accelerator's nodes have none)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def saved_for_backward(compute: Callable[[], Any]) -> tuple[Any, list[torch.Tensor]]:
    """``compute()``'s result and the tensors saved for its backward, in the order saved."""
    saved: list[torch.Tensor] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        saved.append(tensor)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        result = compute()
    return result, saved
