"""wheelops.nn.LinearGELU: nn.Linear followed by nn.GELU, as one fused op."""

from __future__ import annotations

import torch

from wheelops.ops.fused_linear_gelu import APPROXIMATIONS, fused_linear_gelu

__all__ = ["LinearGELU"]


class LinearGELU(torch.nn.Linear):
    """``gelu(x @ weight.T + bias)``: a drop-in for
    ``nn.Sequential(nn.Linear(in_features, out_features, bias), nn.GELU(approximate))``.

    Its parameters are ``nn.Linear``'s (``weight`` ``[out_features, in_features]``,
    ``bias`` ``[out_features]`` or None), with the same names and initialisation, so a
    ``state_dict`` loads from one into the other. The forward is
    ``wheelops.fused_linear_gelu``: on CUDA one cuBLASLt GEMM with the bias (and, for
    ``approximate="tanh"``, the GELU) in its epilogue.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        approximate: str = "none",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        if approximate not in APPROXIMATIONS:
            raise ValueError(
                f"LinearGELU: 'approximate' must be 'none' or 'tanh', got {approximate!r}"
            )
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.approximate = approximate

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return fused_linear_gelu(input, self.weight, self.bias, self.approximate)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, approximate={self.approximate!r}"
