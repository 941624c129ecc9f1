"""Property-based tests (hypothesis) of the ops, forward and backward.

Each test draws a dtype, a shape (empty, single, prime and long sizes, leading
batch dimensions of varying rank), a memory layout per tensor (contiguous,
permuted, sliced with a step, one element off alignment, expanded with stride
0) and the op's scalar arguments at their edges, then compares the op with a
float64 reference computed from the very inputs it received, at the
tolerances the op's own tests use (rgb_to_gray and normalize_volume: bitwise).
Invalid arguments are a property too: a TypeError or ValueError naming the op
and the argument, never a crash or a RuntimeError from native code.

The hypothesis profile (tests/conftest.py) sets the number of examples: "ci"
is small and derandomized, "gpu" (the device suite) runs many more.

An op may keep its property tests in its own test file instead, with the checks
shared from tests/_property_checks.py (as a new op does: DEVELOPING.md).
"""

from __future__ import annotations

import math
from fractions import Fraction

import _example_log
import pytest
import torch
import torch.nn.functional as F
from _bias_gelu_bounds import assert_grad_bias_close, gelu_term_roundings
from _helpers import DEVICES, TOLERANCE, randn
from _lltm_bounds import assert_lltm_close, fp32_accumulating_gemms
from _norm_helpers import (
    assert_close_tol,
    assert_layer_norm_grad_weight_close,
    assert_layer_norm_grad_x_close,
    assert_layer_norm_out_close,
    assert_norm_bias_grad_close,
    assert_rms_norm_grad_weight_close,
    assert_within,
    float64_grads,
    layer_norm_reference,
    rms_norm_reference,
)
from _property_checks import (
    assert_close_to_float64,
    assert_rejected,
    assert_result_layout,
    elementwise_draws,
    float_dtypes,
    grad_leaf,
    saturate,
)
from _strategies import (
    FLOAT_DTYPES,
    apply_layout,
    device_type,
    integer_values,
    layouts,
    not_numbers,
    python_floats,
    python_numbers,
    row_lengths,
    scales,
    seeds,
    shapes,
    sizes,
    special_fractions,
    sprinkle_specials,
)
from hypothesis import given
from hypothesis import strategies as st
from opspecs.bias_gelu import reference as bias_gelu_reference
from opspecs.bias_gelu import reference_grads as bias_gelu_reference_grads
from opspecs.lltm import make_inputs as lltm_inputs
from opspecs.normalize_volume import reference as normalize_volume_reference
from opspecs.rgb_to_gray import reference as rgb_to_gray_reference
from opspecs.softmax import AUTOGRAD_TOLERANCE as SOFTMAX_AUTOGRAD_TOLERANCE

import wheelops
from wheelops.ops.rms_norm import default_eps

# ---------------------------------------------------------------------------
# add


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_add(device: str, data: st.DataObject) -> None:
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
    assert_close_to_float64(out, a.double() + b.double(), equal_nan=True)
    grad = randn(shape, dtype, device, seed + 2)
    grad_a, grad_b = torch.autograd.grad(out, (a, b), grad)
    assert torch.equal(grad_a, grad) and torch.equal(grad_b, grad)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_add_rejects_bad_arguments(device: str, data: st.DataObject) -> None:
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


# ---------------------------------------------------------------------------
# relu_scale


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
def test_relu_scale(device: str, data: st.DataObject) -> None:
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
    assert_close_to_float64(out, torch.relu(x64) * rounded_alpha, equal_nan=True)
    grad = randn(shape, dtype, device, seed + 1)
    (grad_x,) = torch.autograd.grad(out, x, grad)
    # Eager autograd in float64: at NaN the gradient passes, as torch.relu's does.
    x64 = x64.requires_grad_()
    (expected,) = torch.autograd.grad(torch.relu(x64) * rounded_alpha, x64, grad.double())
    assert_close_to_float64(grad_x, expected, equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
@given(alpha=st.one_of(python_numbers(), not_numbers()))
def test_relu_scale_accepts_every_number_or_names_alpha(device: str, alpha: object) -> None:
    x = torch.tensor([-1.0, 0.0, 2.0], device=device)
    _example_log.record("relu_scale", device)
    try:
        value = float(alpha)  # type: ignore[arg-type]
        is_number = isinstance(alpha, (int, float)) and not isinstance(alpha, bool)
    except (TypeError, ValueError, OverflowError):
        is_number = False
    if is_number:
        expected = torch.relu(x.double()) * alpha_in_compute_dtype(value, x.dtype)
        assert_close_to_float64(wheelops.relu_scale(x, alpha), expected, equal_nan=True)
    else:
        assert_rejected(lambda: wheelops.relu_scale(x, alpha), "relu_scale", "alpha")


# ---------------------------------------------------------------------------
# bias_gelu


def assert_bias_gelu_grads_close(
    grad_x: torch.Tensor,
    grad_bias: torch.Tensor,
    expected: tuple[torch.Tensor, torch.Tensor],
    grad: torch.Tensor,
    u: torch.Tensor,
) -> None:
    """grad_x at the dtype's tolerance plus the terms' rounding; grad_bias, the column
    sum of those terms, by test_bias_gelu's bound."""
    atol, rtol = TOLERANCE[grad_x.dtype]
    slack = gelu_term_roundings(grad, u, grad_x.dtype)
    expected_x, expected_bias = (e.double() for e in expected)
    assert_within(grad_x, expected_x, atol + rtol * expected_x.abs() + slack, "grad_x")
    assert_grad_bias_close(grad_bias, expected_bias, expected_x, grad, u)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_bias_gelu(device: str, data: st.DataObject) -> None:
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
    assert_close_to_float64(out, bias_gelu_reference(x, bias, approximate))
    grad = randn(shape, dtype, device, seed + 2)
    grad_x, grad_bias = torch.autograd.grad(out, (x, bias), grad)
    expected = bias_gelu_reference_grads(grad, x, bias, approximate)
    u = x.detach().double() + bias.detach().double()
    assert_bias_gelu_grads_close(grad_x, grad_bias, expected, grad, u)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_bias_gelu_rejects_bad_arguments(device: str, data: st.DataObject) -> None:
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


# ---------------------------------------------------------------------------
# layer_norm and rms_norm


def norm_eps(smallest: float) -> st.SearchStrategy[float]:
    """eps from `smallest` to large: edges, then anything in between."""
    edges = [1e-30, 1e-12, 1e-6, 1e-5, 1e-3, 1.0, 1e3, 1e10, 1e30]
    return st.one_of(
        st.sampled_from([e for e in edges if e >= smallest]), st.floats(smallest, 1e30)
    )


# rms_norm: down to 1e-30, where an all-zero row's rstd (eps**-0.5) is still
# finite in the float32 statistics saved for the backward. layer_norm: down to
# 1e-12, since on a constant row (an expanded last dim, or low precision
# rounding values together) its gradient is rstd * (g - mean(g) - xhat * ...)
# with xhat = (x - mean) * rstd, which the float64 reference itself gets wrong
# once float64 rounding of x - mean times rstd = eps**-0.5 is not negligible
# (1e-16 * 1e15 at eps = 1e-30: off by 1e-3 relative, found by this test).
RMS_NORM_EPS = norm_eps(1e-30)
LAYER_NORM_EPS = norm_eps(1e-12)
# Values around a large mean (shift) stress the cancellation in x - mean.
norm_shifts = st.sampled_from([0.0, 0.0, 0.5, 100.0])


def norm_inputs(
    draw: st.DrawFn, device: str
) -> tuple[torch.dtype, int, torch.Tensor, torch.Tensor | None]:
    """dtype, seed, x and an optional weight: what both norms draw first."""
    dtype, seed = draw(float_dtypes()), draw(seeds)
    shape = draw(shapes(device, min_rank=1, max_rank=4, last=row_lengths(device)))
    x = randn(shape, dtype, device, seed, draw(scales), draw(norm_shifts))
    x = grad_leaf(apply_layout(x, draw(layouts(shape), label="x layout")))
    weight = optional_param(draw, "weight", shape[-1], dtype, device, seed + 1)
    return dtype, seed, x, weight


def optional_param(
    draw: st.DrawFn, name: str, cols: int, dtype: torch.dtype, device: str, seed: int
) -> torch.Tensor | None:
    """None, or a [cols] parameter in any layout, requiring grad or not."""
    if not draw(st.booleans(), label=f"with {name}"):
        return None
    p = randn((cols,), dtype, device, seed, scale=0.5, shift=1.0)
    p = apply_layout(p, draw(layouts((cols,)), label=f"{name} layout")).detach()
    return p.requires_grad_(draw(st.booleans(), label=f"{name} requires grad"))


def norm_gradients(
    out: torch.Tensor, inputs: list[torch.Tensor | None], grad: torch.Tensor
) -> list[torch.Tensor | None]:
    """Gradients of the inputs that require one (None for the others)."""
    wanted = [t for t in inputs if t is not None and t.requires_grad]
    grads = iter(torch.autograd.grad(out, wanted, grad))
    return [next(grads) if t is not None and t.requires_grad else None for t in inputs]


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_layer_norm(device: str, data: st.DataObject) -> None:
    draw = data.draw
    dtype, seed, x, weight = norm_inputs(draw, device)
    cols = x.shape[-1]
    bias = optional_param(draw, "bias", cols, dtype, device, seed + 2)
    eps = draw(LAYER_NORM_EPS, label="eps")
    x.requires_grad_(draw(st.booleans(), label="x requires grad"))
    _example_log.record("layer_norm", device)

    out = wheelops.layer_norm(x, weight, bias, eps)
    assert_result_layout(out, tuple(x.shape), dtype)
    expected = saturate(layer_norm_reference(x.detach(), weight, bias, eps).detach(), dtype)
    assert_layer_norm_out_close(out, expected, x.detach(), weight, eps)
    if not out.requires_grad:
        return
    grad = randn(tuple(x.shape), dtype, device, seed + 3)
    mine = norm_gradients(out, [x, weight, bias], grad)
    reference = float64_grads(
        lambda a, w, b: F.layer_norm(a, (cols,), w, b, eps), grad, x, weight, bias
    )
    # A constant row has rstd = eps**-0.5: its gradients may overflow float16.
    reference = [None if r is None else saturate(r, dtype) for r in reference]
    if mine[0] is not None and x.numel() == 0:
        assert mine[0].shape == x.shape  # (the bound's helper reduces over rows)
    elif mine[0] is not None:
        assert_layer_norm_grad_x_close(mine[0], reference[0], x.detach(), weight, grad, eps, 4.0)
    if mine[1] is not None:
        assert_layer_norm_grad_weight_close(mine[1], reference[1], x.detach(), grad, eps)
    if mine[2] is not None:
        assert_norm_bias_grad_close(mine[2], reference[2], grad)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_rms_norm(device: str, data: st.DataObject) -> None:
    draw = data.draw
    dtype, seed, x, weight = norm_inputs(draw, device)
    cols = x.shape[-1]
    eps = draw(st.one_of(st.none(), RMS_NORM_EPS), label="eps")
    x.requires_grad_(draw(st.booleans(), label="x requires grad"))
    _example_log.record("rms_norm", device)

    out = wheelops.rms_norm(x, weight, eps)
    assert_result_layout(out, tuple(x.shape), dtype)
    ref_eps = default_eps(dtype) if eps is None else eps
    assert_close_tol(out, rms_norm_reference(x.detach(), weight, ref_eps))
    if not out.requires_grad:
        return
    grad = randn(tuple(x.shape), dtype, device, seed + 3)
    mine = norm_gradients(out, [x, weight], grad)
    reference = float64_grads(lambda a, w: F.rms_norm(a, (cols,), w, ref_eps), grad, x, weight)
    if mine[0] is not None:
        assert_close_tol(mine[0], reference[0], scale=4.0)
    if mine[1] is not None:
        assert_rms_norm_grad_weight_close(mine[1], reference[1], x.detach(), grad, ref_eps)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@given(data=st.data())
def test_norms_reject_bad_arguments(device: str, op: str, data: st.DataObject) -> None:
    draw = data.draw
    norm = getattr(wheelops, op)
    shape = draw(shapes(device, min_rank=1, max_rank=3))
    bad_eps = draw(
        st.one_of(
            # None is rms_norm's default (the compute dtype's epsilon), not an error.
            not_numbers().filter(lambda v: not (v is None and op == "rms_norm")),
            st.floats(max_value=-1e-300),
            st.just(math.nan),
            st.integers(max_value=-1),
            st.sampled_from([10**309, 10**400]),
        ),
        label="bad eps",
    )
    weight_shape = draw(
        st.lists(sizes(40), max_size=2).map(tuple).filter(lambda s: s != shape[-1:])
    )
    _example_log.record(op, device)
    x = torch.zeros(shape, device=device)
    assert_rejected(lambda: norm(x, None, eps=bad_eps), op, "eps")
    weight = torch.zeros(weight_shape, device=device)
    assert_rejected(lambda: norm(x, weight), op, "weight")


# ---------------------------------------------------------------------------
# softmax


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_softmax(device: str, data: st.DataObject) -> None:
    draw = data.draw
    dtype, seed, scale = draw(float_dtypes()), draw(seeds), draw(scales)
    shape = draw(shapes(device, max_rank=4, last=row_lengths(device)))
    rank = max(len(shape), 1)
    dim = draw(st.integers(-rank, rank - 1), label="dim")
    x = randn(shape, dtype, device, seed, 3 * scale)
    x = sprinkle_specials(x, seed, draw(special_fractions))
    if draw(st.booleans(), label="one slice all -inf") and x.dim() > 0 and x.numel() > 0:
        index = [slice(None)] * x.dim()
        index[draw(st.integers(0, x.dim() - 1))] = 0
        x[tuple(index)] = -math.inf
    x = grad_leaf(apply_layout(x, draw(layouts(shape))))
    _example_log.record("softmax", device)

    out = wheelops.softmax(x, dim)
    assert_result_layout(out, shape, dtype)
    x64 = x.detach().double().requires_grad_()
    expected = torch.softmax(x64, dim)
    assert_close_to_float64(out, expected.detach(), equal_nan=True)
    grad = randn(shape, dtype, device, seed + 1)
    (grad_x,) = torch.autograd.grad(out, x, grad)
    (expected_grad,) = torch.autograd.grad(expected, x64, grad.double())
    assert_close_to_float64(
        grad_x, expected_grad, SOFTMAX_AUTOGRAD_TOLERANCE[dtype], equal_nan=True
    )


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_softmax_rejects_bad_dim(device: str, data: st.DataObject) -> None:
    draw = data.draw
    shape = draw(shapes(device, max_rank=4))
    rank = max(len(shape), 1)
    dim = draw(
        st.one_of(
            st.integers().filter(lambda d: not -rank <= d < rank),
            st.floats(),
            st.booleans(),
            st.none(),
            st.just("0"),
        ),
        label="bad dim",
    )
    _example_log.record("softmax", device)
    x = torch.zeros(shape, device=device)
    assert_rejected(lambda: wheelops.softmax(x, dim), "softmax", "dim")


# ---------------------------------------------------------------------------
# rgb_to_gray

# An image's layouts: every generic one (permuted covers planar NCHW, sliced
# on the last dim covers RGB of RGBX), and the channels of an RGBA image.
RGBA = "rgb_of_rgba"


def image_layout(img: torch.Tensor, kind: str) -> torch.Tensor:
    if kind != RGBA:
        return img
    rgba = torch.full((*img.shape[:-1], 4), 77, dtype=img.dtype, device=img.device)
    rgba[..., :3] = img
    return rgba[..., :3]


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_rgb_to_gray(device: str, data: st.DataObject) -> None:
    draw = data.draw
    batch = draw(st.lists(sizes(6), max_size=1), label="batch")
    height_width = draw(st.tuples(sizes(64), sizes(64)), label="height, width")
    shape = (*batch, *height_width, 3)
    img = integer_values(shape, torch.uint8, 256, device, draw(seeds))
    img = apply_layout(img, draw(layouts(shape)))
    img = image_layout(img, draw(st.sampled_from(["as laid out", RGBA])))
    _example_log.record("rgb_to_gray", device)

    out = wheelops.rgb_to_gray(img)
    assert_result_layout(out, shape[:-1], torch.uint8)
    assert torch.equal(out.cpu(), rgb_to_gray_reference(img.cpu()))


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_rgb_to_gray_rejects_bad_images(device: str, data: st.DataObject) -> None:
    draw = data.draw
    shape = draw(
        st.lists(sizes(5), max_size=5)
        .map(tuple)
        .filter(lambda s: len(s) not in (3, 4) or s[-1] != 3)
    )
    dtype = draw(st.sampled_from([torch.int8, torch.int16, torch.float32, torch.uint16]))
    _example_log.record("rgb_to_gray", device)
    assert_rejected(
        lambda: wheelops.rgb_to_gray(torch.zeros(shape, dtype=torch.uint8, device=device)),
        "rgb_to_gray",
        "img",
    )
    good = torch.zeros(2, 2, 3, dtype=dtype, device=device)
    assert_rejected(lambda: wheelops.rgb_to_gray(good), "rgb_to_gray", "img")


# ---------------------------------------------------------------------------
# normalize_volume

FLOAT32_MAX = torch.finfo(torch.float32).max
# Round to nearest even: 2**-150 (half the smallest subnormal) rounds to 0, and
# 2**128 - 2**103 (FLOAT32_MAX plus half its ulp) to inf; between, a finite float32.
ROUNDS_TO_ZERO = Fraction(2) ** -150
ROUNDS_TO_INF = Fraction(2) ** 128 - Fraction(2) ** 103


def finite_positive_in_float32(max_value: object) -> bool:
    """normalize_volume's contract: float(max_value), rounded to float32, is positive and finite."""
    if isinstance(max_value, bool) or not isinstance(max_value, (int, float)):
        return False
    try:
        value = float(max_value)
    except OverflowError:
        return False
    return math.isfinite(value) and ROUNDS_TO_ZERO < Fraction(value) < ROUNDS_TO_INF


MAX_VALUE_EDGES = [
    1,
    65535,
    4095,
    0.1,
    7.3,
    1e-30,
    2.0**-149,
    math.nextafter(2.0**-150, 1.0),
    FLOAT32_MAX,
    math.nextafter(FLOAT32_MAX, math.inf),
    math.nextafter(float(ROUNDS_TO_INF), 0.0),
    2**127,
    1e38,
]
max_values = st.one_of(
    st.sampled_from(MAX_VALUE_EDGES),
    st.integers(1, 2**20),
    st.floats(2.0**-149, 1e6),
    st.floats(1e6, FLOAT32_MAX),
)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_normalize_volume(device: str, data: st.DataObject) -> None:
    draw = data.draw
    shape = draw(shapes(device, max_rank=4))
    max_value = draw(max_values, label="max_value")
    vol = integer_values(shape, torch.uint16, 65536, device, draw(seeds))
    vol = apply_layout(vol, draw(layouts(shape)))
    _example_log.record("normalize_volume", device)

    out = wheelops.normalize_volume(vol, max_value)
    assert_result_layout(out, shape, torch.float32)
    assert torch.equal(out.cpu(), normalize_volume_reference(vol, max_value))


@pytest.mark.parametrize("device", DEVICES)
@given(
    max_value=st.one_of(
        python_numbers(),
        not_numbers(),
        st.sampled_from(
            [2.0**-150, float(ROUNDS_TO_INF), 2**128, -(2.0**-149), 1e39, 1e-46, *MAX_VALUE_EDGES]
        ),
    )
)
def test_normalize_volume_max_value_contract(device: str, max_value: object) -> None:
    # Every value finite and positive once rounded to float32 is accepted, every
    # other one rejected with an error naming max_value.
    vol = torch.tensor([0, 1, 4095, 65535], dtype=torch.int32).to(torch.uint16).to(device)
    _example_log.record("normalize_volume", device)
    if finite_positive_in_float32(max_value):
        out = wheelops.normalize_volume(vol, max_value)  # type: ignore[arg-type]
        assert torch.equal(out.cpu(), normalize_volume_reference(vol, max_value))
    else:
        assert_rejected(
            lambda: wheelops.normalize_volume(vol, max_value),  # type: ignore[arg-type]
            "normalize_volume",
            "max_value",
        )


# ---------------------------------------------------------------------------
# lltm

LLTM_ARGUMENTS = ("input", "weights", "bias", "old_h", "old_cell")


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_lltm(device: str, data: st.DataObject) -> None:
    draw = data.draw
    dtype, seed = draw(float_dtypes()), draw(seeds)
    limit = 64 if device_type(device) == "cpu" else 512
    batch, features, state = (draw(sizes(limit), label=name) for name in ("B", "F", "S"))
    inputs = lltm_inputs(batch, features, state, dtype, device, seed)
    inputs = tuple(
        grad_leaf(apply_layout(t, draw(layouts(tuple(t.shape)), label=f"{name} layout")))
        for name, t in zip(LLTM_ARGUMENTS, inputs, strict=True)
    )
    use_cell = draw(st.booleans(), label="new_cell used")
    _example_log.record("lltm", device)

    with fp32_accumulating_gemms():  # torch's GEMMs as the bounds assume
        new_h, new_cell = wheelops.lltm(*inputs)
    assert_result_layout(new_h, (batch, state), dtype)
    assert_result_layout(new_cell, (batch, state), dtype)
    generator = torch.Generator().manual_seed(seed + 1)
    grad_h, grad_cell = (
        torch.randn(batch, state, generator=generator).to(dtype).to(device) for _ in range(2)
    )
    if not use_cell:
        grad_cell = torch.zeros_like(grad_cell)  # what autograd feeds an unused output
    outputs, out_grads = (
        ((new_h, new_cell), (grad_h, grad_cell))
        if use_cell
        else (
            (new_h,),
            (grad_h,),
        )
    )
    with fp32_accumulating_gemms():
        mine = torch.autograd.grad(outputs, inputs, out_grads)
    for name, actual, leaf in zip(LLTM_ARGUMENTS, mine, inputs, strict=True):
        assert actual.shape == leaf.shape and actual.dtype == dtype, name
    # Every result within its derived bound (_lltm_bounds.lltm_allowed).
    assert_lltm_close((new_h, new_cell), mine, inputs, (grad_h, grad_cell))


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_lltm_rejects_mismatched_shapes(device: str, data: st.DataObject) -> None:
    draw = data.draw
    batch, features, state = (draw(sizes(8)) for _ in range(3))
    inputs = list(lltm_inputs(batch, features, state, torch.float32, device))
    index = draw(st.integers(0, 4), label="argument")
    good_shape = tuple(inputs[index].shape)
    bad_shape = draw(
        st.lists(sizes(9), min_size=1, max_size=3).map(tuple).filter(lambda s: s != good_shape)
    )
    _example_log.record("lltm", device)
    inputs[index] = torch.zeros(bad_shape, device=device)
    # A wrong 'input' or 'old_h' can also be reported through the arguments
    # whose shapes derive from it (batch, state_size): any of them is named.
    with pytest.raises(ValueError) as info:
        wheelops.lltm(*inputs)
    message = str(info.value)
    assert "wheelops.lltm" in message
    assert any(f"'{name}'" in message for name in LLTM_ARGUMENTS), message
