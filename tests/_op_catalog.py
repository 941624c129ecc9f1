"""The op descriptions (specs/opspecs) as the reliability suites use them.

The reliability tests (streams, graphs, several GPUs, determinism, memory, threads,
export, the sanitizer runs) loop over CATALOG, so that an op described in opspecs is
covered by all of them. Each case builds its inputs from a ``rows x cols`` size so that
callers choose the scale; the answers are the description's (eager PyTorch's, or the
exact one where eager's is not exact on every device).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import opspecs
import torch
from opspecs._spec import OpSpec

import wheelops


@dataclass(frozen=True)
class OpCase:
    """One op: ``inputs(rows, cols, ...)`` gives the positional arguments of both ``run``
    (wheelops) and ``eager`` (the answer)."""

    spec: OpSpec

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def run(self) -> Callable[..., object]:
        return self.spec.call

    @property
    def eager(self) -> Callable[..., object]:
        return self.spec.samples[0].answer

    @property
    def argument_names(self) -> list[str]:
        """The public function's parameters: its errors name the arguments by them."""
        return list(inspect.signature(getattr(wheelops, self.name)).parameters)

    @property
    def dtypes(self) -> tuple[torch.dtype, ...]:
        return self.spec.dtypes

    @property
    def differentiable(self) -> bool:
        return self.spec.derivatives is not None

    def inputs(
        self,
        rows: int,
        cols: int,
        dtype: torch.dtype | None = None,
        device: str | torch.device = "cpu",
        seed: int = 0,
        requires_grad: bool = False,
    ) -> tuple:
        args = self.spec.inputs((rows, cols), dtype or self.dtypes[0], device, seed)
        if requires_grad and self.differentiable:
            args = tuple(
                a.requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                for a in args
            )
        return args


def outputs(result: object) -> tuple[torch.Tensor, ...]:
    """An op's result as a tuple of tensors (lltm returns two)."""
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def grad_leaves(args: tuple) -> tuple[torch.Tensor, ...]:
    return tuple(a for a in args if isinstance(a, torch.Tensor) and a.requires_grad)


def forward_backward(case: OpCase, args: tuple, grads: Sequence[torch.Tensor] | None = None):
    """wheelops forward, and the gradients of every input that requires one.

    ``grads`` defaults to ones; returns (outputs, input gradients)."""
    outs = outputs(case.run(*args))
    leaves = grad_leaves(args)
    if not leaves:
        return outs, ()
    grads = grads if grads is not None else [torch.ones_like(o) for o in outs]
    return outs, torch.autograd.grad(outs, leaves, grads)


CATALOG: tuple[OpCase, ...] = tuple(OpCase(spec) for spec in opspecs.ALL)
BY_NAME = {case.name: case for case in CATALOG}
NAMES = [case.name for case in CATALOG]
