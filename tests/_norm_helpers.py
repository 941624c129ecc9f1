"""Tolerances shared by the layer_norm / rms_norm tests (their float64 references are
their descriptions', specs/opspecs), and the bounds on sums (column sums, GEMMs) that the
bias_gelu and lltm gradient checks share."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from opspecs._rounding import bias_beyond

# One rounding to each dtype: the unit roundoff (half the spacing of values near 1).
UNIT = {
    torch.float64: 2.0**-53,
    torch.float32: 2.0**-24,
    torch.float16: 2.0**-11,
    torch.bfloat16: 2.0**-8,
}
# Hoeffding: a sum of independent mean-zero errors e_i, |e_i| <= E_i (roundings, in the
# standard model of Higham and Mary, "A new approach to probabilistic rounding error
# analysis", 2019) exceeds LAMBDA * sqrt(sum E_i^2) with probability <= 2 exp(-LAMBDA^2 / 2),
# 2.5e-14 per checked value.
LAMBDA = 8.0

# Row lengths: tiny, odd, not a multiple of any vector width, one warp's worth,
# a block's worth, and past the register-resident limit on GPU.
LENGTHS = [1, 2, 3, 7, 127, 1000, 1031, 4096, 8193]
GPU_LENGTHS = [16384, 32768, 65536, 65537, 100000, 262144]


def float64_grads(fn, grad, *inputs):
    """Gradients of fn at the float64 copies of inputs (None stays None).

    Computed on the CPU and returned on grad's device: the reference must not
    share a backend with what it checks. (torch 2.11's CUDA layer_norm backward
    gave a bias gradient of 0 for 69632 rows of one column, where the CPU and
    wheelops give the sum; see test_layer_norm's regression test.)"""
    leaves = [None if t is None else t.detach().cpu().double().requires_grad_() for t in inputs]
    out = fn(*leaves)
    wanted = [t for t in leaves if t is not None]
    grads = iter(torch.autograd.grad(out, wanted, grad.detach().cpu().double()))
    return [None if t is None else next(grads).to(grad.device) for t in leaves]


def layer_norm_float64_grads(grad, x, weight, bias, eps):
    """float64_grads of layer_norm with each row shifted by its first value (where finite):
    layer_norm and its gradients are the same, and the reference's float64 roundings then
    scale with a row's spread, not its mean, as the kernels' do (they shift so too). On rows
    around 100 with a spread of 1e-3, torch's CPU float64 grad_x of the rows as they are was
    2.16e-9 off the exact one (decimal, 50 digits), past the 2.10e-9 the bound allows, where
    the kernels were about 1e-11 off and the shifted reference 2.2e-13
    (test_layer_norm.py::test_float64_rows_around_a_large_mean_against_a_shifted_reference)."""

    def shifted(a, w, b):
        first = a[..., :1].detach()
        offset = torch.where(first.isfinite(), first, torch.zeros_like(first))
        return F.layer_norm(a - offset, (a.shape[-1],), w, b, eps)

    return float64_grads(shifted, grad, x, weight, bias)


# ---------------------------------------------------------------- bounds on sums


def compute_unit(dtype: torch.dtype) -> float:
    """The unit of the arithmetic the kernels (and torch's GEMMs and sums) use for dtype."""
    return UNIT[torch.float64] if dtype == torch.float64 else UNIT[torch.float32]


def subnormal_floor(dtype: torch.dtype) -> float:
    """Half the spacing of dtype's subnormals: a rounding's absolute error near 0."""
    info = torch.finfo(dtype)
    return info.tiny * info.eps / 2


def square_scale(t: torch.Tensor, dim: int) -> torch.Tensor:
    """The largest |t| along dim (kept), 1 where that is 0, not finite or empty: a divisor
    that keeps squares of tiny or huge values (float64 errors of 1e-200) from under- or
    overflowing."""
    if t.shape[dim] == 0:
        return torch.ones_like(t.sum(dim, keepdim=True))
    top = t.abs().amax(dim, keepdim=True)
    return torch.where((top > 0) & top.isfinite(), top, 1.0)


def root_sum_square(t: torch.Tensor, dim: int) -> torch.Tensor:
    """sqrt(sum of t^2 along dim), without squaring t itself."""
    t = t.double()
    scale = square_scale(t, dim)
    return (t / scale).square().sum(dim, keepdim=True).sqrt().mul(scale).squeeze(dim)


def root_matmul_square(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """sqrt(a^2 @ b^2) ([M, K] x [K, N]), without squaring a or b themselves."""
    a, b = a.double(), b.double()
    scale_a, scale_b = square_scale(a, 1), square_scale(b, 0)
    return ((a / scale_a).square() @ (b / scale_b).square()).sqrt() * scale_a * scale_b


def independent_sum(errors: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """A bound on |sum of e_i| along dim given |e_i| <= errors_i: their sum, or (the e_i
    independent roundings, mean zero) LAMBDA * sqrt(sum errors_i^2), whichever is smaller."""
    errors = errors.double()
    return torch.minimum(errors.sum(dim), LAMBDA * root_sum_square(errors, dim))


def summation_parts(
    terms: torch.Tensor, unit: float, dim: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rounding of sum(terms, dim) added up in arithmetic of unit `unit`, as (worst,
    proxy): its worst case, and the sum of its roundings' squared bounds (Hoeffding's
    variance proxy); summation_rounding says which orders these cover."""
    terms = terms.double()
    n = terms.shape[dim]
    worst = unit * n * terms.abs().sum(dim)
    proxy = unit**2 * (terms.cumsum(dim).square() + terms.square()).sum(dim)
    return worst, proxy


def hoeffding(worst: torch.Tensor, proxy: torch.Tensor) -> torch.Tensor:
    """A sum of roundings bounded by `worst`, or LAMBDA * sqrt(its variance proxy), whichever
    is smaller. A proxy below float64's normal range has lost its digits (roundings of
    1e-160 and less square to subnormals or 0): there only the worst case is sure."""
    sure = proxy >= torch.finfo(torch.float64).tiny
    return torch.minimum(worst, torch.where(sure, LAMBDA * proxy.sqrt(), worst))


def summation_rounding(terms: torch.Tensor, unit: float, dim: int = 0) -> torch.Tensor:
    """A bound on the rounding of sum(terms, dim) added up in arithmetic of unit `unit`.

    Any order: each term goes through at most n roundings (its product's included),
    n * unit * sum|t|. Or, the roundings independent (Hoeffding), LAMBDA * unit *
    sqrt(sum S_k^2 + t_k^2) over the partial sums S_k of the row-order sum: the CPU
    kernels' order; the CUDA kernels and BLAS sum strided chains and trees, whose
    partial sums are sums of fewer terms (for terms of random sign, smaller ones in
    expectation). Whichever is smaller.
    """
    return hoeffding(*summation_parts(terms, unit, dim))


def gemm_parts(a: torch.Tensor, b: torch.Tensor, unit: float) -> tuple[torch.Tensor, torch.Tensor]:
    """summation_parts of each element of a @ b.T ([M, K] x [N, K] -> [M, N]), in
    chunks of rows of a so that the [rows, N, K] products stay within ~256 MiB."""
    a, b = a.double(), b.double()
    rows = max(1, 2**25 // max(1, b.shape[0] * b.shape[1]))
    parts = [
        summation_parts(a[i : i + rows, None, :] * b[None, :, :], unit, dim=-1)
        for i in range(0, a.shape[0], rows)
    ]
    if not parts:
        empty = a.new_zeros(0, b.shape[0])
        return empty, empty
    return torch.cat([w for w, _ in parts]), torch.cat([v for _, v in parts])


def gemm_rounding(a: torch.Tensor, b: torch.Tensor, unit: float) -> torch.Tensor:
    """summation_rounding of each element of a @ b.T ([M, K] x [N, K] -> [M, N])."""
    return hoeffding(*gemm_parts(a, b, unit))


def rounded_error(value: torch.Tensor, error: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The error of a result rounded once to dtype whose value before that rounding was
    within `error` of `value`: u |value| + (1 + u) error, plus the subnormal floor.
    (A value that overflowed dtype adds nothing: the result must equal it.)"""
    u = UNIT[dtype]
    magnitude = torch.where(value.isfinite(), value.double().abs(), 0.0)
    return u * magnitude + (1 + u) * error.double() + subnormal_floor(dtype)


def allowance(expected: torch.Tensor, error: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """|actual - expected| allowed for a result within `error` of expected before its one
    rounding to dtype (rounded_error); twice that for float64, whose reference rounds as
    much as the kernel."""
    allowed = rounded_error(expected, error, dtype)
    return 2 * allowed if dtype == torch.float64 else allowed


def assert_within(
    actual: torch.Tensor,
    expected: torch.Tensor,
    allowed: torch.Tensor,
    what: str,
    offset: int = 0,
) -> None:
    """|actual - expected| <= allowed everywhere (0 where both are the same infinity); the
    flat index it reports counts from offset (a piece of a larger check)."""
    diff = _difference(actual.to(expected.device), expected)
    if diff.numel() == 0:
        return
    allowed = allowed.to(diff.device).expand_as(diff)
    worst = int((diff - allowed).flatten().nan_to_num(math.inf).argmax())
    assert bool((diff <= allowed).all()), (
        f"{what} off by {diff.flatten()[worst].item():.3g} at flat index {offset + worst} "
        f"(allowed {allowed.flatten()[worst].item():.3g}, expected "
        f"{expected.flatten()[worst].item():.6g}, got {actual.flatten()[worst].item():.6g})"
    )


def assert_unbiased(actual: torch.Tensor, expected: torch.Tensor, limit: float, what: str) -> None:
    """The aggregate check: actual's sign-weighted error sum within limit of the correctly
    rounded result's (opspecs/_rounding.py: not of zero, which one rounding need not have);
    limit's roundings count the result's own twice (TWO_ROUNDINGS)."""
    problem = bias_beyond(actual, expected, limit)
    assert problem is None, f"{what} {problem}"


def column_sum_allowance(
    expected: torch.Tensor, terms: torch.Tensor, term_errors: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    """What assert_within allows a column sum of `terms` ([rows, cols], float64 from the
    reference inputs), each computed with an error <= term_errors, accumulated in
    compute_unit(dtype) and rounded once to dtype."""
    # |err| <= u_out |ref| + (1 + u_out) (sum of the terms' errors + float32 accumulation)
    inner = independent_sum(term_errors) + summation_rounding(terms, compute_unit(dtype))
    return allowance(expected, inner, dtype)


def as_rows(t: torch.Tensor) -> torch.Tensor:
    """t as float64 [rows, cols] (cols = its last dimension; rows may be 0)."""
    return t.double().reshape(math.prod(t.shape[:-1]), t.shape[-1])


def _rstd_error(x: torch.Tensor) -> float:
    """rstd's relative error: the row's sum of cols squares (non-negative: cols roundings,
    or LAMBDA * sqrt(cols) if independent) and 3 more roundings (square, / cols, + eps),
    halved by the square root, plus the root and the reciprocal, in float32 (CUDA) or in
    float64 rounded once to the float32 statistics (CPU)."""
    cols = x.shape[-1]
    on_cpu = x.device.type == "cpu"
    stats_unit = UNIT[torch.float64] if on_cpu else compute_unit(x.dtype)
    error = ((min(cols, LAMBDA * math.sqrt(cols)) + 3) / 2 + 2) * stats_unit
    return error + (UNIT[torch.float32] if on_cpu and x.dtype != torch.float64 else 0.0)


def assert_norm_bias_grad_close(actual, expected, grad):
    """layer_norm's grad_bias, the column sum of g: exact terms, accumulated in float32
    (float64 for float64; the CPU kernels sum in float64) and rounded once."""
    terms = as_rows(grad)
    # The terms g are exact (any dtype's value is a float32 one): accumulation, one rounding.
    allowed = column_sum_allowance(expected, terms, torch.zeros_like(terms), actual.dtype)
    assert_within(actual, expected, allowed, "grad_bias")


def assert_rms_norm_grad_weight_close(actual, expected, x, grad, eps):
    """rms_norm's grad_weight, the column sum of g * x * rstd: two roundings per term
    and rstd's error (_rstd_error), accumulated and rounded as a column sum."""
    x64, g64 = as_rows(x), as_rows(grad)
    rstd = 1.0 / torch.sqrt(x64.square().mean(-1, keepdim=True) + eps)
    terms = g64 * x64 * rstd
    unit = compute_unit(x.dtype)
    # Per term g * (x * rstd): two roundings plus rstd's relative error.
    term_errors = (2 * unit + _rstd_error(x)) * terms.abs()
    allowed = column_sum_allowance(expected, terms, term_errors, actual.dtype)
    assert_within(actual, expected, allowed, "grad_weight")


def assert_layer_norm_grad_x_close(actual, expected, x, weight, grad, eps):
    """grad_x of layer_norm against its float64 reference, allowing the kernel's rounding.

    grad_x = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)) is a difference of
    terms that can cancel almost completely, and xhat = (x - mean) * rstd itself
    cancels when a row's values are close together (short rows: with 3 columns
    rstd reaches ~1e3 for randn input). A kernel computing in float32 (float64) then
    has an absolute error of roundings of the *terms*, not of the result
    (_grad_x_error). The mean's own rounding moves every xhat of the row by
    delta = _centering_error * max|x| * rstd, which enters both xhat and
    mean(g*w*xhat): the product moves by delta * (|mean(g*w*xhat)| + |xhat| *
    |mean(g*w)|) (the second part, 0.0224 at 0.0161 allowed on a 31-column float32 row
    around 0.5, was found by the GPU property tests; a float32 emulation of the kernel
    gives the same). Then the result is rounded once to its dtype (allowance).
    """
    _assert_grad_x_close(actual, expected, _grad_x_error(x, weight, grad, eps, True))


def assert_rms_norm_grad_x_close(actual, expected, x, weight, grad, eps):
    """grad_x of rms_norm against its float64 reference: layer_norm's bound without the
    mean (rstd * (g*w - xhat * mean(g*w*xhat))), then one rounding to the dtype."""
    _assert_grad_x_close(actual, expected, _grad_x_error(x, weight, grad, eps, False))


def _grad_x_error(x, weight, grad, eps, centered: bool) -> torch.Tensor:
    """grad_x's error before its rounding to the dtype, in arithmetic of unit u (float32,
    float64 for float64): 10 roundings of the direct terms rstd * (|g*w| + |mean(g*w)| +
    |xhat| |mean(g*w*xhat)|) (products, differences, the means' divisions), rstd's relative
    error three times (in rstd, xhat and mean(g*w*xhat)), the row sums behind the means
    (min(cols, LAMBDA sqrt(cols)) roundings of the sums of |terms|) and, centred, the
    saved mean's error (_centering_error of max|x|) moving xhat."""
    x64 = x.double()
    g64 = grad.double()
    cols = x.shape[-1]
    mean = x64.mean(-1, keepdim=True) if centered else torch.zeros_like(x64[..., :1])
    rstd = 1.0 / torch.sqrt((x64 - mean).square().mean(-1, keepdim=True) + eps)
    xhat = (x64 - mean) * rstd
    gw = g64 * weight.double() if weight is not None else g64
    mean_gw = gw.mean(-1, keepdim=True) if centered else torch.zeros_like(mean)
    mean_dot = (gw * xhat).mean(-1, keepdim=True)
    direct = rstd * (gw.abs() + mean_gw.abs() + xhat.abs() * mean_dot.abs())
    summed = rstd * xhat.abs() * (gw * xhat).abs().mean(-1, keepdim=True)
    if centered:
        summed = summed + rstd * gw.abs().mean(-1, keepdim=True)
    unit = compute_unit(x.dtype)
    sums = min(float(cols), LAMBDA * math.sqrt(cols)) if cols else 0.0
    error = (10 * unit + 3 * _rstd_error(x)) * direct + sums * unit * summed
    if centered:
        max_x = x64.abs().amax(-1, keepdim=True)
        moved = rstd * rstd * max_x * (mean_dot.abs() + xhat.abs() * mean_gw.abs())
        error = error + _centering_error(x) * moved
    return error


def _assert_grad_x_close(actual, expected, error) -> None:
    """|actual - expected| within one rounding to the dtype of a value off by error."""
    expected = expected.double()
    assert_within(actual, expected, allowance(expected, error, actual.dtype), "grad_x")


def _difference(actual, expected):
    """|actual - expected|, 0 where they are equal (an infinity both overflowed to)."""
    a, e = actual.double(), expected.double()
    return torch.where(a == e, torch.zeros_like(a), (a - e).abs())


def _centering_error(x):
    """Roundings of |x| in x - mean, per unit of max|x|: 64 of the statistics'
    precision (float32, or float64 for float64 x), plus the worst case of a
    float64 sum of the row (cols roundings; the CPU kernels sum in order)."""
    unit = 2.0**-53 if x.dtype == torch.float64 else 2.0**-24
    return 64 * unit + x.shape[-1] * 2.0**-53


def _out_error(x, weight, bias, eps, centered: bool) -> torch.Tensor:
    """The norm's output error before its rounding to the dtype: xhat = (x - mean) * rstd
    (rms_norm: x * rstd) carries rstd's error (_rstd_error), two roundings (the difference
    and the product) and, centred, the saved mean's error (_centering_error per max|x|,
    times rstd: rows of values close together around a large mean, or constant rows, make
    it the dominant one); then times w (one rounding) and plus b (one more)."""
    x64 = x.double()
    u = compute_unit(x.dtype)
    if centered:
        mean = x64.mean(-1, keepdim=True)
        centred = x64 - mean
    else:
        centred = x64
    rstd = 1.0 / torch.sqrt(centred.square().mean(-1, keepdim=True) + eps)
    xhat = centred * rstd
    error = (2 * u + _rstd_error(x)) * xhat.abs()
    if centered and x.shape[-1]:
        error = error + _centering_error(x) * x64.abs().amax(-1, keepdim=True) * rstd
    w = weight.double().abs() if weight is not None else 1.0
    out = xhat * w + (bias.double() if bias is not None else 0.0)
    return w * error + u * (xhat * w).abs() + (u * out.abs() if bias is not None else 0.0)


def assert_layer_norm_out_close(actual, expected, x, weight, bias, eps):
    """layer_norm's output against its float64 reference: within one rounding of
    _out_error (its centred form)."""
    if actual.numel() == 0:
        assert expected.numel() == 0
        return
    error = _out_error(x, weight, bias, eps, centered=True)
    assert_within(actual, expected, allowance(expected, error, actual.dtype), "layer_norm out")


def assert_rms_norm_out_close(actual, expected, x, weight, eps):
    """rms_norm's output against its float64 reference: within one rounding of _out_error."""
    if actual.numel() == 0:
        assert expected.numel() == 0
        return
    error = _out_error(x, weight, None, eps, centered=False)
    assert_within(actual, expected, allowance(expected, error, actual.dtype), "rms_norm out")


def assert_layer_norm_grad_weight_close(actual, expected, x, grad, eps):
    """grad_weight of layer_norm (a column sum of g * xhat) against its float64 reference.

    Per term: three roundings of g * ((x - mean) * rstd) and rstd's error
    (_rstd_error); and, since the backward recomputes xhat from the float32 mean
    saved by the forward (float64 for float64 x), the saved mean's error, which a
    row of values close together around a large mean makes far bigger than xhat's
    own rounding: _centering_error(x) * max|x| per row, times rstd and |g|. Summed,
    accumulated and rounded as a column sum (column_sum_allowance).
    """
    x64, g64 = as_rows(x), as_rows(grad)
    mean = x64.mean(-1, keepdim=True)
    rstd = 1.0 / torch.sqrt((x64 - mean).square().mean(-1, keepdim=True) + eps)
    terms = g64 * (x64 - mean) * rstd
    max_x = x64.abs().amax(-1, keepdim=True) if x64.shape[-1] else x64.new_zeros(len(x64), 1)
    unit = compute_unit(x.dtype)
    # Per term g * ((x - mean) * rstd): 3 roundings, rstd's error, the saved mean's * rstd |g|.
    term_errors = (3 * unit + _rstd_error(x)) * terms.abs()
    term_errors = term_errors + _centering_error(x) * g64.abs() * rstd * max_x
    allowed = column_sum_allowance(expected, terms, term_errors, actual.dtype)
    assert_within(actual, expected, allowed, "grad_weight")


def wheelops_ops_called(fn: Callable[[], object]) -> list[str]:
    """The wheelops ops ``fn()`` reaches through the dispatcher, in order."""
    from torch.utils._python_dispatch import TorchDispatchMode

    called: list[str] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.namespace == "wheelops":
                called.append(func.__name__)
            return func(*args, **(kwargs or {}))

    with Record():
        fn()
    return called
