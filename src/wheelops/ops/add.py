"""wheelops.add: elementwise a + b (no broadcasting)."""

from __future__ import annotations

from typing import Any

import torch

from wheelops.ops import _autograd, _checks, _entry
from wheelops.ops._entry import dynamo_tracing

__all__ = ["add"]

# The namespace, bound once: a call then looks up only its op on it (`torch.ops.wheelops.x`
# costs ~0.2 µs a call, on a call of a few µs).
_OPS = torch.ops.wheelops


def _check(a: torch.Tensor, b: torch.Tensor) -> None:
    _checks.float_tensor("add", "a", a)
    _checks.float_tensor("add", "b", b)
    _checks.same_device("add", "a", a, "b", b)
    _checks.same_dtype("add", "a", a, "b", b)
    _checks.same_shape("add", "a", a, "b", b)


def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return ``a + b`` elementwise.

    ``a`` and ``b`` must have the same shape (no broadcasting), dtype (float32,
    float16, bfloat16 or float64) and device. Any strides are accepted; the
    result is contiguous. Reduced-precision inputs are added in float32.

    Example::

        >>> wheelops.add(torch.ones(3), torch.arange(3.0))
        tensor([1., 2., 3.])
    """
    return (_python_path if dynamo_tracing() else _eager)(a, b)


def _python_path(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """wheelops.add's own path: every call under torch.compile, and each call the
    accelerator hands back (wheelops/ops/_accel.py)."""
    return _entry.run("add", lambda: _check(a, b), _OPS.add.default, a, b)


# The eager entry: the accelerator's once register() has run, where it serves this op
# (wheelops/ops/_autograd.py accelerated); until then, and without it, the Python path.
_eager = _python_path


def _fake(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    _check(a, b)
    _checks.gpu_supported("add", a)
    return a.new_empty(a.shape)


def _setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    pass


def _backward(ctx: Any, grad: torch.Tensor) -> tuple:
    return grad, grad


def _jvp(ctx: Any, a_tangent: torch.Tensor | None, b_tangent: torch.Tensor | None) -> Any:
    if a_tangent is None or b_tangent is None:
        return a_tangent if b_tangent is None else b_tangent
    return _autograd.call(_OPS.add.default, a_tangent, b_tangent)


def register() -> None:
    torch.library.register_fake("wheelops::add", _fake)
    _autograd.register("add", setup_context=_setup_context, backward=_backward, jvp=_jvp)
    # Last: the entry calls the ops registered above.
    global _eager
    _eager = _autograd.accelerated("add", _python_path)
