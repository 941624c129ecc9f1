"""What the elementwise ops' derived per-element bounds share: the check of a result and
its gradients against float64 math on the same inputs, and the check that a bound is
sound and tight (issue 42 item 6, DESIGN.md decision 14). They replaced hand-picked
(atol, rtol) per dtype; each op states its own k and T beside its tests
(tests/test_<op>.py, or tests/_<op>_bounds.py where other tests share it).

Each kernel computes in float32 (float64 for float64) from exact inputs and rounds its
result once to the dtype. A formula of k roundings of unit u whose terms have magnitude T
(the formula with every term taken in absolute value, so that a result that cancels is
bounded by the size of what cancelled) is within k * u * T before that rounding;
_norm_helpers.allowance adds the rounding (and doubles it all for float64, whose reference
rounds as much). An elementwise result has no sum, so its bound does not grow with the
size: a systematic error of 1% (0.1% in float32) fails it wherever T is within a few times
|result|; each op's test of assert_bound_is_sound_and_tight shows it at its largest shape.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from _norm_helpers import allowance, assert_within, compute_unit
from _property_checks import saturate

# Elements per piece of a check: its float64 temporaries are 16 MiB, which glibc's heap
# reuses once the first is freed; a 4096 x 4096 check's were 128 MiB each, every one a
# fresh mmap faulted in page by page (most of a bound test's CPU time).
PIECE = 2**21


def assert_within_roundings(
    actual: torch.Tensor,
    expected: torch.Tensor,
    error: torch.Tensor,
    what: str,
    equal_nan: bool = False,
) -> None:
    """|actual - expected| within one rounding to actual's dtype of a value `error` away
    (allowance); NaN where expected has NaN (equal_nan) or nowhere. Checked in pieces."""
    expected = expected.to(actual.device)
    error = error.to(actual.device).expand_as(expected).reshape(-1)
    actual, expected = actual.reshape(-1), expected.reshape(-1)
    for start in range(0, max(expected.numel(), 1), PIECE):
        piece = slice(start, start + PIECE)
        _check_piece(actual[piece], expected[piece], error[piece], what, equal_nan, start)


def _check_piece(
    actual: torch.Tensor,
    expected: torch.Tensor,
    error: torch.Tensor,
    what: str,
    equal_nan: bool,
    offset: int,
) -> None:
    expected = saturate(expected.double(), actual.dtype)
    actual64 = actual.double()
    nan = expected.isnan()
    if equal_nan:
        assert torch.equal(actual64.isnan(), nan), f"{what}: NaN where the reference differs"
    else:
        assert not nan.any() and not actual64.isnan().any(), f"{what}: NaN"
    # An infinite reference must be met exactly (assert_within: 0 between equal infinities).
    error = torch.where(expected.isfinite(), error.double(), 0.0)
    if nan.any():
        keep = ~nan
        actual64, expected, error = actual64[keep], expected[keep], error[keep]
    allowed = allowance(expected, error, actual.dtype)
    assert_within(actual64, expected, allowed, what, offset)


def compute_error(roundings: object, terms: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """k roundings (a number, or one per element) of the terms' size T in the arithmetic
    the kernels use for dtype (float32, float64 for float64)."""
    return roundings * compute_unit(dtype) * terms.double().abs()  # type: ignore[operator]


def assert_bound_is_sound_and_tight(
    check: Callable[[torch.Tensor], None], expected: torch.Tensor, dtype: torch.dtype
) -> None:
    """DESIGN.md decision 14 for a bound `check` (it raises AssertionError "... off by"):
    the correctly rounded result (expected rounded once to dtype, to nearest even) passes,
    and expected off by 1% either way (0.1% in float32 and float64) fails."""
    check(expected.to(dtype))
    off = 0.001 if dtype in (torch.float32, torch.float64) else 0.01
    for factor in (1 + off, 1 - off):
        with pytest.raises(AssertionError, match="off by"):
            check((expected * factor).to(dtype))
