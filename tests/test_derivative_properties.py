"""Property tests (hypothesis) of every op's derivatives beyond the first backward:
forward-mode AD (torch.func.jvp) against eager's JVP in float64, second
derivatives against eager's (or the op's clear refusal), and gradients at NaN
inputs against eager's, over drawn shapes, memory layouts and values (issue #14).
"""

from __future__ import annotations

import opspecs
import pytest
import torch
from _helpers import DEVICES, randn
from _jvp_bounds import JVP_BOUNDS, assert_jvp_close
from _op_catalog import DERIVATIVE_SAMPLES, outputs
from _strategies import apply_layout, layouts, seeds, shapes, sizes
from hypothesis import given
from hypothesis import strategies as st
from opspecs._spec import OpSpec, Sample

# Every op's tangent has a derived bound (tests/_jvp_bounds.py) but lltm's, whose tangent
# also goes through torch's GEMM: relative to its largest tangent, not derived (issue 42).
LLTM_JVP_TOLERANCE = {torch.float64: 1e-10, torch.float32: 2e-4}


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
    name = spec.sample_name(sample)
    for g, w in zip(outputs(got), outputs(want), strict=True):
        assert g.dtype == dtype and g.shape == w.shape
        if name in JVP_BOUNDS:
            assert_jvp_close(name, sample.arguments(primals), tangents, g, w)
            continue
        # Relative to the largest tangent (no floor: a "+1" let ~1% through on small ones);
        # plus one rounding of the largest input times the largest input tangent: an
        # intermediate rounded to the dtype (bias_gelu's x + b) moves a tangent by the
        # derivative's slope (gelu'') times that, all there is where the tangents are near 0
        # (x + b near gelu''s root); the dtype's subnormal floor where every tangent is 0.
        scale = w.abs().max().item() if w.numel() else 0.0
        rounding = torch.finfo(dtype).eps / 2 * _largest(primals) * _largest(tangents)
        floor = rounding + torch.finfo(dtype).tiny
        atol = LLTM_JVP_TOLERANCE[dtype] * scale + floor
        torch.testing.assert_close(g.double(), w, atol=atol, rtol=0)


# The largest shape the jvp test draws: leading dims <= 64 (shapes()), last <= 48, within
# the GPU's element budget; the CPU draws smaller ones.
LARGEST_JVP_SHAPE = (64, 64, 48)
JVP_CASES = [case for case in DERIVATIVE_SAMPLES if case.id in JVP_BOUNDS]


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
    assert_jvp_close(name, primals, tangents, got, want)
    for factor in (1.01, 0.99, *((1.001, 0.999) if dtype == torch.float32 else ())):
        with pytest.raises(AssertionError, match="off by"):
            assert_jvp_close(name, primals, tangents, (want * factor).to(dtype), want)


def _largest(tensors: tuple[torch.Tensor, ...]) -> float:
    return max((t.abs().max().item() for t in tensors if t.numel()), default=0.0)


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

    def double_backward(fn):
        # Zeros where a second derivative vanishes (add's everywhere; relu's), however
        # autograd reports it (None, zeros, or a total that needs no grad).
        grads = torch.autograd.grad(
            (outputs(fn(*inputs))[0] * weights).sum(), inputs, create_graph=True
        )
        total = sum((g * g).sum() for g in grads)
        if not total.requires_grad:
            return tuple(torch.zeros_like(t) for t in inputs)
        second = torch.autograd.grad(total, inputs, allow_unused=True)
        return tuple(
            torch.zeros_like(t) if s is None else s for s, t in zip(second, inputs, strict=True)
        )

    if not spec.derivatives.second:
        with pytest.raises(
            NotImplementedError, match=f"wheelops.{spec.derivatives.backward_op} does not"
        ):
            double_backward(sample.call)
        return
    for g, w in zip(double_backward(sample.call), double_backward(sample.eager), strict=True):
        torch.testing.assert_close(g, w, atol=1e-10, rtol=1e-8)


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

    def gradients(fn):
        leaves = [t.detach().clone().requires_grad_() for t in inputs]
        out = outputs(fn(*leaves))[0]
        return torch.autograd.grad(out, leaves, randn(out.shape, out.dtype, device, grad_seed))

    for g, w in zip(gradients(sample.call), gradients(sample.eager), strict=True):
        torch.testing.assert_close(g, w, atol=1e-12, rtol=1e-10, equal_nan=True)
