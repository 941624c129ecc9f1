"""The aggregate (bias) checks' one rule, shared by the benchmark (benchmarks/verify.py) and the
tests' bounds (tests/_linear_gelu_bounds.py, tests/_lltm_bounds.py).

A result rounded once to its dtype, even correctly, does not have a signed error of mean
zero: one rounding of a deterministic function of discrete inputs has a mean of its own
(bfloat16 relu(x) * 1.7 of normal inputs, rounded to nearest even: -3e-5 with the sign of
the values, issue #42). So the checks compare a result's sign-weighted error sum with that of
the correctly rounded result (the float64 expected values rounded once to the result's dtype,
round-to-nearest-even), not with zero.

Rule: |sum sign(e) (actual - e) - sum sign(e) (fl(e) - e)| <= the result's own systematic
error in full + LAMBDA sqrt(sum of its roundings' variance proxies), where its final rounding
and fl's are two roundings of (nearly) one value to one grid: their difference is within one
spacing, TWO_ROUNDINGS times one rounding's half-width.
"""

from __future__ import annotations

import torch

# |fl_1(v) - fl_2(v')| for two roundings to one grid of values closer than a rounding: within
# one spacing of the grid, twice one rounding's half-width (its unit roundoff).
TWO_ROUNDINGS = 2.0
# Elements per piece (here and in benchmarks/verify.py): a float64 temporary of 16 MiB,
# whatever the tensor's size. Under glibc's largest mmap threshold (32 MiB), so that a freed
# temporary's memory serves the next: 128 MiB ones were each mapped afresh and faulted in
# page by page: 28 of the 38 CPU seconds of a 2**28-element check.
PIECE = 2**21


def signed_errors(actual: torch.Tensor, expected: torch.Tensor) -> tuple[float, float, int]:
    """(sum of sign(e) (actual - e), sum of sign(e) (fl(e) - e), the number of elements summed)
    over the elements where both errors are finite; e: expected, fl: rounded once to actual's
    dtype (round-to-nearest-even). On expected's device, in pieces (a 2**28-element check
    needs no 2**28-element temporaries)."""
    a, e = actual.reshape(-1), expected.reshape(-1)
    own, rounded, count = 0.0, 0.0, 0
    for start in range(0, e.numel(), PIECE):
        e64 = e[start : start + PIECE].double()
        a64 = a[start : start + PIECE].to(e64.device, torch.float64)
        sign = e64.sign()
        mine = (a64 - e64) * sign
        theirs = (e64.to(actual.dtype).double() - e64) * sign
        finite = mine.isfinite() & theirs.isfinite()
        own += float(mine[finite].sum())
        rounded += float(theirs[finite].sum())
        count += int(finite.sum())
    return own, rounded, count


def bias_beyond(actual: torch.Tensor, expected: torch.Tensor, limit: float) -> str | None:
    """None where actual's signed error sum is within limit of the correctly rounded result's
    (the rule above; limit from the caller's bound), else what is wrong, in words."""
    own, rounded, count = signed_errors(actual, expected)
    if abs(own - rounded) <= limit:
        return None
    count = max(count, 1)
    return (
        f"off by {own / count:.3g} on average with the sign of the expected values where the "
        f"correctly rounded result is off by {rounded / count:.3g}: a bias ({own - rounded:.3g} "
        f"summed beyond it, {limit:.3g} allowed)"
    )
