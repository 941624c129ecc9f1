"""Every differentiable op beside its eager PyTorch composite, for the derivative tests.

A case builds the op's inputs for a drawn shape (its last dimension is the row,
at least 1) and says whether the op has second derivatives; the backward op
that computes its gradient is named for the error messages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from _helpers import randn
from test_lltm import eager_lltm
from test_lltm import make_inputs as make_lltm_inputs
from test_silu_and_mul import eager as eager_silu_and_mul

import wheelops

Inputs = tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class Case:
    name: str
    wheelops: Callable[..., object]
    eager: Callable[..., object]
    inputs: Callable[[tuple[int, ...], torch.dtype, str, int], Inputs]
    second_order: bool  # double backward and forward-over-reverse
    backward_op: str  # the op that computes its gradient

    def make(self, shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int) -> Inputs:
        return tuple(t.requires_grad_() for t in self.inputs(shape, dtype, device, seed))


def _one(shape, dtype, device, seed):
    return (randn(shape, dtype, device, seed),)


def _two(shape, dtype, device, seed):
    return randn(shape, dtype, device, seed), randn(shape, dtype, device, seed + 1)


def _row_params(count: int):
    def make(shape, dtype, device, seed):
        x = randn(shape, dtype, device, seed)
        return (x, *(randn(shape[-1:], dtype, device, seed + 1 + i) for i in range(count)))

    return make


def _gate_and_up(shape, dtype, device, seed):
    return (randn((*shape[:-1], 2 * shape[-1]), dtype, device, seed),)


def _lltm_inputs(shape, dtype, device, seed):
    batch = max(shape[0], 1) if shape else 1
    return make_lltm_inputs(batch, 3, 4, dtype, device, seed)


def _linear_inputs(shape, dtype, device, seed):
    # input [*, in], weight [out, in], bias [out], out = in + 2
    features = shape[-1]
    return (
        randn(shape, dtype, device, seed),
        randn((features + 2, features), dtype, device, seed + 1),
        randn((features + 2,), dtype, device, seed + 2),
    )


CASES = [
    Case("add", wheelops.add, torch.add, _two, True, "add"),
    Case(
        "relu_scale",
        lambda x: wheelops.relu_scale(x, 1.5),
        lambda x: torch.relu(x) * 1.5,
        _one,
        True,
        "relu_scale_backward",
    ),
    Case(
        "bias_gelu",
        lambda x, b: wheelops.bias_gelu(x, b, "tanh"),
        lambda x, b: F.gelu(x + b, approximate="tanh"),
        _row_params(1),
        False,
        "bias_gelu_backward",
    ),
    Case(
        "bias_gelu_erf",
        lambda x, b: wheelops.bias_gelu(x, b),
        lambda x, b: F.gelu(x + b),
        _row_params(1),
        False,
        "bias_gelu_backward",
    ),
    Case(
        "layer_norm",
        wheelops.layer_norm,
        lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b),
        _row_params(2),
        False,
        "layer_norm_backward",
    ),
    Case(
        "rms_norm",
        lambda x, w: wheelops.rms_norm(x, w, 1e-6),
        lambda x, w: F.rms_norm(x, x.shape[-1:], w, 1e-6),
        _row_params(1),
        False,
        "rms_norm_backward",
    ),
    Case(
        "softmax",
        lambda x: wheelops.softmax(x, 0),
        lambda x: torch.softmax(x, 0),
        _one,
        True,
        "softmax_backward",
    ),
    Case(
        "silu_and_mul",
        wheelops.silu_and_mul,
        eager_silu_and_mul,
        _gate_and_up,
        False,
        "silu_and_mul_backward",
    ),
    Case("lltm", wheelops.lltm, eager_lltm, _lltm_inputs, False, "lltm_gates_backward"),
    Case(
        "fused_linear_gelu",
        wheelops.fused_linear_gelu,
        lambda x, w, b: F.gelu(F.linear(x, w, b)),
        _linear_inputs,
        False,
        "fused_linear_gelu_backward",
    ),
    Case(
        "fused_linear_gelu_tanh_no_bias",
        lambda x, w: wheelops.fused_linear_gelu(x, w, None, "tanh"),
        lambda x, w: F.gelu(F.linear(x, w), approximate="tanh"),
        lambda shape, dtype, device, seed: _linear_inputs(shape, dtype, device, seed)[:2],
        False,
        "fused_linear_gelu_backward",
    ),
]
CASE_IDS = [case.name for case in CASES]


def outputs(result: object) -> tuple[torch.Tensor, ...]:
    return result if isinstance(result, tuple) else (result,)
