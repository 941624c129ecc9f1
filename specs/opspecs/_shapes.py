"""The benchmark's shape profiles, shared by the ops of one kind: ``full`` (the shapes
that matter on a GPU), ``quick`` (one representative shape), ``tiny`` (the CPU smoke
run: small, odd sizes), ``sweep`` (64K to 256M elements, for GB/s against size) and
``overhead`` (one tiny tensor, where the time is host work)."""

from __future__ import annotations

from collections.abc import Mapping

from opspecs._spec import Shape

Profiles = Mapping[str, tuple[Shape, ...]]
PROFILES = ("full", "quick", "tiny", "sweep", "overhead")
SWEEP_ELEMENTS = tuple(4**k for k in range(8, 15))  # x4 a step
SWEEP_HIDDEN = 4096

# rows x hidden: the hidden sizes of real models, at a batch of 4096 tokens, and
# one 8192 x 8192 square.
ROWS: Profiles = {
    "full": ((4096, 1024), (4096, 4096), (4096, 8192), (4096, 16384), (8192, 8192)),
    "quick": ((4096, 4096),),
    "tiny": ((5, 33),),
    "sweep": tuple((n // SWEEP_HIDDEN, SWEEP_HIDDEN) for n in SWEEP_ELEMENTS),
    "overhead": ((1, 64),),
}


def elements(shape: Shape) -> int:
    """The number of elements of a rows x hidden shape."""
    return shape[0] * shape[1]


def rows_label(shape: Shape) -> str:
    return f"{shape[0]}x{shape[1]}"


def dims_label(shape: Shape) -> str:
    return "x".join(str(n) for n in shape)
