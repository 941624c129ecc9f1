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
from _property_checks import (
    assert_rejected,
    assert_result_layout,
    elementwise_draws,
    float_dtypes,
    grad_leaf,
)
from _strategies import (
    FLOAT_DTYPES,
    apply_layout,
    layouts,
    shapes,
    special_fractions,
    sprinkle_specials,
)
from hypothesis import given
from hypothesis import strategies as st
from opspecs.add import reference

import wheelops


def assert_add_close(out: torch.Tensor, expected: torch.Tensor, equal_nan: bool = False) -> None:
    # a + b in float32 (float64): one rounding of the sum (k = 1, T = |a + b|), then the dtype's
    error = compute_error(1, expected, out.dtype)
    assert_within_roundings(out, expected, error, "add", equal_nan)


@pytest.mark.parametrize("dtype", DTYPES)
def test_bound_passes_the_correctly_rounded_sum_and_fails_a_systematic_error(dtype):
    # At the largest shape its tests use on the GPU (4096 x 4096 as the benchmark's; an
    # elementwise bound does not grow with the size).
    a, b = randn((4096, 4096), dtype, "cpu", 1), randn((4096, 4096), dtype, "cpu", 2)
    expected = reference(a, b)
    assert_add_close(wheelops.add(a, b), expected)
    assert_bound_is_sound_and_tight(lambda got: assert_add_close(got, expected), expected, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_float64(shape, dtype, device):
    a, b = randn(shape, dtype, device, 1), randn(shape, dtype, device, 2)
    out = wheelops.add(a, b)
    assert out.shape == a.shape and out.dtype == dtype and out.device == a.device
    assert out.is_contiguous()
    assert_add_close(out, reference(a, b))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_non_contiguous_inputs(dtype, device):
    a, b = randn((37, 24), dtype, device, 1), randn((37, 24), dtype, device, 2)
    expected = reference(a, b)
    for view in strided_variants(a).values():
        assert_add_close(wheelops.add(view, b), expected)
        assert_add_close(wheelops.add(b, view), expected)
    row = randn((24,), dtype, device, 3)
    assert_add_close(wheelops.add(row.expand(37, 24), b), reference(row, b))


@pytest.mark.parametrize("device", DEVICES)
def test_nan_and_inf_propagate(device):
    a = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0], device=device)
    b = torch.tensor([1.0, 1.0, 1.0, float("inf")], device=device)
    torch.testing.assert_close(wheelops.add(a, b), a + b, equal_nan=True)


def test_gradcheck_float64():
    a = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(wheelops.add, (a, b))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for requires_grad in (False, True):
        a = torch.randn(3, 17, device=device, requires_grad=requires_grad)
        b = torch.randn(3, 17, device=device, requires_grad=requires_grad)
        torch.library.opcheck(torch.ops.wheelops.add.default, (a, b))
    half = torch.randn(64, dtype=torch.float16, device=device)
    torch.library.opcheck(torch.ops.wheelops.add.default, (half, half))


@pytest.mark.gpu
def test_mixed_devices_rejected():
    with pytest.raises(ValueError, match=r"same device .*cuda:0 and cpu"):
        wheelops.add(torch.ones(3, device="cuda"), torch.ones(3))
    with pytest.raises(RuntimeError, match="same device"):
        torch.ops.wheelops.add.default(torch.ones(3, device="cuda"), torch.ones(3))
    torch.cuda.synchronize()  # no CUDA error left behind


@pytest.mark.gpu
@pytest.mark.huge
@pytest.mark.parametrize(
    ("n", "offset"),
    [(2**31 + 1027, 0), (2**30 - 3, 0), (2**30, 1)],
    ids=["int64-indexed", "largest-32-bit-vectors-and-tail", "largest-32-bit-unaligned"],
)
def test_more_than_2_pow_31_elements(n: int, offset: int):
    """Past int32 indexing (not a multiple of the vector width), and the elementwise
    kernel's largest 32-bit-indexed launches (up to 2**30 elements, vectorized.cuh):
    vectorized with a scalar tail, and unaligned (a view at element 1: the scalar kernel)."""
    a = torch.ones(n + offset, dtype=torch.bfloat16, device="cuda")[offset:]
    a[-5:] = torch.arange(5, dtype=torch.bfloat16, device="cuda")
    b = torch.full((n + offset,), 2.0, dtype=torch.bfloat16, device="cuda")[offset:]
    out = wheelops.add(a, b)
    torch.cuda.synchronize()
    assert torch.equal(out[: n - 5], torch.full_like(out[: n - 5], 3.0))
    assert out[-5:].tolist() == [2.0, 3.0, 4.0, 5.0, 6.0]


# ---------------------------------------------------------------------------
# Properties (hypothesis; the profile in tests/conftest.py sets how many examples)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_property_add(device: str, data: st.DataObject) -> None:
    draw = data.draw
    dtype, shape, seed, scale = elementwise_draws(draw, device)
    fraction = draw(special_fractions)
    a = sprinkle_specials(randn(shape, dtype, device, seed, scale), seed, fraction)
    b = sprinkle_specials(randn(shape, dtype, device, seed + 1, scale), seed + 1, fraction)
    a = grad_leaf(apply_layout(a, draw(layouts(shape), label="a layout")))
    b = grad_leaf(apply_layout(b, draw(layouts(shape), label="b layout")))
    _example_log.record("add", device)

    out = wheelops.add(a, b)
    assert_result_layout(out, shape, dtype)
    assert_add_close(out, reference(a, b), equal_nan=True)
    grad = randn(shape, dtype, device, seed + 2)
    grad_a, grad_b = torch.autograd.grad(out, (a, b), grad)
    assert torch.equal(grad_a, grad) and torch.equal(grad_b, grad)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_property_add_rejects_bad_arguments(device: str, data: st.DataObject) -> None:
    draw = data.draw
    shape_a = draw(shapes(device, max_rank=3))
    shape_b = draw(shapes(device, max_rank=3).filter(lambda s: s != shape_a))
    dtype = draw(float_dtypes())
    other = draw(st.sampled_from([t for t in FLOAT_DTYPES if t != dtype] + [torch.int32]))
    _example_log.record("add", device)
    a = torch.zeros(shape_a, dtype=dtype, device=device)
    assert_rejected(
        lambda: wheelops.add(a, torch.zeros(shape_b, dtype=dtype, device=device)), "add", "b"
    )
    assert_rejected(lambda: wheelops.add(a, a.to(other)), "add", "b")
