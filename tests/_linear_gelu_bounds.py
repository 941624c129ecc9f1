"""fused_linear_gelu's derived error bounds: what its output and gradients may differ from
float64 math on the same (rounded) inputs, from how it computes. Shared by
tests/test_fused_linear_gelu.py and the bounds' own tightness tests
(tests/test_tolerance_bounds.py).

The op as written: pre = x @ w.T (float32 accumulation; float64 for float64) + bias,
added in float32; on CUDA the erf path and the float32 path store pre in the dtype
before the GELU (the tanh epilogue of 16-bit dtypes does not, nor does the erf epilogue
of the sm_90a kernel: the CUDA bound allows that rounding on every path), and where cuBLASLt's
bias epilogue is not used the GEMM's result is rounded before the bias is added; the
forward keeps pre, rounded to the dtype, for the backward. The GELU and gelu' run in
float32 (float64), each result rounded once. Backward: d = g * gelu'(pre) (rounded to
the dtype on CUDA, float32 on the CPU), grad_input = d @ w, grad_weight = d.T @ x,
grad_bias = sum of d over rows, float32 accumulation, each rounded once.

Each bound is split into a part that may be systematic (libm's and cuBLASLt's GELU
evaluation, TF32's truncation) and one made of roundings modelled as independent and of
mean zero (Higham and Mary's probabilistic model, as _norm_helpers' sums): per element
both are allowed in full; the sign-weighted sum of the errors over a tensor (the
aggregate check a coherent 1% bias cannot pass), less that of the correctly rounded result
(opspecs/_rounding.py), allows the first in full and the second within LAMBDA * sqrt(sum of
squares).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from _norm_helpers import (
    LAMBDA,
    UNIT,
    allowance,
    as_rows,
    assert_unbiased,
    assert_within,
    compute_unit,
    gemm_parts,
    hoeffding,
    summation_parts,
)
from opspecs._rounding import TWO_ROUNDINGS
from opspecs.fused_linear_gelu import reference

GELU_SLOPE = 1.129  # max |gelu'(u)| (both forms: 1.12890 erf, 1.12899 tanh)
GELU_CURVATURE = 0.798  # max |gelu''(u)| = 2 / sqrt(2 pi), at u = 0
EVALUATION_ULPS = 4  # erf/tanh/exp in the accumulator type: a few ulps of |u| + 1
# cuBLASLt's GELU epilogue (CUDA, "tanh", 16-bit dtypes) evaluates tanh its own way: measured
# at most 38.5 float32 ulps of |u| + 1 against float64 F.gelu(tanh) of the same float32
# pre-activation (H100, cuBLAS 13.1; 512 x 1024 values); bounded by 64, still 2**-10 of a
# bf16 ulp and 2**-7 of an fp16 ulp. float32 does not use it (docs/ops.md: fused_linear_gelu).
CUBLASLT_GELU_ULPS = 64
# The erf GELU of CUDA's 16-bit kernels (csrc/include/wheelops/kernels/gelu_16bit.cuh, the
# epilogue and the passes, forward and backward): measured within 4.3 float32 ulps of |u|
# (gelu) and 4.1 of 1 + |u| (gelu') on an H200, over every 16-bit value and 2**24 points of
# [-16, 16]; bounded by 8, 2**-12 of a bf16 ulp.
GELU_16BIT_ULPS = 8
# TF32 keeps 10 of float32's 23 mantissa bits: an input truncated to it is off by less
# than 2**-10 of itself (rounded: 2**-11). A product of two: 2 * 2**-10 at most, split
# into a mean of 2**-10 (systematic) and a part of mean zero within 2**-10.
TF32_HALF = 2.0**-10


@dataclass(frozen=True)
class Rounding:
    """An error made of independent roundings of mean zero, per element: its worst case
    and Hoeffding's variance proxy (the sum of the roundings' squared bounds)."""

    worst: torch.Tensor
    proxy: torch.Tensor

    @staticmethod
    def one(size: torch.Tensor) -> Rounding:
        """A single rounding of at most `size`."""
        return Rounding(size, size.square())

    def __add__(self, other: Rounding) -> Rounding:
        return Rounding(self.worst + other.worst, self.proxy + other.proxy)

    def __mul__(self, factor: float) -> Rounding:
        return Rounding(factor * self.worst, factor**2 * self.proxy)

    def bound(self) -> torch.Tensor:
        return hoeffding(self.worst, self.proxy)

    def summed(self, dim: int) -> Rounding:
        """Of the sum along dim of elements with independent errors."""
        return Rounding(self.worst.sum(dim), _proxy(self).sum(dim))


@dataclass(frozen=True)
class Bound:
    """|actual - expected| allowed per element, and the most the sign-weighted sum of the
    errors, sum of sign(expected) * (actual - expected), may reach."""

    expected: torch.Tensor
    allowed: torch.Tensor
    aggregate: float


def _finish(expected, error, systematic, proxy, dtype, shape) -> Bound:
    """One rounding of the result to dtype (allowance) on top of its error (systematic
    included); the aggregate limit: the systematic parts in full, the roundings (proxy:
    their sign-weighted sum's, the results' own roundings added here) within
    LAMBDA * sqrt(proxy)."""
    allowed = allowance(expected, error, dtype)
    scale = 2.0 if dtype == torch.float64 else 1.0  # allowance doubles float64's
    # the result's rounding, less the correctly rounded result's (opspecs/_rounding.py)
    own = (TWO_ROUNDINGS * UNIT[dtype] * (expected.abs() + error)).square().sum()
    limit = (1 + UNIT[dtype]) * systematic.sum() + LAMBDA * (proxy + own).sqrt()
    return Bound(expected.reshape(shape), allowed.reshape(shape), scale * float(limit))


def _proxy(rounding: Rounding) -> torch.Tensor:
    """Per element, the variance proxy of an error within rounding.worst, made of roundings."""
    return torch.minimum(rounding.proxy, rounding.worst.square())


def _propagated(errors: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """A bound on |errors @ weights| for errors of independent sign: the worst case or,
    Hoeffding, LAMBDA * sqrt(errors^2 @ weights^2), whichever is smaller."""
    worst = errors @ weights.abs()
    return torch.minimum(worst, LAMBDA * (errors.square() @ weights.square()).sqrt())


def pre_activation(x, w, b, *, device="cpu", rounded_twice=False, tf32=False, saved=False):
    """(pre in float64 [M, N], its roundings, its systematic error bound) for x [*, K],
    w [N, K], b [N] or None (any device; computed on the CPU)."""
    dtype = x.dtype
    u = compute_unit(dtype)
    x64, w64 = as_rows(x.cpu()), w.cpu().double()
    b64 = b.cpu().double() if b is not None else torch.zeros(w.shape[0], dtype=torch.float64)
    product = x64 @ w64.T
    pre = product + b64
    # The GEMM's float32 accumulation (probabilistic sqrt(K) bound), then the bias add.
    random = Rounding(*gemm_parts(x64, w64, u)) + Rounding.one(u * pre.abs())
    systematic = torch.zeros_like(pre)
    if tf32:  # each product's two inputs truncated (or rounded) to TF32
        systematic = systematic + TF32_HALF * product.abs()
        random = random + Rounding(
            TF32_HALF * (x64.abs() @ w64.abs().T), TF32_HALF**2 * (x64.square() @ w64.square().T)
        )
    if saved or device == "cuda":  # pre stored in the dtype before the GELU / for the backward
        random = random + Rounding.one(UNIT[dtype] * pre.abs())
    if rounded_twice:  # x @ w.T rounded to the dtype before the bias
        random = random + Rounding.one(UNIT[dtype] * product.abs())
    return pre, random, systematic


def evaluation_ulps(approximate: str, device: str, dtype: torch.dtype, forward: bool = True) -> int:
    """Float32 ulps of 1 + |u| within which the path that serves computes gelu(u) (forward)
    or gelu'(u): CUDA's 16-bit tanh forward is cuBLASLt's epilogue, its 16-bit erf the
    kernels' own formula; the rest gelu.h's, on the C library's erf, tanh and exp."""
    if device != "cuda" or dtype.itemsize != 2:
        return EVALUATION_ULPS
    if approximate == "none":
        return GELU_16BIT_ULPS
    return CUBLASLT_GELU_ULPS if forward else EVALUATION_ULPS


def forward_bound(x, w, b, approximate, device="cpu", rounded_twice=False, tf32=False) -> Bound:
    """The output's bound: |gelu'| <= GELU_SLOPE times pre's error, the GELU evaluated in
    float32 (float64), one rounding of the result. Output elements share no rounding."""
    dtype = x.dtype
    pre, random, systematic = pre_activation(
        x, w, b, device=device, rounded_twice=rounded_twice, tf32=tf32
    )
    expected = as_rows(reference(x.cpu(), w.cpu(), None if b is None else b.cpu(), approximate))
    evaluation = evaluation_ulps(approximate, device, dtype) * compute_unit(dtype) * (1 + pre.abs())
    shape = (*x.shape[:-1], w.shape[0])
    systematic = GELU_SLOPE * systematic + evaluation
    error = GELU_SLOPE * random.bound() + systematic
    proxy = GELU_SLOPE**2 * _proxy(random).sum()  # each output its own roundings
    return _finish(expected, error, systematic, proxy, dtype, shape)


def backward_bounds(grad, x, w, b, approximate, device="cpu") -> dict[str, Bound]:
    """grad_input, grad_weight, grad_bias: d = g * gelu'(pre) from the saved pre (its error
    times max |gelu''|, gelu' evaluated in float32, the product rounded: to the dtype on
    CUDA), then the GEMMs' and the column sum's float32 accumulation and one rounding.
    grad_input's and grad_weight's elements share d's roundings: no aggregate there."""
    dtype = x.dtype
    u = compute_unit(dtype)
    pre, pre_random, pre_systematic = pre_activation(x, w, b, device=device, saved=True)
    g64, x64, w64 = as_rows(grad.cpu()), as_rows(x.cpu()), w.cpu().double()
    leaf = pre.clone().requires_grad_()
    (d,) = torch.autograd.grad(F.gelu(leaf, approximate=approximate), leaf, g64)
    d_unit = UNIT[dtype] if device == "cuda" else u
    d_random = (
        Rounding(g64.abs() * pre_random.worst, g64.square() * pre_random.proxy) * GELU_CURVATURE
        + Rounding.one(u * d.abs())
        + Rounding.one(d_unit * d.abs())
    )
    d_systematic = g64.abs() * (
        GELU_CURVATURE * pre_systematic
        + evaluation_ulps(approximate, device, dtype, forward=False) * u * (1 + pre.abs())
    )
    e, d_proxy = d_random.bound(), _proxy(d_random)
    gi, gw = d @ w64, d.T @ x64
    gi_gemm, gw_gemm = Rounding(*gemm_parts(d, w64.T, u)), Rounding(*gemm_parts(d.T, x64.T, u))
    # The sign-weighted sum over grad_input of d's errors e[m, j] * w[j, k] is a sum over
    # (m, j) of e[m, j] * c[m, j], c = sign(grad_input) @ w.T (grad_weight: x @ sign.T).
    gi_c, gw_c = gi.sign() @ w64.T, x64 @ gw.sign().T
    gi_sys, gw_sys = d_systematic @ w64.abs(), d_systematic.T @ x64.abs()
    bias = d_random.summed(0) + Rounding(*summation_parts(d, u))
    bias_sys = d_systematic.sum(0)
    return {
        "grad_input": _finish(
            gi,
            _propagated(e, w64) + gi_gemm.bound() + gi_sys,
            gi_sys,
            (d_proxy * gi_c.square()).sum() + _proxy(gi_gemm).sum(),
            dtype,
            x.shape,
        ),
        "grad_weight": _finish(
            gw,
            _propagated(e.T, x64) + gw_gemm.bound() + gw_sys,
            gw_sys,
            (d_proxy * gw_c.square()).sum() + _proxy(gw_gemm).sum(),
            dtype,
            w.shape,
        ),
        "grad_bias": _finish(
            d.sum(0), bias.bound() + bias_sys, bias_sys, _proxy(bias).sum(), dtype, (w.shape[0],)
        ),
    }


def assert_bound(actual: torch.Tensor, bound: Bound, what: str) -> None:
    """Per element within bound.allowed, and the aggregate check."""
    assert actual.shape == bound.expected.shape, (what, actual.shape, bound.expected.shape)
    assert_within(actual.cpu(), bound.expected, bound.allowed, what)
    assert_unbiased(actual, bound.expected, bound.aggregate, what)
