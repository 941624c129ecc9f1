"""wheelops.silu_and_mul(x): silu(gate) * up, the halves of x's last dim (vLLM's op)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import wheelops
from opspecs._inputs import normal
from opspecs._shapes import ROWS, elements
from opspecs._spec import (
    BadInput,
    Benchmark,
    Derivatives,
    NativeBadCall,
    OpSpec,
    Sample,
    Shape,
)

ops = torch.ops.wheelops


def eager(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return F.silu(a) * b


def reference(x: torch.Tensor) -> torch.Tensor:
    """The forward in float64, from the (already rounded) input."""
    return eager(x.double())


def reference_grad(grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """grad_x in float64."""
    x64 = x.double().requires_grad_()
    (grad_x,) = torch.autograd.grad(eager(x64), x64, grad.double())
    return grad_x


def backward_terms(grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The size of the float32 terms behind each element of grad_x: d/da = g b s (1 + a (1 -
    s)), s = sigmoid(a), cancels where it crosses zero (a near -1.28) with terms of |g b| s
    (1 + |a|); d/db = g a s, terms |g a s|. The benchmark's check scales its float32
    roundings by these, not by grad_x's rms (an H200 gave float32 1.7x an rms-based bound
    at 134M elements, issue 42); the op's tests derive the same per element."""
    a, b = x.double().chunk(2, dim=-1)
    g, s = grad.double(), torch.sigmoid(a)
    return torch.cat([(g * b).abs() * s * (1 + a.abs()), (g * a * s).abs()], dim=-1)


def make(shape: Shape, dtype: torch.dtype, device: str | torch.device, seed: int) -> tuple:
    """``shape`` is the output's: x is [*shape[:-1], 2 * shape[-1]]."""
    return (normal((*shape[:-1], 2 * shape[-1]), dtype, device, seed),)


SPEC = OpSpec(
    name="silu_and_mul",
    make=make,
    samples=(Sample(lambda x: wheelops.silu_and_mul(x), eager),),
    reference=reference,
    derivatives=Derivatives(
        backward_op="silu_and_mul_backward",
        nan_like_eager=True,
        backward_args=lambda g, x: (g[:, :2], x),
    ),
    bad_inputs=(
        BadInput(lambda: ([1.0, 2.0],), TypeError, "'x' must be a torch.Tensor, got list"),
        BadInput(
            lambda: (torch.ones(2, 4, dtype=torch.int32),), TypeError, "'x' has dtype torch.int32"
        ),
        BadInput(
            lambda: (torch.ones(2, 5),),
            ValueError,
            r"'x' must have an even last dimension.*\[2, 5\]",
        ),
        BadInput(
            lambda: (torch.tensor(1.0),), ValueError, r"'x' must have an even last dimension.*\[\]"
        ),
    ),
    native_bad_calls=(
        NativeBadCall(
            "silu_and_mul",
            lambda t: ops.silu_and_mul.default(t(2, 5)),
            r"even last dimension .*, got shape \[2, 5\]",
        ),
        NativeBadCall(
            "silu_and_mul",
            lambda t: ops.silu_and_mul.default(t()),
            "argument 'x' must have an even last",
        ),
        NativeBadCall(
            "silu_and_mul",
            lambda t: ops.silu_and_mul.default(t(2, 4, dtype=torch.int32)),
            "argument 'x' has dtype Int",
        ),
        NativeBadCall(
            "silu_and_mul_backward",
            lambda t: ops.silu_and_mul_backward.default(t(2, 4), t(2, 4)),
            r"'grad' must have the shape of the output.*x has shape \[2, 4\], grad has \[2, 4\]",
        ),
        NativeBadCall(
            "silu_and_mul_backward",
            lambda t: ops.silu_and_mul_backward.default(t(2, 2, dtype=torch.float64), t(2, 4)),
            "'grad' and 'x' must have the same dtype",
        ),
    ),
    benchmark=Benchmark(
        shapes=ROWS,
        label=lambda s: f"{s[0]}x(2x{s[1]})",
        forward_bytes=lambda s, e: 3 * elements(s) * e,  # read 2d, write d
        backward_bytes=lambda s, e: 5 * elements(s) * e,  # read 2d + grad d, write 2d
        note="input rows x (2 x hidden), output rows x hidden",
        backward_terms=lambda inputs, grads: (backward_terms(grads[0], inputs[0]),),
    ),
)
