"""Derived bounds on each op's forward-mode tangent (torch.func.jvp) against eager's float64
JVP (issue 42 item 6, DESIGN.md decision 14).

Each op's tangent is computed by its formula in src/wheelops/ops/<op>.py in float32 (float64
for float64) from exact inputs. A formula of k roundings of unit u whose terms have
magnitude T (the formula with every term taken in absolute value, including the terms of
its factors that cancel) is within k * u * T before its one rounding to the dtype
(_norm_helpers.allowance adds that rounding). Each op below states T and k in one line;
lltm, whose tangent also goes through torch's GEMMs, has its own
(_lltm_bounds.lltm_jvp_errors).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from _lltm_bounds import assert_lltm_jvp_close
from _norm_helpers import allowance, assert_within, compute_unit
from _softmax_bounds import EXP_ULPS

Magnitude = Callable[[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]], torch.Tensor]


def _gelu_slope_terms(z: torch.Tensor, approximate: str) -> torch.Tensor:
    """|Φ(z)| + |z φ(z)| (tanh form: its two terms) + |z|: gelu' as written, whose terms
    cancel near its root, and |z| for z's own rounding times |gelu''| <= 0.8."""
    if approximate == "tanh":
        c = math.sqrt(2 / math.pi)
        t = torch.tanh(c * (z + 0.044715 * z**3))
        second = 0.5 * z * (1 - t * t) * c * (1 + 3 * 0.044715 * z * z)
        return 0.5 * (1 + t.abs()) + second.abs() + z.abs()
    phi = torch.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    return 0.5 * (1 + torch.erf(z / math.sqrt(2))) + (z * phi).abs() + z.abs()


def _add(p, t):
    # one rounding of a + b: nothing before it (k = 0)
    return torch.zeros_like(p[0] + p[1])


def _relu_scale(p, t):
    # grad * alpha with alpha rounded to the compute dtype: one rounding of |alpha dx|
    return 1.7 * t[0].abs()


def _bias_gelu(approximate: str) -> Magnitude:
    # gelu'(x + b) * (dx + db): x + b, dx + db, gelu' (erf/exp/tanh within EXP_ULPS), product
    def magnitude(p, t):
        z = p[0] + p[1]
        return _gelu_slope_terms(z, approximate) * (t[0].abs() + t[1].abs())

    return magnitude


def _silu_and_mul(p, t):
    # silu'(a) b da + silu(a) db, silu' = s (1 + a (1 - s)) cancelling for a < 0
    d = p[0].shape[-1] // 2
    a, b, da, db = p[0][..., :d], p[0][..., d:], t[0][..., :d], t[0][..., d:]
    s = torch.sigmoid(a)
    return s * (1 + a.abs() * (1 - s)) * (b * da).abs() + (a * s * db).abs()


def _softmax(dim: int) -> Magnitude:
    # y (dx - sum(dx y)): y's own n + EXP_ULPS roundings, the dot's n, two more
    def magnitude(p, t):
        y = torch.softmax(p[0], dim)
        return y * (t[0].abs() + (t[0].abs() * y).sum(dim, keepdim=True))

    return magnitude


def _layer_norm(p, t):
    # rstd (dxc - xhat mean(xhat dxc)) w + xhat dw + db; xhat within its n roundings of
    # (|x| + max|x|) rstd (x - mean cancels), which stands for |xhat|
    x, w = p[0], p[1]
    dx, dw, db = (v.abs() for v in t)
    centred = x - x.mean(-1, keepdim=True)
    rstd = centred.square().mean(-1, keepdim=True).add(1e-5).rsqrt()
    xa = (x.abs() + x.abs().amax(-1, keepdim=True)) * rstd
    dxc = dx + dx.mean(-1, keepdim=True)
    return rstd * (dxc + xa * (xa * dxc).mean(-1, keepdim=True)) * w.abs() + xa * dw + db


def _rms_norm(p, t):
    # rstd (dx - x rstd^2 mean(x dx)) w + x rstd dw, rstd within its n roundings
    x, w = p[0], p[1]
    dx, dw = t[0].abs(), t[1].abs()
    rstd = x.square().mean(-1, keepdim=True).add(1e-6).rsqrt()
    xa = x.abs() * rstd
    return rstd * (dx + xa * (xa * dx).mean(-1, keepdim=True)) * w.abs() + xa * dw


def _fused_linear_gelu(approximate: str) -> Magnitude:
    # gelu'(pre) (dx W^T + x dW^T + db), pre = x W^T + b: both GEMMs K roundings, then
    # pre's error K u |x||W|^T times |gelu''| <= 0.8, gelu' and the product
    def magnitude(p, t):
        x, w = p[0].abs(), p[1].abs()
        b = p[2] if len(p) > 2 else None
        pre = torch.nn.functional.linear(p[0], p[1], b)
        size = (x @ w.T) + (b.abs() if b is not None else 0)
        tangent = t[0].abs() @ w.T + x @ t[1].abs().T + (t[2].abs() if len(t) > 2 else 0)
        return (_gelu_slope_terms(pre, approximate) + size) * tangent

    return magnitude


# op (sample suffix) -> (roundings k as a function of the row length n, magnitude T)
JVP_BOUNDS: dict[str, tuple[Callable[[int], int], Magnitude]] = {
    "add": (lambda n: 0, _add),
    "relu_scale": (lambda n: 1, _relu_scale),
    "bias_gelu": (lambda n: 3 + EXP_ULPS + 2, _bias_gelu("none")),
    "bias_gelu_tanh": (lambda n: 3 + EXP_ULPS + 2, _bias_gelu("tanh")),
    "silu_and_mul": (lambda n: 4 + EXP_ULPS + 3, _silu_and_mul),
    "softmax": (lambda n: 2 * n + EXP_ULPS + 4, _softmax(-1)),
    "softmax_dim0": (lambda n: 2 * n + EXP_ULPS + 4, _softmax(0)),
    "layer_norm": (lambda n: 3 * n + 12, _layer_norm),
    "rms_norm": (lambda n: 2 * n + 10, _rms_norm),
    "fused_linear_gelu": (lambda n: n + 4 + EXP_ULPS + 3, _fused_linear_gelu("none")),
    "fused_linear_gelu_tanh_no_bias": (
        lambda n: n + 4 + EXP_ULPS + 3,
        _fused_linear_gelu("tanh"),
    ),
}


def jvp_allowed(
    name: str,
    primals: tuple[torch.Tensor, ...],
    tangents: tuple[torch.Tensor, ...],
    expected: torch.Tensor,
    dtype: torch.dtype,
) -> torch.Tensor:
    """|tangent - expected| allowed for op `name`'s tangent in dtype (JVP_BOUNDS)."""
    roundings, magnitude = JVP_BOUNDS[name]
    p = tuple(v.double() for v in primals)
    t = tuple(v.double() for v in tangents)
    dim = 0 if name == "softmax_dim0" else -1
    n = p[0].shape[dim] if p[0].dim() else 1
    error = roundings(n) * compute_unit(dtype) * magnitude(p, t)
    return allowance(expected, error.expand_as(expected), dtype)


def assert_jvp_close(
    name: str,
    primals: tuple[torch.Tensor, ...],
    tangents: tuple[torch.Tensor, ...],
    actual: torch.Tensor,
    expected: torch.Tensor,
) -> None:
    allowed = jvp_allowed(name, primals, tangents, expected, actual.dtype)
    assert_within(actual.double(), expected, allowed, f"{name} tangent")


def assert_tangents_close(
    name: str,
    primals: tuple[torch.Tensor, ...],
    tangents: tuple[torch.Tensor, ...],
    actual: tuple[torch.Tensor, ...],
    expected: tuple[torch.Tensor, ...],
) -> None:
    """Every output's tangent of op `name` (sample suffix included) within its bound."""
    if name == "lltm":
        assert_lltm_jvp_close(primals, tangents, actual, expected)
        return
    for a, e in zip(actual, expected, strict=True):
        assert_jvp_close(name, primals, tangents, a, e)
