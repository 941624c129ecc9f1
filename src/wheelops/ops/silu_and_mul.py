"""wheelops.silu_and_mul: SwiGLU, silu(gate) * up from one [..., 2 * d] tensor, in one pass."""

from __future__ import annotations

from typing import Any

import torch

from wheelops.ops import _autograd, _checks, _entry
from wheelops.ops._entry import dynamo_tracing

__all__ = ["silu_and_mul"]

# The namespace, bound once: a call then looks up only its op on it (`torch.ops.wheelops.x`
# costs ~0.2 µs a call, on a call of a few µs).
_OPS = torch.ops.wheelops


def _check(op: str, x: object) -> torch.Tensor:
    x = _checks.float_tensor(op, "x", x)
    if x.dim() < 1 or x.shape[-1] % 2 != 0:
        raise ValueError(
            f"wheelops.{op}: argument 'x' must have an even last dimension (2 * d: gate, then "
            f"up), got shape {list(x.shape)}"
        )
    return x


def _output_shape(x: torch.Tensor) -> tuple[int, ...]:
    return (*x.shape[:-1], x.shape[-1] // 2)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """Return ``silu(x[..., :d]) * x[..., d:]`` (SwiGLU) for ``x`` of shape ``[..., 2 * d]``.

    The first half of the last dimension is the gate, the second the up
    projection, as in vLLM's ``silu_and_mul``; the result has shape
    ``[..., d]``. ``x`` is float32, float16, bfloat16 or float64 of any
    strides; the product is computed in float32 (float64 for float64) and
    rounded once, so reduced-precision results are at least as accurate as
    ``F.silu(a) * b`` in eager PyTorch. NaN and infinities follow PyTorch's
    formula ``silu(a) = a / (1 + exp(-a))`` (so ``silu(-inf)`` is NaN). The
    backward reads the saved ``x`` and writes both halves of ``grad_x`` in one
    pass.

    Example::

        >>> x = torch.randn(4, 16)
        >>> a, b = x.chunk(2, dim=-1)
        >>> torch.allclose(wheelops.silu_and_mul(x), torch.nn.functional.silu(a) * b)
        True
    """
    return (_python_path if dynamo_tracing() else _eager)(x)


def _python_path(x: torch.Tensor) -> torch.Tensor:
    """wheelops.silu_and_mul's own path: every call under torch.compile, and each call the
    accelerator hands back (wheelops/ops/_accel.py)."""
    return _entry.run(
        "silu_and_mul",
        lambda: _check("silu_and_mul", x),
        _OPS.silu_and_mul.default,
        x,
    )


# The eager entry: the accelerator's once register() has run, where it serves this op
# (wheelops/ops/_autograd.py accelerated); until then, and without it, the Python path.
_eager = _python_path


def _fake(x: torch.Tensor) -> torch.Tensor:
    _check("silu_and_mul", x)
    _checks.gpu_supported("silu_and_mul", x)
    return x.new_empty(_output_shape(x))


def _fake_backward(grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    op = "silu_and_mul_backward"
    _check(op, x)
    _checks.float_tensor(op, "grad", grad)
    _checks.same_device(op, "grad", grad, "x", x)
    _checks.same_dtype(op, "grad", grad, "x", x)
    if tuple(grad.shape) != _output_shape(x):
        raise ValueError(
            f"wheelops.{op}: argument 'grad' must have the shape of the output, 'x' with its "
            f"last dimension halved (x has shape {list(x.shape)}, grad has {list(grad.shape)})"
        )
    _checks.gpu_supported(op, x)
    return x.new_empty(x.shape)


def _setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    (x,) = inputs
    ctx.save_for_backward(x)
    ctx.save_for_forward(x)


def _backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
    (x,) = ctx.saved_tensors
    return _autograd.call(_OPS.silu_and_mul_backward.default, grad, x)


def _jvp(ctx: Any, x_tangent: torch.Tensor) -> torch.Tensor:
    # silu'(a) * b * da + silu(a) * db: the backward with grad = 1 gives both factors.
    (x,) = ctx.saved_tensors
    ones = x.new_ones(_output_shape(x))
    factors = _autograd.call(_OPS.silu_and_mul_backward.default, ones, x)
    d = x.shape[-1] // 2
    tangent = _checks.opmath(factors) * _checks.opmath(x_tangent)
    return (tangent[..., :d] + tangent[..., d:]).to(x.dtype)


def register() -> None:
    torch.library.register_fake("wheelops::silu_and_mul", _fake)
    torch.library.register_fake("wheelops::silu_and_mul_backward", _fake_backward)
    _autograd.register("silu_and_mul", setup_context=_setup_context, backward=_backward, jvp=_jvp)
    _autograd.register_gradient_without_derivatives("silu_and_mul")
    # Last: the entry calls the ops registered above.
    global _eager
    _eager = _autograd.accelerated("silu_and_mul", _python_path)
