"""wheelops.softmax(x, dim=-1)."""

from __future__ import annotations

import torch

import wheelops
from opspecs._inputs import normal
from opspecs._shapes import ROWS, elements, rows_label
from opspecs._spec import BadInput, Benchmark, Derivatives, NativeBadCall, OpSpec, Sample, Shape

ops = torch.ops.wheelops


def reference(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """The forward in float64, from the (already rounded) input."""
    return torch.softmax(x.double(), dim)


def backward(grad: torch.Tensor, out: torch.Tensor, dim: int) -> torch.Tensor:
    """softmax_backward's formula, from the saved output y: y * (g - sum(g * y)) (in
    float64 when given float64: the backward's reference)."""
    return out * (grad - (grad * out).sum(dim, keepdim=True))


def _sample(dim: int, suffix: str) -> Sample:
    return Sample(lambda x: wheelops.softmax(x, dim), lambda x: torch.softmax(x, dim), suffix)


def make(shape: Shape, dtype: torch.dtype, device: str | torch.device, seed: int) -> tuple:
    return (normal(shape, dtype, device, seed),)


SPEC = OpSpec(
    name="softmax",
    make=make,
    # Over the rows, and over the first dim: a reduction across rows, strided
    samples=(_sample(-1, ""), _sample(0, "dim0")),
    reference=reference,
    derivatives=Derivatives(
        backward_op="softmax_backward",
        second=True,
        # y, the softmax of x, is what the backward takes
        backward_args=lambda g, x: (g, torch.softmax(x, -1), -1),
        backward_eager=backward,
    ),
    bad_inputs=(
        BadInput(lambda: ([1.0, 2.0],), TypeError, "'x' must be a torch.Tensor, got list"),
        BadInput(
            lambda: (torch.ones(2, 3, dtype=torch.int64),), TypeError, "'x' has dtype torch.int64"
        ),
        BadInput(lambda: (torch.ones(2, 3), 2), ValueError, r"'dim' must be in \[-2, 1\].*got 2"),
        BadInput(lambda: (torch.ones(2, 3), -3), ValueError, r"'dim' must be in \[-2, 1\].*got -3"),
        BadInput(lambda: (torch.ones(2, 3), 1.0), TypeError, "'dim' must be an int, got float"),
        BadInput(lambda: (torch.ones(2, 3), True), TypeError, "'dim' must be an int, got bool"),
        BadInput(lambda: (torch.ones(2, 3), None), TypeError, "'dim' must be an int, got NoneType"),
    ),
    native_bad_calls=(
        NativeBadCall(
            "softmax",
            lambda t: ops.softmax.default(t(2, 3), 5),
            r"'dim' must be in \[-2, 1\] for 'x' of shape \[2, 3\], got 5",
        ),
        NativeBadCall(
            "softmax",
            lambda t: ops.softmax.default(t(2, 3, dtype=torch.int64), -1),
            "argument 'x' has dtype Long",
        ),
        NativeBadCall(
            "softmax_backward",
            lambda t: ops.softmax_backward.default(t(3, 3), t(2, 3), 1),
            r"'grad' and 'out' must have the same shape \(got \[3, 3\] and \[2, 3\]\)",
        ),
        NativeBadCall(
            "softmax_backward",
            lambda t: ops.softmax_backward.default(t(2, 3, dtype=torch.float64), t(2, 3), -1),
            "'grad' and 'out' must have the same dtype",
        ),
        NativeBadCall(
            "softmax_backward",
            lambda t: ops.softmax_backward.default(t(2, 3), t(2, 3), 2),
            "argument 'dim' must be in",
        ),
    ),
    benchmark=Benchmark(
        shapes=ROWS,
        label=rows_label,
        forward_bytes=lambda s, e: 2 * elements(s) * e,
        backward_bytes=lambda s, e: 3 * elements(s) * e,  # read y, grad; write grad_x
        eager_unfused=(False, False),
        note="dim=-1",
        sum_length=lambda s: s[-1],  # the row's sums of exponentials (and of g * y)
        # The backward runs on the saved y, rounded to the dtype (as eager's): its float64
        # reference is the backward's formula on that y.
        backward_from_rounded_output=True,
    ),
)
