"""GB/s against size: each op's forward from 64K to 256M elements, with copy beside it.

Every point is a forward case of its own (checked against eager, then timed like
the main table); the copy curve times ``dst.copy_(src)`` moving the same bytes as
the op at each point, so the plot shows where each implementation stands against
what the memory can do at that size.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from opspecs._spec import OpSpec, Shape

from .cases import inputs
from .measure import Implementations, measure_forward, new_row
from .targets import derive
from .timing import Timer, copy_bandwidth


def sweep_rows(
    spec: OpSpec,
    cases: list[tuple[Shape, torch.dtype]],
    impls: Implementations,
    timer: Timer,
    device: torch.device,
    copy_gbps: float,
) -> list[dict[str, Any]]:
    """One forward row per (shape, dtype), with the copy bandwidth measured at its bytes."""
    rows = []
    for shape, dtype in cases:
        try:
            row = measure_forward(spec, shape, dtype, impls, timer, device)
        except Exception as err:  # out of memory at the largest size, say: reported
            meta = inputs(spec, shape, dtype, torch.device("meta"))
            row = new_row(spec, shape, dtype, "forward", meta)
            row.update(status="error", problem=f"{type(err).__name__}: {err}"[:500])
        row = derive(row, copy_gbps)
        row["elements"] = _elements(row)
        nbytes = row["bytes"]
        # copy_bandwidth counts read + write: copying nbytes / 2 moves the op's bytes.
        row["copy_gbps"] = copy_bandwidth(timer, max(nbytes // 2, 4), reps=5).gbps
        rows.append(row)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def _elements(row: dict[str, Any]) -> int:
    return math.prod(row["input_shapes"][0])
