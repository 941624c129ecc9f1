"""wheelops.normalize_volume: uint16 volumes to float32 in [0, 1] by one division."""

from __future__ import annotations

import math

import torch

from wheelops.ops import _checks, _entry

__all__ = ["normalize_volume"]

# Rounding to nearest (ties to even): half the smallest float32 subnormal and
# anything below rounds to 0; the largest float32 plus half its ulp
# (2**128 - 2**103) and anything above rounds to inf. Strictly between, a
# value rounds to a positive finite float32 (the largest one just above it).
_FLOAT32_ROUNDS_TO_ZERO = 2.0**-150
_FLOAT32_ROUNDS_TO_INF = 2.0**128 - 2.0**103


def _check_max_value_type(max_value: object) -> None:
    if isinstance(max_value, bool) or not isinstance(max_value, (int, float)):
        raise TypeError(
            "wheelops.normalize_volume: argument 'max_value' must be a Python int or float, "
            f"got {type(max_value).__name__}"
        )


def _check(vol: object, max_value: object) -> None:
    op = "normalize_volume"
    _checks.tensor_of(
        op, "vol", vol, (torch.uint16,), "torch.uint16",
        "e.g. vol.view(torch.uint16) for raw 16-bit scanner data read as int16",
    )  # fmt: skip
    _check_max_value_type(max_value)
    try:
        value = float(max_value)
    except OverflowError:
        value = math.inf
    # float32(value) must be positive and finite: in plain Python (no tensors),
    # so that this also runs in fake kernels and under torch.compile.
    if not _FLOAT32_ROUNDS_TO_ZERO < value < _FLOAT32_ROUNDS_TO_INF:
        raise ValueError(
            f"wheelops.{op}: argument 'max_value' must be positive and finite in float32, "
            f"got {max_value!r}"
        )


def normalize_volume(vol: torch.Tensor, max_value: float) -> torch.Tensor:
    """Return ``vol / max_value`` as float32, for a uint16 volume, in one pass.

    ``vol`` is ``torch.uint16`` of any shape (typically ``[D, H, W]``) and any
    strides; ``max_value`` is a positive Python int or float, finite once
    rounded to float32. Each element is ``float32(v) / float32(max_value)``:
    one IEEE float32 division (every uint16 is exact in float32), so the
    result is the correctly rounded quotient, bit for bit the same on CPU and
    CUDA (no reciprocal multiply, no fast math). Values above ``max_value``
    give results above 1: nothing is clamped (use ``.clamp_(0, 1)`` if you need
    it). The result is contiguous float32 of ``vol``'s shape. Not
    differentiable (integer input).

    Example::

        >>> vol = torch.tensor([0, 1024, 4095], dtype=torch.int32).to(torch.uint16)
        >>> wheelops.normalize_volume(vol, 4095)
        tensor([0.0000, 0.2501, 1.0000])
    """
    _check_max_value_type(max_value)  # the op's schema would take a bool or a 0-dim tensor
    return _entry.run(
        "normalize_volume",
        lambda: _check(vol, max_value),
        torch.ops.wheelops.normalize_volume.default,
        vol,
        max_value,
    )


def _fake(vol: torch.Tensor, max_value: float) -> torch.Tensor:
    _check(vol, max_value)
    _checks.gpu_supported("normalize_volume", vol)
    return vol.new_empty(vol.shape, dtype=torch.float32)


def register() -> None:
    torch.library.register_fake("wheelops::normalize_volume", _fake)
