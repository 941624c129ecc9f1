"""wheelops.nn.SiluAndMul: the SwiGLU activation of a fused gate/up projection."""

from __future__ import annotations

import torch

from wheelops.ops.silu_and_mul import silu_and_mul

__all__ = ["SiluAndMul"]


class SiluAndMul(torch.nn.Module):
    """``silu(x[..., :d]) * x[..., d:]`` for ``x`` of shape ``[..., 2 * d]`` (vLLM's name).

    The activation of a SwiGLU MLP whose gate and up projections are one
    ``nn.Linear(hidden, 2 * d)``::

        nn.Sequential(nn.Linear(512, 2 * 1376), wheelops.nn.SiluAndMul(), nn.Linear(1376, 512))
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return silu_and_mul(x)
