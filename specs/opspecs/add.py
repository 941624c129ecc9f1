"""wheelops.add(a, b): a + b, same shape and dtype."""

from __future__ import annotations

import torch

import wheelops
from opspecs._inputs import normal
from opspecs._shapes import ROWS, elements, rows_label
from opspecs._spec import BadInput, Benchmark, Derivatives, NativeBadCall, OpSpec, Sample, Shape

ops = torch.ops.wheelops


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a + b in float64, from the (already rounded) inputs."""
    return a.double() + b.double()


def make(shape: Shape, dtype: torch.dtype, device: str | torch.device, seed: int) -> tuple:
    return normal(shape, dtype, device, seed), normal(shape, dtype, device, seed + 1)


SPEC = OpSpec(
    name="add",
    make=make,
    samples=(Sample(wheelops.add, torch.add),),  # both called as a user calls them
    reference=reference,
    derivatives=Derivatives(backward_op="add", second=True, nan_like_eager=True),
    bad_inputs=(
        BadInput(
            lambda: (torch.ones(2, 3), torch.ones(3)), ValueError, "same shape .*does not broadcast"
        ),
        BadInput(
            lambda: (torch.ones(2, 3), torch.ones(3, 2)), ValueError, r"got \[2, 3\] and \[3, 2\]"
        ),
        BadInput(
            lambda: (torch.ones(3), torch.ones(3, dtype=torch.float64)), TypeError, "same dtype"
        ),
        BadInput(
            lambda: (torch.ones(3, dtype=torch.int64),) * 2, TypeError, "'a' has dtype torch.int64"
        ),
        BadInput(lambda: (torch.ones(3), [1.0, 2.0, 3.0]), TypeError, "'b' must be a torch.Tensor"),
        BadInput(lambda: (torch.ones(3).to_sparse(), torch.ones(3)), TypeError, "dense"),
    ),
    native_bad_calls=(
        NativeBadCall(
            "add",
            lambda t: ops.add.default(t(4), t(5)),
            r"must have the same shape \(got \[4\] and \[5\]\)",
        ),
        NativeBadCall("add", lambda t: ops.add.default(t(4), t(4, dtype=torch.long)), "dtype Long"),
    ),
    benchmark=Benchmark(
        shapes=ROWS,
        label=rows_label,
        forward_bytes=lambda s, e: 3 * elements(s) * e,
        # The gradient of a sum is the incoming gradient itself: nothing moves.
        backward_bytes=lambda s, e: 0,
        eager_unfused=(False, False),
        note="backward passes the gradient through (no kernel, no bytes)",
    ),
)
