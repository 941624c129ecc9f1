"""wheelops.fused_linear_gelu(input, weight, bias=None, approximate="none"):
gelu(linear(input, weight, bias)), one GEMM with a GELU epilogue.

Its benchmark is a section of its own (benchmarks/linear_gelu.py): GEMM-bound, with
targets against cuBLAS, not a bandwidth curve."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import wheelops
from opspecs._inputs import normal
from opspecs._spec import BadInput, Derivatives, NativeBadCall, OpSpec, Sample, Shape

ops = torch.ops.wheelops
t = torch.ones


def reference(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    approximate: str = "none",
) -> torch.Tensor:
    """The forward in float64, from the (already rounded) inputs."""
    b64 = None if bias is None else bias.double()
    return F.gelu(F.linear(input.double(), weight.double(), b64), approximate=approximate)


def make(shape: Shape, dtype: torch.dtype, device: str | torch.device, seed: int) -> tuple:
    """input [*shape], weight [out, in], bias [out]; out = in + 3, never a batch size, so
    that an exported batch stays dynamic; weights at nn.Linear's scale."""
    features = shape[-1]
    out = features + 3
    return (
        normal(shape, dtype, device, seed),
        normal((out, features), dtype, device, seed + 1, scale=1 / math.sqrt(max(features, 1))),
        normal((out,), dtype, device, seed + 2, scale=0.5),
    )


def _sample(approximate: str, suffix: str = "", arity: int | None = None) -> Sample:
    return Sample(
        lambda x, w, b=None: wheelops.fused_linear_gelu(x, w, b, approximate),
        lambda x, w, b=None: F.gelu(F.linear(x, w, b), approximate=approximate),
        suffix,
        arity,
    )


SPEC = OpSpec(
    name="fused_linear_gelu",
    make=make,
    samples=(_sample("none"), _sample("tanh", "tanh_no_bias", arity=2)),
    reference=reference,
    derivatives=Derivatives(backward_op="fused_linear_gelu_backward"),
    # input [2, 3], weight [4, 3], bias [4] with one thing wrong
    bad_inputs=(
        BadInput(
            lambda: (t(2, 3).long(), t(4, 3), t(4)), TypeError, "'input' has dtype torch.int64"
        ),
        BadInput(lambda: ([1.0], t(4, 3), t(4)), TypeError, "'input' must be a torch.Tensor"),
        BadInput(lambda: (t(2, 3), "w", t(4)), TypeError, "'weight' must be a torch.Tensor"),
        BadInput(
            lambda: (t(2, 3), t(4, 3).double(), t(4)),
            TypeError,
            "'input' and 'weight' must have the same dtype",
        ),
        BadInput(
            lambda: (t(2, 3), t(4, 3), t(4).half()),
            TypeError,
            "'input' and 'bias' must have the same dtype",
        ),
        BadInput(
            lambda: (torch.tensor(1.0), t(4, 3), t(4)),
            ValueError,
            "'input' must have at least one dimension",
        ),
        BadInput(
            lambda: (t(2, 3), t(4, 2), t(4)),
            ValueError,
            r"'weight' must have shape \[out_features, 3\]",
        ),
        BadInput(
            lambda: (t(2, 3), t(12), t(4)),
            ValueError,
            r"'weight' must have shape \[out_features, 3\]",
        ),
        BadInput(
            lambda: (t(2, 3), t(4, 3), t(3)),
            ValueError,
            r"'bias' must have shape \[4\] .*got \[3\]",
        ),
        BadInput(lambda: (t(2, 3), t(4, 3), t(1, 4)), ValueError, r"'bias' must have shape \[4\]"),
        BadInput(
            lambda: (t(2, 3), t(4, 3, device="meta"), t(4)),
            ValueError,
            "'input' and 'weight' must be on the same device",
        ),
        BadInput(
            lambda: (t(2, 3), t(4, 3), t(4)),
            ValueError,
            "'approximate' must be 'none' or 'tanh'",
            {"approximate": "erf"},
        ),
    ),
    native_bad_calls=(
        NativeBadCall(
            "fused_linear_gelu",
            lambda t: ops.fused_linear_gelu.default(t(2, 3), t(4, 2), t(4)),
            r"'weight' must have shape \[out_features, 3\] .*, got \[4, 2\]",
        ),
        NativeBadCall(
            "fused_linear_gelu",
            lambda t: ops.fused_linear_gelu.default(t(2, 3), t(4, 3), t(5)),
            r"'bias' must have shape \[4\]",
        ),
        NativeBadCall(
            "fused_linear_gelu_backward",
            lambda t: ops.fused_linear_gelu_backward.default(t(2, 5), t(2, 3), t(4, 3), t(2, 4)),
            r"'grad' must have shape \[2, 4\] .*, got \[2, 5\]",
        ),
        NativeBadCall(
            "fused_linear_gelu_backward",
            lambda t: ops.fused_linear_gelu_backward.default(t(2, 4), t(2, 3), t(4, 3), t(0)),
            r"'pre_activation' must have shape \[2, 4\]",
        ),
    ),
)
