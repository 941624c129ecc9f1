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

import opspecs
import torch
from opspecs._spec import Benchmark, OpSpec, Shape

Profile = str  # one of opspecs._shapes.PROFILES
SEED = 1234

OPS: tuple[OpSpec, ...] = tuple(spec for spec in opspecs.ALL if spec.benchmark is not None)
OPS_BY_NAME: Mapping[str, OpSpec] = {spec.name: spec for spec in OPS}


def plan(spec: OpSpec) -> Benchmark:
    assert spec.benchmark is not None, f"{spec.name} is not benchmarked here"
    return spec.benchmark


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def inputs(
    spec: OpSpec, shape: Shape, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, ...]:
    """The op's arguments at its own ``shape`` (a benchmark shape is the op's, not mapped
    by problem_shape), the same on every run."""
    return spec.make(shape, dtype, device, SEED)


def grad_inputs(inputs: tuple[torch.Tensor, ...]) -> tuple[int, ...]:
    """Which inputs the backward differentiates: every floating-point one."""
    return tuple(i for i, t in enumerate(inputs) if t.is_floating_point())


def cases(
    spec: OpSpec, profile: Profile, dtypes: tuple[torch.dtype, ...]
) -> list[tuple[Shape, torch.dtype]]:
    """The (shape, dtype) pairs the op is timed at (both passes, when it has a backward)."""
    # An op of other dtypes (images, volumes) ignores --dtypes: its own dtype instead.
    kinds = [dtype for dtype in dtypes if dtype in spec.dtypes] or spec.dtypes[:1]
    return [(shape, dtype) for dtype in kinds for shape in plan(spec).shapes[profile]]
