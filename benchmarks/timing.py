"""How a callable is timed: the same way for wheelops, eager and torch.compile.

On CUDA each repetition is bracketed by CUDA events, after a write of a buffer
larger than the L2 cache (so every repetition reads its inputs from memory, as
in a real model where the previous layer evicted them) and a spin kernel of
about a millisecond: the host queues the whole step (a backward's Python and
launches included) while the GPU spins, so the events time the GPU's work, not
the host's. The host's cost per call is measured apart (overhead.py). The result
is the median. On the CPU (the smoke run) it is plain wall-clock time.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

MIN_FLUSH_BYTES = 256 * 2**20
HEAD_START_CYCLES = 2_000_000  # about 1 ms at the 1.5-2 GHz of current data-centre GPUs


@dataclass(frozen=True)
class Timing:
    median_us: float
    min_us: float
    reps: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Timer:
    """Times callables on one device: warm-up, then `reps` measured repetitions."""

    def __init__(self, device: torch.device, reps: int, warmup: int) -> None:
        if reps < 1 or warmup < 0:
            raise ValueError(f"need reps >= 1 and warmup >= 0, got {reps} and {warmup}")
        self.device, self.reps, self.warmup = device, reps, warmup
        self.flush: torch.Tensor | None = None
        if device.type == "cuda":
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
            self.flush = torch.empty(max(MIN_FLUSH_BYTES, 4 * l2), dtype=torch.uint8, device=device)

    @property
    def method(self) -> str:
        if self.flush is None:
            return "wall clock (time.perf_counter), median"
        return (
            f"CUDA events, median, L2 flushed by writing {self.flush_bytes // 2**20} MiB, "
            f"then a {HEAD_START_CYCLES:,}-cycle spin so the host queues the step first"
        )

    @property
    def flush_bytes(self) -> int:
        return 0 if self.flush is None else self.flush.numel()

    def __call__(self, fn: Callable[[], object], reps: int | None = None) -> Timing:
        reps = self.reps if reps is None else reps
        for _ in range(self.warmup):
            fn()
        times = self._cuda(fn, reps) if self.flush is not None else self._wall(fn, reps)
        return Timing(median_us=statistics.median(times), min_us=min(times), reps=reps)

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _cuda(self, fn: Callable[[], object], reps: int) -> list[float]:
        assert self.flush is not None
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(reps)
        ]
        torch.cuda.synchronize(self.device)
        for start, end in events:
            self.flush.zero_()
            torch.cuda._sleep(HEAD_START_CYCLES)
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize(self.device)
        return [start.elapsed_time(end) * 1e3 for start, end in events]

    def _wall(self, fn: Callable[[], object], reps: int) -> list[float]:
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e6)
        return times


@dataclass(frozen=True)
class CopyBandwidth:
    """The device's achievable bandwidth: a large device-to-device copy."""

    size_bytes: int
    best_us: float

    @property
    def gbps(self) -> float:
        return 2 * self.size_bytes / (self.best_us * 1e3)  # read + write

    def to_dict(self) -> dict[str, Any]:
        return {"size_bytes": self.size_bytes, "best_us": self.best_us, "gbps": self.gbps}


def copy_bandwidth(timer: Timer, size_bytes: int, reps: int = 10) -> CopyBandwidth:
    """Best of `reps` timings of dst.copy_(src), `size_bytes` each, with the L2 flush."""
    src = torch.ones(size_bytes // 4, dtype=torch.float32, device=timer.device)
    dst = torch.empty_like(src)
    timing = timer(lambda: dst.copy_(src), reps=reps)
    return CopyBandwidth(size_bytes=size_bytes // 4 * 4, best_us=timing.min_us)
