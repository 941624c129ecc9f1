"""wheelops.relu_scale: max(x, 0) * alpha in one pass."""

from __future__ import annotations

from typing import Any

import torch

from wheelops.ops import _checks

__all__ = ["relu_scale"]


def relu_scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """Return ``torch.relu(x) * alpha`` computed in one fused pass.

    ``x`` is float32, float16, bfloat16 or float64, of any shape and strides
    (the result is contiguous); ``alpha`` is a Python float. NaN propagates as
    in ``torch.relu``. Differentiable in ``x``.

    Example::

        >>> wheelops.relu_scale(torch.tensor([-1.0, 2.0]), 0.5)
        tensor([0., 1.])
    """
    _checks.float_tensor("relu_scale", "x", x)
    alpha = _checks.python_float("relu_scale", "alpha", alpha)
    _checks.runnable("relu_scale", x)
    return torch.ops.wheelops.relu_scale.default(x, alpha)


def _fake(x: torch.Tensor, alpha: float) -> torch.Tensor:
    _checks.float_tensor("relu_scale", "x", x)
    _checks.gpu_supported("relu_scale", x)
    return x.new_empty(x.shape)


def _setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    x, alpha = inputs
    ctx.save_for_backward(x)
    ctx.alpha = alpha


def _backward(ctx: Any, grad: torch.Tensor) -> tuple:
    (x,) = ctx.saved_tensors
    # d/dx relu(x) * alpha = alpha where x > 0, else 0 (also for NaN, as torch.relu).
    grad_x = torch.where(x > 0, grad * ctx.alpha, torch.zeros_like(grad))
    return grad_x, None


def register() -> None:
    torch.library.register_fake("wheelops::relu_scale", _fake)
    torch.library.register_autograd("wheelops::relu_scale", _backward, setup_context=_setup_context)
