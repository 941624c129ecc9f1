"""Input makers' building blocks: values drawn on the device they are used on, from a
generator seeded per tensor, so that inputs are the same every run and cost no copy
(the benchmark's largest inputs are a gigabyte)."""

from __future__ import annotations

import torch

from opspecs._spec import Shape


def _generator(device: str | torch.device, seed: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def normal(
    shape: Shape,
    dtype: torch.dtype,
    device: str | torch.device,
    seed: int,
    scale: float = 1.0,
    shift: float = 0.0,
) -> torch.Tensor:
    """Normal values, times scale, plus shift."""
    values = torch.randn(shape, generator=_generator(device, seed), device=device, dtype=dtype)
    return values if (scale, shift) == (1.0, 0.0) else values * scale + shift


def integers(
    shape: Shape, high: int, dtype: torch.dtype, device: str | torch.device, seed: int
) -> torch.Tensor:
    """Uniform integers in [0, high), as dtype."""
    # Drawn as int32: randint has no uint16 kernel on every torch.
    values = torch.randint(
        0, high, shape, generator=_generator(device, seed), device=device, dtype=torch.int32
    )
    return values.to(dtype)
