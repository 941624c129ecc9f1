"""The benchmark's float64 references at the benchmark's own shapes (issue 42, item 3).

A backward that takes the op's rounded output (softmax's y) is checked against its
formula on the y that implementation's forward produced: the correctly rounded y differs
from a float32-computed one by an ulp wherever the value lies within float32's error of a
rounding boundary (hundreds of elements of a 4096x1024 bfloat16 softmax), and that ulp
moves grad_x by 2u |grad_x| there, twice what one rounding allows. These run on the CPU,
whose kernels compute in float32 as the CUDA ones do; the GPU suite runs them on CUDA.
"""

from __future__ import annotations

import pytest
import torch
from _helpers import DEVICES
from opspecs import ALL
from opspecs._spec import OpSpec

from benchmarks import measure
from benchmarks.timing import Timer


def _backward_row(spec: OpSpec, shape: tuple[int, ...], dtype: torch.dtype, device: str) -> dict:
    impls = measure.Implementations(wheelops=spec.call, eager=spec.eager, compiled=None)
    timer = Timer(torch.device(device), reps=1, warmup=0)
    args = measure.inputs(spec, shape, dtype, torch.device(device))
    return measure._backward(spec, shape, dtype, impls, timer, args)


def _with(attribute: str) -> list[OpSpec]:
    benchmarked = [s for s in ALL if s.benchmark is not None and s.benchmark.has_backward]
    return [s for s in benchmarked if getattr(s.benchmark, attribute)]


@pytest.mark.parametrize("spec", _with("backward_from_rounded_output"), ids=lambda s: s.name)
@pytest.mark.parametrize("device", DEVICES)
def test_a_backward_of_the_rounded_output_is_checked_on_its_own_output(spec, device):
    """softmax's backward takes y: checked on the y its own forward gave (bfloat16 4096 x
    1024: the correctly rounded y differs from it at hundreds of elements)."""
    row = _backward_row(spec, (4096, 1024), torch.bfloat16, device)
    assert row["status"] == "ok", row["problem"]


@pytest.mark.parametrize("spec", _with("backward_terms"), ids=lambda s: s.name)
@pytest.mark.parametrize("device", DEVICES)
def test_a_backward_that_cancels_is_checked_at_the_size_of_its_terms(spec, device):
    """A gated product's d/da crosses zero with float32 terms of |g b|: an rms-based bound
    let the H200's correct float32 grad_x fail by 1.7x (4096 x (2 x 16384): 29 elements),
    and this machine's CPU kernel 1.25x at 4096 x 4096."""
    row = _backward_row(spec, (4096, 4096), torch.float32, device)
    assert row["status"] == "ok", row["problem"]
