"""A vmap rule that loops over the batch, for ops torch.func cannot batch by itself.

torch.func's fallback loop refuses ops with optional outputs (the norms'
backward ops return Tensor? for each gradient), which broke torch.func.jacrev
and vmap(grad) of the norms. This is the same loop, with None outputs kept.
"""

from __future__ import annotations

from typing import Any

import torch


def register_loop(op: str) -> None:
    overload = getattr(torch.ops.wheelops, op).default

    def rule(info: Any, in_dims: tuple, *args: Any) -> tuple[tuple, tuple]:
        per_sample = [
            overload(
                *(
                    arg if dim is None else arg.select(dim, i)
                    for arg, dim in zip(args, in_dims, strict=True)
                )
            )
            for i in range(info.batch_size)
        ]
        stacked = tuple(
            None if results[0] is None else torch.stack(results)
            for results in zip(*per_sample, strict=True)
        )
        return stacked, tuple(None if out is None else 0 for out in stacked)

    torch.library.register_vmap(f"wheelops::{op}", rule)
