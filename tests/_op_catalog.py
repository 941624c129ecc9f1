"""What the cross-cutting suites do with the op descriptions (specs/opspecs): run an op
forward and backward, and parametrize over every differentiable op's calls.

The reliability tests (streams, graphs, several GPUs, determinism, memory, threads,
export, the sanitizer runs) loop over opspecs.ALL, so that an op described there is
covered by all of them; the derivative tests over DERIVATIVE_SAMPLES.
"""

from __future__ import annotations

from collections.abc import Sequence

import opspecs
import pytest
import torch
from opspecs._spec import OpSpec


def outputs(result: object) -> tuple[torch.Tensor, ...]:
    """An op's result as a tuple of tensors (lltm returns two)."""
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def grad_leaves(args: tuple) -> tuple[torch.Tensor, ...]:
    return tuple(a for a in args if isinstance(a, torch.Tensor) and a.requires_grad)


def forward_backward(spec: OpSpec, args: tuple, grads: Sequence[torch.Tensor] | None = None):
    """wheelops forward, and the gradients of every input that requires one.

    ``grads`` defaults to ones; returns (outputs, input gradients)."""
    outs = outputs(spec.call(*args))
    leaves = grad_leaves(args)
    if not leaves:
        return outs, ()
    grads = grads if grads is not None else [torch.ones_like(o) for o in outs]
    return outs, torch.autograd.grad(outs, leaves, grads)


# (spec, sample) for every call of every differentiable op, named as the op and suffix.
DERIVATIVE_SAMPLES = [
    pytest.param(spec, sample, id=spec.sample_name(sample))
    for spec in opspecs.ALL
    if spec.differentiable
    for sample in spec.samples
]
