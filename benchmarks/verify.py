"""Is a result the same as eager's? Checked before anything is timed.

Float results pass when every element is within ``atol * rms(expected) + rtol *
|expected|`` (the absolute part scales with the tensor, so that sums such as a
bias gradient and tiny values such as a wide softmax are judged alike) and the
whole tensor's relative error ``||got - expected|| / ||expected||`` is within
``rtol`` (so an all-zero answer to a small-valued op cannot slip through the
absolute part). NaN must be where eager has NaN. Integer results must be equal.
The tolerances allow for eager rounding its intermediates to the input dtype
where wheelops rounds once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

# dtype -> (atol as a fraction of the expected tensor's rms, rtol)
DEFAULT_TOLERANCE: Mapping[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-10, 1e-10),
    torch.float32: (1e-5, 1e-4),
    torch.float16: (1e-3, 4e-3),
    torch.bfloat16: (1e-2, 2e-2),
}


def as_tuple(value: torch.Tensor | Sequence[torch.Tensor | None]) -> tuple[torch.Tensor, ...]:
    if isinstance(value, torch.Tensor):
        return (value,)
    return tuple(v for v in value if v is not None)


def mismatch(
    got: torch.Tensor | Sequence[torch.Tensor],
    expected: torch.Tensor | Sequence[torch.Tensor],
    tolerance: Mapping[torch.dtype, tuple[float, float]] | None = None,
) -> str | None:
    """None when got matches expected; otherwise what differs, in words."""
    got_all, expected_all = as_tuple(got), as_tuple(expected)
    if len(got_all) != len(expected_all):
        return f"{len(got_all)} results where eager has {len(expected_all)}"
    for index, (g, e) in enumerate(zip(got_all, expected_all, strict=True)):
        problem = _tensor_mismatch(g, e, {**DEFAULT_TOLERANCE, **(tolerance or {})})
        if problem is not None:
            prefix = f"result {index}: " if len(got_all) > 1 else ""
            return prefix + problem
    return None


def _tensor_mismatch(
    got: torch.Tensor, expected: torch.Tensor, tolerance: Mapping[torch.dtype, tuple[float, float]]
) -> str | None:
    if got.shape != expected.shape:
        return f"shape {list(got.shape)}, eager {list(expected.shape)}"
    if got.dtype != expected.dtype:
        return f"dtype {got.dtype}, eager {expected.dtype}"
    if got.device != expected.device:
        return f"device {got.device}, eager {expected.device}"
    if not expected.is_floating_point():
        differ = got != expected
        count = int(differ.sum())
        if count == 0:
            return None
        worst = (got.long() - expected.long()).abs().max()
        return f"{count} of {got.numel()} elements differ (by up to {int(worst)})"
    if got.numel() == 0:
        return None
    atol, rtol = tolerance[got.dtype]
    g, e = got.double(), expected.double()
    nan_differs = int((g.isnan() != e.isnan()).sum())
    if nan_differs:
        return f"NaN at {nan_differs} elements where eager differs"
    finite = e.isfinite()
    if not torch.equal(g[~finite], e[~finite]):
        return "an infinity differs from eager's"
    g, e = g[finite], e[finite]
    if e.numel() == 0:
        return None
    error = (g - e).abs()
    scale = float(e.square().mean().sqrt())
    bad = int((error > atol * scale + rtol * e.abs()).sum())
    norm_error = float(error.norm() / e.norm()) if scale > 0 else float(error.norm())
    if bad or norm_error > rtol:
        return (
            f"{bad} of {e.numel()} elements out of tolerance (atol {atol:g} x rms {scale:.3g}, "
            f"rtol {rtol:g}); max abs error {float(error.max()):.3g}, "
            f"relative norm error {norm_error:.3g}"
        )
    return None
