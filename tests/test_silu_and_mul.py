from __future__ import annotations

import math

import _example_log
import pytest
import torch
from _elementwise_bounds import (
    assert_bound_is_sound_and_tight,
    assert_within_roundings,
    compute_error,
)
from _helpers import (
    DEVICES,
    DTYPES,
    LOW_PRECISION,
    randn,
    strided_variants,
)
from _norm_helpers import allowance, assert_within, compute_unit, subnormal_floor
from _property_checks import (
    assert_rejected,
    assert_result_layout,
    float_dtypes,
    grad_leaf,
    saturate,
)
from _softmax_bounds import EXP_ULPS
from _strategies import (
    apply_layout,
    layouts,
    scales,
    seeds,
    shapes,
    sizes,
    special_fractions,
    sprinkle_specials,
)
from hypothesis import given
from hypothesis import strategies as st
from opspecs.silu_and_mul import SPEC, eager, reference, reference_grad

import wheelops

# Last dimension 2 * d: d of 1, 7 and 1031 (not a multiple of any vector
# width), 8 and 32 (one or a few vectors per row), 4096; empty and 1-D too.
SHAPES = [(0, 8), (1, 2), (5, 14), (4, 64), (3, 2, 66), (2, 2062), (9, 16), (3, 0), (2,), (7, 8192)]
INF, NAN = float("inf"), float("nan")


# CUDA's __expf (the 16-bit forward): within 2 + floor(1.173 |x|) ulps (CUDA C Programming
# Guide, intrinsic functions), each ulp two roundings.
FAST_EXP_ULPS = (2.0, 1.173)


def assert_silu_and_mul_close(
    out: torch.Tensor, expected: torch.Tensor, x: torch.Tensor, equal_nan: bool = False
) -> None:
    """a / (1 + exp(-a)) * b: exp's ulps, then 1 + e, the quotient and the product, each
    relative to its value (1 + e >= e: no cancellation), k = EXP_ULPS + 3, T = |result|;
    CUDA's 16-bit kernel: __expf's ulps (and a correctly rounded reciprocal). Where exp(-a)
    overflows the arithmetic, all of the result is lost (it is -0); the quotient and the
    product may round in its subnormals. Then the dtype's rounding."""
    a = x.detach().double().chunk(2, dim=-1)[0]
    exp_roundings = torch.full_like(a, float(EXP_ULPS))
    if x.device.type == "cuda" and x.element_size() == 2:
        base, slope = FAST_EXP_ULPS
        exp_roundings = torch.maximum(exp_roundings, 2 * (base + slope * a.abs()).floor())
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    lost = torch.where(-a > math.log(torch.finfo(compute).max), expected.double().abs(), 0.0)
    error = compute_error(exp_roundings + 3, expected, x.dtype) + lost
    error = error + 2 * subnormal_floor(compute)
    assert_within_roundings(out, expected, error, "silu_and_mul", equal_nan)


@pytest.mark.parametrize("dtype", DTYPES)
def test_bound_passes_the_correctly_rounded_result_and_fails_a_systematic_error(dtype):
    # At the largest shape its CPU-checkable tests use (the GPU side stream's 4096 x 2048;
    # an elementwise bound does not grow with the size), inputs at the tests' scale 3.
    x = randn((4096, 2 * 1024), dtype, "cpu", 1, scale=3.0)
    expected = reference(x)
    assert_silu_and_mul_close(wheelops.silu_and_mul(x), expected, x)
    assert_bound_is_sound_and_tight(
        lambda got: assert_silu_and_mul_close(got, expected, x), expected, dtype
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_forward_matches_float64(shape, dtype, device):
    x = randn(shape, dtype, device, 1) * 3
    out = wheelops.silu_and_mul(x)
    assert out.shape == (*shape[:-1], shape[-1] // 2) and out.dtype == dtype
    assert out.is_contiguous()
    assert_silu_and_mul_close(out, reference(x), x)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_backward_op_matches_float64(shape, dtype, device):
    x = randn(shape, dtype, device, 1) * 3
    grad = randn((*shape[:-1], shape[-1] // 2), dtype, device, 2)
    grad_x = torch.ops.wheelops.silu_and_mul_backward.default(grad, x)
    assert grad_x.shape == x.shape and grad_x.dtype == dtype
    assert_grad_x_close(grad_x, grad, x)


@pytest.mark.parametrize("device", DEVICES)
def test_autograd_matches_float64(device):
    x = torch.randn(6, 5, 96, device=device, requires_grad=True)
    grad = torch.randn(6, 5, 48, device=device)
    (ours,) = torch.autograd.grad(wheelops.silu_and_mul(x), x, grad)
    assert_grad_x_close(ours, grad, x.detach())


def test_gradcheck_float64():
    x = torch.randn(7, 26, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(wheelops.silu_and_mul, (x,))


def test_saves_the_input():
    # The backward needs x: changing it in place after the forward must be caught.
    x = torch.randn(4, 8, requires_grad=True)
    y = x * 1.0
    out = wheelops.silu_and_mul(y)
    with torch.no_grad():
        y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_non_contiguous_and_misaligned_inputs(dtype, device):
    x = randn((40, 48), dtype, device, 1)
    grad = randn((40, 24), dtype, device, 2)
    expected = reference(x)
    for view in strided_variants(x).values():
        assert_silu_and_mul_close(wheelops.silu_and_mul(view), expected, x)
        for grad_view in strided_variants(grad).values():
            grad_x = torch.ops.wheelops.silu_and_mul_backward.default(grad_view, view)
            assert_grad_x_close(grad_x, grad, x)


@pytest.mark.parametrize("device", DEVICES)
def test_nan_and_inf_like_pytorch(device):
    # PyTorch's silu(a) = a / (1 + exp(-a)): silu(-inf) = -inf / inf = NaN,
    # silu(inf) = inf; its derivative at +-inf is NaN (0 * inf).
    gate = [-INF, INF, NAN, -1000.0, 1000.0, 0.0, 1.0, 2.0]
    up = [2.0, 2.0, 2.0, 2.0, 2.0, 2.0, INF, NAN]
    x = torch.tensor([gate + up], dtype=torch.float64, device=device)
    grad = torch.ones(1, 8, dtype=torch.float64, device=device)
    torch.testing.assert_close(wheelops.silu_and_mul(x), eager(x), equal_nan=True)
    torch.testing.assert_close(
        torch.ops.wheelops.silu_and_mul_backward.default(grad, x),
        reference_grad(grad, x),
        equal_nan=True,
    )
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x_low = x.to(dtype)
        torch.testing.assert_close(
            wheelops.silu_and_mul(x_low).double(), reference(x_low), equal_nan=True
        )


@pytest.mark.parametrize("device", DEVICES)
def test_deterministic(device):
    x = randn((300, 2 * 520), torch.bfloat16, device, 1)
    grad = randn((300, 520), torch.bfloat16, device, 2)
    first = wheelops.silu_and_mul(x)
    first_grad = torch.ops.wheelops.silu_and_mul_backward.default(grad, x)
    for _ in range(3):
        assert torch.equal(wheelops.silu_and_mul(x), first)
        assert torch.equal(torch.ops.wheelops.silu_and_mul_backward.default(grad, x), first_grad)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for requires_grad in (False, True):
        for shape in ((3, 4, 32), (5, 14)):
            x = torch.randn(shape, device=device, requires_grad=requires_grad)
            torch.library.opcheck(torch.ops.wheelops.silu_and_mul.default, (x,))
    x = torch.randn(5, 48, device=device)
    torch.library.opcheck(
        torch.ops.wheelops.silu_and_mul_backward.default, (torch.randn(5, 24, device=device), x)
    )


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_forward_and_backward(device):
    # The gated half of a SwiGLU MLP, x's gradient given: nothing but wheelops' op (and its
    # backward) in the graph, so compiled and eager run the same kernels on the same
    # inputs, bitwise (issue 42); the Linear layers around it are torch's, and what they
    # and inductor's reductions do to the sums is torch's (test_fused_linear_gelu bounds
    # a GEMM with wheelops in one graph).
    module = wheelops.nn.SiluAndMul()
    x = torch.randn(4, 2 * 24, device=device, requires_grad=True)
    grad = torch.randn(4, 24, device=device)
    torch._dynamo.reset()
    compiled = torch.compile(module, fullgraph=True)
    out = compiled(x)
    (grad_x,) = torch.autograd.grad(out, x, grad)
    eager_out = module(x)
    assert torch.equal(out, eager_out)
    assert torch.equal(grad_x, torch.autograd.grad(eager_out, x, grad)[0])
    assert_silu_and_mul_close(out, reference(x.detach()), x)


def test_module():
    module = wheelops.nn.SiluAndMul()
    assert list(module.parameters()) == []
    x = torch.randn(3, 10)
    torch.testing.assert_close(module(x), eager(x))


@pytest.mark.gpu
def test_mixed_devices_rejected():
    with pytest.raises(RuntimeError, match="'grad' and 'x' must be on the same device"):
        torch.ops.wheelops.silu_and_mul_backward.default(
            torch.ones(2, 2, device="cuda"), torch.ones(2, 4)
        )
    torch.cuda.synchronize()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", LOW_PRECISION)
def test_side_stream(dtype):
    x = randn((4096, 2 * 1024), dtype, "cuda", 1)
    grad = randn((4096, 1024), dtype, "cuda", 2)
    expected = reference(x)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = wheelops.silu_and_mul(x)
        grad_x = torch.ops.wheelops.silu_and_mul_backward.default(grad, x)
    torch.cuda.current_stream().wait_stream(stream)
    assert_silu_and_mul_close(out, expected, x)
    assert_grad_x_close(grad_x, grad, x)


@pytest.mark.gpu
@pytest.mark.parametrize(("rows", "d"), [(1_000_003, 8), (70_001, 100), (2, 2_000_003)])
def test_grid_stride_over_rows_and_columns(rows, d):
    # Far more rows than grid rows, and one row wider than the grid.
    x = randn((rows, 2 * d), torch.float32, "cuda", 1)
    assert_silu_and_mul_close(wheelops.silu_and_mul(x), reference(x), x)
    grad = randn((rows, d), torch.float32, "cuda", 2)
    assert_grad_x_close(torch.ops.wheelops.silu_and_mul_backward.default(grad, x), grad, x)


@pytest.mark.gpu
@pytest.mark.huge
def test_more_than_2_pow_31_elements():
    rows, d = 2**21 + 3, 512  # x has 2**31 + 3072 elements
    x = torch.zeros(rows, 2 * d, dtype=torch.bfloat16, device="cuda")
    last = randn((3, 2 * d), torch.bfloat16, "cuda", 1)
    x[-3:] = last
    x[0] = last[0]
    out = wheelops.silu_and_mul(x)
    torch.cuda.synchronize()
    assert not out[1:-3].any()
    assert_silu_and_mul_close(out[-3:], reference(last), last)
    assert_silu_and_mul_close(out[0], reference(last[0]), last[0])
    del out
    grad = torch.ones(rows, d, dtype=torch.bfloat16, device="cuda")
    grad_x = torch.ops.wheelops.silu_and_mul_backward.default(grad, x)
    torch.cuda.synchronize()
    # silu'(0) * b = 0.5 * 0 and silu(0) = 0 everywhere but the set rows.
    assert not grad_x[1:-3].any()
    assert_grad_x_close(grad_x[-3:], grad[-3:], last)
    del x, grad, grad_x
    torch.cuda.empty_cache()


def test_description_counts_the_bytes_of_both_halves():
    # The input is rows x (2 x hidden): forward reads 2d and writes d, backward reads 2d
    # and the grad d and writes 2d (specs/opspecs/silu_and_mul.py).
    assert SPEC.benchmark is not None
    assert SPEC.benchmark.forward_bytes((8, 16), 2) == 3 * 2 * 128
    assert SPEC.benchmark.backward_bytes is not None
    assert SPEC.benchmark.backward_bytes((8, 16), 2) == 5 * 2 * 128
    (x,) = SPEC.make((5, 33), torch.float32, "cpu", 0)
    assert list(x.shape) == [5, 66]


# ---------------------------------------------------------------------------
# Properties (hypothesis; the profile in tests/conftest.py sets how many examples)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_property_silu_and_mul(device: str, data: st.DataObject) -> None:
    draw = data.draw
    dtype, seed, scale = draw(float_dtypes()), draw(seeds), draw(scales)
    half = draw(sizes(2000), label="d")
    shape = draw(shapes(device, min_rank=1, last=st.just(2 * half)))
    fraction = draw(special_fractions)
    # With infinities among the inputs, keep the finite gates where exp(-a)
    # does not overflow float32 (|a| < 88): inf * silu(-200) is NaN computed in
    # float32 (silu(-200) = -0, as in eager) but -inf in the float64 reference.
    x = randn(shape, dtype, device, seed, 3 * scale if fraction == 0 else min(scale, 3.0))
    x = sprinkle_specials(x, seed, fraction)
    x = grad_leaf(apply_layout(x, draw(layouts(shape))))
    _example_log.record("silu_and_mul", device)

    out = wheelops.silu_and_mul(x)
    assert_result_layout(out, (*shape[:-1], half), dtype)
    assert_silu_and_mul_close(out, reference(x.detach()), x, equal_nan=True)
    grad = randn(tuple(out.shape), dtype, device, seed + 1)
    (grad_x,) = torch.autograd.grad(out, x, grad)
    assert_grad_x_close(grad_x, grad, x.detach())


def assert_grad_x_close(grad_x: torch.Tensor, grad: torch.Tensor, x: torch.Tensor) -> None:
    """grad_x against float64 math on the same inputs: non-finite exactly where it is, and
    within the kernel's error elsewhere. d/da = g b s (1 + a (1 - s)), s = sigmoid(a),
    cancels where it crosses zero (a near -1.28): its float32 evaluation (float64 for
    float64; exp within 2 ulps) is within 16 roundings of |g b| s (1 + |a|), and d/db =
    g a s within 8 of |g a s|; s is 0 where exp(-a) overflows (all of s lost), and each
    of the four products may round in the subnormals; then one rounding to x's dtype."""
    expected = saturate(reference_grad(grad, x), x.dtype)
    actual = grad_x.double().to(expected.device)
    finite = expected.isfinite()
    assert torch.equal(actual.isfinite(), finite), "grad_x: non-finite where float64 is not"
    torch.testing.assert_close(actual[~finite], expected[~finite], equal_nan=True)
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    u = compute_unit(x.dtype)
    g, (a, b) = grad.double(), x.double().chunk(2, dim=-1)
    s = torch.sigmoid(a)
    lost = torch.where(-a > math.log(torch.finfo(compute).max), s, 0.0)
    error = torch.cat(
        [(g * b).abs() * (1 + a.abs()) * (16 * u * s + lost), (g * a).abs() * (8 * u * s + lost)],
        dim=-1,
    ) + 4 * subnormal_floor(compute)
    allowed = allowance(expected, error, x.dtype)
    assert_within(actual[finite], expected[finite], allowed[finite], "grad_x")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_grad_x_bound_fails_a_wrong_gradient(dtype: torch.dtype) -> None:
    # The property test's widest inputs (scale 3 x 30): the kernel's answer passes, the
    # float64 one off by 5% either way or zero does not.
    x = randn((64, 2 * 256), dtype, "cpu", 0, 90.0)
    grad = randn((64, 256), dtype, "cpu", 1)
    leaf = grad_leaf(x)
    (grad_x,) = torch.autograd.grad(wheelops.silu_and_mul(leaf), leaf, grad)
    assert_grad_x_close(grad_x, grad, x)
    expected = reference_grad(grad, x)
    for factor in (1.05, 0.95, 0.0):
        with pytest.raises(AssertionError, match=r"^grad_x off by"):
            assert_grad_x_close((expected * factor).to(dtype), grad, x)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_property_silu_and_mul_rejects_odd_or_no_last_dim(device: str, data: st.DataObject) -> None:
    shape = data.draw(
        st.one_of(
            st.just(()),
            shapes(
                device, min_rank=1, max_rank=3, last=st.integers(0, 99).map(lambda n: 2 * n + 1)
            ),
        )
    )
    _example_log.record("silu_and_mul", device)
    x = torch.zeros(shape, device=device)
    assert_rejected(lambda: wheelops.silu_and_mul(x), "silu_and_mul", "x")
