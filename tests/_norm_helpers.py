"""float64 references and tolerances shared by the layer_norm / rms_norm tests."""

from __future__ import annotations

import math

import torch
from _helpers import TOLERANCE

# Row lengths: tiny, odd, not a multiple of any vector width, one warp's worth,
# a block's worth, and past the register-resident limit on GPU.
LENGTHS = [1, 2, 3, 7, 127, 1000, 1031, 4096, 8193]
GPU_LENGTHS = [16384, 32768, 65536, 65537, 100000, 262144]


def layer_norm_reference(x, weight, bias, eps):
    """The formula in float64, from the (already rounded) inputs."""
    x64 = x.double()
    mean = x64.mean(-1, keepdim=True)
    var = (x64 - mean).square().mean(-1, keepdim=True)
    out = (x64 - mean) / torch.sqrt(var + eps)
    if weight is not None:
        out = out * weight.double()
    if bias is not None:
        out = out + bias.double()
    return out


def rms_norm_reference(x, weight, eps):
    x64 = x.double()
    out = x64 / torch.sqrt(x64.square().mean(-1, keepdim=True) + eps)
    return out * weight.double() if weight is not None else out


def float64_grads(fn, grad, *inputs):
    """Gradients of fn at the float64 copies of inputs (None stays None).

    Computed on the CPU and returned on grad's device: the reference must not
    share a backend with what it checks. (torch 2.11's CUDA layer_norm backward
    gave a bias gradient of 0 for 69632 rows of one column, where the CPU and
    wheelops give the sum; see test_layer_norm's regression test.)"""
    leaves = [None if t is None else t.detach().cpu().double().requires_grad_() for t in inputs]
    out = fn(*leaves)
    wanted = [t for t in leaves if t is not None]
    grads = iter(torch.autograd.grad(out, wanted, grad.detach().cpu().double()))
    return [None if t is None else next(grads).to(grad.device) for t in leaves]


def assert_close_tol(actual, expected, scale: float = 1.0):
    """actual (its dtype's tolerance, times scale) against a float64 reference."""
    atol, rtol = TOLERANCE[actual.dtype]
    if actual.dtype == torch.float32:
        atol, rtol = 1e-5, 1e-5  # statistics over long rows in float32
    torch.testing.assert_close(
        actual.double(), expected.double(), atol=atol * scale, rtol=rtol * scale
    )


def assert_column_sum(actual, expected, rows: int):
    """A sum over `rows` rows: allow the accumulated float32 rounding (sqrt(rows))."""
    assert_close_tol(actual, expected, scale=max(1.0, rows**0.5))


def assert_layer_norm_grad_x_close(actual, expected, x, weight, grad, eps, scale: float = 1.0):
    """grad_x of layer_norm against its float64 reference, allowing the kernel's rounding.

    grad_x = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)) is a difference of
    terms that can cancel almost completely, and xhat = (x - mean) * rstd itself
    cancels when a row's values are close together (short rows: with 3 columns
    rstd reaches ~1e3 for randn input). A kernel accumulating in float32 then
    has an absolute error of a few float32 roundings of the *terms*, not of the
    result: u * rstd * (|g*w| + |mean(g*w)| + (|xhat| + rstd * max|x|) * |mean(g*w*xhat)|).
    This is that bound, times 64 (a float32 emulation of the kernel reaches ~20
    on 70001 x 3 randn rows), added to the usual tolerance. The row sums behind
    mean and rstd round more the longer the row (~sqrt(cols) roundings of
    max|x|), and in float64 the reference rounds as much as the kernel: past 64
    columns the factor grows as 8 * sqrt(cols) (a float64 row of 4096 values
    1e-3 apart around 100 reached 3.4 times the fixed 64).
    """
    x64 = x.double()
    g64 = grad.double()
    mean = x64.mean(-1, keepdim=True)
    rstd = 1.0 / torch.sqrt((x64 - mean).square().mean(-1, keepdim=True) + eps)
    xhat = (x64 - mean) * rstd
    gw = g64 * weight.double() if weight is not None else g64
    mean_gw = gw.mean(-1, keepdim=True)
    mean_dot = (gw * xhat).mean(-1, keepdim=True)
    max_x = x64.abs().amax(-1, keepdim=True)
    terms = rstd * (gw.abs() + mean_gw.abs() + (xhat.abs() + rstd * max_x) * mean_dot.abs())
    unit = 2.0**-53 if x.dtype == torch.float64 else 2.0**-24
    atol, rtol = TOLERANCE[actual.dtype]
    if actual.dtype == torch.float32:
        atol, rtol = 1e-5, 1e-5
    diff = _difference(actual, expected)
    roundings = max(64.0, 8.0 * math.sqrt(x.shape[-1]))
    allowed = atol * scale + rtol * scale * expected.double().abs() + roundings * unit * terms
    worst = (diff - allowed).argmax()
    assert bool((diff <= allowed).all()), (
        f"grad_x off by {diff.flatten()[worst].item():.3g} at flat index {worst.item()} "
        f"(allowed {allowed.flatten()[worst].item():.3g})"
    )


def _difference(actual, expected):
    """|actual - expected|, 0 where they are equal (an infinity both overflowed to)."""
    a, e = actual.double(), expected.double()
    return torch.where(a == e, torch.zeros_like(a), (a - e).abs())


def _centering_error(x):
    """Roundings of |x| in x - mean, per unit of max|x|: 64 of the statistics'
    precision (float32, or float64 for float64 x), plus the worst case of a
    float64 sum of the row (cols roundings; the CPU kernels sum in order)."""
    unit = 2.0**-53 if x.dtype == torch.float64 else 2.0**-24
    return 64 * unit + x.shape[-1] * 2.0**-53


def assert_layer_norm_out_close(actual, expected, x, weight, eps, scale: float = 1.0):
    """layer_norm's output against its float64 reference, allowing for cancellation.

    out = (x - mean) * rstd * w: in a kernel whose statistics are float32, x - mean
    carries an absolute error of a few float32 roundings of max|x|, which rstd
    then multiplies. Rows whose values sit close together around a large mean
    (randn * 1e-3 + 100), or constant rows, make that the dominant error; the
    bound (_centering_error) is added to the usual tolerance.
    """
    if actual.numel() == 0:
        assert expected.numel() == 0
        return
    x64 = x.double()
    mean = x64.mean(-1, keepdim=True)
    rstd = 1.0 / torch.sqrt((x64 - mean).square().mean(-1, keepdim=True) + eps)
    max_x = x64.abs().amax(-1, keepdim=True)
    w = weight.double().abs() if weight is not None else 1.0
    atol, rtol = TOLERANCE[actual.dtype]
    if actual.dtype == torch.float32:
        atol, rtol = 1e-5, 1e-5
    diff = _difference(actual, expected)
    slack = _centering_error(x) * rstd * max_x * w
    allowed = atol * scale + rtol * scale * expected.double().abs() + slack
    assert bool((diff <= allowed).all()), (
        f"layer_norm out off by {diff.max().item():.3g} "
        f"(allowed at least {allowed.min().item():.3g})"
    )


def assert_layer_norm_grad_weight_close(actual, expected, x, grad, eps):
    """grad_weight of layer_norm (a column sum of g * xhat) against its float64 reference.

    The backward recomputes xhat = (x - mean) * rstd from the float32 mean and
    rstd saved by the forward (float64 for float64 x): the saved mean's rounding,
    u * |mean|, times rstd is an absolute error in xhat that a row of values
    close together around a large mean makes far bigger than xhat's own
    rounding. This allows _centering_error per row, weighted by |g|, on top of
    assert_column_sum's tolerance.
    """
    rows = x.numel() // max(1, x.shape[-1])
    if x.numel() == 0:
        assert_column_sum(actual, expected, rows)
        return
    x64 = x.double().reshape(-1, x.shape[-1])
    mean = x64.mean(-1, keepdim=True)
    rstd = 1.0 / torch.sqrt((x64 - mean).square().mean(-1, keepdim=True) + eps)
    max_x = x64.abs().amax(-1, keepdim=True)
    g64 = grad.double().reshape(-1, x.shape[-1])
    slack = _centering_error(x) * (g64.abs() * rstd * max_x).sum(0)
    atol, rtol = TOLERANCE[actual.dtype]
    if actual.dtype == torch.float32:
        atol, rtol = 1e-5, 1e-5
    scale = max(1.0, rows**0.5)
    diff = _difference(actual, expected)
    allowed = atol * scale + rtol * scale * expected.double().abs() + slack
    worst = (diff - allowed).argmax()
    assert bool((diff <= allowed).all()), (
        f"grad_weight off by {diff[worst].item():.3g} at column {worst.item()} "
        f"(allowed {allowed[worst].item():.3g})"
    )
