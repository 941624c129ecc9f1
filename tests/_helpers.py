"""Devices, dtypes, shapes and inputs shared by the op tests (their bounds are derived
per op: tests/_elementwise_bounds.py says how), and the environment of a user's process."""

from __future__ import annotations

import os
from collections.abc import Sequence

import pytest
import torch

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
LOW_PRECISION = [torch.float16, torch.bfloat16]

# tools/sanitize.sh turns the caching allocator off: then every free is a
# cudaFree, which waits for the whole device (so a busy default stream is
# waited for) and may not happen during stream capture. Tests that
# measure or rely on that allocator (busy default stream, graph capture, the
# memory tests) skip there.
needs_caching_allocator = pytest.mark.skipif(
    os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1",
    reason="PYTORCH_NO_CUDA_MEMORY_CACHING=1: cudaFree synchronizes the device",
)

# Odd sizes on purpose: empty, single, not a multiple of the vector width, and
# long enough to take the vectorized path and a tail.
SHAPES = [(0,), (1,), (7,), (3, 5), (4, 33), (2, 3, 64), (1031,), (0, 8)]


def randn(
    shape: Sequence[int],
    dtype: torch.dtype,
    device: str,
    seed: int = 0,
    scale: float = 1.0,
    shift: float = 0.0,
) -> torch.Tensor:
    """Normal values (times scale, plus shift) drawn in float64, rounded to dtype, on device."""
    generator = torch.Generator().manual_seed(seed)
    values = torch.randn(tuple(shape), generator=generator, dtype=torch.float64)
    return (values * scale + shift).to(dtype).to(device)


def strided_variants(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """The same values as x laid out non-contiguously (x must be 2-D)."""
    rows, cols = x.shape
    padded = torch.zeros(rows, cols + 1, dtype=x.dtype, device=x.device)
    padded[:, 1:] = x
    flat = torch.zeros(x.numel() + 1, dtype=x.dtype, device=x.device)
    flat[1:] = x.reshape(-1)
    return {
        "transposed": x.t().contiguous().t(),
        "row_padded": padded[:, 1:],
        "offset_by_one": flat[1:].view(rows, cols),  # contiguous but not 16-byte aligned
    }


def user_env(*also_not: str) -> dict[str, str]:
    """This process's environment as a user's process starts with it: none of our variables
    (WHEELOPS_*), no Python ones (PYTHON*), and none starting with `also_not`."""
    ours = ("WHEELOPS_", "PYTHON", *also_not)
    return {k: v for k, v in os.environ.items() if not k.startswith(ours)}
