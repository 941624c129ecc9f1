"""The fast autograd layer: one Autograd kernel per op, on torch internals.

Each op's kernel applies a single-level autograd.Function below the torch.func
transforms (as torch.func does for its own), and `call` skips the dispatcher's trip
through that kernel where no transform, forward-mode level or trace is active. Every
torch internal used here is listed in wheelops/_compat/torch_internals.py and probed
at import: this module is imported only where all of them exist
(wheelops/ops/_autograd.py chooses).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import _C
from torch._functorch.utils import enable_single_level_autograd_function
from torch.autograd import forward_ad
from torch.autograd.forward_ad import _set_fwd_grad_enabled
from torch.autograd.function import _SingleLevelFunction

from wheelops.ops._unsupported import Formula, unsupported

_LIBRARY = torch.library.Library("wheelops", "FRAGMENT")  # kept alive: it holds the kernels


# Looked up once: the per-call path below reads each as a module global, not an attribute.
_is_grad_enabled = _C.is_grad_enabled
_any_requires_grad = _C._any_requires_grad
_has_torch_function = _C._has_torch_function
_maybe_current_level = _C._functorch.maybe_current_level
_BelowAutograd = _C._AutoDispatchBelowAutograd


def _wants_gradient(args: tuple) -> bool:
    return _is_grad_enabled() and _any_requires_grad(*args)


def may_carry_tangents() -> bool:
    # A dual level of torch.autograd.forward_ad, or a torch.func transform (its jvp is
    # forward AD on levels of its own), is active: then autograd.Function looks for
    # tangents on the inputs itself.
    return forward_ad._current_level >= 0 or _maybe_current_level() is not None


class _Direct(NamedTuple):
    """What `call_eager` applies when an input needs a gradient: the op's Function for
    calls made outside the dispatcher (no keyset argument, no wrappers around the
    formulas), the schema's defaults and, for a `forward_with` op, how many of the
    Function's outputs the op returns (0: all of them)."""

    function: type
    defaults: tuple
    returns: int


# Each op's direct Function, for `call_eager`.
_FUNCTIONS: dict[Any, _Direct] = {}


def call(overload: Any, *args: Any) -> Any:
    """``overload(*args)``, the way every wheelops function calls its op.

    The Python Autograd kernel, reached through the dispatcher, costs more than the op
    itself on a small tensor. Where no torch.func transform, forward-mode level,
    __torch_function__ override or trace (torch.compile) is involved, which is where
    that kernel could only do one of two things, ``call`` does it directly: the op's
    autograd.Function when an input needs a gradient, else the op straight below
    autograd. Everything else takes the full path.
    """
    if torch.compiler.is_compiling():
        return overload(*args)
    return call_eager(overload, args)


def call_eager(overload: Any, args: tuple, inference: Any = None) -> Any:
    """`call` where the caller knows that torch.compile is not tracing. ``inference``: an
    op of the same arguments returning `overload`'s first output alone, run when no
    derivative is wanted; then the first output is returned either way."""
    # may_carry_tangents() inlined: this is every call's path, and a call costs ~0.1 µs.
    if (
        forward_ad._current_level >= 0
        or _maybe_current_level() is not None
        or _has_torch_function(args)
    ):
        result = overload(*args)
    elif _is_grad_enabled() and _any_requires_grad(*args):
        function, defaults, returns = _FUNCTIONS[overload]
        if len(args) < len(defaults):
            args = (*args, *defaults[len(args) :])
        result = function.apply(*args)
        if returns:
            result = result[0] if returns == 1 else tuple(result[:returns])
    else:
        with _BelowAutograd():
            return (overload if inference is None else inference)._op(*args)
    return result if inference is None else result[0]


def register(
    op: str,
    *,
    setup_context: Callable[[Any, tuple, Any], None],
    backward: Formula | None,
    jvp: Formula | None,
    gradient_of: str | None = None,
    forward_with: str | None = None,
) -> None:
    """The Autograd kernel of wheelops::`op` (the contract: _autograd.register)."""
    overload = getattr(torch.ops.wheelops, op).default
    runs = overload if forward_with is None else getattr(torch.ops.wheelops, forward_with).default
    returns = len(overload._schema.returns)
    # The dispatcher drops trailing arguments equal to their defaults; the formulas
    # get every input.
    defaults = tuple(argument.default_value for argument in overload._schema.arguments)

    def own_outputs(result: Any) -> Any:
        if forward_with is None:
            return result
        return result[0] if returns == 1 else tuple(result[:returns])

    def redispatch(target: Any, keyset: _C.DispatchKeySet, args: tuple) -> Any:
        with _C._AutoDispatchBelowAutograd():
            return target.redispatch(keyset & _C._after_autograd_keyset, *args)

    def forward(*args: Any) -> Any:
        *inputs, keyset = args
        if _C._functorch.maybe_current_level() is None:
            return redispatch(runs, keyset, tuple(inputs))
        # Inside a torch.func transform the redispatch goes on to the transforms below
        # this one (jacrev(jacrev(f)) differentiates the op again there), with the
        # derivatives back on that the Function turned off for its forward, as
        # torch.func does for its own Functions.
        with torch.enable_grad(), _set_fwd_grad_enabled(True):
            return redispatch(runs, keyset, tuple(inputs))

    def setup(ctx: Any, inputs: tuple, output: Any) -> None:
        setup_context(ctx, inputs[:-1], output)

    def backward_with_keyset(ctx: Any, *grads: Any) -> tuple:
        if backward is None:
            raise unsupported(op, "backward", gradient_of)
        result = backward(ctx, *grads)
        return (*(result if isinstance(result, tuple) else (result,)), None)

    def jvp_without_keyset(ctx: Any, *tangents: Any) -> Any:
        if jvp is None:
            raise unsupported(op, "forward-mode AD", gradient_of)
        return jvp(ctx, *tangents[:-1])

    function = type(
        f"wheelops_{op}",
        (_SingleLevelFunction,),
        {
            "forward": staticmethod(forward),
            "setup_context": staticmethod(setup),
            "backward": staticmethod(backward_with_keyset),
            "jvp": staticmethod(jvp_without_keyset),
        },
    )

    def apply(keyset: _C.DispatchKeySet, args: tuple) -> Any:
        # This kernel runs below the torch.func transforms, which have already given the
        # tensors of their level: apply the Function at that level, as torch.func does
        # for its own (Function.apply would hand the call back to the transforms).
        with enable_single_level_autograd_function():
            return own_outputs(function.apply(*args, *defaults[len(args) :], keyset))

    def kernel(keyset: _C.DispatchKeySet, *args: Any) -> Any:
        # A missing formula raises when a derivative is asked of it, not here: calling a
        # backward op with inputs that require grad is fine until something
        # differentiates through it.
        if _wants_gradient(args) or may_carry_tangents():
            return apply(keyset, args)
        return redispatch(overload, keyset, args)

    _LIBRARY.impl(op, kernel, "Autograd", with_keyset=True)

    # The same derivatives for `call_eager`, which applies the Function itself, outside
    # the dispatcher: no keyset argument, so the formulas are the Function's own
    # methods (no wrapper, no argument slicing) where they exist.
    def forward_direct(*inputs: Any) -> Any:
        with _BelowAutograd():
            return runs._op(*inputs)

    direct = type(
        f"wheelops_{op}_direct",
        (_SingleLevelFunction,),
        {
            "forward": staticmethod(forward_direct),
            "setup_context": staticmethod(setup_context),
            # Without a formula, the keyset variants refuse before they look at a keyset.
            "backward": staticmethod(backward if backward is not None else backward_with_keyset),
            "jvp": staticmethod(jvp if jvp is not None else jvp_without_keyset),
        },
    )
    _FUNCTIONS[overload] = _Direct(direct, defaults, 0 if forward_with is None else returns)
