"""lltm's derived error bounds: what each result may differ from float64 math on the same
inputs, from how it is computed (see the comment below). Shared by tests/test_lltm.py, the
property tests and the bounds' own tightness tests (tests/test_tolerance_bounds.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from _norm_helpers import (
    LAMBDA,
    UNIT,
    allowance,
    assert_unbiased,
    assert_within,
    compute_unit,
    gemm_parts,
    gemm_rounding,
    hoeffding,
    independent_sum,
    root_matmul_square,
    rounded_error,
    square_scale,
    subnormal_floor,
    summation_parts,
    summation_rounding,
)
from opspecs._rounding import TWO_ROUNDINGS
from opspecs.lltm import ARGUMENTS as LLTM_INPUTS
from opspecs.lltm import float64_results

# ---------------------------------------------------------------- error bounds
#
# What each result may differ from float64 math on the same inputs, derived from how it
# is computed: gates = [old_h, input] @ weights.T + bias is torch's addmm in the input
# dtype (float32 accumulation, the product rounded and then its sum with the bias, as
# cuBLAS does; float64 for float64); the gate math after
# it runs in float32 (float64) on those rounded gates and rounds each result once; the
# backward's fused kernel rounds d_gates once, then torch's GEMMs and column sum
# (float32 accumulation, one rounding) make the input grads from them.

# libm's expf/tanhf/expm1f (glibc, CUDA) are within 2 ulps: 4 roundings.
LIBM = 4.0
# A rounding's absolute error near 0 in the arithmetic of each unit (0: exact math).
ROUNDING_FLOOR = {
    compute_unit(torch.float32): subnormal_floor(torch.float32),
    compute_unit(torch.float64): subnormal_floor(torch.float64),
    0.0: 0.0,
}


@dataclass(frozen=True)
class Interval:
    """Per element, [lo, hi]: every value a computation can give (roundings included)
    for inputs anywhere in their intervals."""

    lo: torch.Tensor
    hi: torch.Tensor

    def widen(self, u: float, roundings: float = 1.0) -> Interval:
        """Plus `roundings` roundings in arithmetic of unit u: each at most u times the
        value's magnitude, or half a subnormal spacing where the value is subnormal (the
        float32 kernels' sigmoid is a subnormal below -87 and keeps ~2 bits at -102)."""
        magnitude = torch.maximum(self.lo.abs(), self.hi.abs())
        r = roundings * (u * magnitude + ROUNDING_FLOOR[u])
        return Interval(self.lo - r, self.hi + r)

    def distance(self, value: torch.Tensor) -> torch.Tensor:
        """How far from value the interval reaches (value inside: its farther end)."""
        return torch.maximum(self.hi - value, value - self.lo).clamp_min(0.0)


def _add(a: Interval, b: Interval, u: float) -> Interval:
    return Interval(a.lo + b.lo, a.hi + b.hi).widen(u)


def _mul(a: Interval, b: Interval, u: float) -> Interval:
    ends = torch.stack([a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi])
    return Interval(ends.amin(0), ends.amax(0)).widen(u)


def _increasing(
    f: Callable[[torch.Tensor], torch.Tensor], a: Interval, u: float, roundings: float
) -> Interval:
    return Interval(f(a.lo), f(a.hi)).widen(u, roundings)


def _one_minus_square(t: Interval, u: float) -> Interval:
    """1 - t * t: the square's rounding, then the difference's."""
    low = torch.where(t.lo > 0, t.lo, torch.where(t.hi < 0, -t.hi, 0.0))
    high = torch.maximum(t.lo.abs(), t.hi.abs())
    square = Interval(low.square(), high.square()).widen(u)
    return Interval(1 - square.hi, 1 - square.lo).widen(u)


def _logistic_slope(p: Interval, u: float) -> Interval:
    """p * (1 - p) for p in [lo, hi] (a sigmoid), peak 1/4 at p = 1/2; two roundings."""
    ends = torch.minimum(p.lo * (1 - p.lo), p.hi * (1 - p.hi))
    inside = (p.lo <= 0.5) & (p.hi >= 0.5)
    peak = torch.where(inside, 0.25, torch.maximum(p.lo * (1 - p.lo), p.hi * (1 - p.hi)))
    return Interval(ends, peak).widen(u, 2)


def _elu_slope(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x > 0, 1.0, torch.exp(x.clamp_max(0.0)))


def gate_math(
    gates: Interval,
    old_cell: torch.Tensor,
    grad_h: torch.Tensor,
    grad_cell: torch.Tensor,
    u: float,
) -> dict[str, Interval]:
    """The fused kernels' values (lltm.h, as written) in interval arithmetic, each op
    rounding once in arithmetic of unit u: new_h, new_cell, d_gates, d_old_cell."""
    state = old_cell.shape[1]
    g0, g1, g2 = (Interval(gates.lo[:, k], gates.hi[:, k]) for k in _gate_slices(state))
    c, gh, gc = (Interval(t, t) for t in (old_cell, grad_h, grad_cell))
    input_gate = _increasing(torch.sigmoid, g0, u, LIBM + 2)
    output_gate = _increasing(torch.sigmoid, g1, u, LIBM + 2)
    candidate = _increasing(F.elu, g2, u, LIBM)
    new_cell = _add(c, _mul(candidate, input_gate, u), u)
    tanh_cell = _increasing(torch.tanh, new_cell, u, LIBM)
    new_h = _mul(tanh_cell, output_gate, u)
    d_new_cell = _add(gc, _mul(_mul(gh, output_gate, u), _one_minus_square(tanh_cell, u), u), u)
    d_g0 = _mul(_mul(d_new_cell, candidate, u), _logistic_slope(input_gate, u), u)
    d_g1 = _mul(_mul(gh, tanh_cell, u), _logistic_slope(output_gate, u), u)
    d_g2 = _mul(_mul(d_new_cell, input_gate, u), _increasing(_elu_slope, g2, u, LIBM), u)
    d_gates = Interval(
        torch.cat([d_g0.lo, d_g1.lo, d_g2.lo], 1), torch.cat([d_g0.hi, d_g1.hi, d_g2.hi], 1)
    )
    return {"new_h": new_h, "new_cell": new_cell, "d_gates": d_gates, "d_old_cell": d_new_cell}


def _gate_slices(state: int) -> list[slice]:
    return [slice(k * state, (k + 1) * state) for k in range(3)]


def _root_triple_sums(e: torch.Tensor, w: torch.Tensor, state: int) -> torch.Tensor:
    """sqrt(sum over columns s of (sum over the 3 gates m of e[:, m S + s] * w[m S + s, :])^2):
    the root sum square of the independent per-column parts of e @ w (e and w >= 0),
    scaled so that no square under- or overflows."""
    scale_e, scale_w = square_scale(e, 1), square_scale(w, 0)
    e, w = e / scale_e, w / scale_w
    parts = _gate_slices(state)
    products = ((e[:, a] * e[:, b]) @ (w[a] * w[b]) for a in parts for b in parts)
    total = sum(products, start=e.new_zeros(e.shape[0], w.shape[1]))
    return total.sqrt() * scale_e * scale_w


@dataclass(frozen=True)
class _GateErrors:
    """What lltm_allowed and lltm_aggregate both start from: the GEMM's inputs in float64,
    the fused kernels' values as intervals over the rounded gates, the exact d_gates and
    e, how far the kernel's rounded d_gates may be from them."""

    dtype: torch.dtype
    u: float
    x: torch.Tensor
    weights: torch.Tensor
    state: int
    kernel: dict[str, Interval]
    d_gates: torch.Tensor
    e: torch.Tensor


def _gate_errors(inputs: Sequence[torch.Tensor], grads: Sequence[torch.Tensor]) -> _GateErrors:
    dtype = inputs[0].dtype
    u = compute_unit(dtype)
    input, weights, bias, old_h, old_cell = (t.detach().double() for t in inputs)
    grad_h, grad_cell = (g.detach().double() for g in grads)
    x = torch.cat([old_h, input], 1)
    product = x @ weights.T
    exact_gates = product + bias
    # gates = torch.addmm(bias, x, W.T): K products accumulated in float32 and rounded to
    # dtype, then the bias added and rounded again (cuBLAS on an H100 returned
    # bf16(bf16(x @ W.T) + bias) for bfloat16; the CPU rounds once, which is within this).
    # An operand expanded along K (stride 0: input or weights repeated across the
    # features) makes the K products of a gate equal: their roundings are then as
    # correlated as the partial sums k * t, and Hoeffding's independent roundings undercount
    # them (an H200 gave new_cell 1.04x that bound: B=231, F=230, S=16, both expanded).
    # There only the worst case (K roundings of each term) is sure.
    worst, proxy = gemm_parts(x, weights, u)
    repeated = any(_repeats_along(t, 1) for t in (inputs[0], inputs[1], inputs[3]))
    gemm_error = worst if repeated else hoeffding(worst, proxy)
    product_error = rounded_error(product, gemm_error, dtype)
    gate_error = rounded_error(exact_gates, product_error, dtype)
    # The fused kernels on gates anywhere within that error, each op rounding once: intervals.
    gates = Interval(exact_gates - gate_error, exact_gates + gate_error)
    kernel = gate_math(gates, old_cell, grad_h, grad_cell, u)
    d_gates = gate_math(Interval(exact_gates, exact_gates), old_cell, grad_h, grad_cell, 0.0)
    d_gates = d_gates["d_gates"].lo
    # d_gates as the kernel rounds them to dtype: within e of the exact ones.
    e = rounded_error(d_gates, kernel["d_gates"].distance(d_gates), dtype)
    return _GateErrors(dtype, u, x, weights, old_h.shape[1], kernel, d_gates, e)


def _repeats_along(t: torch.Tensor, dim: int) -> bool:
    """Whether t holds one value many times along dim (expanded: stride 0)."""
    return t.dim() > dim and t.shape[dim] > 1 and t.stride(dim) == 0


def lltm_allowed(
    inputs: Sequence[torch.Tensor],
    grads: Sequence[torch.Tensor],
    outputs: Sequence[torch.Tensor],
    input_grads: Sequence[torch.Tensor],
) -> dict[str, torch.Tensor]:
    """|actual - expected| allowed for new_h, new_cell and the input grads ("input", ...,
    "old_cell"), given the inputs, the output grads and the float64 results."""
    c = _gate_errors(inputs, grads)
    dtype, u, x, weights, state, d_gates, e = (
        c.dtype, c.u, c.x, c.weights, c.state, c.d_gates, c.e
    )  # fmt: skip
    kernel = c.kernel
    # d_x = d_gates @ W: terms off by e (Hoeffding over columns, a column's 3 gates as one).
    d_x = torch.minimum(
        e @ weights.abs(), LAMBDA * _root_triple_sums(e, weights.abs(), state)
    ) + gemm_rounding(d_gates, weights.T, u)
    # d_W = d_gates.T @ x: terms off by e (Hoeffding over the batch), float32 accumulation.
    d_weights = torch.minimum(e.T @ x.abs(), LAMBDA * root_matmul_square(e.T, x)) + gemm_rounding(
        d_gates.T, x.T, u
    )
    # d_b = d_gates.sum(0): the same over the batch; every result then rounds once (allowance).
    d_bias = independent_sum(e) + summation_rounding(d_gates, u)
    errors = {
        "new_h": kernel["new_h"].distance(outputs[0].double()),
        "new_cell": kernel["new_cell"].distance(outputs[1].double()),
        "input": d_x[:, state:],
        "weights": d_weights,
        "bias": d_bias,
        "old_h": d_x[:, :state],
        "old_cell": kernel["d_old_cell"].distance(input_grads[4].double()),
    }
    expected = dict(zip(["new_h", "new_cell", *LLTM_INPUTS], [*outputs, *input_grads], strict=True))
    return {name: allowance(expected[name], error, dtype) for name, error in errors.items()}


def lltm_aggregate(
    inputs: Sequence[torch.Tensor],
    grads: Sequence[torch.Tensor],
    expected: dict[str, torch.Tensor],
    allowed: dict[str, torch.Tensor],
) -> dict[str, float]:
    """Per result, the most |sum of sign(expected) * (actual - expected)| may differ from the
    correctly rounded result's (opspecs/_rounding.py): the errors are roundings of mean zero
    (Hoeffding, LAMBDA * sqrt of the proxies). new_h, new_cell and grad old_cell: each
    element's own, within allowed, less the correctly rounded one's. The GEMM results
    share d_gates' errors e (lltm_allowed): over grad_input (old_h) they sum to
    sum of e * c with c = sign(result) @ W.T (grad_weights: x @ sign.T, grad_bias: each
    column its own), plus the GEMMs' float32 roundings and each result's own rounding."""
    c = _gate_errors(inputs, grads)
    dtype, u, x, weights, state, d_gates = c.dtype, c.u, c.x, c.weights, c.state, c.d_gates
    e2 = c.e.square()

    def rounding(name: str) -> torch.Tensor:
        return UNIT[dtype] * expected[name].double().abs()

    # The result's rounding less the correctly rounded result's (opspecs/_rounding.py), and
    # GEMM roundings below.
    def own(name: str) -> torch.Tensor:
        return (TWO_ROUNDINGS * rounding(name)).square().sum()

    def gemm_proxy(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        worst, proxy = gemm_parts(a, b, u)
        return torch.minimum(proxy, worst.square()).sum()

    parts = {"input": slice(state, None), "old_h": slice(None, state)}
    # Within allowed, less the correctly rounded result's rounding.
    sure = {name: allowed[name].double() + rounding(name) for name in expected}
    proxies = {name: sure[name].square().sum() for name in ("new_h", "new_cell", "old_cell")}
    for name, columns in parts.items():
        c = expected[name].double().sign() @ weights[:, columns].T
        proxies[name] = (e2 * c.square()).sum() + gemm_proxy(d_gates, weights[:, columns].T)
        proxies[name] = proxies[name] + own(name)
    c = x @ expected["weights"].double().sign().T
    proxies["weights"] = (e2 * c.square()).sum() + gemm_proxy(d_gates.T, x.T) + own("weights")
    worst, proxy = summation_parts(d_gates, u)
    proxies["bias"] = e2.sum() + torch.minimum(proxy, worst.square()).sum() + own("bias")
    scale = 2.0 if dtype == torch.float64 else 1.0  # the reference rounds as much
    # Never above the per-element allowances' sum, which is sure (and is what remains where
    # a proxy of float64 errors of 1e-190 underflowed).
    return {name: float(hoeffding(sure[name].sum(), scale**2 * p)) for name, p in proxies.items()}


def gate_ops_allowed(
    gates: torch.Tensor,
    old_cell: torch.Tensor,
    grad_h: torch.Tensor,
    grad_cell: torch.Tensor,
    expected: dict[str, torch.Tensor],
) -> dict[str, torch.Tensor]:
    """What lltm_gates and its backward may differ from float64 math on their own inputs
    (expected: new_h, new_cell, d_gates, d_old_cell): the kernel math, rounded once."""
    exact = gates.double()
    state = (old_cell.double(), grad_h.double(), grad_cell.double())
    kernel = gate_math(Interval(exact, exact), *state, compute_unit(gates.dtype))
    return {
        name: allowance(value, kernel[name].distance(value.double()), gates.dtype)
        for name, value in expected.items()
    }


def assert_lltm_close(
    outputs: Sequence[torch.Tensor | None],
    input_grads: Sequence[torch.Tensor | None],
    inputs: Sequence[torch.Tensor],
    grads: Sequence[torch.Tensor],
) -> None:
    """new_h, new_cell (None: not checked) and the five input grads against float64
    math on the same inputs, within lltm_allowed."""
    (expected_h, expected_cell), expected_grads = float64_results(inputs, grads)
    allowed = lltm_allowed(inputs, grads, (expected_h, expected_cell), expected_grads)
    names = ["new_h", "new_cell", *LLTM_INPUTS]
    expected = dict(zip(names, [expected_h, expected_cell, *expected_grads], strict=True))
    limits = lltm_aggregate(inputs, grads, expected, allowed)
    pairs = zip(
        ["new_h", "new_cell", *LLTM_INPUTS],
        [*outputs, *input_grads],
        [expected_h, expected_cell, *expected_grads],
        strict=True,
    )
    for name, actual, expected in pairs:
        if actual is not None:
            assert actual.shape == expected.shape and actual.dtype == inputs[0].dtype, name
            assert_within(actual, expected, allowed[name], name)
            assert_unbiased(actual, expected, limits[name], name)


@contextlib.contextmanager
def fp32_accumulating_gemms() -> Iterator[None]:
    """cuBLAS's half and bfloat16 GEMMs accumulating in float32 throughout, as lltm_allowed
    assumes: torch allows them reduced-precision (split-K) reductions by default."""
    if not torch.cuda.is_available():
        yield
        return
    matmul = torch.backends.cuda.matmul
    saved = (
        matmul.allow_fp16_reduced_precision_reduction,
        matmul.allow_bf16_reduced_precision_reduction,
    )
    matmul.allow_fp16_reduced_precision_reduction = False
    matmul.allow_bf16_reduced_precision_reduction = False
    try:
        yield
    finally:
        matmul.allow_fp16_reduced_precision_reduction = saved[0]
        matmul.allow_bf16_reduced_precision_reduction = saved[1]


# ---------------------------------------------------------------- forward-mode tangent


def lltm_jvp_errors(
    primals: Sequence[torch.Tensor], tangents: Sequence[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """What (new_h, new_cell)'s tangents may differ from float64 math before their rounding
    to the dtype (issue 42 item 6): torch's GEMM gives the gates (K = state + features
    products) and their tangent dX W^T + X dW^T + db (two such GEMMs and two sums), each
    within its K (+ 1, + 2) roundings of its terms' size, p = |X||W|^T + |b| and D =
    |dX||W|^T + |X||dW|^T + |db|; wheelops' jvp (ops/lltm.py) then evaluates, in the same
    arithmetic (unit u), d_cell = dc0 + elu'(c) si dc + elu(c) si (1 - si) di and d_h =
    (1 - tanh^2) so d_cell + tanh so (1 - so) do on those gates: each coefficient moved by
    the gates' error times its slope (elu'' <= 1, sigmoid' <= 1/4, tanh's <= 0.77), and a
    handful of roundings (LIBM a function) of each product. Each term below says which.
    For float32 and float64 (the JVP tests' dtypes: the gates stay in the arithmetic)."""
    u = compute_unit(primals[0].dtype)
    input, weights, bias, old_h, old_cell = (t.detach().double() for t in primals)
    d_input, d_weights, d_bias, d_old_h, d_old_cell = (t.detach().double().abs() for t in tangents)
    x, dx = torch.cat([old_h, input], 1), torch.cat([d_old_h, d_input], 1)
    k = x.shape[1]
    p = x.abs() @ weights.abs().T + bias.abs()
    size = dx @ weights.abs().T + x.abs() @ d_weights.T + d_bias
    state = old_cell.shape[1]
    (p_i, p_o, p_c), (d_i, d_o, d_c) = (t.split(state, 1) for t in (p, size))
    c = (x @ weights.T + bias)[:, 2 * state :].abs() + 1  # 1 + |candidate|: |elu| <= it
    gates, tangent = (k + 1) * u, (k + 2) * u  # the GEMMs' roundings (plus the sums')
    fn = LIBM * u  # sigmoid, elu, tanh: LIBM roundings each (and their 1 +, 1 -)
    # d_cell: the tangent's error through |elu' si| <= 1 and |elu si (1 - si)| <= c / 4;
    # the gates' error through the slopes of those coefficients; 10 roundings and the
    # functions' of its three terms' size.
    d_cell = d_old_cell + d_c + c * d_i / 4
    cell = (
        tangent * (d_c + c * d_i / 4)
        + gates * ((p_c + p_i / 4) * d_c + (p_c / 4 + c * p_i / 10) * d_i)
        + (10 * u + 2 * fn) * d_cell
    )
    # new_cell's own error (the forward): the gates' through |elu' si| <= 1, |elu| / 4, and
    # 3 roundings and the functions' of |old_cell| + |elu si|.
    new_cell = gates * (p_c + c * p_i / 4) + (3 * u + 2 * fn) * (old_cell.abs() + c)
    # d_h: d_cell's error through (1 - tanh^2) so <= 1; that coefficient's own error
    # (new_cell's through 0.77, so's through 1) times |d_cell|; do's error through
    # tanh so (1 - so) <= 1/4 and that coefficient's (new_cell's through 1/4, so's through
    # 1) times |do|; 8 roundings and the functions' of both products.
    coefficient = 0.77 * new_cell + gates * p_o / 4 + 4 * u + fn
    h = (
        cell
        + coefficient * d_cell
        + tangent * d_o / 4
        + (new_cell / 4 + gates * p_o / 4 + 4 * u + fn) * d_o
        + (8 * u + 2 * fn) * (d_cell + d_o / 4)
    )
    return h, cell


def assert_lltm_jvp_close(
    primals: Sequence[torch.Tensor],
    tangents: Sequence[torch.Tensor],
    actual: Sequence[torch.Tensor],
    expected: Sequence[torch.Tensor],
) -> None:
    """(new_h, new_cell)'s tangents within lltm_jvp_errors and their rounding to the dtype."""
    dtype = primals[0].dtype
    errors = lltm_jvp_errors(primals, tangents)
    for name, a, e, error in zip(("new_h", "new_cell"), actual, expected, errors, strict=True):
        allowed = allowance(e, error, dtype)
        assert_within(a.double(), e.double(), allowed, f"lltm {name} tangent")
