"""Property tests (hypothesis) of every op's derivatives beyond the first backward:
forward-mode AD (torch.func.jvp) against eager's JVP in float64, second
derivatives against eager's within derived bounds (or the op's clear refusal), and
gradients at NaN
inputs against eager's, over drawn shapes, memory layouts and values (issue #14).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import opspecs
import pytest
import torch
from _benchmark_rule import assert_within_rule, rules
from _helpers import DEVICES, randn
from _jvp_bounds import assert_tangents_close
from _op_catalog import DERIVATIVE_SAMPLES, outputs
from _softmax_bounds import assert_second_derivative_close
from _strategies import apply_layout, layouts, seeds, shapes, sizes
from hypothesis import given
from hypothesis import strategies as st
from opspecs._spec import OpSpec, Sample

# torch.func.jvp cannot make a dual of an expanded (stride 0) primal: every other layout.
LAYOUTS = ("contiguous", "permuted", "sliced", "offset")


def _draw_inputs(
    data: st.DataObject, spec: OpSpec, sample: Sample, device: str, dtype: torch.dtype
) -> tuple[torch.Tensor, ...]:
    shape = data.draw(shapes(device, min_rank=1, max_rank=3, last=sizes(48, min_size=1)))
    seed = data.draw(seeds, label="seed")
    inputs = spec.inputs(shape, dtype, device, seed, sample=sample)
    return tuple(apply_layout(t, data.draw(layouts(tuple(t.shape), LAYOUTS))) for t in inputs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("spec, sample", DERIVATIVE_SAMPLES)
@given(data=st.data())
def test_jvp_matches_eager_float64(
    spec: OpSpec, sample: Sample, device: str, data: st.DataObject
) -> None:
    dtype = data.draw(st.sampled_from([torch.float64, torch.float32]), label="dtype")
    primals = _draw_inputs(data, spec, sample, device, dtype)
    seed = data.draw(seeds, label="tangent seed")
    tangents = tuple(randn(t.shape, dtype, device, seed + i) for i, t in enumerate(primals))
    _, got = torch.func.jvp(sample.call, primals, tangents)
    _, want = torch.func.jvp(
        sample.eager, tuple(t.double() for t in primals), tuple(t.double() for t in tangents)
    )
    for g, w in zip(outputs(got), outputs(want), strict=True):
        assert g.dtype == dtype and g.shape == w.shape
    # Every op's tangent has a derived bound (tests/_jvp_bounds.py).
    name = spec.sample_name(sample)
    assert_tangents_close(name, sample.arguments(primals), tangents, outputs(got), outputs(want))


# The largest shape the jvp test draws: leading dims <= 64 (shapes()), last <= 48, within
# the GPU's element budget; the CPU draws smaller ones.
LARGEST_JVP_SHAPE = (64, 64, 48)
JVP_CASES = DERIVATIVE_SAMPLES


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("spec, sample", JVP_CASES)
def test_jvp_bound_passes_the_real_tangent_and_fails_a_systematic_error(
    spec: OpSpec, sample: Sample, dtype: torch.dtype
) -> None:
    # Decision 14 at the largest drawn size: the CPU kernel's tangent passes, the float64
    # tangent 1% off either way (0.1% in float32) fails.
    name = spec.sample_name(sample)
    primals = spec.inputs(LARGEST_JVP_SHAPE, dtype, "cpu", 0, sample=sample)
    tangents = tuple(randn(t.shape, dtype, "cpu", 7 + i) for i, t in enumerate(primals))
    _, got = torch.func.jvp(sample.call, primals, tangents)
    _, want = torch.func.jvp(
        sample.eager, tuple(t.double() for t in primals), tuple(t.double() for t in tangents)
    )
    got, want = outputs(got), outputs(want)
    assert_tangents_close(name, primals, tangents, got, want)
    for factor in (1.01, 0.99, *((1.001, 0.999) if dtype == torch.float32 else ())):
        for index in range(len(want)):  # each output's bound, the others right
            wrong = tuple((w * factor if i == index else w).to(dtype) for i, w in enumerate(want))
            with pytest.raises(AssertionError, match="off by"):
                assert_tangents_close(name, primals, tangents, wrong, want)


def _double_backward(
    fn: Callable[..., object], inputs: tuple[torch.Tensor, ...], weights: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """d/d inputs of sum(g * g) over the gradients g of sum(fn(inputs)[0] * weights).

    Zeros where a second derivative vanishes (add's everywhere; relu's), however autograd
    reports it (None, zeros, or a total that needs no grad)."""
    loss = (outputs(fn(*inputs))[0] * weights).sum()
    grads = torch.autograd.grad(loss, inputs, create_graph=True)
    total = sum((g * g).sum() for g in grads)
    if not total.requires_grad:
        return tuple(torch.zeros_like(t) for t in inputs)
    second = torch.autograd.grad(total, inputs, allow_unused=True)
    return tuple(
        torch.zeros_like(t) if s is None else s for s, t in zip(second, inputs, strict=True)
    )


def _assert_second_derivatives_close(
    name: str,
    inputs: tuple[torch.Tensor, ...],
    weights: torch.Tensor,
    actual: tuple[torch.Tensor, ...],
    expected: tuple[torch.Tensor, ...],
) -> None:
    """Each op's second derivatives (float64) against eager's within its derived bound."""
    for a, e in zip(actual, expected, strict=True):
        if name in ("softmax", "softmax_dim0"):
            dim = 0 if name == "softmax_dim0" else -1
            assert_second_derivative_close(a, e, inputs[0].detach(), weights, dim)
        else:
            # add and relu_scale are piecewise linear: their second derivative is zero,
            # computed as zero on both sides (bitwise).
            assert name in ("add", "relu_scale"), f"{name}: no second-derivative bound"
            torch.testing.assert_close(a, e, atol=0, rtol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("spec, sample", DERIVATIVE_SAMPLES)
@given(data=st.data())
def test_second_derivatives_match_eager_or_refuse(
    spec: OpSpec, sample: Sample, device: str, data: st.DataObject
) -> None:
    inputs = tuple(
        t.requires_grad_() for t in _draw_inputs(data, spec, sample, device, torch.float64)
    )
    weights = randn(outputs(sample.eager(*inputs))[0].shape, torch.float64, device, seed=1)
    if not spec.derivatives.second:
        with pytest.raises(
            NotImplementedError, match=f"wheelops.{spec.derivatives.backward_op} does not"
        ):
            _double_backward(sample.call, inputs, weights)
        return
    # softmax's cancels: its bound is of its terms' size (_softmax_bounds).
    _assert_second_derivatives_close(
        spec.sample_name(sample),
        inputs,
        weights,
        _double_backward(sample.call, inputs, weights),
        _double_backward(sample.eager, inputs, weights),
    )


SECOND_DERIVATIVE_CASES = [
    pytest.param(spec, sample, id=spec.sample_name(sample))
    for spec, sample in (p.values for p in DERIVATIVE_SAMPLES)
    if spec.derivatives.second
]


def _second_derivative_long_double(x: torch.Tensor, weights: torch.Tensor, dim: int) -> np.ndarray:
    """softmax's second derivative (as _double_backward takes it) in long double: 64-bit
    significands where float64 has 53, so within 2**-11 of a float64 rounding of it."""
    x_l = np.moveaxis(x.detach().double().numpy().astype(np.longdouble), dim, -1)
    w = np.moveaxis(weights.double().numpy().astype(np.longdouble), dim, -1)
    e = np.exp(x_l - x_l.max(-1, keepdims=True))
    y = e / e.sum(-1, keepdims=True)
    d = w - (w * y).sum(-1, keepdims=True)
    gg = 2 * y * d
    gy = gg * d - w * (gg * y).sum(-1, keepdims=True)
    return np.moveaxis(y * (gy - (gy * y).sum(-1, keepdims=True)), -1, dim)


@pytest.mark.parametrize("spec, sample", SECOND_DERIVATIVE_CASES)
def test_second_derivative_bound_passes_the_correct_result_and_fails_a_systematic_error(
    spec: OpSpec, sample: Sample
) -> None:
    # At the largest drawn shape: wheelops' CPU second derivative and the correctly
    # rounded one (from long double) pass against eager's; 1e-6 off either way fails.
    assert np.finfo(np.longdouble).nmant >= 63, "long double is float64 here: no reference"
    name = spec.sample_name(sample)
    inputs = tuple(
        t.requires_grad_()
        for t in spec.inputs(LARGEST_JVP_SHAPE, torch.float64, "cpu", 0, sample=sample)
    )
    weights = randn(outputs(sample.eager(*inputs))[0].shape, torch.float64, "cpu", seed=1)
    eager = _double_backward(sample.eager, inputs, weights)
    _assert_second_derivatives_close(
        name, inputs, weights, _double_backward(sample.call, inputs, weights), eager
    )
    if name in ("add", "relu_scale"):  # zero: no error can scale it
        assert all(not e.any() for e in eager)
        return
    dim = 0 if name == "softmax_dim0" else -1
    exact = _second_derivative_long_double(inputs[0], weights, dim)
    _assert_second_derivatives_close(
        name, inputs, weights, (torch.from_numpy(exact.astype(np.float64)),), eager
    )
    for factor in ("1.000001", "0.999999"):
        wrong = torch.from_numpy((exact * np.longdouble(factor)).astype(np.float64))
        with pytest.raises(AssertionError, match="off by"):
            _assert_second_derivatives_close(name, inputs, weights, (wrong,), eager)


# The default call of each op whose gradients at NaN inputs are eager's element by element.
NAN_SAMPLES = [
    pytest.param(spec, spec.samples[0], id=spec.name)
    for spec in opspecs.ALL
    if spec.derivatives is not None and spec.derivatives.nan_like_eager
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("spec, sample", NAN_SAMPLES)
@given(data=st.data())
def test_gradients_at_nan_inputs_are_eagers(
    spec: OpSpec, sample: Sample, device: str, data: st.DataObject
) -> None:
    # Where eager's gradient is NaN, so is wheelops'; where eager passes a finite one
    # (relu at NaN, add), wheelops gives the same number.
    inputs = list(_draw_inputs(data, spec, sample, device, torch.float64))
    mask_seed = data.draw(seeds, label="NaN positions")
    generator = torch.Generator().manual_seed(mask_seed)
    hit = torch.rand(tuple(inputs[0].shape), generator=generator) < 0.3
    inputs[0] = torch.where(hit.to(device), torch.nan, inputs[0])
    grad_seed = data.draw(seeds, label="grad seed")

    def forward(fn):
        leaves = [t.detach().clone().requires_grad_() for t in inputs]
        return leaves, outputs(fn(*leaves))[0]

    eager_leaves, eager_out = forward(sample.eager)
    grad = randn(eager_out.shape, torch.float64, device, grad_seed)
    ours_leaves, ours_out = forward(sample.call)
    # NaN where eager's is NaN (verify compares their places), the rest by the benchmark's
    # rules: where a gradient cancels, at the size of its terms (bias_gelu's grad_bias).
    found = rules(spec, tuple(inputs[0].shape), tuple(inputs), device, (grad,))
    each = found if isinstance(found, list) else [found] * len(inputs)
    ours = torch.autograd.grad(ours_out, ours_leaves, grad)
    eager = torch.autograd.grad(eager_out, eager_leaves, grad)
    for g, w, rule in zip(ours, eager, each, strict=True):
        assert_within_rule([g], [w], rule)
