"""wheelops.relu_scale(x, alpha): relu(x) * alpha."""

from __future__ import annotations

import torch

import wheelops
from opspecs._inputs import normal
from opspecs._shapes import ROWS, elements, rows_label
from opspecs._spec import BadInput, Benchmark, Derivatives, NativeBadCall, OpSpec, Sample, Shape

ops = torch.ops.wheelops
ALPHA = 1.7  # not a power of two, so the multiply really rounds


def make(shape: Shape, dtype: torch.dtype, device: str | torch.device, seed: int) -> tuple:
    return (normal(shape, dtype, device, seed),)


SPEC = OpSpec(
    name="relu_scale",
    make=make,
    samples=(Sample(lambda x: wheelops.relu_scale(x, ALPHA), lambda x: torch.relu(x) * ALPHA),),
    derivatives=Derivatives(
        backward_op="relu_scale_backward",
        second=True,
        nan_like_eager=True,
        backward_args=lambda g, x: (g, x, 2.0),
        backward_eager=lambda g, x, alpha: torch.where(x <= 0, torch.zeros_like(g), g * alpha),
    ),
    bad_inputs=(
        BadInput(
            lambda: (torch.ones(3, dtype=torch.int32), 1.0), TypeError, "'x' has dtype torch.int32"
        ),
        BadInput(lambda: (torch.ones(3), "2"), TypeError, "'alpha' must be a Python float"),
        BadInput(lambda: (torch.ones(3), True), TypeError, "'alpha' must be a Python float"),
        BadInput(
            lambda: (torch.ones(3), torch.tensor(2.0)), TypeError, "'alpha' must be a Python float"
        ),
        BadInput(lambda: ([1.0], 1.0), TypeError, "'x' must be a torch.Tensor"),
    ),
    native_bad_calls=(
        NativeBadCall(
            "relu_scale",
            lambda t: ops.relu_scale.default(t(4, dtype=torch.long), 1.0),
            r"'x' has dtype Long; expected float32",
        ),
        NativeBadCall(
            "relu_scale_backward",
            lambda t: ops.relu_scale_backward.default(t(3), t(4), 1.0),
            r"same shape \(got \[3\] and \[4\]\)",
        ),
    ),
    benchmark=Benchmark(
        shapes=ROWS,
        label=rows_label,
        forward_bytes=lambda s, e: 2 * elements(s) * e,
        backward_bytes=lambda s, e: 3 * elements(s) * e,  # read x, grad; write grad_x
    ),
)
