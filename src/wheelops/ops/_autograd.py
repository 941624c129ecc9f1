"""One autograd layer for every op: reverse mode, forward mode (JVP), and a clear refusal
of every derivative an op does not have.

torch.library.register_autograd alone covers reverse mode only: a tangent passed by
torch.func.jvp or torch.autograd.forward_ad went through it unseen and came out as
zero, and a backward op without a kernel of its own claimed a gradient it could not
give (double backward returned zeros). Here every differentiable op gets both
derivatives, and every op without one (the backward ops, unless they have a formula)
raises, naming the op and the transform, the moment a gradient or a tangent would flow
through it.

Two layers keep that promise; which one serves is decided once, at import
(wheelops._compat.policy.public_autograd over the probe of
wheelops/_compat/torch_internals.py; `python -m wheelops` names it):

- the fast layer (_autograd_fast.py), on torch internals: the least host time per call;
- the public layer (_autograd_public.py), on public torch APIs only: where this torch
  lacks one of those internals, or where WHEELOPS_AUTOGRAD=public asks for it.

The op modules call only what this module exports.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from wheelops._compat import policy, torch_internals
from wheelops.ops._unsupported import Formula, unsupported

PUBLIC = policy.public_autograd(torch_internals.facts())

if PUBLIC:
    from wheelops.ops._autograd_public import call, call_eager, may_carry_tangents
    from wheelops.ops._autograd_public import register as _register
else:
    from wheelops.ops._autograd_fast import call, call_eager, may_carry_tangents
    from wheelops.ops._autograd_fast import register as _register

__all__ = [
    "PUBLIC",
    "accelerated",
    "call",
    "call_eager",
    "may_carry_tangents",
    "no_context",
    "register",
    "register_gradient_without_derivatives",
    "unsupported",
    "zero_if_none",
]


def register(
    op: str,
    *,
    setup_context: Any,
    backward: Formula | None,
    jvp: Formula | None,
    gradient_of: str | None = None,
    forward_with: str | None = None,
) -> None:
    """The derivatives of wheelops::`op`.

    ``setup_context(ctx, inputs, output)`` saves what the formulas need (tensors for
    ``jvp`` with ``ctx.save_for_forward``); ``backward(ctx, *grads)`` returns one
    gradient per input; ``jvp(ctx, *tangents)`` gets one tangent (or None) per input
    and returns the outputs'. A formula left None makes that transform raise
    NotImplementedError; ``gradient_of`` names the forward op of a backward op, for
    the message. ``forward_with`` names an op with the same inputs that returns `op`'s
    one output followed by more (what only the formulas need, such as a mask): when a
    derivative may be wanted it runs in place of `op`, the formulas see all its outputs,
    and the caller gets `op`'s.
    """
    _register(
        op,
        setup_context=setup_context,
        backward=backward,
        jvp=jvp,
        gradient_of=gradient_of,
        forward_with=forward_with,
    )


def accelerated(op: str, python_path: Callable[..., Any]) -> Callable[..., Any]:
    """wheelops.`op`'s eager entry: the optional C++ accelerator's (wheelops/ops/_accel.py),
    which hands every call it does not serve to ``python_path``, where it serves this op
    and this torch; else ``python_path``. The public layer uses public torch APIs alone,
    so never the accelerator. Called by the op's register(), after the native schemas
    exist."""
    if PUBLIC:
        return python_path
    from wheelops.ops import _accel

    return _accel.entry(op, python_path)


def register_gradient_without_derivatives(forward: str) -> None:
    """The derivatives of wheelops::`forward`_backward, which has none of its own:
    differentiating through it raises, naming it and `forward`."""
    register(
        f"{forward}_backward",
        setup_context=no_context,
        backward=None,
        jvp=None,
        gradient_of=forward,
    )


def zero_if_none(tangent: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """A JVP input's tangent, zeros where the input has none."""
    return torch.zeros_like(like) if tangent is None else tangent


def no_context(ctx: Any, inputs: tuple, output: Any) -> None:
    """setup_context of an op whose formulas need nothing saved (or that has none)."""
