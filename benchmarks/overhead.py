"""Host overhead: microseconds per call on one tiny tensor, PyTorch's formula vs wheelops.

On a tensor this small the device does almost nothing: the time is Python, the
dispatcher, autograd and (on CUDA) the launches, the cost a model pays per call at
batch 1. Each implementation is called many times in a loop (the device synchronized
once at the end, so launches overlap as in a model), PyTorch's rounds and wheelops' taken
in turn; the best of a few rounds is reported, per call. Three modes:

- ``forward``: inputs that need gradients, grad mode on (a training forward: the
  autograd graph is built);
- ``no_grad``: the same call under ``torch.no_grad()`` (inference);
- ``forward+backward``: the forward, then ``torch.autograd.grad`` of its outputs.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import torch
from opspecs._spec import OpSpec, Output, Shape

from .cases import dtype_name, grad_inputs, inputs, plan
from .verify import as_tuple

MODES = ("forward", "no_grad", "forward+backward")
# wheelops time / PyTorch time may be at most this, per device type and mode. CUDA: issue
# 43's product limits (DESIGN.md 13: the host cost of the formula an op replaces). CPU (the
# smoke run's verdicts, reported, never asserted by a unit test), per autograd layer, from
# what each reaches on 1x64 CPU tensors, where torch's own call is a 1-2 µs C++ fast path:
# - "cpu", the stable-ABI Python layer (no accelerator for this torch, or WHEELOPS_ACCEL=0).
#   Worst rows (best of 15 rounds, a loaded 2-core host): softmax 3.6x no_grad (the native
#   call alone, below autograd, is ~2x torch's whole call), 4.7x forward (an empty
#   autograd.Function costs more than torch.add), 2.0x forward+backward (the Python node);
# - "cpu+accelerator", the C++ accelerator serving: softmax 1.46x no_grad, 1.63x forward,
#   1.16x forward+backward (the boxed stable-ABI call and the Python frame of the public
#   function are what is left).
# Each leaves ~1.2-1.3x of room for a shared host: per-call Python checks put back
# (+2 µs), or a call falling from the accelerator to the Python layer, miss them.
LIMITS: dict[str, dict[str, float]] = {
    "cuda": {"forward": 1.15, "no_grad": 1.0, "forward+backward": 1.1},
    "cpu": {"forward": 5.5, "no_grad": 4.5, "forward+backward": 2.5},
    "cpu+accelerator": {"forward": 2.1, "no_grad": 1.9, "forward+backward": 1.5},
}


def limits(device: torch.device) -> dict[str, float]:
    """The limits of `device` for the autograd layer serving this process."""
    from wheelops.ops import _accel

    if device.type == "cpu" and _accel.state().startswith("loaded"):
        return LIMITS["cpu+accelerator"]
    return LIMITS[device.type]


ROUNDS = 5
# A row over its limit is timed again, up to this many times, its best of all rounds
# kept: a miss must persist to count (on a shared host one round can lose a whole core).
RETRIES = 2


def measure_overhead(
    spec: OpSpec,
    shape: Shape,
    dtype: torch.dtype,
    eager: Callable[..., Output],
    wheelops: Callable[..., Output],
    device: torch.device,
    calls: int,
) -> list[dict[str, Any]]:
    """One row per mode the op has: both implementations' µs per call and the verdict."""
    args = inputs(spec, shape, dtype, device)
    wanted = set(grad_inputs(args)) if plan(spec).has_backward else set()
    leaves = tuple(t.detach().requires_grad_(i in wanted) for i, t in enumerate(args))
    wrt = tuple(leaves[i] for i in sorted(wanted))
    grads = tuple(torch.ones_like(out) for out in as_tuple(eager(*leaves)))
    modes = MODES if wanted else MODES[:2]
    rows = []
    for mode in modes:
        step: dict[str, Callable[[], object]] = {}
        for name, fn in (("torch", eager), ("wheelops", wheelops)):
            if mode == "forward+backward":
                step[name] = _forward_backward(fn, leaves, wrt, grads)
            else:
                step[name] = functools.partial(fn, *leaves)
        row: dict[str, Any] = {
            "op": spec.name,
            "mode": mode,
            "dtype": dtype_name(dtype),
            "shape": [list(t.shape) for t in args],
            "calls": calls,
            "limit": limits(device)[mode],
        }
        try:
            times = _interleaved_us(step, device, calls, no_grad=mode == "no_grad")
            for _ in range(RETRIES):
                if times["wheelops"] / times["torch"] <= row["limit"]:
                    break
                again = _interleaved_us(step, device, calls, no_grad=mode == "no_grad")
                times = {name: min(us, again[name]) for name, us in times.items()}
        except Exception as err:  # reported in the results; the run goes on
            row.update(torch_us=None, wheelops_us=None, ratio=None, verdict="error")
            row["problem"] = f"{type(err).__name__}: {err}"[:500]
        else:
            ratio = times["wheelops"] / times["torch"]
            row.update(torch_us=times["torch"], wheelops_us=times["wheelops"], ratio=ratio)
            row.update(verdict="met" if ratio <= row["limit"] else "missed", problem=None)
        rows.append(row)
    return rows


def _forward_backward(
    fn: Callable[..., Output],
    leaves: tuple[torch.Tensor, ...],
    wrt: tuple[torch.Tensor, ...],
    grads: tuple[torch.Tensor, ...],
) -> Callable[[], object]:
    return lambda: torch.autograd.grad(as_tuple(fn(*leaves)), wrt, grads)


def _interleaved_us(
    steps: dict[str, Callable[[], object]],
    device: torch.device,
    calls: int,
    no_grad: bool,
    rounds: int = ROUNDS,
) -> dict[str, float]:
    """`interleaved_us` on one CPU thread where the device is the CPU: on a shared host
    (CI's, a loaded CPU) load that comes and goes then weighs on both sides alike."""
    # On the CPU, one thread: a 1x64 op has no work to share, and on a loaded host a woken
    # thread pool (lltm's GEMMs) made a call vary 10x from round to round.
    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    try:
        return interleaved_us(steps, device, calls, no_grad, rounds)
    finally:
        torch.set_num_threads(threads)


def interleaved_us(
    steps: dict[str, Callable[[], object]],
    device: torch.device,
    calls: int,
    no_grad: bool = False,
    rounds: int = ROUNDS,
) -> dict[str, float]:
    """Best of `rounds` rounds of `calls` calls of each step, in µs per call, the device
    synchronized after each round, the steps' rounds taken in turn (the user's clock:
    benchmarks.user_loop times its implementations so), at torch's own thread count."""
    best = dict.fromkeys(steps, float("inf"))
    with torch.no_grad() if no_grad else torch.enable_grad():
        for fn in steps.values():
            for _ in range(max(calls // 10, 1)):  # warm-up: caches, allocator, first launches
                fn()
        _synchronize(device)
        for _ in range(rounds):
            for name, fn in steps.items():
                start = time.perf_counter()
                for _ in range(calls):
                    fn()
                _synchronize(device)
                best[name] = min(best[name], (time.perf_counter() - start) / calls * 1e6)
    return best


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
