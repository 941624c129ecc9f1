"""wheelops.layer_norm: layer normalization over the last dimension, fused forward and backward."""

from __future__ import annotations

from typing import Any

import torch

from wheelops.ops import _autograd, _checks, _entry, _norm_checks, _vmap
from wheelops.ops._entry import dynamo_tracing

__all__ = ["layer_norm"]

# The namespace, bound once: a call then looks up only its op on it (`torch.ops.wheelops.x`
# costs ~0.2 µs a call, on a call of a few µs).
_OPS = torch.ops.wheelops


def _check(
    op: str, x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: object
) -> float:
    _norm_checks.x_tensor(op, x)
    _norm_checks.param(op, "weight", weight, x)
    _norm_checks.param(op, "bias", bias, x)
    return _norm_checks.eps_value(op, eps)


def layer_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """Return ``F.layer_norm(x, (x.shape[-1],), weight, bias, eps)``, fused.

    Normalizes over the last dimension only: ``(x - mean) / sqrt(var + eps) *
    weight + bias`` with the biased variance. ``weight`` and ``bias`` are
    optional, of shape ``[x.shape[-1]]`` and the dtype and device of ``x``
    (float32, float16, bfloat16 or float64). Statistics are computed in float32
    (float64 for float64 input) and each output is rounded once. The result is
    contiguous. For the backward only ``x``, ``weight`` and the per-row float32
    mean and rstd are saved (not the output); a call that wants no gradient
    allocates no statistics. Gradients are computed only for the inputs that
    need them (forward-mode AD too; no second derivatives).

    Example::

        >>> x, w, b = torch.randn(4, 8), torch.randn(8), torch.randn(8)
        >>> ref = torch.nn.functional.layer_norm(x, (8,), w, b)
        >>> torch.allclose(wheelops.layer_norm(x, w, b), ref, atol=1e-6)
        True
    """
    return (_python_path if dynamo_tracing() else _eager)(x, weight, bias, eps)


def _python_path(
    x: torch.Tensor,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """wheelops.layer_norm's own path: every call under torch.compile, and each call the
    accelerator hands back (wheelops/ops/_accel.py)."""
    eps = _norm_checks.eps_value("layer_norm", eps)
    return _entry.run(
        "layer_norm",
        lambda: _check("layer_norm", x, weight, bias, eps),
        _OPS.layer_norm.default,
        x,
        weight,
        bias,
        eps,
        inference=_OPS.layer_norm_inference.default,
    )


# The eager entry: the accelerator's once register() has run, where it serves this op
# (wheelops/ops/_autograd.py accelerated); until then, and without it, the Python path.
_eager = _python_path


def _fake(
    x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    _check("layer_norm", x, weight, bias, eps)
    _checks.gpu_supported("layer_norm", x)
    rows, dtype = _norm_checks.rows(x), _norm_checks.stats_dtype(x)
    return x.new_empty(x.shape), x.new_empty(rows, dtype=dtype), x.new_empty(rows, dtype=dtype)


def _fake_inference(
    x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float
) -> torch.Tensor:
    _check("layer_norm_inference", x, weight, bias, eps)
    _checks.gpu_supported("layer_norm_inference", x)
    return x.new_empty(x.shape)


def _fake_backward(
    grad: torch.Tensor,
    x: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor | None,
    x_grad: bool,
    weight_grad: bool,
    bias_grad: bool,
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    op = "layer_norm_backward"
    _norm_checks.backward_args(op, grad, x, weight, weight_grad)
    _norm_checks.stat(op, "mean", mean, x)
    _norm_checks.stat(op, "rstd", rstd, x)
    _checks.gpu_supported(op, x)
    cols = x.shape[-1]
    return (
        x.new_empty(x.shape) if x_grad else None,
        x.new_empty(cols) if weight_grad else None,
        x.new_empty(cols) if bias_grad else None,
    )


def _setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
    x, weight, _bias, _eps = inputs
    _out, mean, rstd = output
    ctx.mark_non_differentiable(mean, rstd)
    # Their gradients are never used: left undefined, not filled with zeros (a launch each).
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(x, weight, mean, rstd)
    ctx.save_for_forward(x, weight, mean, rstd)


def _backward(ctx: Any, grad: torch.Tensor | None, _grad_mean: Any, _grad_rstd: Any) -> tuple:
    if grad is None:  # grads are not materialized (setup_context): nothing flows back
        return None, None, None, None
    x, weight, mean, rstd = ctx.saved_tensors
    x_grad, weight_grad, bias_grad = ctx.needs_input_grad[:3]
    grad_x, grad_weight, grad_bias = _autograd.call(
        _OPS.layer_norm_backward.default,
        grad,
        x,
        mean,
        rstd,
        weight,
        x_grad,
        weight_grad,
        bias_grad,
    )
    return grad_x, grad_weight, grad_bias, None


def _jvp(
    ctx: Any,
    x_tangent: torch.Tensor | None,
    weight_tangent: torch.Tensor | None,
    bias_tangent: torch.Tensor | None,
    _eps: None,
) -> tuple:
    # xhat = (x - mean) * rstd; dxhat = rstd * (dxc - xhat * mean(xhat * dxc)) with
    # dxc = dx - mean(dx); dy = dxhat * w + xhat * dw + db. In the stats' precision.
    x, weight, mean, rstd = ctx.saved_tensors
    stats = mean.dtype
    mean, rstd = mean.view(*x.shape[:-1], 1), rstd.view(*x.shape[:-1], 1)
    xhat = (x.to(stats) - mean) * rstd
    tangent = torch.zeros_like(xhat)
    if x_tangent is not None:
        centred = x_tangent.to(stats) - x_tangent.to(stats).mean(-1, keepdim=True)
        tangent = rstd * (centred - xhat * (xhat * centred).mean(-1, keepdim=True))
        if weight is not None:
            tangent = tangent * weight.to(stats)
    if weight_tangent is not None:
        tangent = tangent + xhat * weight_tangent.to(stats)
    if bias_tangent is not None:
        tangent = tangent + bias_tangent.to(stats)
    return tangent.to(x.dtype), None, None


def register() -> None:
    torch.library.register_fake("wheelops::layer_norm", _fake)
    torch.library.register_fake("wheelops::layer_norm_inference", _fake_inference)
    torch.library.register_fake("wheelops::layer_norm_backward", _fake_backward)
    _autograd.register("layer_norm", setup_context=_setup_context, backward=_backward, jvp=_jvp)
    _autograd.register_gradient_without_derivatives("layer_norm")
    # Run only when no derivative is wanted; asked for one directly, it says so.
    _autograd.register(
        "layer_norm_inference", setup_context=_autograd.no_context, backward=None, jvp=None
    )
    _vmap.register_loop("layer_norm_backward")
    # Last: the entry calls the ops registered above.
    global _eager
    _eager = _autograd.accelerated("layer_norm", _python_path)
