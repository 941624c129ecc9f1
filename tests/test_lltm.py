from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from _helpers import DEVICES, DTYPES
from _norm_helpers import (
    LAMBDA,
    allowance,
    assert_within,
    compute_unit,
    gemm_rounding,
    independent_sum,
    rounded_error,
    summation_rounding,
)

import wheelops

# (batch, input_features, state_size): single elements, state sizes that are
# and are not a multiple of the 16-byte vector width, empty batch/features/state.
SHAPES = [
    (1, 1, 1),
    (3, 5, 7),
    (4, 8, 16),
    (2, 3, 33),
    (6, 10, 64),
    (0, 4, 8),
    (5, 0, 8),
    (3, 4, 0),
]


def eager_lltm(input, weights, bias, old_h, old_cell):
    """The tutorial's pure-PyTorch LLTM forward (pytorch/extension-cpp)."""
    x = torch.cat([old_h, input], dim=1)
    gate_weights = F.linear(x, weights, bias)
    gates = gate_weights.chunk(3, dim=1)
    input_gate = torch.sigmoid(gates[0])
    output_gate = torch.sigmoid(gates[1])
    candidate_cell = F.elu(gates[2])
    new_cell = old_cell + candidate_cell * input_gate
    new_h = torch.tanh(new_cell) * output_gate
    return new_h, new_cell


def make_inputs(batch, features, state, dtype, device, seed=0, requires_grad=False):
    generator = torch.Generator().manual_seed(seed)
    bound = 1 / math.sqrt(max(state, 1))

    def rand(*shape, scale=1.0):
        t = (torch.rand(shape, generator=generator, dtype=torch.float64) * 2 - 1) * scale
        return t.to(dtype).to(device).requires_grad_(requires_grad)

    return (
        rand(batch, features, scale=2.0),
        rand(3 * state, state + features, scale=bound),
        rand(3 * state, scale=bound),
        rand(batch, state),
        rand(batch, state, scale=2.0),
    )


def float64_results(inputs, grads):
    leaves = [t.detach().double().requires_grad_() for t in inputs]
    outputs = eager_lltm(*leaves)
    input_grads = torch.autograd.grad(outputs, leaves, [g.double() for g in grads])
    return [o.detach() for o in outputs], list(input_grads)


# ---------------------------------------------------------------- error bounds
#
# What each result may differ from float64 math on the same inputs, derived from how it
# is computed: gates = [old_h, input] @ weights.T + bias is torch's GEMM in the input
# dtype (float32 accumulation, one rounding; float64 for float64); the gate math after
# it runs in float32 (float64) on those rounded gates and rounds each result once; the
# backward's fused kernel rounds d_gates once, then torch's GEMMs and column sum
# (float32 accumulation, one rounding) make the input grads from them.

# libm's expf/tanhf/expm1f (glibc, CUDA) are within 2 ulps: 4 roundings.
LIBM = 4.0


@dataclass(frozen=True)
class Interval:
    """Per element, [lo, hi]: every value a computation can give (roundings included)
    for inputs anywhere in their intervals."""

    lo: torch.Tensor
    hi: torch.Tensor

    def widen(self, relative: float) -> Interval:
        """Plus a rounding of the value of at most `relative` times its magnitude."""
        r = relative * torch.maximum(self.lo.abs(), self.hi.abs())
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
    f: Callable[[torch.Tensor], torch.Tensor], a: Interval, relative: float
) -> Interval:
    return Interval(f(a.lo), f(a.hi)).widen(relative)


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
    return Interval(ends, peak).widen(2 * u)


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
    input_gate = _increasing(torch.sigmoid, g0, (LIBM + 2) * u)
    output_gate = _increasing(torch.sigmoid, g1, (LIBM + 2) * u)
    candidate = _increasing(F.elu, g2, LIBM * u)
    new_cell = _add(c, _mul(candidate, input_gate, u), u)
    tanh_cell = _increasing(torch.tanh, new_cell, LIBM * u)
    new_h = _mul(tanh_cell, output_gate, u)
    d_new_cell = _add(gc, _mul(_mul(gh, output_gate, u), _one_minus_square(tanh_cell, u), u), u)
    d_g0 = _mul(_mul(d_new_cell, candidate, u), _logistic_slope(input_gate, u), u)
    d_g1 = _mul(_mul(gh, tanh_cell, u), _logistic_slope(output_gate, u), u)
    d_g2 = _mul(_mul(d_new_cell, input_gate, u), _increasing(_elu_slope, g2, LIBM * u), u)
    d_gates = Interval(
        torch.cat([d_g0.lo, d_g1.lo, d_g2.lo], 1), torch.cat([d_g0.hi, d_g1.hi, d_g2.hi], 1)
    )
    return {"new_h": new_h, "new_cell": new_cell, "d_gates": d_gates, "d_old_cell": d_new_cell}


def _gate_slices(state: int) -> list[slice]:
    return [slice(k * state, (k + 1) * state) for k in range(3)]


def _triple_sums(e: torch.Tensor, w: torch.Tensor, state: int) -> torch.Tensor:
    """sum over columns s of (sum over the 3 gates m of e[:, m S + s] * w[m S + s, :])^2:
    the squared ranges of the independent per-column parts of e @ w."""
    parts = _gate_slices(state)
    products = ((e[:, a] * e[:, b]) @ (w[a] * w[b]) for a in parts for b in parts)
    return sum(products, start=e.new_zeros(e.shape[0], w.shape[1]))


def lltm_allowed(
    inputs: Sequence[torch.Tensor],
    grads: Sequence[torch.Tensor],
    outputs: Sequence[torch.Tensor],
    input_grads: Sequence[torch.Tensor],
) -> dict[str, torch.Tensor]:
    """|actual - expected| allowed for new_h, new_cell and the input grads ("input", ...,
    "old_cell"), given the inputs, the output grads and the float64 results."""
    dtype = inputs[0].dtype
    u = compute_unit(dtype)
    input, weights, bias, old_h, old_cell = (t.detach().double() for t in inputs)
    grad_h, grad_cell = (g.detach().double() for g in grads)
    x = torch.cat([old_h, input], 1)
    state = old_h.shape[1]
    product = x @ weights.T
    exact_gates = product + bias
    # gates = torch.addmm(bias, x, W.T): K products accumulated in float32 and rounded to
    # dtype, then the bias added and rounded again (cuBLAS on an H100 returned
    # bf16(bf16(x @ W.T) + bias) for bfloat16; the CPU rounds once, which is within this).
    product_error = rounded_error(product, gemm_rounding(x, weights, u), dtype)
    gate_error = rounded_error(exact_gates, product_error, dtype)
    # The fused kernels on gates anywhere within that error, each op rounding once: intervals.
    gates = Interval(exact_gates - gate_error, exact_gates + gate_error)
    kernel = gate_math(gates, old_cell, grad_h, grad_cell, u)
    d_gates = gate_math(Interval(exact_gates, exact_gates), old_cell, grad_h, grad_cell, 0.0)
    d_gates = d_gates["d_gates"].lo
    # d_gates as the kernel rounds them to dtype: within e of the exact ones.
    e = rounded_error(d_gates, kernel["d_gates"].distance(d_gates), dtype)
    # d_x = d_gates @ W: terms off by e (Hoeffding over columns, a column's 3 gates as one).
    d_x = torch.minimum(
        e @ weights.abs(), LAMBDA * _triple_sums(e, weights.abs(), state).sqrt()
    ) + gemm_rounding(d_gates, weights.T, u)
    # d_W = d_gates.T @ x: terms off by e (Hoeffding over the batch), float32 accumulation.
    d_weights = torch.minimum(
        e.T @ x.abs(), LAMBDA * (e.T.square() @ x.square()).sqrt()
    ) + gemm_rounding(d_gates.T, x.T, u)
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


LLTM_INPUTS = ("input", "weights", "bias", "old_h", "old_cell")


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


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_forward_and_all_gradients_match_float64(shape, dtype, device):
    batch, _, state = shape
    inputs = make_inputs(*shape, dtype, device, seed=1, requires_grad=True)
    new_h, new_cell = wheelops.lltm(*inputs)
    assert new_h.shape == new_cell.shape == (batch, state)
    assert new_h.dtype == new_cell.dtype == dtype
    generator = torch.Generator().manual_seed(2)
    grads = [torch.randn(batch, state, generator=generator).to(dtype).to(device) for _ in range(2)]
    ours = torch.autograd.grad((new_h, new_cell), inputs, grads)
    assert_lltm_close((new_h, new_cell), ours, inputs, grads)


@pytest.mark.parametrize("device", DEVICES)
def test_matches_eager_float32_and_only_new_h_used(device):
    inputs = make_inputs(16, 24, 40, torch.float32, device, seed=3, requires_grad=True)
    ours = wheelops.lltm(*inputs)
    eager = eager_lltm(*inputs)
    for mine, theirs in zip(ours, eager, strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-5)
    # grad_cell is None here: autograd gives the fused backward zeros.
    mine = torch.autograd.grad(ours[0].square().sum(), inputs)
    theirs = torch.autograd.grad(eager[0].square().sum(), inputs)
    for a, b in zip(mine, theirs, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    mine = torch.autograd.grad(wheelops.lltm(*inputs)[1].sum(), inputs)
    theirs = torch.autograd.grad(eager_lltm(*inputs)[1].sum(), inputs)
    for a, b in zip(mine, theirs, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_gradcheck_float64():
    inputs = make_inputs(3, 4, 5, torch.float64, "cpu", seed=4, requires_grad=True)
    assert torch.autograd.gradcheck(wheelops.lltm, inputs)
    gates = torch.randn(3, 15, dtype=torch.float64, requires_grad=True)
    old_cell = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(torch.ops.wheelops.lltm_gates.default, (gates, old_cell))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_gate_ops_directly(dtype, device):
    # The two fused kernels against the formula, on their own.
    batch, state = 7, 24
    gates = torch.randn(batch, 3 * state, dtype=torch.float64).to(dtype).to(device)
    old_cell = torch.randn(batch, state, dtype=torch.float64).to(dtype).to(device)
    grad_h, grad_cell = (torch.randn(batch, state).to(dtype).to(device) for _ in range(2))
    new_h, new_cell = torch.ops.wheelops.lltm_gates.default(gates, old_cell)
    g = gates.double().requires_grad_()
    c = old_cell.double().requires_grad_()
    g0, g1, g2 = g.chunk(3, dim=1)
    expected_cell = c + F.elu(g2) * torch.sigmoid(g0)
    expected_h = torch.tanh(expected_cell) * torch.sigmoid(g1)
    d_gates, d_old_cell = torch.ops.wheelops.lltm_gates_backward.default(
        grad_h, grad_cell, gates, old_cell
    )
    expected_grads = torch.autograd.grad(
        (expected_h, expected_cell), (g, c), (grad_h.double(), grad_cell.double())
    )
    assert d_gates.shape == gates.shape and d_old_cell.shape == old_cell.shape
    actual = {"new_h": new_h, "new_cell": new_cell, "d_gates": d_gates, "d_old_cell": d_old_cell}
    expected = dict(
        zip(actual, [expected_h.detach(), expected_cell.detach(), *expected_grads], strict=True)
    )
    allowed = gate_ops_allowed(gates, old_cell, grad_h, grad_cell, expected)
    for name, value in actual.items():
        assert_within(value, expected[name], allowed[name], name)


def misaligned(t: torch.Tensor) -> torch.Tensor:
    flat = torch.zeros(t.numel() + 1, dtype=t.dtype, device=t.device)
    flat[1:] = t.reshape(-1)
    return flat[1:].view(t.shape)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_non_contiguous_and_misaligned_inputs(dtype, device):
    inputs = make_inputs(6, 12, 16, dtype, device, seed=5)
    # The output grads live on the outputs' device (a CPU grad for a CUDA
    # output is rejected by autograd itself).
    ones = torch.ones(6, 16, dtype=dtype, device=device)
    input, weights, bias, old_h, old_cell = inputs
    variants = [
        (input.t().contiguous().t(), weights, bias, old_h, old_cell),
        (input, weights.t().contiguous().t(), bias, old_h, old_cell),
        (misaligned(input), misaligned(weights), misaligned(bias), old_h, misaligned(old_cell)),
        (input, weights, bias, old_h.t().contiguous().t(), old_cell.t().contiguous().t()),
    ]
    for variant in variants:
        leaves = [t.detach().requires_grad_() for t in variant]
        new_h, new_cell = wheelops.lltm(*leaves)
        grads = torch.autograd.grad((new_h, new_cell), leaves, (ones, ones))
        assert_lltm_close((new_h, new_cell), grads, inputs, (ones, ones))
        # Every layout's gradients come back on the inputs' device.
        for grad in grads:
            assert grad.device == new_h.device and grad.dtype == dtype
    # The fused ops on unaligned and strided gates / states.
    gates = torch.randn(6, 48, device=device).to(dtype)
    cell = torch.randn(6, 16, device=device).to(dtype)
    expected = torch.ops.wheelops.lltm_gates.default(gates, cell)
    for g, c in [(misaligned(gates), misaligned(cell)), (gates.t().contiguous().t(), cell)]:
        for mine, theirs in zip(torch.ops.wheelops.lltm_gates.default(g, c), expected, strict=True):
            assert torch.equal(mine, theirs)
        grads = (misaligned(cell), cell.t().contiguous().t())
        assert all(
            torch.equal(a, b)
            for a, b in zip(
                torch.ops.wheelops.lltm_gates_backward.default(*grads, g, c),
                torch.ops.wheelops.lltm_gates_backward.default(cell, cell, gates, cell),
                strict=True,
            )
        )


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_gradients_stay_on_the_inputs_device_without_running_kernels(layout):
    # Meta tensors run only the fake kernels and the backward formula, so this
    # checks on any machine that no gradient is built on another device.
    inputs = make_inputs(6, 12, 16, torch.float32, "cpu", seed=8)
    if layout == "transposed":
        inputs = tuple(t.t().contiguous().t() if t.dim() == 2 else t for t in inputs)
    leaves = [t.to("meta").requires_grad_() for t in inputs]
    new_h, new_cell = wheelops.lltm(*leaves)
    assert new_h.device.type == new_cell.device.type == "meta"
    grads = torch.autograd.grad((new_h, new_cell), leaves, [torch.ones_like(new_h)] * 2)
    for grad, leaf in zip(grads, leaves, strict=True):
        assert grad.device == leaf.device and grad.shape == leaf.shape


@pytest.mark.parametrize("device", DEVICES)
def test_nan_and_inf_propagate_as_in_eager(device):
    inputs = [t.double() for t in make_inputs(2, 3, 4, torch.float64, device, seed=6)]
    input, old_cell = inputs[0], inputs[4]
    input[0, 0] = math.nan
    old_cell[1, 1] = math.inf
    old_cell[1, 2] = -math.inf
    for mine, theirs in zip(wheelops.lltm(*inputs), eager_lltm(*inputs), strict=True):
        torch.testing.assert_close(mine, theirs, equal_nan=True)
    # Saturated gates: sigmoid and tanh reach their limits without NaN.
    gates = torch.tensor([[1e4, -1e4, 1e4], [-1e4, 1e4, -1e4]], device=device)
    cell = torch.zeros(2, 1, device=device)
    new_h, new_cell = torch.ops.wheelops.lltm_gates.default(gates, cell)
    assert new_cell.tolist() == [[1e4], [0.0]] and new_h.tolist() == [[0.0], [0.0]]
    for t in torch.ops.wheelops.lltm_gates_backward.default(cell + 1, cell + 1, gates, cell):
        assert torch.isfinite(t).all()


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for requires_grad in (False, True):
        for batch, state in [(4, 8), (3, 5), (0, 4)]:
            gates = torch.randn(batch, 3 * state, device=device, requires_grad=requires_grad)
            cell = torch.randn(batch, state, device=device, requires_grad=requires_grad)
            torch.library.opcheck(torch.ops.wheelops.lltm_gates.default, (gates, cell))
    gates, cell = torch.randn(5, 24, device=device), torch.randn(5, 8, device=device)
    torch.library.opcheck(
        torch.ops.wheelops.lltm_gates_backward.default,
        (torch.randn_like(cell), torch.randn_like(cell), gates, cell),
    )


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_forward_and_backward(device):
    torch._dynamo.reset()
    module = wheelops.nn.LLTM(12, 16).to(device)

    def step(x, h, c):
        h, c = module(x, (h, c))
        h, c = module(x * 2, (h, c))
        return (h.square() + c).sum()

    compiled = torch.compile(step, fullgraph=True)
    x = torch.randn(5, 12, device=device, requires_grad=True)
    h, c = torch.randn(5, 16, device=device), torch.randn(5, 16, device=device)
    compiled(x, h, c).backward()
    grads = [x.grad.clone(), *(p.grad.clone() for p in module.parameters())]
    x.grad = None
    module.zero_grad()

    def eager_step(x, h, c):
        h, c = eager_lltm(x, module.weights, module.bias, h, c)
        h, c = eager_lltm(x * 2, module.weights, module.bias, h, c)
        return (h.square() + c).sum()

    loss = eager_step(x, h, c)
    loss.backward()
    torch.testing.assert_close(compiled(x, h, c), loss, atol=1e-4, rtol=1e-5)
    expected = [x.grad, *(p.grad for p in module.parameters())]
    for mine, theirs in zip(grads, expected, strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_module_matches_pure_pytorch_lltm(device):
    torch.manual_seed(0)
    module = wheelops.nn.LLTM(20, 30, device=device)
    x = torch.randn(8, 20, device=device)
    h, c = torch.randn(8, 30, device=device), torch.randn(8, 30, device=device)
    new_h, new_cell = module(x, (h, c))
    expected = eager_lltm(x, module.weights, module.bias, h, c)
    torch.testing.assert_close(new_h, expected[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(new_cell, expected[1], atol=1e-5, rtol=1e-5)
    (new_h.sum() + new_cell.sum()).backward()
    grads = [p.grad.clone() for p in module.parameters()]
    module.zero_grad()
    sum(t.sum() for t in eager_lltm(x, module.weights, module.bias, h, c)).backward()
    for mine, theirs in zip(grads, [p.grad for p in module.parameters()], strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-4, rtol=1e-5)


def test_module_parameters_and_init():
    module = wheelops.nn.LLTM(input_features=7, state_size=16, dtype=torch.float64)
    names = [name for name, _ in module.named_parameters()]
    assert names == ["weights", "bias"]
    assert module.weights.shape == (48, 23) and module.bias.shape == (48,)
    assert module.weights.dtype == torch.float64
    for p in module.parameters():
        assert p.abs().max() <= 0.25 and p.abs().max() > 0.1  # uniform(-1/4, 1/4)
    assert "input_features=7, state_size=16" in repr(module)
    with pytest.raises(ValueError, match="'state_size' must be a positive int"):
        wheelops.nn.LLTM(4, 0)
    with pytest.raises(ValueError, match="'input_features' must be a positive int"):
        wheelops.nn.LLTM(2.5, 4)


def _good():
    return list(make_inputs(4, 3, 5, torch.float32, "cpu"))


def _with(index, value):
    args = _good()
    args[index] = value
    return args


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (_with(1, torch.zeros(15, 7)), ValueError, r"'weights' must have shape \[15, 8\]"),
        (_with(1, torch.zeros(16, 8)), ValueError, r"'weights' must have shape \[15, 8\]"),
        (_with(2, torch.zeros(16)), ValueError, r"'bias' must have shape \[15\]"),
        (_with(2, torch.zeros(1, 15)), ValueError, r"'bias' must have shape \[15\]"),
        (_with(3, torch.zeros(3, 5)), ValueError, r"'old_h' must have shape \[4, 5\]"),
        (_with(3, torch.zeros(4, 5, 1)), ValueError, "'old_h' must have shape"),
        (_with(4, torch.zeros(4, 6)), ValueError, r"'old_cell' must have shape \[4, 5\]"),
        (_with(0, torch.zeros(4)), ValueError, "'input' must have shape"),
        (_with(0, torch.zeros(4, 3, dtype=torch.float64)), TypeError, "same dtype"),
        (_with(4, torch.zeros(4, 5, dtype=torch.int32)), TypeError, "'old_cell' has dtype"),
        (_with(1, [[0.0]]), TypeError, "'weights' must be a torch.Tensor"),
    ],
)
def test_bad_input(args, error, message):
    with pytest.raises(error, match=message):
        wheelops.lltm(*args)


def test_native_checks_reject_bad_input_too():
    gates, cell = torch.zeros(4, 15), torch.zeros(4, 5)
    with pytest.raises(RuntimeError, match=r"'gates' must have shape \[batch, 3 \* state_size\]"):
        torch.ops.wheelops.lltm_gates.default(torch.zeros(4, 14), cell)
    with pytest.raises(RuntimeError, match=r"'old_cell' must have shape \[4, 5\]"):
        torch.ops.wheelops.lltm_gates.default(gates, torch.zeros(4, 6))
    with pytest.raises(RuntimeError, match="'gates' and 'old_cell' must have the same dtype"):
        torch.ops.wheelops.lltm_gates.default(gates, cell.double())
    with pytest.raises(RuntimeError, match=r"'grad_h' must have shape \[4, 5\]"):
        torch.ops.wheelops.lltm_gates_backward.default(torch.zeros(3, 5), cell, gates, cell)
    with pytest.raises(RuntimeError, match="'grad_cell' has dtype"):
        torch.ops.wheelops.lltm_gates_backward.default(cell, cell.int(), gates, cell)


@pytest.mark.gpu
def test_mixed_devices_rejected():
    args = _good()
    args[1] = args[1].cuda()
    with pytest.raises(ValueError, match="same device"):
        wheelops.lltm(*args)
    with pytest.raises(RuntimeError, match="same device"):
        torch.ops.wheelops.lltm_gates.default(torch.zeros(4, 15, device="cuda"), torch.zeros(4, 5))
    torch.cuda.synchronize()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_large_batch_on_a_side_stream(dtype):
    inputs = make_inputs(4096, 256, 512, dtype, "cuda", seed=7, requires_grad=True)
    grads = [torch.randn(4096, 512, device="cuda").to(dtype) for _ in range(2)]
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        new_h, new_cell = wheelops.lltm(*inputs)
        ours = torch.autograd.grad((new_h, new_cell), inputs, grads)
    torch.cuda.current_stream().wait_stream(stream)
    assert_lltm_close((new_h, new_cell), ours, inputs, grads)


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


@pytest.fixture(autouse=True)
def _gemms_accumulate_in_float32() -> Iterator[None]:
    with fp32_accumulating_gemms():
        yield
