"""Argument checks shared by wheelops.layer_norm and wheelops.rms_norm."""

from __future__ import annotations

import math

import torch

from wheelops.ops import _checks


def x_tensor(op: str, x: object) -> torch.Tensor:
    _checks.float_tensor(op, "x", x)
    if x.dim() < 1:
        raise ValueError(f"wheelops.{op}: argument 'x' must have at least one dimension")
    return x


def param(op: str, name: str, p: object, x: torch.Tensor) -> None:
    """weight / bias: None, or shape [x.shape[-1]] with x's dtype and device."""
    if p is None:
        return
    _checks.float_tensor(op, name, p)
    _checks.same_device(op, "x", x, name, p)
    _checks.same_dtype(op, "x", x, name, p)
    if p.dim() != 1 or p.shape[0] != x.shape[-1]:
        raise ValueError(
            f"wheelops.{op}: argument '{name}' must have shape [{x.shape[-1]}] (the last "
            f"dimension of 'x'), got {list(p.shape)}"
        )


def eps_value(op: str, eps: object) -> float:
    value = _checks.python_float(op, "eps", eps)
    if math.isnan(value) or value < 0:
        raise ValueError(
            f"wheelops.{op}: argument 'eps' must be a non-negative number, got {eps!r}"
        )
    return value


def stats_dtype(x: torch.Tensor) -> torch.dtype:
    """The saved mean/rstd: float32, or float64 for float64 x."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def rows(x: torch.Tensor) -> int:
    return math.prod(x.shape[:-1])


def stat(op: str, name: str, s: torch.Tensor, x: torch.Tensor) -> None:
    _checks.same_device(op, "x", x, name, s)
    if s.dtype != stats_dtype(x) or s.dim() != 1 or s.shape[0] != rows(x):
        raise ValueError(
            f"wheelops.{op}: argument '{name}' must be a {stats_dtype(x)} tensor of shape "
            f"[{rows(x)}] (one value per row of 'x'), got {s.dtype} {list(s.shape)}"
        )


def backward_args(
    op: str,
    grad: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    weight_grad: bool,
) -> None:
    x_tensor(op, x)
    _checks.float_tensor(op, "grad", grad)
    _checks.same_dtype(op, "grad", grad, "x", x)
    _checks.same_shape(op, "grad", grad, "x", x)
    param(op, "weight", weight, x)
    if weight_grad and weight is None:
        raise ValueError(f"wheelops.{op}: the gradient of 'weight' was requested but it is None")
