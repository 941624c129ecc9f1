"""How each public function reaches its native op: native code checks, Python explains.

The native kernels check every argument: they must, since torch.ops.wheelops.* reaches
them directly. Running the same checks in Python first, on every call, cost more than
a small op itself, so a public function calls its op at once and runs its Python
argument checks only when that call fails. A bad argument then raises the check's
TypeError or ValueError, naming the argument, in place of the native RuntimeError; any
other failure (out of memory, say) is raised as it came. Traced calls (torch.compile)
check first, as the fake kernels do: a trace must not record a call that cannot run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from wheelops.ops import _autograd, _checks

# Whether TorchDynamo is tracing this call: dynamo folds it to True as it traces a public
# function, which then takes the op's own Python path (checks first, as the fake kernels do).
# In eager mode it is one plain call that returns False; torch.compiler.is_compiling() is two
# nested ones (~0.1 µs, half the public function's own cost). Other tracers (non-strict
# torch.export, make_fx) pass fake or functional tensors, which the accelerator's entry hands
# to the Python path, where `run` sees torch.compiler.is_compiling().
dynamo_tracing = torch.compiler.is_dynamo_compiling
_is_compiling = torch.compiler.is_compiling


def run(
    op: str, check: Callable[[], object], overload: Any, *args: Any, inference: Any = None
) -> Any:
    """``overload(*args)`` for wheelops.`op`, whose argument checks are ``check()``;
    ``args[0]`` is the tensor that says where the op runs. ``inference``: an op of the
    same arguments that returns only `overload`'s first output (the norms without their
    statistics), run in eager mode when no derivative is wanted; then the first output
    is returned either way."""
    if _is_compiling():
        check()
        _checks.runnable(op, args[0], tracing=True)
        result = overload(*args)
        return result if inference is None else result[0]
    try:
        # A CPU call needs no check first: without the native library it fails, and
        # _explain raises runnable's error then. A CUDA call checks that this build runs
        # on the GPU before launching.
        if args[0].is_cuda:
            _checks.runnable(op, args[0], tracing=False)
        return _autograd.call_eager(overload, args, inference)
    except Exception:
        _explain(op, check, args[0])
        raise


def _explain(op: str, check: Callable[[], object], tensor: Any) -> None:
    """Inside the `except` of a failed call: raise what the checks find, alone (the
    native error would only repeat it as a RuntimeError); return if they find nothing."""
    try:
        check()
        _checks.runnable(op, tensor)
    except Exception as err:
        err.__suppress_context__ = True
        raise
