"""wheelops.nn.LayerNorm: a drop-in for torch.nn.LayerNorm over the last dimension."""

from __future__ import annotations

import torch

from wheelops.nn._norm_shape import last_dim
from wheelops.ops.layer_norm import layer_norm

__all__ = ["LayerNorm"]


class LayerNorm(torch.nn.Module):
    """``torch.nn.LayerNorm(normalized_shape)`` for the last dimension, fused.

    Same arguments, parameters (``weight`` initialised to ones, ``bias`` to
    zeros) and state_dict keys as ``torch.nn.LayerNorm``, so a torch module's
    ``state_dict`` loads into it. ``normalized_shape`` is the size of the last
    dimension (an int, or a one-element tuple).
    """

    def __init__(
        self,
        normalized_shape: int,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        size = last_dim("LayerNorm", normalized_shape)
        self.normalized_shape = (size,)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = torch.nn.Parameter(torch.empty(size, device=device, dtype=dtype))
            if bias:
                self.bias = torch.nn.Parameter(torch.empty(size, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            torch.nn.init.ones_(self.weight)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )
