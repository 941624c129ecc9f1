"""wheelops.nn.Softmax: torch.nn.Softmax on wheelops.softmax."""

from __future__ import annotations

import torch

from wheelops.ops.softmax import softmax

__all__ = ["Softmax"]


class Softmax(torch.nn.Module):
    """``wheelops.softmax(x, dim)`` as a module, a drop-in for ``torch.nn.Softmax(dim)``.

    Unlike ``torch.nn.Softmax``, whose ``dim=None`` picks a dimension from the
    input's rank (deprecated behaviour), ``dim`` defaults to ``-1``, the last
    dimension, which is also the fast path.
    """

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"Softmax: 'dim' must be an int, got {type(dim).__name__}")
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
