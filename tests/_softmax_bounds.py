"""softmax's derived error bounds, relative to each output (outputs are ~1/cols: an
absolute tolerance lets a wrong wide row pass). Shared by tests/test_softmax.py,
tests/test_scale.py and the bounds' own tightness tests (tests/test_tolerance_bounds.py).

The op as written (softmax.cpp, softmax.cu), in float32 (float64 for float64): the row's
max m, each exp(x - m) (16-bit CUDA: exp2 of fma(x, log2(e), -m * log2(e))), their sum,
a reciprocal and one product per output, rounded once to the dtype. The backward from
the saved output y: dot = sum of g * y, then y * (g - dot), rounded once.
"""

from __future__ import annotations

import math

import torch
from _norm_helpers import (
    LAMBDA,
    UNIT,
    allowance,
    assert_within,
    compute_unit,
    subnormal_floor,
    summation_rounding,
)
from opspecs.softmax import backward as softmax_backward
from opspecs.softmax import reference

EXP_ULPS = 4  # expf/exp2f within 2 ulps (CUDA, glibc): 4 roundings
# CUDA may flush float32 subnormal intermediates (exp2f's result, products) to zero.
FLUSH = torch.finfo(torch.float32).tiny


def _moved(x: torch.Tensor, dim: int) -> torch.Tensor:
    return x.double().movedim(dim, -1)


def _with_zeros(values: torch.Tensor, where_zero: torch.Tensor) -> torch.Tensor:
    """values, 0 where where_zero (an exp that underflowed carries no error forward)."""
    return torch.where(where_zero, torch.zeros_like(values), values)


def forward_error(
    x: torch.Tensor, dim: int = -1
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(float64 softmax, the relative error of each output before its rounding to the
    dtype, the part of it common to the row) in x's layout."""
    if x.dim() == 0:  # a 0-dim x: softmax over its one element
        return tuple(t.reshape(()) for t in forward_error(x.reshape(1)))
    u = compute_unit(x.dtype)
    x64 = _moved(x, dim)
    y = reference(x64, -1)
    if y.numel() == 0:
        return y.movedim(-1, dim), y.movedim(-1, dim), y.movedim(-1, dim)
    m = x64.amax(-1, keepdim=True)
    cols = x64.shape[-1]
    # exp's argument: fl(m * log2 e) and the fma round |m| and |x - m| once each, log2(e)'s
    # own rounding |x| (in natural units, log2(e) * ln 2 = 1); then exp's own ulps.
    own = u * (x64.abs() + 2 * m.abs() + (x64 - m).abs()) + EXP_ULPS * u
    own = _with_zeros(own, y == 0)
    # The row's sum: its terms' errors weighted by y, its float32 accumulation (positive
    # terms: n or LAMBDA sqrt(n) roundings of the sum), the reciprocal and the product.
    sum_rounding = u * min(float(cols), LAMBDA * cols**0.5)
    common = (y * own).nansum(-1, keepdim=True) + sum_rounding + 2 * u
    error = own + common
    return (y.movedim(-1, dim), error.movedim(-1, dim), common.expand_as(y).movedim(-1, dim))


def _assert_within_nan(actual, expected, allowed, what: str) -> None:
    """NaN exactly where expected is NaN; elsewhere assert_within."""
    # On expected's device: test_scale checks 2**31 elements a chunk at a time on the GPU
    # (on the CPU, in float64, that took minutes a chunk).
    actual, allowed = actual.double().to(expected.device), allowed.to(expected.device)
    nan = expected.isnan()
    assert torch.equal(actual.isnan(), nan), f"{what}: NaN where the reference has none"
    assert_within(actual[~nan], expected[~nan], allowed[~nan], what)


def assert_softmax_close(out: torch.Tensor, x: torch.Tensor, dim: int = -1) -> None:
    """softmax(x) within one rounding to the dtype of its float32 value's error
    (forward_error, relative), and the flush of float32 subnormals."""
    expected, relative, _ = forward_error(x, dim)
    error = torch.nan_to_num(relative * expected, nan=0.0) + _flush(x.dtype)
    _assert_within_nan(out, expected, allowance(expected, error, out.dtype), "softmax")


def _flush(dtype: torch.dtype) -> float:
    return 0.0 if dtype == torch.float64 else FLUSH


def backward_error(grad: torch.Tensor, y: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """The backward's own error on exact g and y (before the result's rounding): the
    float32 sum dot = sum g*y, then g - dot and its product with y rounded once each."""
    if grad.dim() == 0 or grad.numel() == 0:
        return torch.zeros(grad.shape, dtype=torch.float64, device=grad.device)
    u = compute_unit(grad.dtype)
    g64, y64 = _moved(grad, dim), _moved(y, dim)
    terms = g64 * y64
    dot = terms.sum(-1, keepdim=True)
    dot_error = summation_rounding(terms, u, dim=-1)[..., None]
    error = y64.abs() * (dot_error + u * (g64 - dot).abs()) + u * (y64 * (g64 - dot)).abs()
    return error.movedim(-1, dim)


def assert_softmax_backward_close(grad_x, grad, y, dim: int = -1) -> None:
    """softmax_backward(grad, y) against y * (g - sum(g * y)) from the same (rounded) y."""
    g64, y64 = _moved(grad, dim), _moved(y, dim)
    expected = softmax_backward(g64, y64, -1).movedim(-1, dim)
    error = backward_error(grad, y, dim) + _flush(grad.dtype)
    allowed = allowance(expected, error, grad_x.dtype)
    _assert_within_nan(grad_x, expected, allowed, "softmax grad_x")


def assert_softmax_grad_close(grad_x, x, grad, dim: int = -1) -> None:
    """grad_x of softmax (autograd, from x) against the float64 gradient at x: the saved
    y carries the forward's error (forward_error) and its rounding to the dtype; y's error
    e_j moves grad_x_i by e_i |g_i - dot| + y_i |sum_j e_j g_j| (the roundings of y
    independent: Hoeffding, the row's common relative error c: c |dot|), then the
    backward's own error and one rounding."""
    if x.dim() == 0:  # a 0-dim x: softmax over its one element
        return assert_softmax_grad_close(grad_x.reshape(1), x.reshape(1), grad.reshape(1))
    u_y = UNIT[x.dtype]
    y, relative, common = forward_error(x, dim)
    y64, g64 = y.movedim(dim, -1), _moved(grad, dim)
    relative, common = relative.movedim(dim, -1), common.movedim(dim, -1)
    dot = (g64 * y64).sum(-1, keepdim=True)
    expected = y64 * (g64 - dot)
    # y's own error: its exp's, its rounding to the dtype (subnormals: absolute) and flushes.
    floor = subnormal_floor(x.dtype) + _flush(x.dtype)
    own = (relative - common + u_y * (1 + relative)) * y64.abs() + floor
    own_sum = torch.minimum(
        (own * g64.abs()).sum(-1, keepdim=True),
        LAMBDA * (own * g64).square().sum(-1, keepdim=True).sqrt(),
    )
    y_error = (own + common * y64.abs()) * (g64 - dot).abs()
    y_error = y_error + y64.abs() * (own_sum + common * dot.abs())
    y_used = y64 * (1 + relative.clamp_max(1.0))  # within the error of the saved y
    error = y_error + backward_error(grad, y_used.movedim(-1, dim), dim).movedim(dim, -1)
    error = torch.nan_to_num(error, nan=0.0) + _flush(x.dtype)
    allowed = allowance(expected, error, grad_x.dtype).movedim(-1, dim)
    _assert_within_nan(grad_x, expected.movedim(-1, dim), allowed, "softmax grad_x")


# ---------------------------------------------------------------- second derivative


def second_derivative_error(x: torch.Tensor, weights: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """|error| of one float64 evaluation of d/dx sum(g1^2), g1 = softmax_backward(w, y),
    y = softmax(x) (test_derivative_properties' second derivative), wheelops' or eager's.

    As written on either side: g1 = y (w - sum(w y)), gg = 2 g1 (exact), the double
    backward gy = gg (w - sum(w y)) - w sum(gg y) (eager: w gg - sum(y w) gg - w sum(y gg)),
    then h = y (gy - sum(gy y)). Expanded, h is a sum of products of w and y, each product
    carrying at most 5 factors of y (each within y's relative error e, forward_error's,
    its row's largest) and 3n + 6 roundings (three n-term dots, six elementwise steps on
    its longest path): |error| <= ((1 + e)^5 (1 + u)^(3n + 6) - 1) M, M the formula on |w|
    with every subtraction an addition (the sizes of the terms that cancel), itself
    computed from the float64 y in 3n + 6 roundings of positive terms: one more factor.
    """
    u = compute_unit(torch.float64)
    y, relative, _ = forward_error(x.double(), dim)
    y, relative = y.movedim(dim, -1), relative.movedim(dim, -1)
    a = weights.double().movedim(dim, -1).abs()
    if y.numel() == 0:
        return torch.zeros_like(y).movedim(-1, dim)
    n = y.shape[-1]
    a_y = (a * y).sum(-1, keepdim=True)
    gg = 2 * y * (a + a_y)
    gy = gg * (a + a_y) + a * (gg * y).sum(-1, keepdim=True)
    terms = y * (gy + (gy * y).sum(-1, keepdim=True))
    e = relative.amax(-1, keepdim=True)
    growth = torch.exp(5 * torch.log1p(e) + (3 * n + 6) * math.log1p(u))
    return ((growth - 1) * growth * terms).movedim(-1, dim)


def assert_second_derivative_close(
    actual: torch.Tensor, expected: torch.Tensor, x: torch.Tensor, weights: torch.Tensor, dim: int
) -> None:
    """One float64 second derivative (second_derivative_error) against another: each
    within its error of the exact one, so twice it apart."""
    allowed = 2 * second_derivative_error(x, weights, dim)
    assert_within(actual.double(), expected.double(), allowed, "softmax second derivative")
