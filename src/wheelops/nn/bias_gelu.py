"""wheelops.nn.BiasGELU: the learnable bias + GELU of a Linear layer, fused."""

from __future__ import annotations

import math

import torch

from wheelops.ops.bias_gelu import APPROXIMATIONS, bias_gelu

__all__ = ["BiasGELU"]


class BiasGELU(torch.nn.Module):
    """``gelu(x + bias)`` with a learnable bias over the last dimension, fused.

    A drop-in for the bias and activation of ``nn.Linear`` + ``nn.GELU``::

        nn.Sequential(nn.Linear(512, 2048, bias=False), wheelops.nn.BiasGELU(2048))

    computes what ``nn.Sequential(nn.Linear(512, 2048), nn.GELU())`` does, in one
    pass over the activations. Pass ``fan_in`` (the Linear's ``in_features``) to
    initialise the bias as ``nn.Linear`` does; otherwise it starts at zero.
    """

    def __init__(
        self,
        features: int,
        approximate: str = "none",
        fan_in: int | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if isinstance(features, bool) or not isinstance(features, int) or features < 1:
            raise ValueError(f"BiasGELU: 'features' must be a positive int, got {features!r}")
        if approximate not in APPROXIMATIONS:
            raise ValueError(
                f"BiasGELU: 'approximate' must be 'none' or 'tanh', got {approximate!r}"
            )
        self.features = features
        self.approximate = approximate
        self.fan_in = fan_in
        self.bias = torch.nn.Parameter(torch.empty(features, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.fan_in:
            bound = 1.0 / math.sqrt(self.fan_in)
            torch.nn.init.uniform_(self.bias, -bound, bound)
        else:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return bias_gelu(x, self.bias, self.approximate)

    def extra_repr(self) -> str:
        return f"features={self.features}, approximate={self.approximate!r}"
