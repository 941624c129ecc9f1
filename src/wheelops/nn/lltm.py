"""wheelops.nn.LLTM: the LLTM cell of PyTorch's extension tutorial as a module."""

from __future__ import annotations

import math

import torch

from wheelops.ops.lltm import lltm

__all__ = ["LLTM"]


class LLTM(torch.nn.Module):
    """The LLTM cell (pytorch/extension-cpp), one GEMM and one fused gate kernel.

    ``weights`` is ``[3 * state_size, state_size + input_features]`` and
    ``bias`` ``[3 * state_size]``, both initialised uniform in
    ``(-1/sqrt(state_size), 1/sqrt(state_size))`` as in the tutorial.
    ``forward(input, (old_h, old_cell))`` returns ``(new_h, new_cell)``; see
    :func:`wheelops.lltm`.

    Example::

        cell = wheelops.nn.LLTM(input_features=32, state_size=128)
        h = c = torch.zeros(16, 128)
        for x in inputs:  # each [16, 32]
            h, c = cell(x, (h, c))
    """

    def __init__(
        self,
        input_features: int,
        state_size: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        for name, value in (("input_features", input_features), ("state_size", state_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"LLTM: '{name}' must be a positive int, got {value!r}")
        self.input_features = input_features
        self.state_size = state_size
        factory = {"device": device, "dtype": dtype}
        self.weights = torch.nn.Parameter(
            torch.empty(3 * state_size, input_features + state_size, **factory)
        )
        self.bias = torch.nn.Parameter(torch.empty(3 * state_size, **factory))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.state_size)
        for parameter in self.parameters():
            torch.nn.init.uniform_(parameter, -bound, bound)

    def forward(
        self, input: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        old_h, old_cell = state
        return lltm(input, self.weights, self.bias, old_h, old_cell)

    def extra_repr(self) -> str:
        return f"input_features={self.input_features}, state_size={self.state_size}"
