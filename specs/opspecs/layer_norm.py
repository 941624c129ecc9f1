"""wheelops.layer_norm(x, weight=None, bias=None, eps=1e-5): over the last dim."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import wheelops
from opspecs._inputs import normal
from opspecs._shapes import ROWS, elements, rows_label
from opspecs._spec import BadInput, Benchmark, Derivatives, NativeBadCall, OpSpec, Sample, Shape

ops = torch.ops.wheelops
EPS = 1e-5


def reference(
    x: torch.Tensor,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = EPS,
) -> torch.Tensor:
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


def make(shape: Shape, dtype: torch.dtype, device: str | torch.device, seed: int) -> tuple:
    return (
        normal(shape, dtype, device, seed),
        normal(shape[-1:], dtype, device, seed + 1, scale=0.1, shift=1.0),
        normal(shape[-1:], dtype, device, seed + 2, scale=0.1),
    )


SPEC = OpSpec(
    name="layer_norm",
    make=make,
    samples=(
        Sample(
            lambda x, w, b: wheelops.layer_norm(x, w, b, EPS),
            lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b, EPS),
        ),
    ),
    reference=reference,
    derivatives=Derivatives(
        backward_op="layer_norm_backward",
        backward_args=lambda g, x: (
            g,
            x,
            x.mean(-1),
            x.var(-1, unbiased=False).add(1e-5).rsqrt(),
            None,
            True,
            False,
            False,
        ),
    ),
    bad_inputs=(
        BadInput(lambda: (torch.tensor(1.0),), ValueError, "at least one dimension"),
        BadInput(lambda: ([1.0, 2.0],), TypeError, "'x' must be a torch.Tensor"),
        BadInput(lambda: (torch.ones(2, 3, dtype=torch.int64),), TypeError, "'x' has dtype"),
        BadInput(
            lambda: (torch.ones(2, 3), torch.ones(4)), ValueError, r"'weight' must have shape \[3\]"
        ),
        BadInput(
            lambda: (torch.ones(2, 3), torch.ones(1, 3)),
            ValueError,
            r"'weight' must have shape \[3\]",
        ),
        BadInput(
            lambda: (torch.ones(2, 3), None, torch.ones(2)),
            ValueError,
            r"'bias' must have shape \[3\]",
        ),
        BadInput(
            lambda: (torch.ones(2, 3), torch.ones(3, dtype=torch.float64)),
            TypeError,
            "'x' and 'weight' must have the same dtype",
        ),
        BadInput(lambda: (torch.ones(2, 3), "w"), TypeError, "'weight' must be a torch.Tensor"),
        BadInput(
            lambda: (torch.ones(2, 3),), ValueError, "'eps' must be a non-negative", {"eps": -1e-5}
        ),
        BadInput(
            lambda: (torch.ones(2, 3),),
            ValueError,
            "'eps' must be a non-negative",
            {"eps": math.nan},
        ),
        BadInput(
            lambda: (torch.ones(2, 3),), TypeError, "'eps' must be a Python float", {"eps": "small"}
        ),
        BadInput(
            lambda: (torch.ones(2, 3),), TypeError, "'eps' must be a Python float", {"eps": None}
        ),
    ),
    native_bad_calls=(
        NativeBadCall(
            "layer_norm",
            lambda t: ops.layer_norm.default(t(2, 3), t(2), None, 1e-5),
            r"'weight' must have shape \[3\] .*, got \[2\]",
        ),
        NativeBadCall(
            "layer_norm_inference",
            lambda t: ops.layer_norm_inference.default(t(2, 3), None, t(3, dtype=torch.int32), 0.0),
            r"'bias' has dtype Int; expected float32",
        ),
        NativeBadCall(
            "layer_norm_backward",
            lambda t: ops.layer_norm_backward.default(
                t(3, 3), t(2, 3), t(2), t(2), None, True, False, False
            ),
            r"same shape \(got \[3, 3\] and \[2, 3\]\)",
        ),
    ),
    benchmark=Benchmark(
        shapes=ROWS,
        label=rows_label,
        forward_bytes=lambda s, e: (2 * elements(s) + 2 * s[1]) * e,
        # read x, grad, weight; write grad_x, grad_weight, grad_bias (row statistics,
        # 8 bytes a row, are left out: they can be recomputed from x)
        backward_bytes=lambda s, e: (3 * elements(s) + 3 * s[1]) * e,
        eager_unfused=(False, False),
        note="weight and bias, eps=1e-5",
        # The statistics sum a row; grad_weight and grad_bias, a column.
        sum_length=lambda s: max(s[-1], math.prod(s[:-1])),
    ),
)
