"""wheelops.nn.RMSNorm: a drop-in for torch.nn.RMSNorm over the last dimension."""

from __future__ import annotations

import torch

from wheelops.nn._norm_shape import last_dim
from wheelops.ops.rms_norm import rms_norm

__all__ = ["RMSNorm"]


class RMSNorm(torch.nn.Module):
    """``torch.nn.RMSNorm(normalized_shape)`` for the last dimension, fused.

    Same arguments, parameter (``weight`` initialised to ones) and state_dict
    keys as ``torch.nn.RMSNorm``; ``eps=None`` uses PyTorch's default (see
    ``wheelops.rms_norm``).
    ``normalized_shape`` is the size of the last dimension (an int, or a
    one-element tuple).
    """

    def __init__(
        self,
        normalized_shape: int,
        eps: float | None = None,
        elementwise_affine: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        size = last_dim("RMSNorm", normalized_shape)
        self.normalized_shape = (size,)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = torch.nn.Parameter(torch.empty(size, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            torch.nn.init.ones_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )
