"""What is benchmarked: each op's inputs, eager formula, wheelops call, shapes and bytes.

One ``OpSpec`` per op. Its ``eager`` function is the natural PyTorch formula a
user would write; ``torch.compile`` compiles that same function, and wheelops
must match its results before anything is timed. ``forward_bytes`` and
``backward_bytes`` count the bytes that must move between the GPU and its memory
for the pass, at best (each input read once, each output written once); an
implementation that moves more shows it as a lower GB/s.

Shapes come in profiles: ``full`` (the shapes that matter on a GPU), ``quick``
(one representative shape per op), ``tiny`` (the CPU smoke run: small, odd sizes,
to check the harness and correctness, not speed), ``sweep`` (64K to 256M
elements, for GB/s against size) and ``overhead`` (one tiny tensor, where the
time is host work: Python, dispatcher, launches).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType

import torch
import torch.nn.functional as F

Output = torch.Tensor | tuple[torch.Tensor, ...]
Shape = tuple[int, ...]
Profile = str  # "full", "quick" or "tiny"
PROFILES: tuple[Profile, ...] = ("full", "quick", "tiny", "sweep", "overhead")
# The sweep: 64K to 256M elements, x4 a step.
SWEEP_ELEMENTS = tuple(4**k for k in range(8, 15))
SWEEP_HIDDEN = 4096

ALPHA = 1.7  # relu_scale's scale: not a power of two, so the multiply really rounds
LAYER_NORM_EPS = 1e-5
VOLUME_MAX = 4095.0  # a 12-bit scanner's full scale
SEED = 1234


@dataclass(frozen=True)
class OpSpec:
    """One op: how to make its inputs, compute it three ways, and count its bytes."""

    name: str
    shapes: Mapping[Profile, tuple[Shape, ...]]
    make_inputs: Callable[[Shape, torch.dtype, torch.device], tuple[torch.Tensor, ...]]
    eager: Callable[..., Output]
    wheelops: Callable[[ModuleType], Callable[..., Output]]  # binds the op's constants
    label: Callable[[Shape], str]
    forward_bytes: Callable[[Shape, int], int]  # (shape, itemsize) -> bytes
    backward_bytes: Callable[[Shape, int], int] | None = None  # None: no backward
    grad_inputs: tuple[int, ...] = (0,)  # which inputs get gradients in the backward
    # Whether eager runs more than one kernel per pass (forward, backward): the
    # ">= 2x eager" target applies only there.
    eager_unfused: tuple[bool, bool] = (True, True)
    bandwidth_target: bool = True  # False where the time is not memory-bound math
    fixed_dtype: torch.dtype | None = None  # images and volumes ignore --dtypes
    tolerance: Mapping[torch.dtype, tuple[float, float]] = field(default_factory=dict)
    note: str = ""

    @property
    def has_backward(self) -> bool:
        return self.backward_bytes is not None


@dataclass(frozen=True)
class Case:
    """One op at one shape and dtype (both passes, when the op has a backward)."""

    spec: OpSpec
    shape: Shape
    dtype: torch.dtype

    @property
    def label(self) -> str:
        return self.spec.label(self.shape)

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).removeprefix("torch.")

    def inputs(self, device: torch.device) -> tuple[torch.Tensor, ...]:
        return self.spec.make_inputs(self.shape, self.dtype, device)

    def bytes(self, backward: bool) -> int:
        itemsize = torch.empty((), dtype=self.dtype).element_size()
        count = self.spec.backward_bytes if backward else self.spec.forward_bytes
        assert count is not None
        return count(self.shape, itemsize)


def cases(spec: OpSpec, profile: Profile, dtypes: tuple[torch.dtype, ...]) -> list[Case]:
    kinds = (spec.fixed_dtype,) if spec.fixed_dtype is not None else dtypes
    return [Case(spec, shape, dtype) for dtype in kinds for shape in spec.shapes[profile]]


# --- inputs --------------------------------------------------------------------------


def _generator(device: torch.device, salt: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(SEED + salt)


def _randn(shape: Shape, dtype: torch.dtype, device: torch.device, salt: int) -> torch.Tensor:
    return torch.randn(shape, generator=_generator(device, salt), device=device, dtype=dtype)


def _uniform(
    shape: Shape, bound: float, dtype: torch.dtype, device: torch.device, salt: int
) -> torch.Tensor:
    values = torch.rand(shape, generator=_generator(device, salt), device=device, dtype=dtype)
    return values.mul_(2 * bound).sub_(bound)


def _randint(
    shape: Shape, high: int, dtype: torch.dtype, device: torch.device, salt: int
) -> torch.Tensor:
    # Drawn as int32: randint has no uint16 kernel on every torch.
    values = torch.randint(
        0, high, shape, generator=_generator(device, salt), device=device, dtype=torch.int32
    )
    return values.to(dtype)


def _rows(rows_hidden: Shape) -> int:
    return rows_hidden[0] * rows_hidden[1]


# --- the natural eager formulas ------------------------------------------------------


def add_eager(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a + b


def relu_scale_eager(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x) * ALPHA


def bias_gelu_eager(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.gelu(x + bias)


def layer_norm_eager(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), weight, bias, LAYER_NORM_EPS)


def rms_norm_eager(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight)


def softmax_eager(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def silu_and_mul_eager(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def rgb_to_gray_eager(img: torch.Tensor) -> torch.Tensor:
    # (299R + 587G + 114B) / 1000 rounded half to even, all in integers: float
    # weights (0.299 * r + ...) miss some ties by one, and so does
    # round(total / 1000) on CUDA, which divides by a scalar as a multiply by
    # its reciprocal (x.5 comes out a hair off and rounds the wrong way).
    rgb = img.to(torch.int32)
    total = 299 * rgb[..., 0] + 587 * rgb[..., 1] + 114 * rgb[..., 2]
    quotient = torch.div(total, 1000, rounding_mode="floor")
    rest = total - quotient * 1000
    round_up = (rest > 500) | ((rest == 500) & (quotient % 2 == 1))
    return (quotient + round_up).to(torch.uint8)


def normalize_volume_eager(vol: torch.Tensor) -> torch.Tensor:
    return vol.float() / VOLUME_MAX


def lltm_eager(
    input: torch.Tensor,
    weights: torch.Tensor,
    bias: torch.Tensor,
    old_h: torch.Tensor,
    old_cell: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The LLTM cell of PyTorch's C++/CUDA extension tutorial, in plain PyTorch."""
    X = torch.cat([old_h, input], dim=1)
    gate_weights = F.linear(X, weights, bias)
    gates = gate_weights.chunk(3, dim=1)
    input_gate = torch.sigmoid(gates[0])
    output_gate = torch.sigmoid(gates[1])
    candidate_cell = F.elu(gates[2])
    new_cell = old_cell + candidate_cell * input_gate
    new_h = torch.tanh(new_cell) * output_gate
    return new_h, new_cell


# --- shapes --------------------------------------------------------------------------

# rows x hidden: the hidden sizes of real models, at a batch of 4096 tokens, and
# one 8192 x 8192 square.
ROW_SHAPES: Mapping[Profile, tuple[Shape, ...]] = {
    "full": ((4096, 1024), (4096, 4096), (4096, 8192), (4096, 16384), (8192, 8192)),
    "quick": ((4096, 4096),),
    "tiny": ((5, 33),),
    "sweep": tuple((n // SWEEP_HIDDEN, SWEEP_HIDDEN) for n in SWEEP_ELEMENTS),
    "overhead": ((1, 64),),
}
# Image leading dims (the channel dim of 3 is added): one 16-megapixel image and a batch.
IMAGE_SHAPES: Mapping[Profile, tuple[Shape, ...]] = {
    "full": ((4096, 4096), (8, 1024, 1024)),
    "quick": ((4096, 4096),),
    "tiny": ((5, 7), (2, 3, 5)),
    "sweep": tuple((n // 1024, 1024) for n in SWEEP_ELEMENTS),  # pixels
    "overhead": ((1, 64),),
}
VOLUME_SHAPES: Mapping[Profile, tuple[Shape, ...]] = {
    "full": ((256, 512, 512),),
    "quick": ((256, 512, 512),),
    "tiny": ((3, 5, 7),),
    "sweep": tuple((n // 2**16, 256, 256) for n in SWEEP_ELEMENTS),
    "overhead": ((1, 8, 8),),
}
# batch, input features, state size: a 4096-sequence batch through a 1024-wide cell.
LLTM_SHAPES: Mapping[Profile, tuple[Shape, ...]] = {
    "full": ((4096, 1024, 1024),),
    "quick": ((4096, 1024, 1024),),
    "tiny": ((4, 6, 5),),
    "sweep": (),  # its time is mostly GEMM: not a bandwidth curve
    "overhead": ((1, 8, 16),),
}


def _rows_label(shape: Shape) -> str:
    return f"{shape[0]}x{shape[1]}"


def _silu_label(shape: Shape) -> str:
    return f"{shape[0]}x(2x{shape[1]})"


def _image_label(shape: Shape) -> str:
    return "x".join(str(n) for n in shape) + "x3"


def _volume_label(shape: Shape) -> str:
    return "x".join(str(n) for n in shape)


def _lltm_label(shape: Shape) -> str:
    batch, features, state = shape
    return f"B{batch} in{features} state{state}"


# --- the ops -------------------------------------------------------------------------


def _lltm_inputs(
    shape: Shape, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, ...]:
    batch, features, state = shape
    bound = 1.0 / math.sqrt(state)  # the tutorial's initialisation
    return (
        _randn((batch, features), dtype, device, 0),
        _uniform((3 * state, state + features), bound, dtype, device, 1),
        _uniform((3 * state,), bound, dtype, device, 2),
        _randn((batch, state), dtype, device, 3),
        _randn((batch, state), dtype, device, 4),
    )


OPS: tuple[OpSpec, ...] = (
    OpSpec(
        name="add",
        shapes=ROW_SHAPES,
        make_inputs=lambda s, t, d: (_randn(s, t, d, 0), _randn(s, t, d, 1)),
        eager=add_eager,
        wheelops=lambda w: w.add,
        label=_rows_label,
        forward_bytes=lambda s, e: 3 * _rows(s) * e,
        # The gradient of a sum is the incoming gradient itself: nothing moves.
        backward_bytes=lambda s, e: 0,
        grad_inputs=(0, 1),
        eager_unfused=(False, False),
        note="backward passes the gradient through (no kernel, no bytes)",
    ),
    OpSpec(
        name="relu_scale",
        shapes=ROW_SHAPES,
        make_inputs=lambda s, t, d: (_randn(s, t, d, 0),),
        eager=relu_scale_eager,
        wheelops=lambda w: lambda x: w.relu_scale(x, ALPHA),
        label=_rows_label,
        forward_bytes=lambda s, e: 2 * _rows(s) * e,
        backward_bytes=lambda s, e: 3 * _rows(s) * e,  # read x, grad; write grad_x
    ),
    OpSpec(
        name="bias_gelu",
        shapes=ROW_SHAPES,
        make_inputs=lambda s, t, d: (_randn(s, t, d, 0), _randn(s[1:], t, d, 1)),
        eager=bias_gelu_eager,
        wheelops=lambda w: w.bias_gelu,
        label=_rows_label,
        forward_bytes=lambda s, e: (2 * _rows(s) + s[1]) * e,
        # read x, grad, bias; write grad_x, grad_bias
        backward_bytes=lambda s, e: (3 * _rows(s) + 2 * s[1]) * e,
        grad_inputs=(0, 1),
        note='approximate="none" (erf)',
    ),
    OpSpec(
        name="layer_norm",
        shapes=ROW_SHAPES,
        make_inputs=lambda s, t, d: (
            _randn(s, t, d, 0),
            _randn(s[1:], t, d, 1),
            _randn(s[1:], t, d, 2),
        ),
        eager=layer_norm_eager,
        wheelops=lambda w: lambda x, weight, bias: w.layer_norm(x, weight, bias, LAYER_NORM_EPS),
        label=_rows_label,
        forward_bytes=lambda s, e: (2 * _rows(s) + 2 * s[1]) * e,
        # read x, grad, weight; write grad_x, grad_weight, grad_bias (row statistics,
        # 8 bytes a row, are left out: they can be recomputed from x)
        backward_bytes=lambda s, e: (3 * _rows(s) + 3 * s[1]) * e,
        grad_inputs=(0, 1, 2),
        eager_unfused=(False, False),
        note="weight and bias, eps=1e-5",
    ),
    OpSpec(
        name="rms_norm",
        shapes=ROW_SHAPES,
        make_inputs=lambda s, t, d: (_randn(s, t, d, 0), _randn(s[1:], t, d, 1)),
        eager=rms_norm_eager,
        wheelops=lambda w: lambda x, weight: w.rms_norm(x, weight),
        label=_rows_label,
        forward_bytes=lambda s, e: (2 * _rows(s) + s[1]) * e,
        backward_bytes=lambda s, e: (3 * _rows(s) + 2 * s[1]) * e,
        grad_inputs=(0, 1),
        # torch >= 2.8 runs F.rms_norm on CUDA as one fused kernel (_fused_rms_norm).
        eager_unfused=(False, False),
        note="weight, eps=None (the dtype's epsilon, as F.rms_norm)",
    ),
    OpSpec(
        name="softmax",
        shapes=ROW_SHAPES,
        make_inputs=lambda s, t, d: (_randn(s, t, d, 0),),
        eager=softmax_eager,
        wheelops=lambda w: lambda x: w.softmax(x, dim=-1),
        label=_rows_label,
        forward_bytes=lambda s, e: 2 * _rows(s) * e,
        backward_bytes=lambda s, e: 3 * _rows(s) * e,  # read y, grad; write grad_x
        eager_unfused=(False, False),
        note="dim=-1",
    ),
    OpSpec(
        name="silu_and_mul",
        shapes=ROW_SHAPES,
        make_inputs=lambda s, t, d: (_randn((s[0], 2 * s[1]), t, d, 0),),
        eager=silu_and_mul_eager,
        wheelops=lambda w: w.silu_and_mul,
        label=_silu_label,
        forward_bytes=lambda s, e: 3 * _rows(s) * e,  # read 2d, write d
        backward_bytes=lambda s, e: 5 * _rows(s) * e,  # read 2d + grad d, write 2d
        note="input rows x (2 x hidden), output rows x hidden",
    ),
    OpSpec(
        name="rgb_to_gray",
        shapes=IMAGE_SHAPES,
        make_inputs=lambda s, t, d: (_randint((*s, 3), 256, t, d, 0),),
        eager=rgb_to_gray_eager,
        wheelops=lambda w: w.rgb_to_gray,
        label=_image_label,
        forward_bytes=lambda s, e: 4 * math.prod(s),  # 3 bytes in, 1 out per pixel
        fixed_dtype=torch.uint8,
        note="BT.601 (299R + 587G + 114B) / 1000, rounded half to even",
    ),
    OpSpec(
        name="normalize_volume",
        shapes=VOLUME_SHAPES,
        make_inputs=lambda s, t, d: (_randint(s, int(VOLUME_MAX) + 1, t, d, 0),),
        eager=normalize_volume_eager,
        wheelops=lambda w: lambda vol: w.normalize_volume(vol, VOLUME_MAX),
        label=_volume_label,
        forward_bytes=lambda s, e: 6 * math.prod(s),  # 2 bytes in, 4 out per voxel
        fixed_dtype=torch.uint16,
        note="uint16 -> float32, max_value=4095",
    ),
    OpSpec(
        name="lltm",
        shapes=LLTM_SHAPES,
        make_inputs=_lltm_inputs,
        eager=lltm_eager,
        wheelops=lambda w: w.lltm,
        label=_lltm_label,
        # Gate math only (batch x state elements): read 3 gates and old_cell, write
        # new_h and new_cell; backward reads grad_h, grad_cell, 3 gates and old_cell and
        # writes 3 gate gradients and grad_old_cell. The time also holds the GEMMs.
        forward_bytes=lambda s, e: 6 * s[0] * s[2] * e,
        backward_bytes=lambda s, e: 10 * s[0] * s[2] * e,
        grad_inputs=(0, 1, 2, 3, 4),
        bandwidth_target=False,
        tolerance={torch.float32: (2e-3, 2e-3), torch.bfloat16: (3e-2, 5e-2)},
        note="GB/s from gate-math bytes only; the times include the GEMMs",
    ),
)

OPS_BY_NAME: Mapping[str, OpSpec] = {spec.name: spec for spec in OPS}
