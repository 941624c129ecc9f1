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


def reference(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """relu(x) * alpha in float64, from the (already rounded) input."""
    return torch.relu(x.double()) * alpha


def mask_of(x: torch.Tensor) -> torch.Tensor:
    """The backward's mask for x: bit j of byte k set where element 8k + j passes the
    gradient (not x <= 0), as relu_scale_with_mask writes it."""
    passes = ~(x.detach().reshape(-1) <= 0)
    padded = torch.nn.functional.pad(passes.to(torch.uint8), (0, -passes.numel() % 8))
    weights = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8, device=x.device)
    return (padded.view(-1, 8) * weights).sum(1, dtype=torch.uint8)


def unpack_mask(mask: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A mask's bits as a bool tensor shaped like `like`."""
    bits = (mask.unsqueeze(1) >> torch.arange(8, device=mask.device, dtype=torch.uint8)) & 1
    return bits.reshape(-1)[: like.numel()].reshape(like.shape).bool()


SPEC = OpSpec(
    name="relu_scale",
    make=make,
    samples=(Sample(lambda x: wheelops.relu_scale(x, ALPHA), lambda x: torch.relu(x) * ALPHA),),
    reference=lambda x: reference(x, ALPHA),
    derivatives=Derivatives(
        backward_op="relu_scale_backward",
        second=True,
        nan_like_eager=True,
        backward_args=lambda g, x: (g, mask_of(x), 2.0),
        backward_eager=lambda g, mask, alpha: torch.where(
            unpack_mask(mask, g), g * alpha, torch.zeros_like(g)
        ),
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
            "relu_scale_with_mask",
            lambda t: ops.relu_scale_with_mask.default(t(4, dtype=torch.long), 1.0),
            r"'x' has dtype Long; expected float32",
        ),
        NativeBadCall(
            "relu_scale_backward",
            lambda t: ops.relu_scale_backward.default(t(9), t(1, dtype=torch.uint8), 1.0),
            r"'mask' must have shape \[2\] \(one bit per element of 'grad', 9 elements\)",
        ),
        NativeBadCall(
            "relu_scale_backward",
            lambda t: ops.relu_scale_backward.default(t(9), t(2), 1.0),
            r"'mask' has dtype Float; expected uint8",
        ),
    ),
    benchmark=Benchmark(
        shapes=ROWS,
        label=rows_label,
        forward_bytes=lambda s, e: 2 * elements(s) * e,
        # read grad and the 1-bit mask; write grad_x
        backward_bytes=lambda s, e: 2 * elements(s) * e + elements(s) // 8,
    ),
)
