"""The autograd layer on public torch APIs only: the ops' derivatives where this torch
lacks an internal the fast layer uses, or where WHEELOPS_AUTOGRAD=public asks for it.

Two public pieces, each where it alone is right:

- every call wheelops makes (its functions and modules, and the formulas, which call
  the backward ops) applies a public ``torch.autograd.Function`` with ``backward``,
  ``jvp`` and a generated vmap rule, so reverse mode, forward mode, torch.func's
  transforms and the second derivatives an op has are served, and a missing formula
  raises, naming the op and the transform;
- each raw op, ``torch.ops.wheelops.*`` (what a torch.compile graph calls), gets
  ``torch.library.register_autograd``: reverse mode, with the same formulas and the
  same refusals. register_autograd has no forward mode, and a tangent through it comes
  out as zero, so the ops' own calls never go through it outside a trace, and a raw op
  given a tangent (torch.autograd.forward_ad, torch.func.jvp) refuses it, naming the
  wheelops function that serves it (_Fragment), rather than return that zero.

It costs more host time per call than the fast layer: no public API tells whether a
torch.func transform or a dual level is active, so the Function is applied on every call
but in inference mode (``torch.inference_mode()``, where torch's own ops drop tangents
too), and only there do the ops skip what their derivatives need (the norms'
statistics, relu_scale's mask, fused_linear_gelu's pre-activation).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.forward_ad import unpack_dual

from wheelops.ops._unsupported import Formula, unsupported


class _Fragment(torch.library.Library):
    """wheelops' library fragment, whose Autograd kernels (register_autograd's, the one
    kind it is given) first refuse an argument that carries a forward-mode tangent.

    register_autograd's kernel runs an op below autograd when nothing requires grad, so a
    tangent would come out as zero. forward_ad.unpack_dual (public) sees a tangent of
    torch.autograd.forward_ad and of torch.func.jvp alike here; inside a wheelops
    Function's forward, where torch turns forward mode off, it sees none, so the ops' own
    calls pass. register_autograd registers its kernel through ``lib.impl``; a torch that
    registered it otherwise would fail test_derivatives' raw-op forward-mode test, which
    the derivative suite's public-layer run (test_autograd_layers) holds this layer to."""

    def impl(self, op_name: Any, fn: Any, dispatch_key: str = "", *args: Any, **kwargs: Any) -> Any:
        if dispatch_key == "Autograd" and isinstance(op_name, str):
            fn = _refusing_tangents(op_name, fn)
        return super().impl(op_name, fn, dispatch_key, *args, **kwargs)


def _refusing_tangents(op: str, kernel: Any) -> Any:
    def refusing(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        for value in (*args, *kwargs.values()):
            if isinstance(value, torch.Tensor) and unpack_dual(value).tangent is not None:
                raise RuntimeError(_no_forward_mode(op))
        return kernel(keyset, *args, **kwargs)

    return refusing


def _no_forward_mode(op: str) -> str:
    """Why a raw op refuses a tangent, and which wheelops function to call instead."""
    from wheelops import ops

    # The op's public function: the longest one whose name starts the op's (lltm for
    # lltm_gates, relu_scale for relu_scale_with_mask and relu_scale_backward).
    public = max((f for f in ops.__all__ if op.startswith(f)), key=len, default=op)
    return (
        f"torch.ops.wheelops.{op} was given a forward-mode AD tangent "
        "(torch.autograd.forward_ad or torch.func.jvp), which a raw op does not support on "
        "the public-API autograd layer (WHEELOPS_AUTOGRAD=public, or a torch without the "
        "internals of the fast layer: `python -m wheelops` says which): call "
        f"wheelops.{public}, which supports forward mode"
    )


_LIBRARY = _Fragment("wheelops", "FRAGMENT")  # kept alive: it holds the kernels

# Each op's Function, and whether it runs an op that returns more (forward_with).
_FUNCTIONS: dict[Any, tuple[type, bool]] = {}


def may_carry_tangents() -> bool:
    """Whether a derivative may be asked of an op called now. No public API tells whether a
    torch.func transform or a dual level is active, so: always, but in inference mode,
    where torch's own ops drop tangents and gradients as well."""
    return not torch.is_inference_mode_enabled()


def call(overload: Any, *args: Any) -> Any:
    """``overload(*args)``, the way every wheelops function calls its op: the op's
    Function, outside a trace; inside one, the raw op (register_autograd's kernel)."""
    if torch.compiler.is_compiling():
        return overload(*args)
    return call_eager(overload, args)


def call_eager(overload: Any, args: tuple, inference: Any = None) -> Any:
    """`call` where the caller knows that torch.compile is not tracing. ``inference``: an
    op of the same arguments returning `overload`'s first output alone, run in inference
    mode (no derivative can be asked there); then the first output is returned either
    way. Every argument must be passed: the Function's formulas get them as given."""
    registered = _FUNCTIONS.get(overload)
    if registered is None or not may_carry_tangents():
        # An op without derivatives (rgb_to_gray), or inference mode.
        if inference is not None:
            return inference(*args)
        result = overload(*args)
    else:
        function, more = registered
        result = function.apply(*args)
        if more:
            result = result[0]
    return result if inference is None else result[0]


def register(
    op: str,
    *,
    setup_context: Any,
    backward: Formula | None,
    jvp: Formula | None,
    gradient_of: str | None = None,
    forward_with: str | None = None,
) -> None:
    """wheelops::`op`'s Function and its raw op's autograd kernel (see _autograd.register)."""
    overload = getattr(torch.ops.wheelops, op).default
    runs = overload if forward_with is None else getattr(torch.ops.wheelops, forward_with).default

    def forward(*args: Any) -> Any:
        # Function.apply turns derivatives off for its forward: the op's autograd kernel
        # (register_autograd's) goes straight below autograd.
        return runs(*args)

    def backward_or_refuse(ctx: Any, *grads: Any) -> Any:
        if backward is None:
            raise unsupported(op, "backward", gradient_of)
        return backward(ctx, *grads)

    def jvp_or_refuse(ctx: Any, *tangents: Any) -> Any:
        if jvp is None:
            raise unsupported(op, "forward-mode AD", gradient_of)
        return jvp(ctx, *tangents)

    function = type(
        f"wheelops_{op}",
        (torch.autograd.Function,),
        {
            "forward": staticmethod(forward),
            "setup_context": staticmethod(setup_context),
            "backward": staticmethod(backward_or_refuse),
            "jvp": staticmethod(jvp_or_refuse),
            "generate_vmap_rule": True,
        },
    )
    _FUNCTIONS[overload] = (function, forward_with is not None)

    def raw_setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
        if forward_with is not None:
            # The formulas read what only `runs` returns (relu_scale's mask): run it
            # (below autograd here, as register_autograd's forward is).
            output = runs(*inputs)
            ctx.wheelops_more_outputs = len(output) - 1
        setup_context(ctx, inputs, output)

    def raw_backward(ctx: Any, *grads: Any) -> Any:
        more = getattr(ctx, "wheelops_more_outputs", 0)
        return backward_or_refuse(ctx, *grads, *(None,) * more)

    torch.library.register_autograd(
        f"wheelops::{op}", raw_backward, setup_context=raw_setup_context, lib=_LIBRARY
    )
