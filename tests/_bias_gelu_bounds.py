"""bias_gelu's derived error bounds for its gradients: the terms g * gelu'(u) carry the
rounding of gelu'(u)'s own terms, and grad_bias sums them. Shared by tests/test_bias_gelu.py,
the property tests and the bounds' own tightness tests (tests/test_tolerance_bounds.py)."""

from __future__ import annotations

import torch
from _norm_helpers import as_rows, assert_within, column_sum_allowance


def gelu_term_roundings(grad: torch.Tensor, u: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Per element: the rounding of gelu'(u)'s terms that grad_x = g * gelu'(u) may carry.

    gelu'(u) = 0.5 * (1 + t) + 0.5 * u * (1 - t * t) * d_inner (tanh; erf is
    alike): for u around -5 the terms cancel to ~1e-6 while t = tanh(inner) is
    within float32 rounding of -1, so a float32 computation (eager's too) is
    off by a few roundings of the terms, not of the result: 8 roundings of
    |g| * (1 + |u| * d_inner) (the rounding of u = x + bias included).
    """
    unit = 2.0**-53 if dtype == torch.float64 else 2.0**-24
    u64 = u.detach().double()
    d_inner = 0.7978845608 * (1 + 3 * 0.044715 * u64.square())
    return 8 * unit * grad.double().abs() * (1 + u64.abs() * d_inner)


def assert_grad_bias_close(
    actual: torch.Tensor,
    expected: torch.Tensor,
    expected_x: torch.Tensor,
    grad: torch.Tensor,
    u: torch.Tensor,
) -> None:
    """grad_bias against its float64 reference: the column sum of the terms
    g * gelu'(u) (expected_x, the float64 grad_x), u = x + bias."""
    terms = as_rows(expected_x)
    term_errors = as_rows(gelu_term_roundings(grad, u, actual.dtype))
    # Terms within gelu_term_roundings, summed in float32 (float64), rounded once to dtype.
    allowed = column_sum_allowance(expected, terms, term_errors, actual.dtype)
    assert_within(actual, expected, allowed, "grad_bias")
