"""Every differentiable op's calls (the samples of its description in specs/opspecs)
beside eager PyTorch, for the derivative tests.

A case builds the op's inputs for a drawn shape (its last dimension is the row, at
least 1) and says whether the op has second derivatives; the backward op that computes
its gradient is named for the error messages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import opspecs
import torch
from opspecs._spec import OpSpec, Sample

Inputs = tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class Case:
    spec: OpSpec
    sample: Sample

    @property
    def name(self) -> str:
        return "_".join(filter(None, (self.spec.name, self.sample.suffix)))

    @property
    def wheelops(self) -> Callable[..., object]:
        return self.sample.call

    @property
    def eager(self) -> Callable[..., object]:
        return self.sample.eager

    @property
    def second_order(self) -> bool:  # double backward and forward-over-reverse
        assert self.spec.derivatives is not None
        return self.spec.derivatives.second

    @property
    def backward_op(self) -> str:  # the op that computes its gradient
        assert self.spec.derivatives is not None
        return self.spec.derivatives.backward_op

    def inputs(self, shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int) -> Inputs:
        return self.spec.inputs(shape, dtype, device, seed)[: self.sample.arity]

    def make(self, shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int) -> Inputs:
        return tuple(t.requires_grad_() for t in self.inputs(shape, dtype, device, seed))


CASES = [
    Case(spec, sample)
    for spec in opspecs.ALL
    if spec.derivatives is not None
    for sample in spec.samples
]
CASE_IDS = [case.name for case in CASES]


def outputs(result: object) -> tuple[torch.Tensor, ...]:
    return result if isinstance(result, tuple) else (result,)
