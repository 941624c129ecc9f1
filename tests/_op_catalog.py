"""Every public op once, in one form: inputs, the call, and PyTorch eager's answer.

The reliability tests (streams, graphs, several GPUs, determinism, memory,
threads, the sanitizer runs) loop over CATALOG so that an op added to wheelops
and to this list is covered by all of them. Each case builds its inputs from a
``rows x cols`` size so that callers choose the scale; the eager answers are the
op tests' own references (normalize_volume's is computed on the host).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from test_lltm import eager_lltm
from test_normalize_volume import reference as normalize_volume_reference
from test_rgb_to_gray import reference as rgb_to_gray_reference
from test_silu_and_mul import eager as silu_and_mul_eager

import wheelops

FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _randn(generator: torch.Generator, shape: Sequence[int], dtype, device, scale=1.0):
    t = torch.randn(tuple(shape), generator=generator, dtype=torch.float64) * scale
    return t.to(dtype).to(device)


def _randint(generator: torch.Generator, high: int, shape: Sequence[int], dtype, device):
    t = torch.randint(0, high, tuple(shape), generator=generator, dtype=torch.int32)
    return t.to(dtype).to(device)


@dataclass(frozen=True)
class OpCase:
    """One op: ``make(rows, cols, dtype, device, seed)`` gives the positional
    arguments of both ``run`` (wheelops) and ``eager`` (PyTorch)."""

    name: str
    make: Callable[..., tuple]
    run: Callable[..., object]
    eager: Callable[..., object]
    dtypes: tuple[torch.dtype, ...] = FLOATS
    differentiable: bool = True

    def inputs(
        self,
        rows: int,
        cols: int,
        dtype: torch.dtype | None = None,
        device: str | torch.device = "cpu",
        seed: int = 0,
        requires_grad: bool = False,
    ) -> tuple:
        generator = torch.Generator().manual_seed(seed)
        args = self.make(generator, rows, cols, dtype or self.dtypes[0], device)
        if requires_grad and self.differentiable:
            args = tuple(
                a.requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                for a in args
            )
        return args


def outputs(result: object) -> tuple[torch.Tensor, ...]:
    """An op's result as a tuple of tensors (lltm returns two)."""
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def grad_leaves(args: tuple) -> tuple[torch.Tensor, ...]:
    return tuple(a for a in args if isinstance(a, torch.Tensor) and a.requires_grad)


def forward_backward(case: OpCase, args: tuple, grads: Sequence[torch.Tensor] | None = None):
    """wheelops forward, and the gradients of every input that requires one.

    ``grads`` defaults to ones; returns (outputs, input gradients)."""
    outs = outputs(case.run(*args))
    leaves = grad_leaves(args)
    if not leaves:
        return outs, ()
    grads = grads if grads is not None else [torch.ones_like(o) for o in outs]
    return outs, torch.autograd.grad(outs, leaves, grads)


CATALOG: tuple[OpCase, ...] = (
    OpCase(
        "add",
        lambda g, r, c, dt, dev: (_randn(g, (r, c), dt, dev), _randn(g, (r, c), dt, dev)),
        wheelops.add,
        torch.add,
    ),
    OpCase(
        "relu_scale",
        lambda g, r, c, dt, dev: (_randn(g, (r, c), dt, dev), 0.75),
        wheelops.relu_scale,
        lambda x, alpha: torch.relu(x) * alpha,
    ),
    OpCase(
        "bias_gelu",
        lambda g, r, c, dt, dev: (_randn(g, (r, c), dt, dev), _randn(g, (c,), dt, dev)),
        wheelops.bias_gelu,
        lambda x, bias: F.gelu(x + bias),
    ),
    OpCase(
        "layer_norm",
        lambda g, r, c, dt, dev: (
            _randn(g, (r, c), dt, dev, scale=2.0),
            1 + _randn(g, (c,), dt, dev, scale=0.1),
            _randn(g, (c,), dt, dev, scale=0.1),
        ),
        wheelops.layer_norm,
        lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, 1e-5),
    ),
    OpCase(
        "rms_norm",
        lambda g, r, c, dt, dev: (
            _randn(g, (r, c), dt, dev, scale=2.0),
            1 + _randn(g, (c,), dt, dev, scale=0.1),
        ),
        wheelops.rms_norm,
        lambda x, w: F.rms_norm(x, (x.shape[-1],), w, torch.finfo(x.dtype).eps),
    ),
    OpCase(
        "softmax",
        lambda g, r, c, dt, dev: (_randn(g, (r, c), dt, dev, scale=3.0),),
        wheelops.softmax,
        lambda x: torch.softmax(x, -1),
    ),
    OpCase(
        "silu_and_mul",
        lambda g, r, c, dt, dev: (_randn(g, (r, 2 * c), dt, dev),),
        wheelops.silu_and_mul,
        silu_and_mul_eager,
    ),
    OpCase(
        "rgb_to_gray",
        lambda g, r, c, dt, dev: (_randint(g, 256, (r, c, 3), dt, dev),),
        wheelops.rgb_to_gray,
        rgb_to_gray_reference,
        dtypes=(torch.uint8,),
        differentiable=False,
    ),
    OpCase(
        "normalize_volume",
        lambda g, r, c, dt, dev: (_randint(g, 65536, (r, c), dt, dev), 4095.0),
        wheelops.normalize_volume,
        normalize_volume_reference,
        dtypes=(torch.uint16,),
        differentiable=False,
    ),
    OpCase(
        "fused_linear_gelu",
        # out_features = cols + 3: never the batch size, so an exported batch stays dynamic
        lambda g, r, c, dt, dev: (
            _randn(g, (r, c), dt, dev),
            _randn(g, (c + 3, c), dt, dev, scale=1 / math.sqrt(c)),
            _randn(g, (c + 3,), dt, dev, scale=0.5),
        ),
        wheelops.fused_linear_gelu,
        lambda x, w, b: F.gelu(F.linear(x, w, b)),
    ),
    OpCase(
        "lltm",
        lambda g, r, c, dt, dev: (
            _randn(g, (r, 8), dt, dev),
            _randn(g, (3 * c, c + 8), dt, dev, scale=1 / math.sqrt(c + 8)),
            _randn(g, (3 * c,), dt, dev, scale=0.1),
            _randn(g, (r, c), dt, dev, scale=0.5),
            _randn(g, (r, c), dt, dev),
        ),
        wheelops.lltm,
        eager_lltm,
    ),
)

BY_NAME = {case.name: case for case in CATALOG}
NAMES = [case.name for case in CATALOG]
