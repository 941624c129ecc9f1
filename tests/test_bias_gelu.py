from __future__ import annotations

import _example_log
import pytest
import torch
import torch.nn.functional as F
from _bias_gelu_bounds import (
    assert_bias_gelu_close,
    assert_bias_gelu_grad_x_close,
    assert_grad_bias_close,
    gelu_term_roundings,
)
from _elementwise_bounds import assert_bound_is_sound_and_tight, assert_within_roundings
from _helpers import (
    DEVICES,
    DTYPES,
    LOW_PRECISION,
    randn,
    strided_variants,
)
from _norm_helpers import (
    LAMBDA,
    UNIT,
    allowance,
    assert_within,
)
from _property_checks import (
    assert_rejected,
    assert_result_layout,
    float_dtypes,
    grad_leaf,
)
from _strategies import (
    apply_layout,
    layouts,
    scales,
    seeds,
    shapes,
    sizes,
)
from hypothesis import given
from hypothesis import strategies as st
from opspecs.bias_gelu import reference, reference_grads
from opspecs.bias_gelu import reference as bias_gelu_reference
from opspecs.bias_gelu import reference_grads as bias_gelu_reference_grads

import wheelops

APPROXIMATIONS = ["none", "tanh"]
SHAPES = [(0, 8), (1, 1), (5, 7), (4, 64), (3, 2, 33), (130, 96), (2, 1031), (9,), (6, 0)]


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_forward_matches_float64(shape, dtype, device, approximate):
    x, bias = randn(shape, dtype, device, 1), randn(shape[-1:], dtype, device, 2)
    out = wheelops.bias_gelu(x, bias, approximate)
    assert out.shape == x.shape and out.dtype == dtype and out.is_contiguous()
    assert_bias_gelu_close(out, reference(x, bias, approximate), x, bias, approximate)


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_bounds_pass_the_correctly_rounded_result_and_fail_a_systematic_error(dtype, approximate):
    # The forward's and grad_x's bounds at the largest shape its tests use on the GPU
    # (4096 x 1024, the side stream's; an elementwise bound does not grow with the size).
    x, bias = randn((4096, 1024), dtype, "cpu", 1), randn((1024,), dtype, "cpu", 2)
    grad = randn((4096, 1024), dtype, "cpu", 3)
    expected = reference(x, bias, approximate)
    assert_bias_gelu_close(wheelops.bias_gelu(x, bias, approximate), expected, x, bias, approximate)
    assert_bound_is_sound_and_tight(
        lambda got: assert_bias_gelu_close(got, expected, x, bias, approximate), expected, dtype
    )
    expected_x = reference_grads(grad, x, bias, approximate)[0]
    grad_x = torch.ops.wheelops.bias_gelu_backward.default(grad, x, bias, approximate)[0]
    assert_bias_gelu_grad_x_close(grad_x, expected_x, grad, x, bias)
    assert_bound_is_sound_and_tight(
        lambda got: assert_bias_gelu_grad_x_close(got, expected_x, grad, x, bias),
        expected_x,
        dtype,
    )


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_fused_backward_matches_float64(shape, dtype, device, approximate):
    x, bias = randn(shape, dtype, device, 1), randn(shape[-1:], dtype, device, 2)
    grad = randn(shape, dtype, device, 3)
    grad_x, grad_bias = torch.ops.wheelops.bias_gelu_backward.default(grad, x, bias, approximate)
    expected_x, expected_bias = reference_grads(grad, x, bias, approximate)
    assert grad_x.dtype == dtype and grad_bias.dtype == dtype and grad_bias.shape == bias.shape
    assert_bias_gelu_grad_x_close(grad_x, expected_x, grad, x, bias)
    assert_grad_bias_close(grad_bias, expected_bias, expected_x, grad, x.double() + bias.double())


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("device", DEVICES)
def test_autograd_matches_float64(device, approximate):
    x = torch.randn(6, 5, 48, device=device, requires_grad=True)
    bias = torch.randn(48, device=device, requires_grad=True)
    grad = torch.randn(6, 5, 48, device=device)
    grad_x, grad_bias = torch.autograd.grad(
        wheelops.bias_gelu(x, bias, approximate), (x, bias), grad
    )
    expected = reference_grads(grad, x.detach(), bias.detach(), approximate)
    u = x.detach().double() + bias.detach().double()
    assert_bias_gelu_grads_close(grad_x, grad_bias, expected, grad, u)


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
def test_gradcheck_float64(approximate):
    x = torch.randn(7, 13, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(13, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: wheelops.bias_gelu(a, b, approximate), (x, bias))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_non_contiguous_inputs(dtype, device):
    x, bias = randn((40, 24), dtype, device, 1), randn((24,), dtype, device, 2)
    expected = reference(x, bias, "tanh")
    expected_x, expected_bias = reference_grads(torch.ones_like(x), x, bias, "tanh")
    for view in strided_variants(x).values():
        assert_bias_gelu_close(wheelops.bias_gelu(view, bias, "tanh"), expected, x, bias, "tanh")
        grad_x, grad_bias = torch.ops.wheelops.bias_gelu_backward.default(
            torch.ones_like(x).t().contiguous().t(), view, bias, "tanh"
        )
        assert_bias_gelu_grad_x_close(grad_x, expected_x, torch.ones_like(x), x, bias)
        u = x.double() + bias.double()
        assert_grad_bias_close(grad_bias, expected_bias, expected_x, torch.ones_like(x), u)
    padded = torch.zeros(25, dtype=dtype, device=device)
    padded[1:] = bias
    assert_bias_gelu_close(wheelops.bias_gelu(x, padded[1:], "tanh"), expected, x, bias, "tanh")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", LOW_PRECISION)
def test_every_finite_16bit_input_within_bound(dtype, device):
    # Every finite value of the dtype, once: the 16-bit CUDA kernels' own erf GELU
    # (csrc/include/wheelops/kernels/gelu_16bit.cuh) over its whole domain, both tails, the
    # cancellation of u < 0 and the subnormals included; the bias adds nothing.
    approximate = "none"
    every = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)
    x = every[torch.isfinite(every)].reshape(1, -1).to(device)
    bias = torch.zeros(x.shape[-1], dtype=dtype, device=device)
    out = wheelops.bias_gelu(x, bias, approximate)
    assert_bias_gelu_close(out, reference(x, bias, approximate), x, bias, approximate)
    grad = torch.ones_like(x)
    grad_x, _ = torch.ops.wheelops.bias_gelu_backward.default(grad, x, bias, approximate)
    expected_x, _ = reference_grads(grad, x, bias, approximate)
    assert_bias_gelu_grad_x_close(grad_x, expected_x, grad, x, bias)


@pytest.mark.parametrize("device", DEVICES)
def test_nan_and_inf_follow_the_formula(device):
    # As eager PyTorch in float64: gelu(nan) = nan, gelu(inf) = inf, and
    # gelu(-inf) = -inf * 0 = nan. (Eager float32 on CPU says nan for +inf, an
    # artifact of its vectorized erf; the formula and float64 say inf.)
    x = torch.tensor([[float("nan"), float("inf"), -float("inf"), 0.5]], device=device)
    bias = torch.zeros(4, device=device)
    for approximate in APPROXIMATIONS:
        torch.testing.assert_close(
            wheelops.bias_gelu(x, bias, approximate).double(),
            F.gelu(x.double(), approximate=approximate),
            equal_nan=True,
        )


@pytest.mark.parametrize("device", DEVICES)
def test_backward_is_deterministic(device):
    x, bias = randn((3000, 96), torch.float32, device, 1), randn((96,), torch.float32, device, 2)
    grad = randn((3000, 96), torch.float32, device, 3)
    first = torch.ops.wheelops.bias_gelu_backward.default(grad, x, bias, "none")
    for _ in range(3):
        again = torch.ops.wheelops.bias_gelu_backward.default(grad, x, bias, "none")
        assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for requires_grad in (False, True):
        for approximate in APPROXIMATIONS:
            x = torch.randn(3, 4, 16, device=device, requires_grad=requires_grad)
            bias = torch.randn(16, device=device, requires_grad=requires_grad)
            torch.library.opcheck(torch.ops.wheelops.bias_gelu.default, (x, bias, approximate))
    x, bias = torch.randn(5, 24, device=device), torch.randn(24, device=device)
    torch.library.opcheck(
        torch.ops.wheelops.bias_gelu_backward.default, (torch.randn_like(x), x, bias, "tanh")
    )


@pytest.mark.gpu
def test_mixed_devices_rejected():
    with pytest.raises(ValueError, match="same device"):
        wheelops.bias_gelu(torch.ones(2, 3, device="cuda"), torch.ones(3))
    with pytest.raises(RuntimeError, match="same device"):
        torch.ops.wheelops.bias_gelu.default(torch.ones(2, 3, device="cuda"), torch.ones(3), "none")
    torch.cuda.synchronize()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", LOW_PRECISION)
def test_large_rows_on_a_side_stream(dtype):
    x, bias = randn((4096, 1024), dtype, "cuda", 1), randn((1024,), dtype, "cuda", 2)
    expected = reference(x, bias, "tanh")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = wheelops.bias_gelu(x, bias, "tanh")
    torch.cuda.current_stream().wait_stream(stream)
    assert_bias_gelu_close(out, expected, x, bias, "tanh")


@pytest.mark.gpu
@pytest.mark.huge
def test_more_than_2_pow_31_elements():
    rows, cols = 2**21 + 3, 1024  # 2**31 + 3072 elements
    x = torch.zeros(rows, cols, dtype=torch.bfloat16, device="cuda")
    x[-1] = 1.0
    bias = torch.zeros(cols, dtype=torch.bfloat16, device="cuda")
    out = wheelops.bias_gelu(x, bias, "tanh")
    grad_x, grad_bias = torch.ops.wheelops.bias_gelu_backward.default(
        torch.ones_like(x), x, bias, "tanh"
    )
    torch.cuda.synchronize()
    assert not out[:-1].any()
    ones = torch.ones(cols, dtype=torch.float64, device="cuda")
    assert_bias_gelu_close(out[-1], F.gelu(ones, approximate="tanh"), ones, bias, "tanh")
    d0 = 0.5  # gelu'(0)
    d1 = reference_grads(torch.ones(1), torch.ones(1), torch.zeros(1), "tanh")[0].item()
    assert torch.all(grad_x[:-1] == d0)
    expected_bias = torch.full((cols,), (rows - 1) * d0 + d1, dtype=torch.float64)
    assert_within(
        grad_bias.double().cpu(), expected_bias, huge_bias_sum_allowed(rows, d1), "grad_bias"
    )


def huge_bias_sum_allowed(rows: int, d1: float) -> torch.Tensor:
    """grad_bias of test_more_than_2_pow_31_elements: a float32 sum of rows - 1 halves and
    d1, its partial sums at most k/2 + d1 (Hoeffding over their roundings: LAMBDA u
    sqrt(sum of squares); the CUDA kernel's chains have smaller partial sums), rounded
    once to bfloat16."""
    partial = torch.arange(1, rows + 1, dtype=torch.float64) / 2 + d1
    error = LAMBDA * UNIT[torch.float32] * float(partial.square().sum().sqrt())
    expected = torch.full((1,), (rows - 1) * 0.5 + d1, dtype=torch.float64)
    return allowance(expected, torch.full_like(expected, error), torch.bfloat16)


def test_huge_bias_sum_bound_passes_the_exact_sum_and_fails_a_systematic_error():
    # Decision 14 at that test's size: the correctly rounded sum passes, 1% off fails.
    rows = 2**21 + 3
    d1 = reference_grads(torch.ones(1), torch.ones(1), torch.zeros(1), "tanh")[0].item()
    expected = torch.full((1,), (rows - 1) * 0.5 + d1, dtype=torch.float64)
    allowed = huge_bias_sum_allowed(rows, d1)
    assert_within(expected.to(torch.bfloat16).double(), expected, allowed, "grad_bias")
    for factor in (1.01, 0.99):
        with pytest.raises(AssertionError, match="off by"):
            assert_within((expected * factor).to(torch.bfloat16).double(), expected, allowed, "")


# ---------------------------------------------------------------------------
# Properties (hypothesis; the profile in tests/conftest.py sets how many examples)


def assert_bias_gelu_grads_close(
    grad_x: torch.Tensor,
    grad_bias: torch.Tensor,
    expected: tuple[torch.Tensor, torch.Tensor],
    grad: torch.Tensor,
    u: torch.Tensor,
) -> None:
    """grad_x within the rounding of gelu' 's terms; grad_bias, the column sum of those
    terms, by test_bias_gelu's bound."""
    expected_x, expected_bias = (e.double() for e in expected)
    error = gelu_term_roundings(grad, u, grad_x.dtype)
    assert_within_roundings(grad_x, expected_x, error, "grad_x")
    assert_grad_bias_close(grad_bias, expected_bias, expected_x, grad, u)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_property_bias_gelu(device: str, data: st.DataObject) -> None:
    draw = data.draw
    dtype, seed, scale = draw(float_dtypes()), draw(seeds), draw(scales)
    shape = draw(shapes(device, min_rank=1, last=sizes(300)))
    approximate = draw(st.sampled_from(["none", "tanh"]))
    x = apply_layout(randn(shape, dtype, device, seed, scale), draw(layouts(shape)))
    bias = randn(shape[-1:], dtype, device, seed + 1, scale)
    bias = apply_layout(bias, draw(layouts(shape[-1:]), label="bias layout"))
    x, bias = grad_leaf(x), grad_leaf(bias)
    _example_log.record("bias_gelu", device)

    out = wheelops.bias_gelu(x, bias, approximate)
    assert_result_layout(out, shape, dtype)
    assert_bias_gelu_close(out, bias_gelu_reference(x, bias, approximate), x, bias, approximate)
    grad = randn(shape, dtype, device, seed + 2)
    grad_x, grad_bias = torch.autograd.grad(out, (x, bias), grad)
    expected = bias_gelu_reference_grads(grad, x, bias, approximate)
    u = x.detach().double() + bias.detach().double()
    assert_bias_gelu_grads_close(grad_x, grad_bias, expected, grad, u)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_property_bias_gelu_rejects_bad_arguments(device: str, data: st.DataObject) -> None:
    draw = data.draw
    shape = draw(shapes(device, min_rank=1, max_rank=3))
    bias_shape = draw(st.lists(sizes(40), max_size=2).map(tuple).filter(lambda s: s != shape[-1:]))
    approximate = draw(st.text(max_size=6).filter(lambda s: s not in ("none", "tanh")))
    _example_log.record("bias_gelu", device)
    x = torch.zeros(shape, device=device)
    bias = torch.zeros(shape[-1:], device=device)
    wrong_bias = torch.zeros(bias_shape, device=device)
    assert_rejected(lambda: wheelops.bias_gelu(x, wrong_bias), "bias_gelu", "bias")
    assert_rejected(lambda: wheelops.bias_gelu(x, bias, approximate), "bias_gelu", "approximate")
