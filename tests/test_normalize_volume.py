from __future__ import annotations

import math
from fractions import Fraction

import _example_log
import pytest
import torch
from _helpers import DEVICES
from _property_checks import (
    assert_rejected,
    assert_result_layout,
)
from _strategies import (
    apply_layout,
    integer_values,
    layouts,
    not_numbers,
    python_numbers,
    seeds,
    shapes,
)
from hypothesis import given
from hypothesis import strategies as st
from opspecs.normalize_volume import reference
from opspecs.normalize_volume import reference as normalize_volume_reference

import wheelops

ALL_VALUES = torch.arange(65536, dtype=torch.int32).to(torch.uint16)


def random_volume(shape: tuple[int, ...], device: str, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    values = torch.randint(0, 65536, shape, generator=generator, dtype=torch.int32)
    return values.to(torch.uint16).to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "max_value", [65535, 4095, 1, 3, 1000.0, 0.1, 7.3, 1e-30, 1e30, 2**40 + 1, 12345.678]
)
def test_every_value_is_correctly_rounded(max_value, device):
    out = wheelops.normalize_volume(ALL_VALUES.to(device), max_value)
    assert out.dtype == torch.float32 and out.shape == (65536,) and out.is_contiguous()
    assert torch.equal(out.cpu(), reference(ALL_VALUES, max_value))


def test_is_a_true_division_not_a_reciprocal_multiply():
    # For some divisors x * (1 / d) differs from x / d in float32; check we divide.
    out = wheelops.normalize_volume(ALL_VALUES, 4095)
    divided = ALL_VALUES.float() / torch.tensor(4095.0)
    multiplied = ALL_VALUES.float() * (1 / torch.tensor(4095.0))
    assert torch.equal(out, divided)
    assert not torch.equal(out, multiplied)


def test_no_clamping():
    vol = torch.tensor([0, 100, 4095, 4096, 65535], dtype=torch.int32).to(torch.uint16)
    out = wheelops.normalize_volume(vol, 4095)
    assert out[-1] > 16 and out[3] > 1 and out[2] == 1 and out[0] == 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "shape", [(0,), (1,), (7,), (9,), (3, 5), (4, 33), (2, 3, 64), (5, 0, 2), (8, 16, 17)]
)
def test_shapes(shape, device):
    vol = random_volume(shape, device, seed=len(shape))
    out = wheelops.normalize_volume(vol, 65535)
    assert out.shape == shape and out.dtype == torch.float32
    assert torch.equal(out.cpu(), reference(vol, 65535))


def strided_volumes(vol: torch.Tensor) -> dict[str, torch.Tensor]:
    d, h, w = vol.shape
    flat = torch.zeros(vol.numel() + 1, dtype=vol.dtype, device=vol.device)
    flat[1:] = vol.reshape(-1)
    flat8 = torch.zeros(vol.numel() + 8, dtype=vol.dtype, device=vol.device)
    flat8[8:] = vol.reshape(-1)
    padded = torch.zeros(d, h, w + 3, dtype=vol.dtype, device=vol.device)
    padded[..., 1 : w + 1] = vol
    return {
        "offset_by_one": flat[1:].view(d, h, w),  # contiguous, 2 bytes off 16-byte alignment
        "offset_by_eight": flat8[8:].view(d, h, w),  # 16 bytes off: aligned again
        "transposed": vol.transpose(0, 2).contiguous().transpose(0, 2),
        "row_padded": padded[..., 1 : w + 1],
        "every_other_slice": torch.stack([vol, vol], dim=1).reshape(2 * d, h, w)[::2],
    }


@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_and_misaligned_views(device):
    vol = random_volume((5, 6, 19), device, seed=7)
    expected = reference(vol, 4095)
    for name, view in strided_volumes(vol).items():
        assert torch.equal(view.cpu(), vol.cpu()), name
        assert torch.equal(wheelops.normalize_volume(view, 4095).cpu(), expected), name


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for shape in [(4, 5, 6), (17,), (0, 3)]:
        vol = random_volume(shape, device)
        torch.library.opcheck(torch.ops.wheelops.normalize_volume.default, (vol, 4095.0))


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph(device):
    torch._dynamo.reset()
    fn = torch.compile(lambda v: wheelops.normalize_volume(v, 4095) * 2, fullgraph=True)
    vol = random_volume((3, 4, 21), device)
    assert torch.equal(fn(vol).cpu(), reference(vol, 4095) * 2)


def test_native_checks_reject_bad_input_too():
    op = torch.ops.wheelops.normalize_volume.default
    with pytest.raises(RuntimeError, match="'vol' has dtype Short; expected uint16"):
        op(torch.zeros(4, dtype=torch.int16), 1.0)
    for bad in (0.0, -1.0, math.nan, math.inf, 1e39, 1e-46):
        with pytest.raises(RuntimeError, match="'max_value' must be positive and finite"):
            op(ALL_VALUES, bad)


@pytest.mark.gpu
def test_typical_volume_on_gpu():
    vol = random_volume((256, 512, 512), "cuda", seed=5)
    out = wheelops.normalize_volume(vol, 4095)
    assert torch.equal(out.cpu(), reference(vol, 4095))
    del vol, out
    torch.cuda.empty_cache()


@pytest.mark.gpu
def test_side_stream():
    vol = random_volume((33, 64, 65), "cuda", seed=6)
    expected = reference(vol, 1000)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = wheelops.normalize_volume(vol, 1000)
    torch.cuda.current_stream().wait_stream(stream)
    assert torch.equal(out.cpu(), expected)


def exact_quotients_on_device(vol: torch.Tensor, max_value: float) -> torch.Tensor:
    # Same device as vol. A tensor (not a Python scalar) divisor: CUDA divides
    # by a scalar as a multiply by its reciprocal, by a tensor truly. The
    # float64 quotient rounds to the correctly rounded float32 one (as in
    # reference()).
    divisor = torch.tensor(float(max_value), dtype=torch.float32).double().to(vol.device)
    return (vol.to(torch.int32).double() / divisor).float()


@pytest.mark.gpu
@pytest.mark.huge
def test_more_than_2_pow_31_elements():
    # Every voxel is checked. Values follow i % 65521 (a prime): an index off
    # by 2**31 or 2**32 (an int32 wrap) reads a different value. n is not a
    # multiple of any vector or tile width, so the vector body and the scalar
    # tail both run, the body across the int32 boundary.
    n = 2**31 + 2**15 + 8 + 3  # 4 GiB in, 8 GiB out
    step = 2**28
    vol = torch.empty(n, dtype=torch.uint16, device="cuda")
    for start in range(0, n, step):
        index = torch.arange(start, min(start + step, n), dtype=torch.int64, device="cuda")
        vol[start : start + step] = (index % 65521).to(torch.int32).to(torch.uint16)
    del index
    out = wheelops.normalize_volume(vol, 65535)
    for start in range(0, n, step):
        expected = exact_quotients_on_device(vol[start : start + step], 65535)
        assert torch.equal(out[start : start + step], expected), start
    del expected
    # Independently of the device reference: around the boundary and at the end.
    for lo, hi in ((2**31 - 4096, 2**31 + 4096), (n - 4096, n)):
        assert torch.equal(out[lo:hi].cpu(), reference(vol[lo:hi], 65535))
    del vol, out
    torch.cuda.empty_cache()
    # The misaligned (scalar) path over 2**31 elements, too.
    flat = torch.zeros(n + 1, dtype=torch.uint16, device="cuda")
    flat[2**31 : 2**31 + 2] = torch.tensor([1, 2], dtype=torch.int32, device="cuda").to(
        torch.uint16
    )
    flat[-1] = 65535
    out = wheelops.normalize_volume(flat[1:], 65535)
    assert out[-1].item() == 1.0 and int(out.count_nonzero()) == 3
    assert out[2**31 - 1 : 2**31 + 1].tolist() == reference(flat[2**31 : 2**31 + 2], 65535).tolist()
    del flat, out
    torch.cuda.empty_cache()


@pytest.mark.parametrize("device", DEVICES)
def test_regression_max_value_just_above_float32_max_rounds_to_it(device):
    # Found by the property test test_property_normalize_volume (and its max_value
    # contract test): the docstring accepts any max_value that is finite once
    # rounded to float32, but the Python and native checks rejected everything
    # above the largest float32, though up to 2**128 - 2**103 (exclusive) it
    # rounds to that float32, not to inf.
    float32_max = torch.finfo(torch.float32).max
    vol = ALL_VALUES.to(device)
    expected = reference(ALL_VALUES, float32_max)
    for max_value in (
        math.nextafter(float32_max, math.inf),
        math.nextafter(2.0**128 - 2.0**103, 0.0),
        2**128 - 2**103 - 2**76,  # an int, as the docstring allows
    ):
        assert torch.equal(wheelops.normalize_volume(vol, max_value).cpu(), expected)
        native = torch.ops.wheelops.normalize_volume.default(vol, float(max_value))
        assert torch.equal(native.cpu(), expected)
    # Half an ulp above the largest float32 rounds (ties to even) to inf: rejected.
    for max_value in (2.0**128 - 2.0**103, 2**128 - 2**103):
        with pytest.raises(ValueError, match="'max_value' must be positive and finite"):
            wheelops.normalize_volume(vol, max_value)
    with pytest.raises(RuntimeError, match="'max_value' must be positive and finite"):
        torch.ops.wheelops.normalize_volume.default(vol, 2.0**128 - 2.0**103)


# ---------------------------------------------------------------------------
# Properties (hypothesis; the profile in tests/conftest.py sets how many examples)


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
def test_property_normalize_volume(device: str, data: st.DataObject) -> None:
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
def test_property_normalize_volume_max_value_contract(device: str, max_value: object) -> None:
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
