"""wheelops.relu_scale: max(x, 0) * alpha in one pass."""

from __future__ import annotations

from typing import Any

import torch

from wheelops.ops import _autograd, _checks, _entry

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
    alpha = _checks.python_float("relu_scale", "alpha", alpha)
    return _entry.run(
        "relu_scale",
        lambda: _checks.float_tensor("relu_scale", "x", x),
        torch.ops.wheelops.relu_scale.default,
        x,
        alpha,
    )


def _fake(x: torch.Tensor, alpha: float) -> torch.Tensor:
    _checks.float_tensor("relu_scale", "x", x)
    _checks.gpu_supported("relu_scale", x)
    return x.new_empty(x.shape)


def _setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    x, alpha = inputs
    ctx.save_for_backward(x)
    ctx.save_for_forward(x)
    ctx.alpha = alpha


def _fake_backward(grad: torch.Tensor, x: torch.Tensor, alpha: float) -> torch.Tensor:
    _checks.float_tensor("relu_scale_backward", "grad", grad)
    _checks.float_tensor("relu_scale_backward", "x", x)
    _checks.same_dtype("relu_scale_backward", "grad", grad, "x", x)
    _checks.same_shape("relu_scale_backward", "grad", grad, "x", x)
    _checks.gpu_supported("relu_scale_backward", x)
    return x.new_empty(x.shape)


def _backward(ctx: Any, grad: torch.Tensor) -> tuple:
    (x,) = ctx.saved_tensors
    # One fused pass: 0 where x <= 0, else alpha * grad (NaN passes it, as in torch.relu).
    return _autograd.call(torch.ops.wheelops.relu_scale_backward.default, grad, x, ctx.alpha), None


def _jvp(ctx: Any, x_tangent: torch.Tensor, _alpha: None) -> torch.Tensor:
    # The derivative is diagonal: the tangent goes through the backward's formula.
    (x,) = ctx.saved_tensors
    return _autograd.call(torch.ops.wheelops.relu_scale_backward.default, x_tangent, x, ctx.alpha)


def _setup_backward_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    _grad, x, alpha = inputs
    ctx.save_for_backward(x)
    ctx.save_for_forward(x)
    ctx.alpha = alpha


def _double_backward(ctx: Any, grad_grad_x: torch.Tensor) -> tuple:
    # Linear in grad; its derivative in x is 0 wherever it exists (as torch.relu's).
    (x,) = ctx.saved_tensors
    grad_grad = _autograd.call(
        torch.ops.wheelops.relu_scale_backward.default, grad_grad_x, x, ctx.alpha
    )
    return grad_grad, None, None


def _backward_jvp(
    ctx: Any, grad_tangent: torch.Tensor | None, _x_tangent: torch.Tensor | None, _alpha: None
) -> torch.Tensor:
    (x,) = ctx.saved_tensors
    grad_tangent = _autograd.zero_if_none(grad_tangent, x)
    return _autograd.call(
        torch.ops.wheelops.relu_scale_backward.default, grad_tangent, x, ctx.alpha
    )


def register() -> None:
    torch.library.register_fake("wheelops::relu_scale", _fake)
    torch.library.register_fake("wheelops::relu_scale_backward", _fake_backward)
    _autograd.register("relu_scale", setup_context=_setup_context, backward=_backward, jvp=_jvp)
    _autograd.register(
        "relu_scale_backward",
        setup_context=_setup_backward_context,
        backward=_double_backward,
        jvp=_backward_jvp,
        gradient_of="relu_scale",
    )
