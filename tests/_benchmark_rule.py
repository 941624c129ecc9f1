"""The benchmark's derived bound (benchmarks/verify.py, each op's rule from its description)
for a test that compares wheelops' results or derivatives with eager's float64 ones where no
bound of the op's own fits (a Jacobian, a Hessian, a second derivative, gradients at NaN):
per element (1 + r) u |ref| + (COMPUTE_ROUNDINGS + LAMBDA sqrt(n)) u rms of the results,
doubled for float64 (eager rounds as much), and the aggregate check beside it."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import torch
from opspecs._spec import OpSpec, Shape

from benchmarks import linear_gelu, measure, verify


def rules(
    spec: OpSpec, shape: Shape, args: tuple, device: str, grads: Sequence | None = None
) -> verify.Rule | list[verify.Rule]:
    """The benchmark's rules for the op's results at `shape` (its gradients' with `grads`,
    the terms of a result that cancels where the op says how large they are)."""
    if spec.benchmark is None:  # fused_linear_gelu: its own benchmark module's rules
        gemm = (math.prod(shape[:-1]), shape[-1], shape[-1] + 3)  # opspecs: out = in + 3
        found = linear_gelu.rule(gemm, "forward" if grads is None else "backward", device != "cpu")
        return found if grads is None else found[1:]
    rule = measure.rule_of(spec, spec.problem_shape(shape))
    terms = spec.benchmark.backward_terms
    if grads is None or terms is None:
        return rule
    detached = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
    sizes = terms(verify.float64_inputs(detached), tuple(g.detach().double() for g in grads))
    return [dataclasses.replace(rule, terms=t.cpu()) for t in sizes]


def assert_within_rule(
    got: Sequence[torch.Tensor],
    expected: Sequence[torch.Tensor],
    rule: verify.Rule | list[verify.Rule],
    what: str = "",
) -> None:
    """got (any device) within the rule of eager's float64 `expected`."""
    cpu = [g.detach().cpu() for g in got]
    ref = [e.detach().cpu() for e in expected]
    problem = verify.mismatch(cpu, ref, ref, rule)
    assert problem is None, f"{what}: {problem}" if what else problem


def rule_of(spec: OpSpec, shape: Shape) -> verify.Rule:
    """One rule for every result of the op at `shape` (the derivatives' tests' case)."""
    found = rules(spec, shape, (), "cpu")
    return found if isinstance(found, verify.Rule) else max(found, key=lambda r: r.sum_length)
