"""What is benchmarked: the op descriptions (specs/opspecs) that have a benchmark part,
each at the shapes of a profile and the dtypes asked for.

Each op's ``eager`` is the natural PyTorch formula a user would write; ``torch.compile``
compiles that same function, and wheelops must match its results before anything is
timed. The bytes a pass moves are counted at best (each input read once, each output
written once); an implementation that moves more shows it as a lower GB/s.

Shapes come in profiles: ``full`` (the shapes that matter on a GPU), ``quick`` (one
representative shape per op), ``tiny`` (the CPU smoke run: small, odd sizes, to check the
harness and correctness, not speed), ``sweep`` (64K to 256M elements, for GB/s against
size) and ``overhead`` (one tiny tensor, where the time is host work: Python,
dispatcher, launches).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import opspecs
import torch
from opspecs._shapes import PROFILES
from opspecs._spec import Benchmark, OpSpec, Output

# (PROFILES, OpSpec and Output for the harness's other modules)
__all__ = ["OPS", "OPS_BY_NAME", "PROFILES", "SEED", "Case", "OpSpec", "Output", "cases"]

Shape = tuple[int, ...]
Profile = str  # one of PROFILES
SEED = 1234

OPS: tuple[OpSpec, ...] = tuple(spec for spec in opspecs.ALL if spec.benchmark is not None)
OPS_BY_NAME: Mapping[str, OpSpec] = {spec.name: spec for spec in OPS}


@dataclass(frozen=True)
class Case:
    """One op at one shape and dtype (both passes, when the op has a backward)."""

    spec: OpSpec
    shape: Shape
    dtype: torch.dtype

    @property
    def plan(self) -> Benchmark:
        assert self.spec.benchmark is not None, f"{self.spec.name} is not benchmarked here"
        return self.spec.benchmark

    @property
    def has_backward(self) -> bool:
        return self.plan.has_backward

    @property
    def label(self) -> str:
        return self.plan.label(self.shape)

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).removeprefix("torch.")

    def inputs(self, device: torch.device) -> tuple[torch.Tensor, ...]:
        return self.spec.make(self.shape, self.dtype, device, SEED)

    def bytes(self, backward: bool) -> int:
        itemsize = torch.empty((), dtype=self.dtype).element_size()
        count = self.plan.backward_bytes if backward else self.plan.forward_bytes
        assert count is not None
        return count(self.shape, itemsize)


def grad_inputs(inputs: tuple[torch.Tensor, ...]) -> tuple[int, ...]:
    """Which inputs the backward differentiates: every floating-point one."""
    return tuple(i for i, t in enumerate(inputs) if t.is_floating_point())


def cases(spec: OpSpec, profile: Profile, dtypes: tuple[torch.dtype, ...]) -> list[Case]:
    # An op of other dtypes (images, volumes) ignores --dtypes: its own dtype instead.
    kinds = [dtype for dtype in dtypes if dtype in spec.dtypes] or spec.dtypes[:1]
    assert spec.benchmark is not None
    return [Case(spec, shape, dtype) for dtype in kinds for shape in spec.benchmark.shapes[profile]]
