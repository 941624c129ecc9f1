"""wheelops.bias_gelu: gelu(x + bias) over the last dimension, with a fused backward."""

from __future__ import annotations

from typing import Any

import torch

from wheelops.ops import _autograd, _checks, _entry
from wheelops.ops._entry import dynamo_tracing

__all__ = ["bias_gelu"]

# The namespace, bound once: a call then looks up only its op on it (`torch.ops.wheelops.x`
# costs ~0.2 µs a call, on a call of a few µs).
_OPS = torch.ops.wheelops

APPROXIMATIONS = ("none", "tanh")


def _check(op: str, x: torch.Tensor, bias: torch.Tensor, approximate: str) -> None:
    _checks.float_tensor(op, "x", x)
    _checks.float_tensor(op, "bias", bias)
    _checks.same_device(op, "x", x, "bias", bias)
    _checks.same_dtype(op, "x", x, "bias", bias)
    if x.dim() < 1:
        raise ValueError(f"wheelops.{op}: argument 'x' must have at least one dimension")
    if bias.dim() != 1 or bias.shape[0] != x.shape[-1]:
        raise ValueError(
            f"wheelops.{op}: argument 'bias' must have shape [{x.shape[-1]}] (the last "
            f"dimension of 'x'), got {list(bias.shape)}"
        )
    _checks.one_of(op, "approximate", approximate, APPROXIMATIONS)


def bias_gelu(x: torch.Tensor, bias: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """Return ``torch.nn.functional.gelu(x + bias, approximate=approximate)`` fused.

    ``bias`` has shape ``[x.shape[-1]]`` and the dtype and device of ``x``
    (float32, float16, bfloat16 or float64). ``approximate`` is ``"none"``
    (exact, erf) or ``"tanh"``, as in PyTorch. ``x + bias`` is not rounded to
    the input dtype before the GELU, so reduced-precision results are at least
    as accurate as eager PyTorch. The backward is one fused pass that returns
    the gradients of ``x`` and ``bias`` (forward-mode AD too; no second derivatives).

    Example::

        >>> x, b = torch.randn(4, 8), torch.randn(8)
        >>> torch.allclose(wheelops.bias_gelu(x, b), torch.nn.functional.gelu(x + b))
        True
    """
    return (_python_path if dynamo_tracing() else _eager)(x, bias, approximate)


def _python_path(x: torch.Tensor, bias: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """wheelops.bias_gelu's own path: every call under torch.compile, and each call the
    accelerator hands back (wheelops/ops/_accel.py)."""
    return _entry.run(
        "bias_gelu",
        lambda: _check("bias_gelu", x, bias, approximate),
        _OPS.bias_gelu.default,
        x,
        bias,
        approximate,
    )


# The eager entry: the accelerator's once register() has run, where it serves this op
# (wheelops/ops/_autograd.py accelerated); until then, and without it, the Python path.
_eager = _python_path


def _fake(x: torch.Tensor, bias: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    _check("bias_gelu", x, bias, approximate)
    _checks.gpu_supported("bias_gelu", x)
    return x.new_empty(x.shape)


def _fake_backward(
    grad: torch.Tensor, x: torch.Tensor, bias: torch.Tensor, approximate: str = "none"
) -> tuple[torch.Tensor, torch.Tensor]:
    _check("bias_gelu_backward", x, bias, approximate)
    _checks.float_tensor("bias_gelu_backward", "grad", grad)
    _checks.same_dtype("bias_gelu_backward", "grad", grad, "x", x)
    _checks.same_shape("bias_gelu_backward", "grad", grad, "x", x)
    _checks.gpu_supported("bias_gelu_backward", x)
    return x.new_empty(x.shape), bias.new_empty(bias.shape)


def _setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    x, bias, approximate = inputs
    ctx.save_for_backward(x, bias)
    ctx.save_for_forward(x, bias)
    ctx.approximate = approximate


def _backward(ctx: Any, grad: torch.Tensor) -> tuple:
    x, bias = ctx.saved_tensors
    grad_x, grad_bias = _autograd.call(
        _OPS.bias_gelu_backward.default, grad, x, bias, ctx.approximate
    )
    return grad_x, grad_bias, None


def _jvp(
    ctx: Any, x_tangent: torch.Tensor | None, bias_tangent: torch.Tensor | None, _approx: None
) -> torch.Tensor:
    # gelu'(x + bias) * (dx + dbias): the backward's grad_x formula, with the summed
    # tangent for grad.
    x, bias = ctx.saved_tensors
    tangent = _autograd.zero_if_none(x_tangent, x)
    if bias_tangent is not None:
        tangent = tangent + bias_tangent
    grad_x, _ = _autograd.call(_OPS.bias_gelu_backward.default, tangent, x, bias, ctx.approximate)
    return grad_x


def register() -> None:
    torch.library.register_fake("wheelops::bias_gelu", _fake)
    torch.library.register_fake("wheelops::bias_gelu_backward", _fake_backward)
    _autograd.register("bias_gelu", setup_context=_setup_context, backward=_backward, jvp=_jvp)
    _autograd.register_gradient_without_derivatives("bias_gelu")
    # Last: the entry calls the ops registered above.
    global _eager
    _eager = _autograd.accelerated("bias_gelu", _python_path)
