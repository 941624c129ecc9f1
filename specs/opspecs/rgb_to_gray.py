"""wheelops.rgb_to_gray(img): uint8 [*, H, W, 3] -> [*, H, W], BT.601 rounded half to even."""

from __future__ import annotations

import math

import torch

import wheelops
from opspecs._inputs import integers
from opspecs._shapes import SWEEP_ELEMENTS, dims_label
from opspecs._spec import BadInput, Benchmark, NativeBadCall, OpSpec, Sample, Shape

ops = torch.ops.wheelops


def reference(img: torch.Tensor) -> torch.Tensor:
    """torch.round (half to even) of the exact float64 value (299 R + 587 G + 114 B) / 1000."""
    rgb = img.to(torch.int64)
    n = 299 * rgb[..., 0] + 587 * rgb[..., 1] + 114 * rgb[..., 2]
    return torch.round(n.double() / 1000).to(torch.uint8)


def eager(img: torch.Tensor) -> torch.Tensor:
    """The same on any device, in integers: float weights (0.299 * r + ...) miss some ties
    by one, and so does round(total / 1000) on CUDA, which divides by a scalar as a
    multiply by its reciprocal (x.5 comes out a hair off and rounds the wrong way)."""
    rgb = img.to(torch.int32)
    total = 299 * rgb[..., 0] + 587 * rgb[..., 1] + 114 * rgb[..., 2]
    quotient = torch.div(total, 1000, rounding_mode="floor")
    rest = total - quotient * 1000
    round_up = (rest > 500) | ((rest == 500) & (quotient % 2 == 1))
    return (quotient + round_up).to(torch.uint8)


def make(shape: Shape, dtype: torch.dtype, device: str | torch.device, seed: int) -> tuple:
    """``shape`` is the image's without its 3 channels."""
    return (integers((*shape, 3), 256, dtype, device, seed),)


SPEC = OpSpec(
    name="rgb_to_gray",
    make=make,
    samples=(Sample(lambda img: wheelops.rgb_to_gray(img), eager),),
    reference=reference,
    dtypes=(torch.uint8,),
    bad_inputs=(
        BadInput(
            lambda: (torch.rand(4, 4, 3),),
            TypeError,
            r"'img' has dtype torch.float32; expected torch.uint8",
        ),
        BadInput(
            lambda: (torch.zeros(4, 4, 3, dtype=torch.int16),), TypeError, "expected torch.uint8"
        ),
        BadInput(
            lambda: (torch.zeros(4, 4, 4, dtype=torch.uint8),),
            ValueError,
            r"\[H, W, 3\] or \[N, H, W, 3\]",
        ),
        BadInput(lambda: (torch.zeros(4, 3, dtype=torch.uint8),), ValueError, r"got \[4, 3\]"),
        BadInput(
            lambda: (torch.zeros(1, 1, 4, 4, 3, dtype=torch.uint8),),
            ValueError,
            "'img' must have shape",
        ),
        BadInput(lambda: ([[[0, 0, 0]]],), TypeError, "'img' must be a torch.Tensor, got list"),
    ),
    native_bad_calls=(
        NativeBadCall(
            "rgb_to_gray",
            lambda t: ops.rgb_to_gray.default(t(4, 4, 4, dtype=torch.uint8)),
            r"'img' must have shape .*, got \[4, 4, 4\]",
        ),
        NativeBadCall(
            "rgb_to_gray",
            lambda t: ops.rgb_to_gray.default(t(4, 4, 3)),
            "'img' has dtype Float; expected uint8",
        ),
        NativeBadCall(
            "rgb_to_gray",
            lambda t: ops.rgb_to_gray.default(t(4, 3, dtype=torch.uint8)),
            r"got \[4, 3\]",
        ),
    ),
    benchmark=Benchmark(
        # Leading dims: one 16-megapixel image and a batch.
        shapes={
            "full": ((4096, 4096), (8, 1024, 1024)),
            "quick": ((4096, 4096),),
            "tiny": ((5, 7), (2, 3, 5)),
            "sweep": tuple((n // 1024, 1024) for n in SWEEP_ELEMENTS),  # pixels
            "overhead": ((1, 64),),
        },
        label=lambda s: dims_label(s) + "x3",
        forward_bytes=lambda s, e: 4 * math.prod(s),  # 3 bytes in, 1 out per pixel
        note="BT.601 (299R + 587G + 114B) / 1000, rounded half to even",
    ),
)
