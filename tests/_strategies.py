"""Hypothesis strategies for the property tests: shapes, layouts, values, scalar edges.

Tensors are built in two steps: values (a seeded float64 draw rounded to the
dtype, so a failing example replays exactly), then a layout that keeps the
shape but changes the strides, storage offset or (for "expanded") the values.
References are always computed from the tensor the op actually received.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from hypothesis import strategies as st

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)

# Sizes that matter to kernels: empty, one, primes, around vector widths (4, 8,
# 16 elements of 16 bytes) and warp/block multiples, and their neighbours.
EDGE_SIZES = (0, 1, 2, 3, 5, 7, 8, 13, 16, 17, 31, 32, 33, 64, 127, 128, 129, 257, 1031)
# Row lengths for the row-wise ops (norms, softmax): the same, plus long rows.
# Beyond a block's registers (CUDA): 4096 and more, up to ~70000 on the GPU.
LONG_ROWS = (2048, 4096, 4099, 8192, 8209, 32768, 32771, 65536, 65537, 70001)

# Per-device budget: CPU runs in CI on two cores; the GPU run takes larger sizes.
MAX_ELEMENTS = {"cpu": 20_000, "cuda": 2_000_000}
MAX_ROW = {"cpu": 8209, "cuda": 70_001}

LAYOUTS = ("contiguous", "permuted", "sliced", "offset", "expanded")


def device_type(device: str) -> str:
    return torch.device(device).type


def sizes(max_size: int, min_size: int = 0) -> st.SearchStrategy[int]:
    """One dimension: an edge size or any size in [min_size, max_size]."""
    edges = [s for s in EDGE_SIZES if min_size <= s <= max_size]
    return st.one_of(st.sampled_from(edges), st.integers(min_size, max_size))


@st.composite
def shapes(
    draw: st.DrawFn,
    device: str,
    min_rank: int = 0,
    max_rank: int = 4,
    last: st.SearchStrategy[int] | None = None,
) -> tuple[int, ...]:
    """A shape whose element count stays within the device's budget.

    `last` draws the last dimension (e.g. a long row); the leading dimensions
    share what is left of the budget.
    """
    budget = MAX_ELEMENTS[device_type(device)]
    rank = draw(st.integers(min_rank, max_rank))
    if rank == 0:
        return ()
    last_size = draw(last if last is not None else sizes(64))
    leading: list[int] = []
    room = budget // max(last_size, 1)
    for _ in range(rank - 1):
        # Nonzero here: with several dims, any 0 would make most shapes empty.
        size = draw(sizes(max(min(room, 64), 1), min_size=1))
        leading.append(size)
        room //= size
    if leading and draw(st.integers(0, 7), label="an empty leading dim") == 0:
        leading[draw(st.integers(0, len(leading) - 1))] = 0
    return (*leading, last_size)


def row_lengths(device: str, max_row: int | None = None) -> st.SearchStrategy[int]:
    """A row length for the row-wise ops: edge sizes, any size, or a long row."""
    limit = MAX_ROW[device_type(device)] if max_row is None else max_row
    long_rows = [n for n in LONG_ROWS if n <= limit]
    return st.one_of(
        st.sampled_from([s for s in EDGE_SIZES if s <= limit]),
        st.integers(0, min(limit, 300)),
        st.sampled_from(long_rows),
    )


@dataclass(frozen=True)
class Layout:
    """How a tensor of a given shape is laid out in memory.

    kind: "contiguous"; "permuted" (the storage order of dims is `order`);
    "sliced" (every `step`-th element along `dim` of a larger tensor);
    "offset" (contiguous but one element into its storage: not 16-byte
    aligned, so kernels take their scalar path); "expanded" (`dim` has stride
    0: the values along it repeat).
    """

    kind: str
    dim: int = 0
    step: int = 2
    order: tuple[int, ...] = ()

    def __str__(self) -> str:
        details = {
            "permuted": f"order={self.order}",
            "sliced": f"dim={self.dim}, step={self.step}",
            "expanded": f"dim={self.dim}",
        }
        return f"{self.kind}({details.get(self.kind, '')})"


@st.composite
def layouts(draw: st.DrawFn, shape: Sequence[int], kinds: Sequence[str] = LAYOUTS) -> Layout:
    """A layout for `shape`; kinds that do not apply to it fall back to contiguous."""
    rank = len(shape)
    kind = draw(st.sampled_from(list(kinds)))
    if rank == 0:
        return Layout("contiguous")
    if kind == "permuted" and rank < 2:
        return Layout("offset")  # one dimension has no other order
    if kind == "permuted":
        order = tuple(draw(st.permutations(range(rank))))
        return Layout(kind, order=order)
    if kind in ("sliced", "expanded"):
        return Layout(kind, dim=draw(st.integers(0, rank - 1)), step=draw(st.integers(2, 3)))
    return Layout(kind)


def _filler(dtype: torch.dtype) -> float | int:
    # What surrounds a view in its storage: NaN for floats, so that a kernel
    # reading outside the view poisons its result visibly.
    return math.nan if dtype.is_floating_point else 77


def apply_layout(t: torch.Tensor, layout: Layout) -> torch.Tensor:
    """t's shape (and, but for "expanded", its values) in the given layout."""
    shape = tuple(t.shape)
    if layout.kind == "contiguous" or t.dim() == 0:
        return t.contiguous()
    if layout.kind == "permuted":
        inverse = [0] * len(layout.order)
        for position, d in enumerate(layout.order):
            inverse[d] = position
        return t.permute(layout.order).contiguous().permute(inverse)
    if layout.kind == "sliced":
        big_shape = list(shape)
        big_shape[layout.dim] *= layout.step
        big = torch.full(big_shape, _filler(t.dtype), dtype=t.dtype, device=t.device)
        index = [slice(None)] * t.dim()
        index[layout.dim] = slice(None, None, layout.step)
        big[tuple(index)] = t
        return big[tuple(index)]
    if layout.kind == "offset":
        flat = torch.full((t.numel() + 1,), _filler(t.dtype), dtype=t.dtype, device=t.device)
        flat[1:] = t.reshape(-1)
        return flat[1:].view(shape)
    if layout.kind == "expanded":
        if shape[layout.dim] == 0:
            return t.contiguous()
        return t.narrow(layout.dim, 0, 1).expand(shape)
    raise ValueError(f"unknown layout {layout.kind}")


def integer_values(
    shape: Sequence[int], dtype: torch.dtype, high: int, device: str, seed: int
) -> torch.Tensor:
    """Uniform integers in [0, high) of an unsigned dtype, on device."""
    generator = torch.Generator().manual_seed(seed)
    values = torch.randint(0, high, tuple(shape), generator=generator, dtype=torch.int32)
    return values.to(dtype).to(device)


SPECIALS = (math.inf, -math.inf, math.nan)


def sprinkle_specials(t: torch.Tensor, seed: int, fraction: float) -> torch.Tensor:
    """A copy of t with about `fraction` of its elements set to +-inf or NaN."""
    if fraction == 0 or t.numel() == 0:
        return t
    generator = torch.Generator().manual_seed(seed)
    hit = torch.rand(tuple(t.shape), generator=generator) < fraction
    which = torch.randint(0, len(SPECIALS), tuple(t.shape), generator=generator)
    specials = torch.tensor(SPECIALS, dtype=torch.float64)[which].to(t.dtype)
    return torch.where(hit.to(t.device), specials.to(t.device), t)


seeds = st.integers(0, 2**32 - 1)
scales = st.sampled_from([1e-3, 0.5, 1.0, 3.0, 30.0])
special_fractions = st.sampled_from([0.0, 0.0, 0.02, 0.3])

# Python float scalars at their edges: zeros of both signs, the smallest
# subnormal, tiny and huge normals, the float32 and float64 limits, infinities
# and NaN; then any float at all.
FLOAT_EDGES = (
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    5e-324,
    1e-45,
    1e-30,
    -1e-30,
    1e30,
    -1e30,
    torch.finfo(torch.float32).max,
    1e300,
    -1e300,
    math.inf,
    -math.inf,
    math.nan,
)


def python_floats() -> st.SearchStrategy[float]:
    return st.one_of(st.sampled_from(FLOAT_EDGES), st.floats())


def python_numbers() -> st.SearchStrategy[float | int]:
    """What a `float` argument accepts: floats at their edges, and ints of any size."""
    return st.one_of(
        python_floats(),
        st.integers(-3, 3),
        st.integers(),
        st.sampled_from([2**53 + 1, 10**308, 10**309, -(10**400)]),
    )


def not_numbers() -> st.SearchStrategy[object]:
    """Values a numeric scalar argument must reject with a TypeError."""
    return st.one_of(
        st.booleans(),
        st.none(),
        st.text(max_size=3),
        st.just([1.0]),
        st.just(torch.tensor(1.0)),
        st.just(1 + 2j),
    )
