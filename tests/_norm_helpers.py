"""float64 references and tolerances shared by the layer_norm / rms_norm tests."""

from __future__ import annotations

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
    """Gradients of fn at the float64 copies of inputs (None stays None)."""
    leaves = [None if t is None else t.detach().double().requires_grad_() for t in inputs]
    out = fn(*leaves)
    wanted = [t for t in leaves if t is not None]
    grads = iter(torch.autograd.grad(out, wanted, grad.double()))
    return [None if t is None else next(grads) for t in leaves]


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
