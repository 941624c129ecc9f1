"""wheelops.lltm(input, weights, bias, old_h, old_cell) -> (new_h, new_cell): the LLTM
cell of PyTorch's C++/CUDA extension tutorial (pytorch/extension-cpp): torch's GEMM for
the gates, then one fused kernel for the gate math (native op lltm_gates)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import wheelops
from opspecs._inputs import normal
from opspecs._spec import BadInput, Benchmark, Derivatives, NativeBadCall, OpSpec, Sample, Shape

ops = torch.ops.wheelops
ARGUMENTS = ("input", "weights", "bias", "old_h", "old_cell")


def eager(
    input: torch.Tensor,
    weights: torch.Tensor,
    bias: torch.Tensor,
    old_h: torch.Tensor,
    old_cell: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The tutorial's pure-PyTorch LLTM forward."""
    x = torch.cat([old_h, input], dim=1)
    gate_weights = F.linear(x, weights, bias)
    gates = gate_weights.chunk(3, dim=1)
    input_gate = torch.sigmoid(gates[0])
    output_gate = torch.sigmoid(gates[1])
    candidate_cell = F.elu(gates[2])
    new_cell = old_cell + candidate_cell * input_gate
    new_h = torch.tanh(new_cell) * output_gate
    return new_h, new_cell


def reference(*inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(new_h, new_cell) in float64, from the (already rounded) inputs (lltm's arguments)."""
    return eager(*(t.double() for t in inputs))


def make_inputs(
    batch: int,
    features: int,
    state: int,
    dtype: torch.dtype,
    device: str | torch.device,
    seed: int = 0,
    requires_grad: bool = False,
) -> tuple[torch.Tensor, ...]:
    """Uniform values; weights and bias at the tutorial's scale, 1 / sqrt(state)."""
    generator = torch.Generator().manual_seed(seed)
    bound = 1 / math.sqrt(max(state, 1))

    def rand(*shape: int, scale: float = 1.0) -> torch.Tensor:
        t = (torch.rand(shape, generator=generator, dtype=torch.float64) * 2 - 1) * scale
        return t.to(dtype).to(device).requires_grad_(requires_grad)

    return (
        rand(batch, features, scale=2.0),
        rand(3 * state, state + features, scale=bound),
        rand(3 * state, scale=bound),
        rand(batch, state),
        rand(batch, state, scale=2.0),
    )


def float64_results(
    inputs: tuple[torch.Tensor, ...], grads: tuple[torch.Tensor, ...]
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(new_h, new_cell) and every input's gradient, in float64 from the same inputs."""
    leaves = [t.detach().double().requires_grad_() for t in inputs]
    outputs = reference(*leaves)
    input_grads = torch.autograd.grad(outputs, leaves, [g.double() for g in grads])
    return [o.detach() for o in outputs], list(input_grads)


def _with(index: int, value: object) -> tuple[object, ...]:
    """Good arguments (batch 4, input features 3, state size 5) but one."""
    args: list[object] = list(make_inputs(4, 3, 5, torch.float32, "cpu"))
    args[index] = value
    return tuple(args)


def make(shape: Shape, dtype: torch.dtype, device: str | torch.device, seed: int) -> tuple:
    """``shape`` is (batch, input features, state size)."""
    return make_inputs(*shape, dtype, device, seed)


SPEC = OpSpec(
    name="lltm",
    make=make,
    samples=(Sample(lambda *args: wheelops.lltm(*args), eager),),
    reference=reference,
    torch_gemms=True,
    derivatives=Derivatives(
        backward_op="lltm_gates_backward",
        backward_args=lambda g, x: (
            g[:, :1],
            g[:, :1],
            normal((3, 3), x.dtype, x.device, 11),
            x[:, :1],
        ),
    ),
    # batch from the leading dim (at least one), state from the last, 8 input features
    problem_shape=lambda shape: (max(shape[0], 1) if len(shape) > 1 else 1, 8, shape[-1]),
    bad_inputs=(
        BadInput(
            lambda: _with(1, torch.zeros(15, 7)), ValueError, r"'weights' must have shape \[15, 8\]"
        ),
        BadInput(
            lambda: _with(1, torch.zeros(16, 8)), ValueError, r"'weights' must have shape \[15, 8\]"
        ),
        BadInput(lambda: _with(2, torch.zeros(16)), ValueError, r"'bias' must have shape \[15\]"),
        BadInput(
            lambda: _with(2, torch.zeros(1, 15)), ValueError, r"'bias' must have shape \[15\]"
        ),
        BadInput(
            lambda: _with(3, torch.zeros(3, 5)), ValueError, r"'old_h' must have shape \[4, 5\]"
        ),
        BadInput(lambda: _with(3, torch.zeros(4, 5, 1)), ValueError, "'old_h' must have shape"),
        BadInput(
            lambda: _with(4, torch.zeros(4, 6)), ValueError, r"'old_cell' must have shape \[4, 5\]"
        ),
        BadInput(lambda: _with(0, torch.zeros(4)), ValueError, "'input' must have shape"),
        BadInput(lambda: _with(0, torch.zeros(4, 3, dtype=torch.float64)), TypeError, "same dtype"),
        BadInput(
            lambda: _with(4, torch.zeros(4, 5, dtype=torch.int32)),
            TypeError,
            "'old_cell' has dtype",
        ),
        BadInput(lambda: _with(1, [[0.0]]), TypeError, "'weights' must be a torch.Tensor"),
    ),
    native_bad_calls=(
        NativeBadCall(
            "lltm_gates",
            lambda t: ops.lltm_gates.default(t(4, 15), t(4, 6)),
            r"'old_cell' must have shape \[4, 5\] .*, got \[4, 6\]",
        ),
        NativeBadCall(
            "lltm_gates",
            lambda t: ops.lltm_gates.default(t(4, 14), t(4, 5)),
            r"'gates' must have shape \[batch, 3 \* state_size\]",
        ),
        NativeBadCall(
            "lltm_gates",
            lambda t: ops.lltm_gates.default(t(4, 15), t(4, 5, dtype=torch.float64)),
            "'gates' and 'old_cell' must have the same dtype",
        ),
        NativeBadCall(
            "lltm_gates_backward",
            lambda t: ops.lltm_gates_backward.default(
                t(4, 5), t(4, 5, dtype=torch.int32), t(4, 15), t(4, 5)
            ),
            "'grad_cell' has dtype",
        ),
        NativeBadCall(
            "lltm_gates_backward",
            lambda t: ops.lltm_gates_backward.default(t(3, 5), t(4, 5), t(4, 15), t(4, 5)),
            r"'grad_h' must have shape \[4, 5\] .*, got \[3, 5\]",
        ),
    ),
    benchmark=Benchmark(
        # batch, input features, state size: a 4096-sequence batch through a 1024-wide cell.
        shapes={
            "full": ((4096, 1024, 1024),),
            "quick": ((4096, 1024, 1024),),
            "tiny": ((4, 6, 5),),
            "sweep": (),  # its time is mostly GEMM: not a bandwidth curve
            "overhead": ((1, 8, 16),),
        },
        label=lambda s: f"B{s[0]} in{s[1]} state{s[2]}",
        # Gate math only (batch x state elements): read 3 gates and old_cell, write
        # new_h and new_cell; backward reads grad_h, grad_cell, 3 gates and old_cell and
        # writes 3 gate gradients and grad_old_cell. The time also holds the GEMMs.
        forward_bytes=lambda s, e: 6 * s[0] * s[2] * e,
        backward_bytes=lambda s, e: 10 * s[0] * s[2] * e,
        bandwidth_target=False,
        # The GEMMs: K = input + state (gates), 3 * state (grad of input and old_h), the
        # batch (grad of weights and bias).
        sum_length=lambda s: max(s[0], s[1] + s[2], 3 * s[2]),
        # Stored in the dtype: the gates (torch's GEMM rounds x @ W.T, then adds the bias
        # and rounds again) and d_gates (rounded once): each term of a result carries at
        # most 4 roundings of itself (a gate's error passes through slopes <= 1), and a
        # sum of n such terms of random sign LAMBDA = 8 times sqrt(sum of squares) ~ its
        # rms: 4 * 8 = 32.
        dtype_roundings=32.0,
        note="GB/s from gate-math bytes only; the times include the GEMMs",
    ),
)
