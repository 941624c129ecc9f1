"""Derived per-element bounds of the elementwise ops (add, relu_scale, bias_gelu,
silu_and_mul) and their gradients against float64 math on the same inputs (issue 42 item
6, DESIGN.md decision 14): they replace the hand-picked (atol, rtol) per dtype.

Each kernel computes in float32 (float64 for float64) from exact inputs and rounds its
result once to the dtype. A formula of k roundings of unit u whose terms have magnitude T
(the formula with every term taken in absolute value, so that a result that cancels is
bounded by the size of what cancelled) is within k * u * T before that rounding;
_norm_helpers.allowance adds the rounding (and doubles it all for float64, whose reference
rounds as much). Each op states k and T in one line. An elementwise result has no sum, so
its bound does not grow with the size: a systematic error of 1% (0.1% in float32) fails it
wherever |T| is within a few times |result| (test_tolerance_bounds checks that).
"""

from __future__ import annotations

import math

import torch
from _bias_gelu_bounds import gelu_term_roundings
from _norm_helpers import allowance, assert_within, compute_unit, subnormal_floor
from _property_checks import saturate
from _softmax_bounds import EXP_ULPS

# CUDA's __expf (silu_and_mul's 16-bit forward): within 2 + floor(1.173 |x|) ulps (CUDA C
# Programming Guide, intrinsic functions), each ulp two roundings.
FAST_EXP_ULPS = (2.0, 1.173)


def assert_within_roundings(
    actual: torch.Tensor,
    expected: torch.Tensor,
    error: torch.Tensor,
    what: str,
    equal_nan: bool = False,
) -> None:
    """|actual - expected| within one rounding to actual's dtype of a value `error` away
    (allowance); NaN where expected has NaN (equal_nan) or nowhere."""
    expected = saturate(expected.double(), actual.dtype).to(actual.device)
    actual64 = actual.double()
    nan = expected.isnan()
    if equal_nan:
        assert torch.equal(actual64.isnan(), nan), f"{what}: NaN where the reference differs"
    else:
        assert not nan.any() and not actual64.isnan().any(), f"{what}: NaN"
    # An infinite reference must be met exactly (assert_within: 0 between equal infinities).
    error = error.double().to(actual.device).expand_as(expected)
    error = torch.where(expected.isfinite() & error.isfinite(), error, 0.0)
    keep = ~nan
    allowed = allowance(expected[keep], error[keep], actual.dtype)
    assert_within(actual64[keep], expected[keep], allowed, what)


def _unit(dtype: torch.dtype) -> float:
    return compute_unit(dtype)


# ---------------------------------------------------------------- forward results


def add_error(expected: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # a + b: one rounding of the sum (k = 1, T = |a + b|)
    return _unit(dtype) * expected.double().abs()


def relu_scale_error(expected: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # relu(x) * fl(alpha): alpha's rounding and the product's (k = 2, T = |result|); the
    # product may round in the subnormals of the compute dtype
    compute = torch.float64 if dtype == torch.float64 else torch.float32
    return 2 * _unit(dtype) * expected.double().abs() + subnormal_floor(compute)


def silu_and_mul_error(x: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    # a / (1 + exp(-a)) * b: exp's ulps, then 1 + e, the quotient and the product, each
    # relative to its value (1 + e >= e: no cancellation), k = EXP_ULPS + 3, T = |result|;
    # CUDA's 16-bit kernel: __expf's ulps and a correctly rounded reciprocal in their place.
    # Where exp(-a) overflows the compute dtype, all of the result is lost (it is -0); the
    # quotient and the product may round in the subnormals.
    a = x.detach().double().chunk(2, dim=-1)[0]
    exp_roundings = torch.full_like(a, float(EXP_ULPS))
    if x.device.type == "cuda" and x.element_size() == 2:
        base, slope = FAST_EXP_ULPS
        exp_roundings = torch.maximum(exp_roundings, 2 * (base + slope * a.abs()).floor())
    size = expected.double().abs()
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    lost = torch.where(-a > math.log(torch.finfo(compute).max), size, 0.0)
    unit = _unit(x.dtype)
    return (exp_roundings + 3) * unit * size + lost + 2 * subnormal_floor(compute)


def bias_gelu_terms(z: torch.Tensor, approximate: str) -> torch.Tensor:
    """The magnitude of gelu(z)'s terms as the kernels write them, z = x + bias: 0.5 |z|
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


def bias_gelu_error(z: torch.Tensor, approximate: str, dtype: torch.dtype) -> torch.Tensor:
    # z = x + b, its scaling, erf/tanh (EXP_ULPS; CUDA's 16-bit 1 + erf within 4e-7 < 7 u),
    # 1 + erf, the products: k = EXP_ULPS + 3 roundings of bias_gelu_terms
    return (EXP_ULPS + 3) * _unit(dtype) * bias_gelu_terms(z, approximate)


# ---------------------------------------------------------------- gradients


def relu_scale_grad_error(expected: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # g * fl(alpha) where the mask is set: as the forward (k = 2, T = |result|)
    return relu_scale_error(expected, dtype)


# ---------------------------------------------------------------- the ops' checks


def assert_add_close(out: torch.Tensor, expected: torch.Tensor, equal_nan: bool = False) -> None:
    assert_within_roundings(out, expected, add_error(expected, out.dtype), "add", equal_nan)


def assert_relu_scale_close(
    out: torch.Tensor, expected: torch.Tensor, what: str = "relu_scale", equal_nan: bool = False
) -> None:
    """relu_scale's result or its gradient (the same k and T)."""
    error = relu_scale_error(expected, out.dtype)
    assert_within_roundings(out, expected, error, what, equal_nan)


def assert_silu_and_mul_close(
    out: torch.Tensor, expected: torch.Tensor, x: torch.Tensor, equal_nan: bool = False
) -> None:
    error = silu_and_mul_error(x, expected)
    assert_within_roundings(out, expected, error, "silu_and_mul", equal_nan)


def assert_bias_gelu_close(
    out: torch.Tensor,
    expected: torch.Tensor,
    x: torch.Tensor,
    bias: torch.Tensor,
    approximate: str,
) -> None:
    z = x.detach().double() + bias.detach().double()
    error = bias_gelu_error(z, approximate, out.dtype)
    assert_within_roundings(out, expected, error, "bias_gelu")


def assert_bias_gelu_grad_x_close(
    grad_x: torch.Tensor,
    expected: torch.Tensor,
    grad: torch.Tensor,
    x: torch.Tensor,
    bias: torch.Tensor,
) -> None:
    """g * gelu'(x + b): the rounding of gelu' 's terms (_bias_gelu_bounds)."""
    z = x.detach().double() + bias.detach().double()
    error = gelu_term_roundings(grad, z, grad_x.dtype)
    assert_within_roundings(grad_x, expected, error, "grad_x")
