"""bias_gelu's derived error bounds: its result (the terms of gelu(z), z = x + bias), its
grad_x (the terms g * gelu'(z) carry the rounding of gelu'(z)'s own terms), and grad_bias,
their column sum. Shared by tests/test_bias_gelu.py,
the property tests and the bounds' own tightness tests (tests/test_tolerance_bounds.py)."""

from __future__ import annotations

import math

import torch
from _elementwise_bounds import assert_within_roundings, compute_error
from _norm_helpers import as_rows, assert_within, column_sum_allowance
from _softmax_bounds import EXP_ULPS
from opspecs import bias_gelu as bias_gelu_spec


def gelu_term_roundings(grad: torch.Tensor, u: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Per element: the rounding of gelu'(u)'s terms that grad_x = g * gelu'(u) may carry.

    gelu'(u) = 0.5 * (1 + t) + 0.5 * u * (1 - t * t) * d_inner (tanh; erf is
    alike): for u around -5 the terms cancel to ~1e-6 while t = tanh(inner) is
    within float32 rounding of -1, so a float32 computation (eager's too) is
    off by a few roundings of the terms, not of the result: 8 roundings of
    |g| * (1 + |u| * d_inner) (the rounding of u = x + bias included), the terms the
    op's description names (opspecs.bias_gelu.backward_terms_x).
    """
    unit = 2.0**-53 if dtype == torch.float64 else 2.0**-24
    return 8 * unit * bias_gelu_spec.backward_terms_x(grad, u.detach())


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


def bias_gelu_terms(z: torch.Tensor, approximate: str) -> torch.Tensor:
    """The magnitude T of gelu(z)'s terms as the kernels write them, z = x + bias: 0.5 |z|
    (1 + |erf| + |z|: erf's argument's rounding, |z| / sqrt 2, times erf's slope <= 1.13;
    tanh: 2 + the inner |c (z + 0.044715 z^3)|, its 5 roundings through tanh's slope <= 1),
    the rounding of z times |gelu'(z)| <= 1.13, and the result's two products (<= 2 |z|)."""
    z = z.double()
    if approximate == "tanh":
        c = math.sqrt(2 / math.pi)
        inner = c * (z.abs() + 0.044715 * z.abs() ** 3)
        return 0.5 * z.abs() * (2 + inner) + 1.13 * z.abs() + 2 * z.abs()
    erf = torch.erf(z / math.sqrt(2)).abs()
    return 0.5 * z.abs() * (1 + erf + z.abs()) + 1.13 * z.abs() + 2 * z.abs()


def assert_bias_gelu_close(
    out: torch.Tensor,
    expected: torch.Tensor,
    x: torch.Tensor,
    bias: torch.Tensor,
    approximate: str,
) -> None:
    z = x.detach().double() + bias.detach().double()
    # z = x + b, its scaling, erf/tanh (EXP_ULPS; CUDA's 16-bit erf GELU, gelu_16bit.cuh, within
    # 4.3 u of |z|, measured: < 7 u of T),
    # 1 + erf, the products: k = EXP_ULPS + 3 roundings of bias_gelu_terms
    error = compute_error(EXP_ULPS + 3, bias_gelu_terms(z, approximate), out.dtype)
    assert_within_roundings(out, expected, error, "bias_gelu")


def assert_bias_gelu_grad_x_close(
    grad_x: torch.Tensor,
    expected: torch.Tensor,
    grad: torch.Tensor,
    x: torch.Tensor,
    bias: torch.Tensor,
) -> None:
    """g * gelu'(x + b): the rounding of gelu' 's terms (gelu_term_roundings)."""
    z = x.detach().double() + bias.detach().double()
    error = gelu_term_roundings(grad, z, grad_x.dtype)
    assert_within_roundings(grad_x, expected, error, "grad_x")
