from __future__ import annotations

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
    SHAPES,
    randn,
    strided_variants,
)
from _norm_helpers import subnormal_floor
from _property_checks import (
    assert_rejected,
    assert_result_layout,
    elementwise_draws,
    grad_leaf,
)
from _saved import saved_for_backward
from _strategies import (
    apply_layout,
    layouts,
    not_numbers,
    python_floats,
    python_numbers,
    special_fractions,
    sprinkle_specials,
)
from hypothesis import given
from hypothesis import strategies as st
from opspecs.relu_scale import mask_of, reference

import wheelops

ALPHAS = [0.5, 1.0, -2.0, 0.0, 3.25]


def assert_relu_scale_close(
    out: torch.Tensor, expected: torch.Tensor, what: str = "relu_scale", equal_nan: bool = False
) -> None:
    """relu_scale's result, or its gradient g * alpha where the mask is set: relu(x) *
    fl(alpha), alpha's rounding to float32 (float64) and the product's (k = 2, T = |result|),
    which may round in the subnormals of that arithmetic; then the dtype's rounding."""
    compute = torch.float64 if out.dtype == torch.float64 else torch.float32
    error = compute_error(2, expected, out.dtype) + subnormal_floor(compute)
    assert_within_roundings(out, expected, error, what, equal_nan)


@pytest.mark.parametrize("dtype", DTYPES)
def test_bound_passes_the_correctly_rounded_result_and_fails_a_systematic_error(dtype):
    # At the largest shape its tests use on the GPU (4096 x 4096 as the benchmark's; an
    # elementwise bound does not grow with the size).
    x = randn((4096, 4096), dtype, "cpu", 1)
    expected = reference(x, 1.7)
    assert_relu_scale_close(wheelops.relu_scale(x, 1.7), expected)
    assert_bound_is_sound_and_tight(
        lambda got: assert_relu_scale_close(got, expected), expected, dtype
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_float64(shape, dtype, device):
    x = randn(shape, dtype, device)
    for alpha in ALPHAS:
        out = wheelops.relu_scale(x, alpha)
        assert out.shape == x.shape and out.dtype == dtype and out.is_contiguous()
        assert_relu_scale_close(out, reference(x, alpha))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_non_contiguous_inputs(dtype, device):
    x = randn((33, 40), dtype, device)
    for view in strided_variants(x).values():
        assert_relu_scale_close(wheelops.relu_scale(view, 1.5), reference(x, 1.5))


@pytest.mark.parametrize("device", DEVICES)
def test_nan_propagates_like_torch_relu(device):
    x = torch.tensor([float("nan"), -float("inf"), float("inf"), -1.0, 2.0], device=device)
    torch.testing.assert_close(wheelops.relu_scale(x, 2.0), torch.relu(x) * 2.0, equal_nan=True)


def test_gradcheck_float64():
    x = torch.randn(6, 7, dtype=torch.float64)
    x = (x + 0.1 * x.sign()).requires_grad_()  # keep away from the kink at 0
    for alpha in (0.5, -1.5):
        assert torch.autograd.gradcheck(lambda t, a=alpha: wheelops.relu_scale(t, a), (x,))


@pytest.mark.parametrize("device", DEVICES)
def test_backward_matches_eager(device):
    x = torch.randn(5, 9, device=device, requires_grad=True)
    grad = torch.randn(5, 9, device=device)
    (ours,) = torch.autograd.grad(wheelops.relu_scale(x, 0.75), x, grad)
    (eager,) = torch.autograd.grad(torch.relu(x) * 0.75, x, grad)
    torch.testing.assert_close(ours, eager)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_backward_matches_float64(dtype, device):
    # Odd length (vector body, a partial mask byte at the end), zeros, NaN and infinities
    # among the inputs; the reference is eager autograd in float64 (at NaN the gradient
    # passes, as torch.relu's). The forward with its mask and the backward each take
    # every layout (the offset one runs the kernels' unaligned path).
    x = randn((3, 37), dtype, device, 1)
    x[0, :5] = torch.tensor([0.0, float("nan"), float("inf"), -float("inf"), -0.0])
    grad = randn((3, 37), dtype, device, 2)
    expected = eager_grad(x, grad, 1.25)
    for name, view in strided_variants(x).items():
        out, mask = torch.ops.wheelops.relu_scale_with_mask.default(view, 1.25)
        assert mask.dtype == torch.uint8 and mask.shape == ((x.numel() + 7) // 8,), name
        assert torch.equal(mask, mask_of(x)), name
        torch.testing.assert_close(out, wheelops.relu_scale(x, 1.25), equal_nan=True)
        grad_view = strided_variants(grad)[name]
        got = torch.ops.wheelops.relu_scale_backward.default(grad_view, mask, 1.25)
        assert got.dtype == dtype and got.is_contiguous()
        assert_relu_scale_close(got, expected, "grad_x", equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("numel", [0, 1, 7, 8, 9, 8 * 256 * 4 + 5])
def test_mask_bits_at_every_length(device, numel):
    # Bit j of byte k is element 8k + j; the last byte is partial when numel % 8 != 0 and
    # its unused bits are 0. Lengths around one byte and past one block's items.
    x = torch.randn(numel, device=device)
    out, mask = torch.ops.wheelops.relu_scale_with_mask.default(x, 2.0)
    assert torch.equal(mask, mask_of(x))
    torch.testing.assert_close(out, torch.relu(x) * 2.0)
    if numel % 8:
        assert int(mask[-1]) >> (numel % 8) == 0
    grad = torch.randn(numel, device=device)
    got = torch.ops.wheelops.relu_scale_backward.default(grad, mask, 2.0)
    torch.testing.assert_close(got, torch.where(x > 0, grad * 2.0, torch.zeros_like(grad)))


def test_the_backward_saves_the_mask_not_x():
    # What the graph keeps for the backward: a uint8 mask of numel / 8 bytes.
    x = torch.randn(4, 64, requires_grad=True)
    _, saved = saved_for_backward(lambda: wheelops.relu_scale(x, 0.5))
    assert [(t.dtype, t.numel()) for t in saved] == [(torch.uint8, 32)]


def eager_grad(x: torch.Tensor, grad: torch.Tensor, alpha: float) -> torch.Tensor:
    """d/dx (torch.relu(x) * alpha), by eager autograd in float64."""
    x64 = x.detach().double().requires_grad_()
    (grad_x,) = torch.autograd.grad(reference(x64, alpha), x64, grad.double())
    return grad_x


def test_nan_passes_the_gradient_as_in_torch_relu():
    # Issue #14: the gradient at NaN was 0; eager's is alpha (threshold_backward(g, relu(x), 0)).
    x = torch.tensor([float("nan"), 1.0, -1.0, 0.0], requires_grad=True)
    wheelops.relu_scale(x, 2.0).sum().backward()
    eager = x.detach().clone().requires_grad_()
    (torch.relu(eager) * 2.0).sum().backward()
    assert x.grad.tolist() == eager.grad.tolist() == [2.0, 2.0, 0.0, 0.0]


def test_native_backward_checks():
    with pytest.raises(RuntimeError, match=r"'mask' must have shape \[2\] \(one bit per"):
        torch.ops.wheelops.relu_scale_backward.default(
            torch.ones(9), torch.ones(3, dtype=torch.uint8), 1.0
        )
    with pytest.raises(RuntimeError, match="'mask' has dtype Bool; expected uint8"):
        torch.ops.wheelops.relu_scale_backward.default(
            torch.ones(3), torch.ones(1, dtype=torch.bool), 1.0
        )


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for requires_grad in (False, True):
        x = torch.randn(4, 11, device=device, requires_grad=requires_grad)
        torch.library.opcheck(torch.ops.wheelops.relu_scale.default, (x, 0.5))
        torch.library.opcheck(torch.ops.wheelops.relu_scale_with_mask.default, (x, 0.5))
    x = torch.randn(4, 11, device=device)
    torch.library.opcheck(
        torch.ops.wheelops.relu_scale_backward.default, (torch.randn_like(x), mask_of(x), 0.5)
    )


@pytest.mark.gpu
@pytest.mark.huge
def test_more_than_2_pow_31_elements():
    n = 2**31 + 9
    x = torch.full((n,), -1.0, dtype=torch.float16, device="cuda")
    x[-3:] = torch.tensor([1.0, 2.0, -4.0], dtype=torch.float16, device="cuda")
    out = wheelops.relu_scale(x, 2.0)
    torch.cuda.synchronize()
    assert not out[: n - 3].any()
    assert out[-3:].tolist() == [2.0, 4.0, 0.0]


def test_regression_alpha_int_beyond_float64_names_alpha():
    # Found by test_property_relu_scale_accepts_every_number_or_names_alpha:
    # an int too large for a float escaped as float()'s bare OverflowError
    # ("int too large to convert to float"), naming neither op nor argument.
    x = torch.ones(3)
    for alpha in (10**309, -(10**400)):
        with pytest.raises(ValueError, match="relu_scale: argument 'alpha' must be representable"):
            wheelops.relu_scale(x, alpha)
    # The largest ints that are floats still work.
    huge = int(torch.finfo(torch.float64).max)
    expected = torch.full((3,), float(huge), dtype=torch.float64)
    assert torch.equal(wheelops.relu_scale(x.double(), huge), expected)


# ---------------------------------------------------------------------------
# Properties (hypothesis; the profile in tests/conftest.py sets how many examples)


def alpha_in_compute_dtype(alpha: float, dtype: torch.dtype) -> float:
    """alpha as the kernel multiplies by it: rounded to float32 unless x is float64.

    As in eager ``torch.relu(x) * alpha``, an alpha beyond float32's range is
    inf for float32/float16/bfloat16 x, so relu(x) = 0 times it is NaN.
    """
    compute = torch.float64 if dtype == torch.float64 else torch.float32
    return torch.tensor(float(alpha), dtype=torch.float64).to(compute).item()


# alpha: any Python float (edges included) and ints, but those past float64.
alphas = st.one_of(python_floats(), st.integers(-3, 3), st.integers(-(2**1000), 2**1000))


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_property_relu_scale(device: str, data: st.DataObject) -> None:
    draw = data.draw
    dtype, shape, seed, scale = elementwise_draws(draw, device)
    alpha = draw(alphas, label="alpha")
    x = sprinkle_specials(randn(shape, dtype, device, seed, scale), seed, draw(special_fractions))
    x = grad_leaf(apply_layout(x, draw(layouts(shape))))
    _example_log.record("relu_scale", device)

    out = wheelops.relu_scale(x, alpha)
    assert_result_layout(out, shape, dtype)
    x64 = x.detach().double()
    rounded_alpha = alpha_in_compute_dtype(alpha, dtype)
    assert_relu_scale_close(out, reference(x64, rounded_alpha), equal_nan=True)
    grad = randn(shape, dtype, device, seed + 1)
    (grad_x,) = torch.autograd.grad(out, x, grad)
    # Eager autograd in float64: at NaN the gradient passes, as torch.relu's does.
    x64 = x64.requires_grad_()
    (expected,) = torch.autograd.grad(reference(x64, rounded_alpha), x64, grad.double())
    assert_relu_scale_close(grad_x, expected, "grad_x", equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
@given(alpha=st.one_of(python_numbers(), not_numbers()))
def test_property_relu_scale_accepts_every_number_or_names_alpha(
    device: str, alpha: object
) -> None:
    x = torch.tensor([-1.0, 0.0, 2.0], device=device)
    _example_log.record("relu_scale", device)
    try:
        value = float(alpha)  # type: ignore[arg-type]
        is_number = isinstance(alpha, (int, float)) and not isinstance(alpha, bool)
    except (TypeError, ValueError, OverflowError):
        is_number = False
    if is_number:
        expected = torch.relu(x.double()) * alpha_in_compute_dtype(value, x.dtype)
        assert_relu_scale_close(wheelops.relu_scale(x, alpha), expected, equal_nan=True)
    else:
        assert_rejected(lambda: wheelops.relu_scale(x, alpha), "relu_scale", "alpha")
