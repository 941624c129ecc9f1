"""What the property tests (hypothesis) share: the float64 reference saturated as a
result rounded to its dtype must be (the ops' bounds are their own: tests/_elementwise_bounds.py),
the checks of a result's layout and of a refusal, and the draws every elementwise test
starts with. Used by each op's property
tests (in tests/test_<op>.py; the norms' in tests/test_properties.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from _strategies import FLOAT_DTYPES, scales, seeds, shapes
from hypothesis import strategies as st


def saturate(reference: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The float64 reference, with values beyond dtype's range replaced by the
    infinity they round to: an op that rounds its result once to dtype must
    give that infinity, which no tolerance relates to the finite reference."""
    rounded = reference.to(dtype).double()
    overflowed = rounded.isinf() & reference.isfinite()
    return torch.where(overflowed, rounded, reference)


def assert_result_layout(out: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype) -> None:
    assert tuple(out.shape) == shape, (tuple(out.shape), shape)
    assert out.dtype == dtype and out.is_contiguous()


def grad_leaf(t: torch.Tensor) -> torch.Tensor:
    """t as a leaf that requires grad, keeping its strides (a layout under test)."""
    return t.detach().requires_grad_()


def assert_rejected(call: Callable[[], object], op: str, argument: str) -> None:
    """The call raises TypeError or ValueError naming the op and the argument."""
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    message = str(info.value)
    assert f"wheelops.{op}" in message and f"'{argument}'" in message, message


def float_dtypes() -> st.SearchStrategy[torch.dtype]:
    return st.sampled_from(FLOAT_DTYPES)


def elementwise_draws(draw: st.DrawFn, device: str) -> tuple[torch.dtype, tuple, int, float]:
    """dtype, shape, seed and value scale: what every elementwise test draws first."""
    return draw(float_dtypes()), draw(shapes(device)), draw(seeds), draw(scales)
