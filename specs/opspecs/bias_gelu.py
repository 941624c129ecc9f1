"""wheelops.bias_gelu(x, bias, approximate="none"): gelu(x + bias), bias over the last dim."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import wheelops
from opspecs._inputs import normal
from opspecs._shapes import ROWS, elements, rows_label
from opspecs._spec import BadInput, Benchmark, Derivatives, NativeBadCall, OpSpec, Sample, Shape

ops = torch.ops.wheelops


def reference(x: torch.Tensor, bias: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """The forward in float64, from the (already rounded) inputs."""
    return F.gelu(x.double() + bias.double(), approximate=approximate)


def reference_grads(
    grad: torch.Tensor, x: torch.Tensor, bias: torch.Tensor, approximate: str
) -> tuple[torch.Tensor, ...]:
    """grad_x and grad_bias in float64."""
    x64 = x.double().requires_grad_()
    b64 = bias.double().requires_grad_()
    out = F.gelu(x64 + b64, approximate=approximate)
    return torch.autograd.grad(out, (x64, b64), grad.double())


def backward_terms(
    grad: torch.Tensor, x: torch.Tensor, bias: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The size of the float32 terms behind grad_x and grad_bias, z = x + bias: grad_x = g
    gelu'(z), whose gelu'(z) = 0.5 (1 + t) + 0.5 z (1 - t^2) d (tanh; erf's alike) crosses
    zero near z = -0.75 with terms of |g| (1 + |z| d), d = c (1 + 3 * 0.044715 z^2) the
    inner function's slope; grad_bias sums those products over the rows and cancels with
    terms of their absolute sum (on the H200, a float64 column of 19 products totalling 34.8
    in size summed to 0.0171, 4.4e-16 off where a bound scaled by the results' rms allowed
    2.0e-16)."""
    terms_x = backward_terms_x(grad, x.double() + bias.double())
    rows = math.prod(terms_x.shape[:-1])
    return terms_x, terms_x.reshape(rows, terms_x.shape[-1]).sum(0)


def backward_terms_x(grad: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """backward_terms' grad_x terms alone, at z = x + bias."""
    z = z.double()
    slope = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * z.square())
    return grad.double().abs() * (1 + z.abs() * slope)


def make(shape: Shape, dtype: torch.dtype, device: str | torch.device, seed: int) -> tuple:
    return normal(shape, dtype, device, seed), normal(shape[-1:], dtype, device, seed + 1)


def _sample(approximate: str, suffix: str) -> Sample:
    return Sample(
        lambda x, b: wheelops.bias_gelu(x, b, approximate),
        lambda x, b: F.gelu(x + b, approximate=approximate),
        suffix,
    )


SPEC = OpSpec(
    name="bias_gelu",
    make=make,
    samples=(_sample("none", ""), _sample("tanh", "tanh")),
    reference=reference,
    derivatives=Derivatives(
        backward_op="bias_gelu_backward",
        nan_like_eager=True,
        backward_args=lambda g, x: (g, x, normal((4,), x.dtype, x.device, 10), "none"),
    ),
    bad_inputs=(
        BadInput(
            lambda: (torch.ones(2, 3), torch.ones(4)), ValueError, r"'bias' must have shape \[3\]"
        ),
        BadInput(
            lambda: (torch.ones(2, 3), torch.ones(1, 3)),
            ValueError,
            r"'bias' must have shape \[3\]",
        ),
        BadInput(lambda: (torch.tensor(1.0), torch.ones(1)), ValueError, "at least one dimension"),
        BadInput(
            lambda: (torch.ones(2, 3), torch.ones(3, dtype=torch.float16)), TypeError, "same dtype"
        ),
        BadInput(
            lambda: (torch.ones(2, 3, dtype=torch.int64), torch.ones(3)), TypeError, "'x' has dtype"
        ),
        BadInput(
            lambda: (torch.ones(2, 3), torch.ones(3), "exact"),
            ValueError,
            "'approximate' must be 'none' or",
        ),
        BadInput(
            lambda: (torch.ones(2, 3), torch.ones(3), None), ValueError, "'approximate' must be"
        ),
    ),
    native_bad_calls=(
        NativeBadCall(
            "bias_gelu",
            lambda t: ops.bias_gelu.default(t(2, 3), t(2), "none"),
            r"'bias' must have shape \[3\] .*, got \[2\]",
        ),
        NativeBadCall(
            "bias_gelu",
            lambda t: ops.bias_gelu.default(t(2, 3), t(3), "erf"),
            "'approximate' must be 'none' or 'tanh'",
        ),
        NativeBadCall(
            "bias_gelu_backward",
            lambda t: ops.bias_gelu_backward.default(t(3, 3), t(2, 3), t(3), "none"),
            r"'grad' and 'x' must have the same shape \(got \[3, 3\] and \[2, 3\]\)",
        ),
    ),
    benchmark=Benchmark(
        shapes=ROWS,
        label=rows_label,
        forward_bytes=lambda s, e: (2 * elements(s) + s[1]) * e,
        # read x, grad, bias; write grad_x, grad_bias
        backward_bytes=lambda s, e: (3 * elements(s) + 2 * s[1]) * e,
        note='approximate="none" (erf)',
        # grad_bias: a float32 sum over the rows.
        sum_length=lambda s: math.prod(s[:-1]),
        backward_terms=lambda inputs, grads: backward_terms(grads[0], *inputs),
    ),
)
