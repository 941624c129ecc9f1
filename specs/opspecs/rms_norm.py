"""wheelops.rms_norm(x, weight=None, eps=None): over the last dim."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import wheelops
from opspecs._inputs import normal
from opspecs._shapes import ROWS, elements, rows_label
from opspecs._spec import BadInput, Benchmark, Derivatives, NativeBadCall, OpSpec, Sample, Shape

ops = torch.ops.wheelops
# Given, not None: None is the compute dtype's epsilon for wheelops but the input dtype's
# for F.rms_norm, which the derivative tests run in float64 on float32 inputs.
EPS = 1e-6


def reference(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """The formula in float64, from the (already rounded) inputs (eps given: wheelops'
    default is the compute dtype's epsilon, wheelops.ops.rms_norm.default_eps)."""
    x64 = x.double()
    out = x64 / torch.sqrt(x64.square().mean(-1, keepdim=True) + eps)
    return out * weight.double() if weight is not None else out


def make(shape: Shape, dtype: torch.dtype, device: str | torch.device, seed: int) -> tuple:
    return (
        normal(shape, dtype, device, seed),
        normal(shape[-1:], dtype, device, seed + 1, scale=0.1, shift=1.0),
    )


SPEC = OpSpec(
    name="rms_norm",
    make=make,
    samples=(
        Sample(
            lambda x, w: wheelops.rms_norm(x, w, EPS),
            lambda x, w: F.rms_norm(x, x.shape[-1:], w, EPS),
        ),
    ),
    reference=lambda x, w: reference(x, w, EPS),
    derivatives=Derivatives(
        backward_op="rms_norm_backward",
        backward_args=lambda g, x: (g, x, x.pow(2).mean(-1).add(1e-6).rsqrt(), None, True, False),
    ),
    bad_inputs=(
        BadInput(lambda: (torch.tensor(1.0),), ValueError, "at least one dimension"),
        BadInput(lambda: (3.0,), TypeError, "'x' must be a torch.Tensor"),
        BadInput(
            lambda: (torch.ones(2, 3), torch.ones(4)), ValueError, r"'weight' must have shape \[3\]"
        ),
        BadInput(
            lambda: (torch.ones(2, 3), torch.ones(3, dtype=torch.float16)), TypeError, "same dtype"
        ),
        BadInput(
            lambda: (torch.ones(2, 3), None, -1.0), ValueError, "'eps' must be a non-negative"
        ),
        BadInput(
            lambda: (torch.ones(2, 3), None, math.nan), ValueError, "'eps' must be a non-negative"
        ),
        BadInput(
            lambda: (torch.ones(2, 3), None, "1e-6"), TypeError, "'eps' must be a Python float"
        ),
        BadInput(lambda: (torch.ones(2, 3), None, True), TypeError, "'eps' must be a Python float"),
    ),
    native_bad_calls=(
        NativeBadCall(
            "rms_norm",
            lambda t: ops.rms_norm.default(t(2, 3), t(3, 1), 1e-6),
            r"'weight' must have shape \[3\] .*, got \[3, 1\]",
        ),
        NativeBadCall(
            "rms_norm_inference",
            lambda t: ops.rms_norm_inference.default(t(2, 3), None, -1.0),
            r"'eps' must be a non-negative number, got -1",
        ),
        NativeBadCall(
            "rms_norm_backward",
            lambda t: ops.rms_norm_backward.default(t(3, 3), t(2, 3), t(2), None, True, False),
            r"same shape \(got \[3, 3\] and \[2, 3\]\)",
        ),
    ),
    benchmark=Benchmark(
        shapes=ROWS,
        label=rows_label,
        forward_bytes=lambda s, e: (2 * elements(s) + s[1]) * e,
        backward_bytes=lambda s, e: (3 * elements(s) + 2 * s[1]) * e,
        # torch >= 2.8 runs F.rms_norm on CUDA as one fused kernel (_fused_rms_norm).
        eager_unfused=(False, False),
        note="weight, eps=1e-6",
        # The statistics sum a row; grad_weight, a column.
        sum_length=lambda s: max(s[-1], math.prod(s[:-1])),
    ),
)
