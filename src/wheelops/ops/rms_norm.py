"""wheelops.rms_norm: RMS normalization over the last dimension, fused forward and backward."""

from __future__ import annotations

from typing import Any

import torch

from wheelops.ops import _autograd, _checks, _entry, _norm_checks, _vmap
from wheelops.ops._entry import dynamo_tracing

__all__ = ["rms_norm"]

# The namespace, bound once: a call then looks up only its op on it (`torch.ops.wheelops.x`
# costs ~0.2 µs a call, on a call of a few µs).
_OPS = torch.ops.wheelops


def default_eps(dtype: torch.dtype | None) -> float:
    """What F.rms_norm uses for eps=None: the epsilon of its float32/float64 compute dtype."""
    return torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).eps


def _check(op: str, x: torch.Tensor, weight: torch.Tensor | None, eps: object) -> float:
    _norm_checks.x_tensor(op, x)
    _norm_checks.param(op, "weight", weight, x)
    return _norm_checks.eps_value(op, eps)


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor | None = None, eps: float | None = None
) -> torch.Tensor:
    """Return ``F.rms_norm(x, (x.shape[-1],), weight, eps)``, fused.

    Normalizes over the last dimension only: ``x / sqrt(mean(x**2) + eps) *
    weight``. ``eps=None`` means the machine epsilon of the compute dtype, as
    in PyTorch's kernels: ``torch.finfo(torch.float32).eps`` for float32,
    float16 and bfloat16 input, ``torch.finfo(torch.float64).eps`` for float64.
    ``weight`` is optional, of shape ``[x.shape[-1]]`` and the dtype and device
    of ``x`` (float32, float16, bfloat16 or float64). Statistics are computed in
    float32 (float64 for float64 input) and each output is rounded once. The
    result is contiguous. For the backward only ``x``, ``weight`` and the
    per-row float32 rstd are saved (none when no gradient is wanted); gradients
    are computed only for the inputs that need them (forward-mode AD too; no
    second derivatives).

    Example::

        >>> x, w = torch.randn(4, 8), torch.randn(8)
        >>> ref = torch.nn.functional.rms_norm(x, (8,), w)
        >>> torch.allclose(wheelops.rms_norm(x, w), ref, atol=1e-6)
        True
    """
    return (_python_path if dynamo_tracing() else _eager)(x, weight, eps)


def _python_path(
    x: torch.Tensor, weight: torch.Tensor | None = None, eps: float | None = None
) -> torch.Tensor:
    """wheelops.rms_norm's own path: every call under torch.compile, and each call the
    accelerator hands back (wheelops/ops/_accel.py)."""
    if eps is None:
        eps = default_eps(getattr(x, "dtype", None))  # x itself is checked below
    eps = _norm_checks.eps_value("rms_norm", eps)
    return _entry.run(
        "rms_norm",
        lambda: _check("rms_norm", x, weight, eps),
        _OPS.rms_norm.default,
        x,
        weight,
        eps,
        inference=_OPS.rms_norm_inference.default,
    )


# The eager entry: the accelerator's once register() has run, where it serves this op
# (wheelops/ops/_autograd.py accelerated); until then, and without it, the Python path.
_eager = _python_path


def _fake(
    x: torch.Tensor, weight: torch.Tensor | None, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    _check("rms_norm", x, weight, eps)
    _checks.gpu_supported("rms_norm", x)
    rows, dtype = _norm_checks.rows(x), _norm_checks.stats_dtype(x)
    return x.new_empty(x.shape), x.new_empty(rows, dtype=dtype)


def _fake_inference(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    _check("rms_norm_inference", x, weight, eps)
    _checks.gpu_supported("rms_norm_inference", x)
    return x.new_empty(x.shape)


def _fake_backward(
    grad: torch.Tensor,
    x: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor | None,
    x_grad: bool,
    weight_grad: bool,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    op = "rms_norm_backward"
    _norm_checks.backward_args(op, grad, x, weight, weight_grad)
    _norm_checks.stat(op, "rstd", rstd, x)
    _checks.gpu_supported(op, x)
    return (
        x.new_empty(x.shape) if x_grad else None,
        x.new_empty(x.shape[-1]) if weight_grad else None,
    )


def _setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
    x, weight, _eps = inputs
    _out, rstd = output
    ctx.mark_non_differentiable(rstd)
    # Their gradients are never used: left undefined, not filled with zeros (a launch each).
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(x, weight, rstd)
    ctx.save_for_forward(x, weight, rstd)


def _backward(ctx: Any, grad: torch.Tensor | None, _grad_rstd: Any) -> tuple:
    if grad is None:  # grads are not materialized (setup_context): nothing flows back
        return None, None, None
    x, weight, rstd = ctx.saved_tensors
    x_grad, weight_grad = ctx.needs_input_grad[:2]
    grad_x, grad_weight = _autograd.call(
        _OPS.rms_norm_backward.default, grad, x, rstd, weight, x_grad, weight_grad
    )
    return grad_x, grad_weight, None


def _jvp(
    ctx: Any, x_tangent: torch.Tensor | None, weight_tangent: torch.Tensor | None, _eps: None
) -> tuple:
    # y = x * rstd * w; d(x * rstd) = rstd * (dx - x * rstd**2 * mean(x * dx)). In the
    # stats' precision.
    x, weight, rstd = ctx.saved_tensors
    stats = rstd.dtype
    rstd = rstd.view(*x.shape[:-1], 1)
    xs = x.to(stats)
    tangent = torch.zeros_like(xs)
    if x_tangent is not None:
        dx = x_tangent.to(stats)
        tangent = rstd * (dx - xs * rstd.square() * (xs * dx).mean(-1, keepdim=True))
        if weight is not None:
            tangent = tangent * weight.to(stats)
    if weight_tangent is not None:
        tangent = tangent + xs * rstd * weight_tangent.to(stats)
    return tangent.to(x.dtype), None


def register() -> None:
    torch.library.register_fake("wheelops::rms_norm", _fake)
    torch.library.register_fake("wheelops::rms_norm_inference", _fake_inference)
    torch.library.register_fake("wheelops::rms_norm_backward", _fake_backward)
    _autograd.register("rms_norm", setup_context=_setup_context, backward=_backward, jvp=_jvp)
    _autograd.register_gradient_without_derivatives("rms_norm")
    # Run only when no derivative is wanted; asked for one directly, it says so.
    _autograd.register(
        "rms_norm_inference", setup_context=_autograd.no_context, backward=None, jvp=None
    )
    _vmap.register_loop("rms_norm_backward")
    # Last: the entry calls the ops registered above.
    global _eager
    _eager = _autograd.accelerated("rms_norm", _python_path)
