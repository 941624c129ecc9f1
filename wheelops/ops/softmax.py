"""wheelops.softmax: numerically stable softmax along one dimension, one read and one write."""

from __future__ import annotations

from typing import Any

import torch

from wheelops.ops import _checks

__all__ = ["softmax"]


def _wrapped_dim(op: str, x: torch.Tensor, dim: object) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"wheelops.{op}: argument 'dim' must be an int, got {type(dim).__name__}")
    n = max(x.dim(), 1)  # a 0-dim tensor is one row of one element, as in torch
    if not -n <= dim < n:
        raise ValueError(
            f"wheelops.{op}: argument 'dim' must be in [{-n}, {n - 1}] for 'x' of shape "
            f"{list(x.shape)}, got {dim}"
        )
    return dim


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Return ``torch.softmax(x, dim)``: ``exp(x - max) / sum(exp(x - max))`` along ``dim``.

    ``x`` is float32, float16, bfloat16 or float64 of any shape and strides;
    ``dim`` may be negative and defaults to the last dimension (the fast path:
    other dimensions pay one transposing copy in and one out). Each row is
    computed in float32 (float64 for float64) and rounded once to ``x``'s
    dtype; the result is contiguous. NaN and infinities behave as in
    ``torch.softmax``: a row holding NaN or +inf, or only -inf, is all NaN.
    The backward, ``y * (g - sum(g * y))``, uses only the saved output.

    Example::

        >>> wheelops.softmax(torch.tensor([[1.0, 1.0], [0.0, float("-inf")]]))
        tensor([[0.5000, 0.5000],
                [1.0000, 0.0000]])
    """
    _checks.float_tensor("softmax", "x", x)
    dim = _wrapped_dim("softmax", x, dim)
    _checks.runnable("softmax", x)
    return torch.ops.wheelops.softmax.default(x, dim)


def _fake(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    _checks.float_tensor("softmax", "x", x)
    _wrapped_dim("softmax", x, dim)
    _checks.gpu_supported("softmax", x)
    return x.new_empty(x.shape)


def _fake_backward(grad: torch.Tensor, out: torch.Tensor, dim: int) -> torch.Tensor:
    op = "softmax_backward"
    _checks.float_tensor(op, "grad", grad)
    _checks.float_tensor(op, "out", out)
    _checks.same_device(op, "grad", grad, "out", out)
    _checks.same_dtype(op, "grad", grad, "out", out)
    _checks.same_shape(op, "grad", grad, "out", out)
    _wrapped_dim(op, out, dim)
    _checks.gpu_supported(op, out)
    return out.new_empty(out.shape)


def _setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    _, dim = inputs
    ctx.save_for_backward(output)  # the output alone determines the gradient
    ctx.dim = dim


def _backward(ctx: Any, grad: torch.Tensor) -> tuple:
    (out,) = ctx.saved_tensors
    return torch.ops.wheelops.softmax_backward.default(grad, out, ctx.dim), None


def register() -> None:
    torch.library.register_fake("wheelops::softmax", _fake)
    torch.library.register_fake("wheelops::softmax_backward", _fake_backward)
    torch.library.register_autograd("wheelops::softmax", _backward, setup_context=_setup_context)
