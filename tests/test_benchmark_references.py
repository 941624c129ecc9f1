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
from _benchmark_rule import rules
from _helpers import DEVICES, randn
from opspecs import ALL
from opspecs._spec import OpSpec

from benchmarks import measure, verify
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


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("spec", _with("backward_terms"), ids=lambda s: s.name)
def test_the_terms_rule_passes_the_correct_rounding_and_fails_a_1_percent_error(spec, dtype):
    """Decision 14 for a rule scaled by the terms (verify.Rule.terms), at the benchmark's
    longest float32 sum: its most rows (8192; the allowance grows with the sum's length, a 1%
    error of a column sum with its square root). The float64 gradients rounded once pass; 1%
    off either way fails. bias_gelu's grad_bias is the loosest case: at 8192 x 64, 1% off
    fails 19 of its 64 float32 columns (7 in bfloat16), 0.3% off none."""
    rows = max(shape[0] for shape in spec.benchmark.shapes["full"])
    args = spec.make((rows, 64), dtype, "cpu", 0)
    leaves = tuple(a.double().requires_grad_() for a in args)
    out = spec.eager(*leaves)
    grad = randn(out.shape, dtype, "cpu", seed=1).double()
    references = torch.autograd.grad(out, leaves, grad)
    found = rules(spec, (rows, 64), args, "cpu", (grad,))
    for reference, rule in zip(references, found, strict=True):
        rounded = reference.to(dtype)
        assert verify.mismatch(rounded, rounded, reference, rule) is None
        for factor in (1.01, 0.99):
            wrong = (reference * factor).to(dtype)
            assert "beyond the derived bound" in verify.mismatch(wrong, rounded, reference, rule)
