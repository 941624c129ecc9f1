"""Shared pieces of the stream, CUDA graph, compile and multi-GPU tests.

Every op of the catalogue runs at one size (``ROWS x COLS``) in its first dtype
(float32 for the float ops). Results are checked two ways:

* against PyTorch eager in float64 on the host (``eager_reference``), within the
  benchmark's derived rule (tests/_benchmark_rule.py; torch's default float32
  GEMMs, TF32 off, as lltm's own tests assume): the answer is right, not just
  repeatable;
* against the same wheelops call made the plain way (``assert_same_kernels``):
  bit for bit, since the same kernels with the same launch shapes ran on the
  same values. Launch shapes depend on the GPU's SM count, so two GPUs of
  different models are each held to the rule alone.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from _benchmark_rule import rules, verify
from _op_catalog import forward_backward, grad_leaves, outputs
from opspecs._spec import OpSpec

ROWS, COLS = 256, 384


def tensors(values: Sequence[object]) -> list[torch.Tensor]:
    return [v for v in values if isinstance(v, torch.Tensor)]


def grads_like(
    spec: OpSpec, args: tuple, outs: Sequence[torch.Tensor], seed: int
) -> list[torch.Tensor]:
    """Random output gradients (ones would make softmax's input grad ~0).

    Made on the host and copied to each output's device: the copy runs on that
    device's current stream, so callers choose the stream by where they call."""
    if not grad_leaves(args):
        return []
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(o.shape, generator=generator, dtype=torch.float64).to(o.dtype).to(o.device)
        for o in outs
    ]


def _reference_arg(a: object) -> object:
    if not isinstance(a, torch.Tensor):
        return a
    t = a.detach().cpu()
    if t.is_floating_point():
        return t.double().requires_grad_(a.requires_grad)
    return t


def eager_reference(
    spec: OpSpec, args: tuple, out_grads: Sequence[torch.Tensor]
) -> tuple[
    tuple[tuple[torch.Tensor, ...], verify.Rule], tuple[tuple[torch.Tensor, ...], verify.Rule]
]:
    """PyTorch eager's outputs and input grads, in float64 on the host, each with the
    benchmark's derived rule for wheelops' results of them (tests/_benchmark_rule.py:
    the op's own sums, its float32 roundings, its cancelling gradients' terms)."""
    ref_args = tuple(_reference_arg(a) for a in args)
    device = str(next(a.device for a in args if isinstance(a, torch.Tensor)))
    with torch.enable_grad():
        outs = outputs(spec.answer(*ref_args))
        leaves = grad_leaves(ref_args)
        grads: tuple[torch.Tensor, ...] = ()
        grad_rule = out_rule = rules(spec, (ROWS, COLS), args, device)
        if leaves:
            ref_grads = [g.detach().cpu().double() for g in out_grads]
            grads = torch.autograd.grad(outs, leaves, ref_grads)
            grad_rule = rules(spec, (ROWS, COLS), args, device, out_grads)
    return (tuple(o.detach() for o in outs), out_rule), (tuple(grads), grad_rule)


def assert_matches_eager(
    actual: Sequence[torch.Tensor],
    expected: Sequence[torch.Tensor],
    rule: verify.Rule,
    what: str = "",
) -> None:
    """actual (any device) within the rule of eager_reference's tensors (integer results:
    equal), as the benchmark checks a result."""
    assert len(actual) == len(expected), what
    got = [a.detach().cpu() for a in actual]
    for i, (a, e) in enumerate(zip(got, expected, strict=True)):
        assert a.shape == e.shape, f"{what} [{i}]: shape {list(a.shape)} != {list(e.shape)}"
    problem = verify.mismatch(got, got, list(expected), rule)
    assert problem is None, f"{what}: {problem}"


def assert_same_kernels(
    actual: Sequence[torch.Tensor], expected: Sequence[torch.Tensor], what: str = ""
) -> None:
    """Bitwise equal (compared on the host, so the devices may differ): the same kernels
    on the same values, torch's GEMMs too (cuBLAS: the same algorithm for the same
    problem, GPU and workspace size, which PyTorch gives every stream alike)."""
    assert len(actual) == len(expected), what
    for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
        a, e = a.detach().cpu(), e.detach().cpu()
        assert a.dtype == e.dtype, f"{what} [{i}]: dtype {a.dtype} != {e.dtype}"
        torch.testing.assert_close(a, e, atol=0, rtol=0, msg=lambda m, i=i: f"{what} [{i}]: {m}")


@contextlib.contextmanager
def current_stream_on(stream: torch.cuda.Stream) -> Iterator[None]:
    """Make `stream` the current stream of its device, leaving the current device alone.

    ``torch.cuda.stream(s)`` (and ``set_stream``) also switch the current device
    to ``s``'s; the multi-GPU tests need "current device 0, current stream of
    cuda:1 a side stream", which is what a library sees when a caller works on
    cuda:1 without making it current."""
    device = torch.cuda.current_device()
    previous = torch.cuda.current_stream(stream.device)
    torch.cuda.set_stream(stream)
    torch.cuda.set_device(device)
    assert torch.cuda.current_stream(stream.device) == stream
    try:
        yield
    finally:
        torch.cuda.set_stream(previous)
        torch.cuda.set_device(device)


# torch.cuda._sleep(cycles) spins on the SM clock. No datacenter GPU boosts past
# 2.5 GHz, so this many cycles per millisecond sleeps at least that long.
_CYCLES_PER_MS = 2_500_000


def occupy_default_stream(device: torch.device, ms: float) -> None:
    """Queue a kernel that spins for at least `ms` on `device`'s default stream."""
    with torch.cuda.device(device), torch.cuda.stream(torch.cuda.default_stream(device)):
        torch.cuda._sleep(int(_CYCLES_PER_MS * ms))


@dataclass
class BesideBusyRun:
    args: tuple
    out_grads: list[torch.Tensor]
    snapshot: list[torch.Tensor]  # outputs, then input grads: host copies made on the side stream
    busy_after: list[bool]  # per busy device: its default stream still had the sleep queued
    host_ms: float  # from queueing the sleeps to the check


def run_beside_busy_default_streams(
    spec: OpSpec,
    device: torch.device,
    side: torch.cuda.Stream,
    busy: Sequence[torch.device],
    sleep_ms: float,
    seed: int,
) -> BesideBusyRun:
    """Forward and backward of `spec` on `side` (a stream of `device`) while the
    default streams of `busy` run a long sleep; snapshot the results to the host
    on `side` and see whether the sleeps are still running.

    Why this proves the op does not use the default stream: the inputs are made
    on `side` and finished before the sleep, so nothing the op needs is behind
    it. If any kernel of the op (or its backward) went to a busy default
    stream, it would queue behind the sleep, and the host copy made on `side`
    would read memory not yet written (the blocks last held the warm-up's
    different values). If anything synchronized with a default stream (a
    device-wide sync, a blocking call on the legacy stream), the host would
    wait out the sleep and the default stream would be idle at the check.
    """
    # Warm up on the same stream with the same sizes, other values: loads every
    # kernel (lazy module loading may synchronize the context), creates the
    # cuBLAS handle and workspace for `side`, and leaves blocks of these sizes in
    # `side`'s pool of the caching allocator, so the measured run needs no
    # cudaMalloc (which may synchronize).
    with current_stream_on(side):
        warm = spec.inputs((ROWS, COLS), device=device, seed=seed + 1000, requires_grad=True)
        warm_outs = outputs(spec.call(*warm))
        forward_backward(spec, warm, grads_like(spec, warm, warm_outs, seed + 2000))
        # The inputs: made on `side`, complete before anything else is queued.
        # (Not by running the op on them: its freed outputs would leave the right
        # answers in the very blocks the measured run gets, and hide a kernel that
        # never ran on `side`.)
        args = spec.inputs((ROWS, COLS), device=device, seed=seed, requires_grad=True)
        out_grads = grads_like(spec, args, warm_outs, seed + 1)
    for d in busy:
        occupy_default_stream(d, 0.001)  # loads the sleep kernel
        torch.cuda.synchronize(d)
    side.synchronize()
    del warm, warm_outs

    start = time.perf_counter()
    for d in busy:
        occupy_default_stream(d, sleep_ms)
    with current_stream_on(side):
        outs, grads = forward_backward(spec, args, out_grads)
        # Host copies on `side`: they wait for `side` only.
        snapshot = [t.detach().cpu() for t in (*outs, *grads)]
    busy_after = [not torch.cuda.default_stream(d).query() for d in busy]
    host_ms = (time.perf_counter() - start) * 1000
    for d in busy:
        torch.cuda.synchronize(d)
    side.synchronize()
    return BesideBusyRun(args, out_grads, snapshot, busy_after, host_ms)


def check_beside_busy_default_streams(
    spec: OpSpec, device: torch.device, busy: list[torch.device]
) -> None:
    """run_beside_busy_default_streams, checked: right results, the same bits as
    the same call on the default stream, and the default streams still busy.

    The sleep is long (>= 250 ms) next to the op (well under 1 ms of GPU time);
    should a slow host take longer than the sleep to queue the op and copy the
    results back, the check is inconclusive and runs once more with a 1 s sleep.
    """
    side = torch.cuda.Stream(device=device)
    run = None
    for attempt, sleep_ms in enumerate((250.0, 1000.0)):
        # New values each attempt: the last one's right answers are in the pool.
        seed = 3 + 10 * attempt
        run = run_beside_busy_default_streams(spec, device, side, busy, sleep_ms, seed)
        n_outs = len(run.snapshot) - len(grad_leaves(run.args))
        # The same call on the (now idle) default stream, and eager's answer.
        with torch.cuda.device(device):
            expected_outs, expected_grads = forward_backward(spec, run.args, run.out_grads)
        assert_same_kernels(run.snapshot[:n_outs], expected_outs, "outputs")
        assert_same_kernels(run.snapshot[n_outs:], expected_grads, "input grads")
        reference = eager_reference(spec, run.args, run.out_grads)
        (ref_outs, out_rule), (ref_grads, grad_rule) = reference
        assert_matches_eager(run.snapshot[:n_outs], ref_outs, out_rule, "outputs")
        assert_matches_eager(run.snapshot[n_outs:], ref_grads, grad_rule, "input grads")
        if all(run.busy_after) or run.host_ms < sleep_ms:
            break
    assert run is not None
    idle = [str(d) for d, b in zip(busy, run.busy_after, strict=True) if not b]
    assert not idle, (
        f"the default stream of {', '.join(idle)} finished its sleep before the op's results "
        f"were back ({run.host_ms:.0f} ms on the host): the op waited for the default stream "
        "or synchronized the device"
    )
