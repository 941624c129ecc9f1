"""Is a result right? Checked before anything is timed.

Each result is compared with eager PyTorch's formula evaluated in float64 on the same
inputs (float inputs converted exactly, integer ones as they are), within a bound derived
from how wheelops computes: in float32 (float64 for float64), each result rounded once to
its dtype. With u the result dtype's unit roundoff, u32 float32's (float64's for float64)
and rms the reference's root mean square:

- per element, |got - ref| <= (1 + r) u |ref| + (1 + u) E + the dtype's subnormal floor,
  where E = (COMPUTE_ROUNDINGS + LAMBDA sqrt(n)) u32 rms + d u rms: a few float32
  roundings, the op's longest float32 sum of n terms (Hoeffding: LAMBDA sqrt(n)
  roundings of its value's size), and roundings of intermediates stored in the dtype, r
  of each value's size and d of the result's rms (``Rule``, from the op's description,
  each value derived there); where a result cancels, the float32 roundings are of its
  terms' size, per element, not of rms (``Rule.terms``);
- in aggregate, against the correctly rounded result fl(ref) (ref rounded once to the dtype,
  to nearest even), whose own signed error is not zero (#42): |sum of sign(ref) (got - ref)
  - sum of sign(ref) (fl(ref) - ref)| <= the float32 part in full plus LAMBDA sqrt(sum
  (2 (1 + r) u |ref| + d u rms)^2) (opspecs/_rounding.py: got's rounding and fl's differ
  by one spacing at most), so a coherent error (every value 1% off) fails where no single
  element shows it.

A reference that is not float64 (an op of integer inputs whose formula gives float32)
rounds as much as wheelops: twice the allowance. NaN must be where the reference has
NaN, infinities equal. Integer results must be equal.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from opspecs._rounding import PIECE, TWO_ROUNDINGS, bias_beyond

# Hoeffding: a sum of independent roundings exceeds LAMBDA standard deviations with
# probability <= 2 exp(-LAMBDA^2 / 2) (2.5e-14): the same as the tests' bounds.
LAMBDA = 8.0
# The float32 roundings of an op's own arithmetic (products, differences, exp/tanh/erf
# within 2-4 ulps, a reciprocal) before its one rounding to the dtype: 16.
COMPUTE_ROUNDINGS = 16
FLOAT_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class Rule:
    """What an op's results carry beyond float32 arithmetic and one rounding: the length
    of its longest float32 sum, and roundings of intermediates stored in the dtype (in
    units of the result's rms, and of each value)."""

    sum_length: int = 1
    dtype_roundings: float = 0.0
    relative_roundings: float = 0.0
    # The size of the float32 terms behind each value, per element, where the result can
    # cancel (a gated product's derivative crosses zero with terms of |g b|): there its rms
    # understates the float32 error. None: the result's rms.
    terms: torch.Tensor | None = None


def unit(dtype: torch.dtype) -> float:
    """The unit roundoff: half the spacing of dtype's values near 1."""
    return torch.finfo(dtype).eps / 2


def compute_unit(dtype: torch.dtype) -> float:
    return unit(torch.float64) if dtype == torch.float64 else unit(torch.float32)


def as_tuple(value: torch.Tensor | Sequence[torch.Tensor | None]) -> tuple[torch.Tensor, ...]:
    if isinstance(value, torch.Tensor):
        return (value,)
    return tuple(v for v in value if v is not None)


def float64_inputs(inputs: Sequence[object]) -> tuple[object, ...]:
    """The inputs for the float64 reference: float tensors converted (exactly), the rest
    as they are."""
    return tuple(
        t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs
    )


def mismatch(
    got: torch.Tensor | Sequence[torch.Tensor],
    eager: torch.Tensor | Sequence[torch.Tensor],
    reference: torch.Tensor | Sequence[torch.Tensor],
    rule: Rule | Sequence[Rule],
) -> str | None:
    """None when got matches: eager's shapes, dtypes and devices, the float64 reference's
    values within the bound (rule: one for all results, or one each); otherwise what
    differs, in words."""
    got_all, eager_all, reference_all = as_tuple(got), as_tuple(eager), as_tuple(reference)
    if len(got_all) != len(eager_all):
        return f"{len(got_all)} results where eager has {len(eager_all)}"
    rules = (rule,) * len(got_all) if isinstance(rule, Rule) else tuple(rule)
    for index, (g, e, r, each) in enumerate(
        zip(got_all, eager_all, reference_all, rules, strict=True)
    ):
        problem = _tensor_mismatch(g, e, r, each)
        if problem is not None:
            prefix = f"result {index}: " if len(got_all) > 1 else ""
            return prefix + problem
    return None


def _tensor_mismatch(
    got: torch.Tensor, eager: torch.Tensor, reference: torch.Tensor, rule: Rule
) -> str | None:
    if got.shape != eager.shape:
        return f"shape {list(got.shape)}, eager {list(eager.shape)}"
    if got.dtype != eager.dtype:
        return f"dtype {got.dtype}, eager {eager.dtype}"
    if got.device != eager.device:
        return f"device {got.device}, eager {eager.device}"
    if not got.is_floating_point():
        differ = got != reference
        count = int(differ.sum())
        if count == 0:
            return None
        worst = (got.long() - reference.long()).abs().max()
        return f"{count} of {got.numel()} elements differ (by up to {int(worst)})"
    if got.numel() == 0:
        return None
    nan_differs, finite, square_sum = 0, 0, 0.0
    for g, r in _pieces(got, reference):
        nan_differs += int((g.isnan() != r.isnan()).sum())
        infinite = r.isinf() | g.isinf()
        if bool(infinite.any()) and not torch.equal(g[infinite], r[infinite]):
            return "an infinity differs from the reference's"
        (r,) = _kept(r.isfinite(), r)
        finite += r.numel()
        square_sum += float(r.square().sum())
    if nan_differs:
        return f"NaN at {nan_differs} elements where the reference differs"
    if finite == 0:
        return None
    rms = math.sqrt(square_sum / finite)
    return _beyond_bound(got, reference, rms, rule, twice=reference.dtype != torch.float64)


def _pieces(*tensors: torch.Tensor) -> Iterator[tuple[torch.Tensor, ...]]:
    """The tensors (got, reference, ...) in float64, PIECE elements at a time (the
    benchmark's largest results have 2**28 elements)."""
    flat = [t.reshape(-1) for t in tensors]
    for start in range(0, flat[0].numel(), PIECE):
        yield tuple(t[start : start + PIECE].double() for t in flat)


def _kept(mask: torch.Tensor, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The tensors' elements where mask holds. Where it holds everywhere (a result with no
    NaN or infinity, nearly always), the tensors themselves: a masked selection copies each
    through nonzero, the costliest operation of a check of large results."""
    if bool(mask.all()):
        return tensors
    return tuple(t[mask] for t in tensors)


def _beyond_bound(
    got: torch.Tensor, reference: torch.Tensor, rms: float, rule: Rule, twice: bool
) -> str | None:
    dtype = got.dtype
    u, u32 = unit(dtype), compute_unit(dtype)
    per_term = (COMPUTE_ROUNDINGS + LAMBDA * math.sqrt(rule.sum_length)) * u32
    stored = rule.dtype_roundings * u * rms
    info = torch.finfo(dtype)
    floor = info.tiny * info.eps / 2
    # Both the reference and wheelops round once where the reference is not float64.
    scale = 2.0 if twice or dtype == torch.float64 else 1.0
    bad, count, worst, proxy, computed = 0, 0, (-math.inf, 0.0, 0.0, 0.0), 0.0, 0.0
    terms = () if rule.terms is None else (rule.terms.to(reference.device),)
    for g, r, *t in _pieces(got, reference, *terms):
        g, r, *t = _kept(r.isfinite(), g, r, *t)
        count += r.numel()
        compute = per_term * (t[0] if t else rms)
        computed += float(compute.sum()) if t else compute * r.numel()
        error = (g - r).abs()
        relative = (1 + rule.relative_roundings) * u * r.abs()
        allowed = scale * (relative + (1 + u) * (compute + stored) + floor)
        beyond = error > allowed
        if beyond.any():
            bad += int(beyond.sum())
            at = int((error - allowed).argmax())
            excess = float(error[at] - allowed[at])
            if excess > worst[0]:
                worst = (excess, float(error[at]), float(allowed[at]), float(r[at]))
        # got's rounding and the correctly rounded result's differ by one spacing at most
        proxy += float((TWO_ROUNDINGS * relative + stored).square().sum())
    if bad:
        return (
            f"{bad} of {count} elements beyond the derived bound; worst off by "
            f"{worst[1]:.3g} where {worst[2]:.3g} is allowed (reference {worst[3]:.6g})"
        )
    limit = scale * ((1 + u) * computed + LAMBDA * math.sqrt(proxy))
    return bias_beyond(got, reference, limit)
