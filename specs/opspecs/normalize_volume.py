"""wheelops.normalize_volume(vol, max_value): uint16 -> float32 vol / max_value."""

from __future__ import annotations

import math

import torch

import wheelops
from opspecs._inputs import integers
from opspecs._shapes import SWEEP_ELEMENTS, dims_label
from opspecs._spec import BadInput, Benchmark, NativeBadCall, OpSpec, Sample, Shape

ops = torch.ops.wheelops
MAX_VALUE = 4095.0  # a 12-bit scanner's full scale


def reference(vol: torch.Tensor, max_value: float) -> torch.Tensor:
    """The correctly rounded float32 quotients, on the host."""
    # The float64 quotient of two float32 values rounds to the correctly
    # rounded float32 quotient (53 >= 2 * 24 + 2 bits), so this is exact.
    divisor = torch.tensor(float(max_value), dtype=torch.float32).item()
    return (vol.cpu().to(torch.int32).double() / divisor).float()


def _all_values() -> torch.Tensor:
    """Every uint16 value once."""
    return torch.arange(65536, dtype=torch.int32).to(torch.uint16)


def make(shape: Shape, dtype: torch.dtype, device: str | torch.device, seed: int) -> tuple:
    return (integers(shape, 65536, dtype, device, seed),)


SPEC = OpSpec(
    name="normalize_volume",
    make=make,
    samples=(
        Sample(
            lambda vol: wheelops.normalize_volume(vol, MAX_VALUE),
            # On CUDA eager divides by a scalar as a multiply by its reciprocal: not
            # the correctly rounded quotient the op gives.
            lambda vol: vol.float() / MAX_VALUE,
            expected=lambda vol: reference(vol, MAX_VALUE),
        ),
    ),
    reference=lambda vol: reference(vol, MAX_VALUE),
    dtypes=(torch.uint16,),
    bad_inputs=(
        BadInput(
            lambda: (torch.zeros(4, dtype=torch.int16), 1.0),
            TypeError,
            "'vol' has dtype torch.int16",
        ),
        BadInput(
            lambda: (torch.zeros(4, dtype=torch.int32), 1.0), TypeError, "expected torch.uint16"
        ),
        BadInput(lambda: (torch.zeros(4), 1.0), TypeError, "expected torch.uint16"),
        BadInput(lambda: ([0, 1, 2], 1.0), TypeError, "'vol' must be a torch.Tensor, got list"),
        BadInput(lambda: (_all_values(), 0), ValueError, "'max_value' must be positive and finite"),
        BadInput(lambda: (_all_values(), 0.0), ValueError, "'max_value' must be positive"),
        BadInput(lambda: (_all_values(), -4095), ValueError, "'max_value' must be positive"),
        BadInput(
            lambda: (_all_values(), math.nan), ValueError, "'max_value' must be positive and finite"
        ),
        BadInput(
            lambda: (_all_values(), math.inf), ValueError, "'max_value' must be positive and finite"
        ),
        BadInput(lambda: (_all_values(), 1e39), ValueError, "finite in float32"),
        BadInput(lambda: (_all_values(), 1e-46), ValueError, "positive and finite in float32"),
        BadInput(lambda: (_all_values(), 10**400), ValueError, "finite in float32"),
        BadInput(
            lambda: (_all_values(), "4095"),
            TypeError,
            "'max_value' must be a Python int or float, got str",
        ),
        BadInput(
            lambda: (_all_values(), True),
            TypeError,
            "'max_value' must be a Python int or float, got bool",
        ),
        BadInput(lambda: (_all_values(), torch.tensor(4095.0)), TypeError, "got Tensor"),
        BadInput(lambda: (_all_values(), None), TypeError, "got NoneType"),
    ),
    native_bad_calls=(
        NativeBadCall(
            "normalize_volume",
            lambda t: ops.normalize_volume.default(t(4, dtype=torch.int16), 1.0),
            r"'vol' has dtype Short; expected uint16",
        ),
    ),
    benchmark=Benchmark(
        shapes={
            "full": ((256, 512, 512),),
            "quick": ((256, 512, 512),),
            "tiny": ((3, 5, 7),),
            "sweep": tuple((n // 2**16, 256, 256) for n in SWEEP_ELEMENTS),
            "overhead": ((1, 8, 8),),
        },
        label=dims_label,
        forward_bytes=lambda s, e: 6 * math.prod(s),  # 2 bytes in, 4 out per voxel
        note="uint16 -> float32, max_value=4095",
    ),
)
