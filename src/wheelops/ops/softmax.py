"""wheelops.softmax: numerically stable softmax along one dimension, one read and one write."""

from __future__ import annotations

from typing import Any

import torch

from wheelops.ops import _autograd, _checks, _entry
from wheelops.ops._entry import dynamo_tracing

__all__ = ["softmax"]

# The namespace, bound once: a call then looks up only its op on it (`torch.ops.wheelops.x`
# costs ~0.2 µs a call, on a call of a few µs).
_OPS = torch.ops.wheelops


def _wrapped_dim(op: str, x: torch.Tensor, dim: object) -> int:
    _checks.python_int(op, "dim", dim)
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
    return (_python_path if dynamo_tracing() else _eager)(x, dim)


def _python_path(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """wheelops.softmax's own path: every call under torch.compile, and each call the
    accelerator hands back (wheelops/ops/_accel.py)."""
    _checks.python_int("softmax", "dim", dim)  # the op's schema would take a bool
    return _entry.run(
        "softmax",
        lambda: _wrapped_dim("softmax", _checks.float_tensor("softmax", "x", x), dim),
        _OPS.softmax.default,
        x,
        dim,
    )


# The eager entry: the accelerator's once register() has run, where it serves this op
# (wheelops/ops/_autograd.py accelerated); until then, and without it, the Python path.
_eager = _python_path


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
    ctx.save_for_backward(output)  # the output alone determines both derivatives
    ctx.save_for_forward(output)
    ctx.dim = dim


def _backward(ctx: Any, grad: torch.Tensor) -> tuple:
    (out,) = ctx.saved_tensors
    return _autograd.call(_OPS.softmax_backward.default, grad, out, ctx.dim), None


def _jvp(ctx: Any, x_tangent: torch.Tensor | None, _dim: None) -> torch.Tensor:
    # The Jacobian diag(y) - y y^T is symmetric: the JVP is the backward's formula.
    (out,) = ctx.saved_tensors
    return _autograd.call(_OPS.softmax_backward.default, x_tangent, out, ctx.dim)


def _setup_backward_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    grad, out, dim = inputs
    ctx.save_for_backward(grad, out)
    ctx.save_for_forward(grad, out)
    ctx.dim = dim


def _double_backward(ctx: Any, grad_grad_x: torch.Tensor) -> tuple:
    # grad_x = y * (g - sum(g * y)): linear in g with the same symmetric Jacobian, and
    # d/dy gives gg * (g - sum(g * y)) - g * sum(gg * y); computed in float32 or wider.
    grad, out = ctx.saved_tensors
    grad_grad = None
    if ctx.needs_input_grad[0]:
        grad_grad = _autograd.call(_OPS.softmax_backward.default, grad_grad_x, out, ctx.dim)
    grad_out = None
    if ctx.needs_input_grad[1]:
        g, y, gg = (_checks.opmath(t) for t in (grad, out, grad_grad_x))
        dot = (g * y).sum(ctx.dim, keepdim=True)
        grad_out = (gg * (g - dot) - g * (gg * y).sum(ctx.dim, keepdim=True)).to(out.dtype)
    return grad_grad, grad_out, None


def _backward_jvp(
    ctx: Any, grad_tangent: torch.Tensor | None, out_tangent: torch.Tensor | None, _dim: None
) -> torch.Tensor:
    # d[y * (g - sum(g * y))] = dy * (g - sum(g * y)) + y * (dg - sum(dg * y) - sum(g * dy))
    grad, out = ctx.saved_tensors
    g, y = _checks.opmath(grad), _checks.opmath(out)
    dg = _checks.opmath(_autograd.zero_if_none(grad_tangent, grad))
    dy = _checks.opmath(_autograd.zero_if_none(out_tangent, out))
    dim = ctx.dim
    dot = (g * y).sum(dim, keepdim=True)
    tangent = dy * (g - dot) + y * (
        dg - (dg * y).sum(dim, keepdim=True) - (g * dy).sum(dim, keepdim=True)
    )
    return tangent.to(out.dtype)


def register() -> None:
    torch.library.register_fake("wheelops::softmax", _fake)
    torch.library.register_fake("wheelops::softmax_backward", _fake_backward)
    _autograd.register("softmax", setup_context=_setup_context, backward=_backward, jvp=_jvp)
    _autograd.register(
        "softmax_backward",
        setup_context=_setup_backward_context,
        backward=_double_backward,
        jvp=_backward_jvp,
        gradient_of="softmax",
    )
    # Last: the entry calls the ops registered above.
    global _eager
    _eager = _autograd.accelerated("softmax", _python_path)
