"""Every op: bitwise determinism, no memory growth, no memory outside torch, threads.

* Determinism: forward and backward twice on the same inputs give bitwise the
  same outputs and gradients (torch.equal), every dtype, at sizes where the
  reductions (row statistics, weight/bias column sums) span many blocks or
  CPU threads. Reductions in wheelops use fixed orders and no atomics; this
  holds them to it.
* Memory: 10,000 calls of each op (and 10,000 forward + backward iterations
  of each differentiable op) leave torch.cuda.memory_allocated() where it was
  after a warm-up call, and memory_reserved() no larger.
* Outside torch's caching allocator: the device memory used besides torch's
  reservation (total - free - reserved, the driver's view) does not change
  over those calls; and no native source calls a CUDA allocation function at
  all (a static scan of csrc/, which runs on CPU too).
* Threads: 8 Python threads run every op concurrently on their own inputs
  (on CUDA half of them on their own streams, half on the default stream) and
  each result equals the single-threaded one bitwise.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path

import opspecs
import pytest
import torch
from _helpers import DEVICES, needs_caching_allocator
from _op_catalog import forward_backward, outputs
from opspecs._spec import OpSpec

REPO = Path(__file__).resolve().parent.parent

# rows x cols per device: on CUDA 4096 x 1024 gives the norms' and bias_gelu's
# column sums hundreds of partial blocks and softmax many teams; on CPU the
# row loops split over the intra-op threads (grain 32768 elements).
DETERMINISM_SIZE = {"cpu": (512, 768), "cuda": (4096, 1024)}


def _grads_for(outs: Sequence[torch.Tensor], seed: int) -> list[torch.Tensor]:
    """Random output gradients (not ones: sums of ones hide reordering less well)."""
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(o.shape, generator=generator, dtype=torch.float64).to(o.dtype).to(o.device)
        for o in outs
    ]


def _run(spec: OpSpec, args: tuple, grads: Sequence[torch.Tensor] | None):
    """Outputs and input gradients (none for non-differentiable ops), detached."""
    if not spec.differentiable:
        return tuple(o.detach() for o in outputs(spec.call(*args))), ()
    outs, input_grads = forward_backward(spec, args, grads)
    return tuple(o.detach() for o in outs), tuple(input_grads)


def _assert_bitwise(first: Sequence[torch.Tensor], again: Sequence[torch.Tensor], what: str):
    assert len(first) == len(again), what
    for i, (a, b) in enumerate(zip(first, again, strict=True)):
        if not torch.equal(a, b):
            diff = (a.double() - b.double()).abs()
            raise AssertionError(
                f"{what} [{i}] differs between identical calls: {int((a != b).sum())} elements, "
                f"max difference {diff.max().item():.3g}"
            )


# ------------------------------------------------------------------ determinism


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("spec", opspecs.ALL, ids=opspecs.NAMES)
def test_bitwise_deterministic(spec: OpSpec, device: str) -> None:
    rows, cols = DETERMINISM_SIZE[device]
    for dtype in spec.dtypes:
        args = spec.inputs((rows, cols), dtype, device, seed=1, requires_grad=True)
        grads = _grads_for(outputs(spec.call(*args)), seed=2) if spec.differentiable else None
        first_out, first_grad = _run(spec, args, grads)
        for attempt in range(2):
            out, grad = _run(spec, args, grads)
            _assert_bitwise(first_out, out, f"{spec.name} {dtype} output (run {attempt + 2})")
            _assert_bitwise(first_grad, grad, f"{spec.name} {dtype} gradient (run {attempt + 2})")


# ------------------------------------------------------------------ memory

CALLS = 10_000
# Small tensors: the point is the count of calls, not their size.
MEMORY_SIZE = (64, 256)
# The driver's view is in pages (2 MiB); anything leaked per call over 10,000
# calls would be far more than this.
DRIVER_SLACK = 4 * 2**20


def _memory_state() -> tuple[int, int, int]:
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    reserved = torch.cuda.memory_reserved()
    # What the process (and anything else on the GPU) holds besides torch's
    # caching allocator: the context, loaded modules, and any allocation a
    # library made behind torch's back.
    outside = total - free - reserved
    return torch.cuda.memory_allocated(), reserved, outside


def _repeat(spec: OpSpec, args: tuple, grads: Sequence[torch.Tensor] | None, n: int) -> None:
    for _ in range(n):
        _run(spec, args, grads)  # results dropped at once


# Forward for every op; forward + backward for those with a gradient.
_MEMORY_PARAMS = [
    pytest.param(spec, backward, id=f"{spec.name}-{'forward_backward' if backward else 'forward'}")
    for spec in opspecs.ALL
    for backward in ((False, True) if spec.differentiable else (False,))
]


@pytest.mark.gpu
@needs_caching_allocator  # what it measures is the caching allocator's state
@pytest.mark.parametrize(("spec", "backward"), _MEMORY_PARAMS)
def test_no_memory_growth_over_10000_calls(spec: OpSpec, backward: bool) -> None:
    rows, cols = MEMORY_SIZE
    args = spec.inputs((rows, cols), spec.dtypes[0], "cuda", seed=1, requires_grad=backward)
    grads = _grads_for(outputs(spec.call(*args)), seed=2) if backward else None
    # Warm-up: the first calls load the kernels' modules (lazy loading), make
    # cuBLAS's handle and workspace (lltm's GEMM) and fill the cache's pools.
    _repeat(spec, args, grads, 3)
    allocated, reserved, outside = _memory_state()
    _repeat(spec, args, grads, CALLS)
    allocated_after, reserved_after, outside_after = _memory_state()
    assert allocated_after == allocated, (
        f"{spec.name}: {allocated_after - allocated} bytes still allocated after {CALLS} calls"
    )
    assert reserved_after <= reserved, (
        f"{spec.name}: the caching allocator reserved {reserved_after - reserved} more bytes"
    )
    assert abs(outside_after - outside) <= DRIVER_SLACK, (
        f"{spec.name}: device memory outside torch's allocator changed by "
        f"{(outside_after - outside) / 2**20:.1f} MiB over {CALLS} calls (another process "
        "on this GPU would also show here)"
    )


# Allocation entry points of the CUDA runtime and driver APIs, and device
# containers that allocate by themselves: wheelops must allocate through
# torch (tensors), which pools memory and orders its reuse on streams.
_ALLOCATORS = re.compile(
    r"\b("
    r"cudaMalloc\w*|cudaFree\w*|cudaHostAlloc|cudaHostRegister|cudaMemPool\w*"
    r"|cudaMallocFromPoolAsync|cuMemAlloc\w*|cuMemCreate|cuMemMap|cuMemFree\w*"
    r"|cuMemHostAlloc|cuMemAddressReserve|cuMemPool\w*"
    r"|(?:thrust::)?device_vector|(?:thrust::)?host_vector"
    r")\b"
)
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_NATIVE_SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hpp"}


def _allocator_calls(source: str) -> list[str]:
    """Allocation API names used in C/C++/CUDA source, comments ignored."""
    return [m.group(1) for m in _ALLOCATORS.finditer(_COMMENTS.sub(" ", source))]


def test_scanner_finds_allocations() -> None:
    # The scan below must be able to fail: calls are found, comments are not.
    source = (
        "// cudaMalloc(&p, n) is not used\n/* nor cudaFree(p) */\n"
        "void f() { cudaMallocAsync(&p, n, stream); cudaFreeAsync(p, stream); }\n"
        "thrust::device_vector<float> v(3); cuMemAlloc_v2(&q, 8);\n"
    )
    assert _allocator_calls(source) == [
        "cudaMallocAsync",
        "cudaFreeAsync",
        "thrust::device_vector",
        "cuMemAlloc_v2",
    ]


def test_native_sources_allocate_only_through_torch() -> None:
    csrc = REPO / "csrc"
    if not csrc.is_dir():
        pytest.skip(f"no native sources at {csrc} (tests run outside a checkout)")
    files = sorted(p for p in csrc.rglob("*") if p.suffix in _NATIVE_SUFFIXES)
    assert any(p.suffix == ".cu" for p in files), f"no CUDA sources found under {csrc}"
    found = {
        str(p.relative_to(REPO)): calls
        for p in files
        if (calls := _allocator_calls(p.read_text(encoding="utf-8", errors="replace")))
    }
    assert not found, f"native code allocates outside torch's allocator: {found}"


# ------------------------------------------------------------------ threads

THREADS = 8
THREAD_SIZE = {"cpu": (64, 256), "cuda": (256, 512)}
ITERATIONS = {"cpu": 10, "cuda": 30}


def _thread_dtypes(spec: OpSpec) -> list[torch.dtype]:
    """The op's first dtype, and bfloat16 too where it takes it (another kernel instance)."""
    return [spec.dtypes[0]] + [d for d in spec.dtypes[1:] if d == torch.bfloat16]


@pytest.mark.parametrize("device", DEVICES)
def test_threads_match_single_threaded(device: str) -> None:
    rows, cols = THREAD_SIZE[device]
    work = []  # per thread: (spec, args, grads, expected outputs, expected gradients)
    for t in range(THREADS):
        mine = []
        for spec in opspecs.ALL:
            for dtype in _thread_dtypes(spec):
                args = spec.inputs((rows, cols), dtype, device, seed=100 + t, requires_grad=True)
                grads = (
                    _grads_for(outputs(spec.call(*args)), seed=200 + t)
                    if spec.differentiable
                    else None
                )
                mine.append((spec, dtype, args, grads, *_run(spec, args, grads)))
        work.append(mine)
    if device == "cuda":
        torch.cuda.synchronize()  # inputs and expected results ready for every stream
    barrier = threading.Barrier(THREADS)

    def worker(t: int) -> int:
        stream = torch.cuda.Stream() if device == "cuda" and t % 2 == 0 else None
        barrier.wait()  # all threads call at once
        checked = 0
        for i in range(ITERATIONS[device]):
            # Each thread walks the ops from its own offset, so that different
            # ops (and kernels) overlap, not the same one in lockstep.
            mine = work[t][t:] + work[t][:t]
            for spec, dtype, args, grads, out0, grad0 in mine:
                # The comparison runs on the thread's stream too; torch.equal
                # waits for it before the results are freed.
                with torch.cuda.stream(stream) if stream is not None else nullcontext():
                    out, grad = _run(spec, args, grads)
                    what = f"thread {t} iteration {i}: {spec.name} {dtype}"
                    _assert_bitwise(out0, out, f"{what} output")
                    _assert_bitwise(grad0, grad, f"{what} gradient")
                checked += 1
        return checked

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        futures = [pool.submit(worker, t) for t in range(THREADS)]
        # result() re-raises a thread's exception here.
        counts = [f.result() for f in futures]
    assert counts == [ITERATIONS[device] * len(work[0])] * THREADS
