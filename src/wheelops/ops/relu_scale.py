"""wheelops.relu_scale: max(x, 0) * alpha in one pass."""

from __future__ import annotations

from typing import Any

import torch

from wheelops.ops import _autograd, _checks, _entry
from wheelops.ops._entry import dynamo_tracing

__all__ = ["relu_scale"]

# The namespace, bound once: a call then looks up only its op on it (`torch.ops.wheelops.x`
# costs ~0.2 µs a call, on a call of a few µs).
_OPS = torch.ops.wheelops


def relu_scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """Return ``torch.relu(x) * alpha`` computed in one fused pass.

    ``x`` is float32, float16, bfloat16 or float64, of any shape and strides
    (the result is contiguous); ``alpha`` is a Python float. NaN propagates as
    in ``torch.relu``. Differentiable in ``x``.

    Example::

        >>> wheelops.relu_scale(torch.tensor([-1.0, 2.0]), 0.5)
        tensor([0., 1.])
    """
    return (_python_path if dynamo_tracing() else _eager)(x, alpha)


def _python_path(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """wheelops.relu_scale's own path: every call under torch.compile, and each call the
    accelerator hands back (wheelops/ops/_accel.py)."""
    alpha = _checks.python_float("relu_scale", "alpha", alpha)
    return _entry.run(
        "relu_scale",
        lambda: _checks.float_tensor("relu_scale", "x", x),
        _OPS.relu_scale.default,
        x,
        alpha,
    )


# The eager entry: the accelerator's once register() has run, where it serves this op
# (wheelops/ops/_autograd.py accelerated); until then, and without it, the Python path.
_eager = _python_path


def _fake(x: torch.Tensor, alpha: float) -> torch.Tensor:
    _checks.float_tensor("relu_scale", "x", x)
    _checks.gpu_supported("relu_scale", x)
    return x.new_empty(x.shape)


def _mask_bytes(numel: Any) -> Any:
    """The mask's bytes: one bit per element (bit j of byte k is element 8k + j)."""
    return (numel + 7) // 8


def _fake_with_mask(x: torch.Tensor, alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
    _checks.float_tensor("relu_scale_with_mask", "x", x)
    _checks.gpu_supported("relu_scale_with_mask", x)
    return x.new_empty(x.shape), x.new_empty(_mask_bytes(x.numel()), dtype=torch.uint8)


def _fake_backward(grad: torch.Tensor, mask: torch.Tensor, alpha: float) -> torch.Tensor:
    op = "relu_scale_backward"
    _checks.float_tensor(op, "grad", grad)
    _checks.tensor_of(op, "mask", mask, (torch.uint8,), "uint8", "the mask of relu_scale_with_mask")
    _checks.same_device(op, "grad", grad, "mask", mask)
    if mask.dim() != 1 or mask.shape[0] != _mask_bytes(grad.numel()):
        raise ValueError(
            f"wheelops.{op}: argument 'mask' must have shape [{_mask_bytes(grad.numel())}] (one "
            f"bit per element of 'grad', {grad.numel()} elements), got {list(mask.shape)}"
        )
    _checks.gpu_supported(op, grad)
    return grad.new_empty(grad.shape)


def _setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
    # relu_scale runs relu_scale_with_mask when a derivative is wanted: both save the mask
    # (1 bit an element), not x.
    _x, alpha = inputs
    _out, mask = output
    ctx.mark_non_differentiable(mask)
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(mask)
    ctx.save_for_forward(mask)
    ctx.alpha = alpha


def _backward(ctx: Any, grad: torch.Tensor | None, _grad_mask: Any) -> tuple:
    if grad is None:  # grads are not materialized (setup_context): nothing flows back
        return None, None
    (mask,) = ctx.saved_tensors
    # One fused pass: alpha * grad where the mask's bit is set (x > 0, or NaN), else 0.
    grad_x = _autograd.call(_OPS.relu_scale_backward.default, grad, mask, ctx.alpha)
    return grad_x, None


def _jvp(ctx: Any, x_tangent: torch.Tensor, _alpha: None) -> tuple:
    # The derivative is diagonal: the tangent goes through the backward's formula.
    (mask,) = ctx.saved_tensors
    tangent = _autograd.call(_OPS.relu_scale_backward.default, x_tangent, mask, ctx.alpha)
    return tangent, None


def _setup_backward_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    _grad, mask, alpha = inputs
    ctx.save_for_backward(mask)
    ctx.save_for_forward(mask)
    ctx.alpha = alpha


def _double_backward(ctx: Any, grad_grad_x: torch.Tensor) -> tuple:
    # Linear in grad; its derivative in x is 0 wherever it exists (as torch.relu's).
    (mask,) = ctx.saved_tensors
    grad_grad = _autograd.call(_OPS.relu_scale_backward.default, grad_grad_x, mask, ctx.alpha)
    return grad_grad, None, None


def _backward_jvp(
    ctx: Any, grad_tangent: torch.Tensor | None, _mask_tangent: None, _alpha: None
) -> torch.Tensor | None:
    if grad_tangent is None:  # only grad is differentiable: no tangent, a zero one
        return None
    (mask,) = ctx.saved_tensors
    return _autograd.call(_OPS.relu_scale_backward.default, grad_tangent, mask, ctx.alpha)


def register() -> None:
    torch.library.register_fake("wheelops::relu_scale", _fake)
    torch.library.register_fake("wheelops::relu_scale_with_mask", _fake_with_mask)
    torch.library.register_fake("wheelops::relu_scale_backward", _fake_backward)
    formulas = {"setup_context": _setup_context, "backward": _backward, "jvp": _jvp}
    _autograd.register("relu_scale", forward_with="relu_scale_with_mask", **formulas)
    _autograd.register("relu_scale_with_mask", **formulas)
    _autograd.register(
        "relu_scale_backward",
        setup_context=_setup_backward_context,
        backward=_double_backward,
        jvp=_backward_jvp,
        gradient_of="relu_scale",
    )
    # Last: the entry calls the ops registered above.
    global _eager
    _eager = _autograd.accelerated("relu_scale", _python_path)
