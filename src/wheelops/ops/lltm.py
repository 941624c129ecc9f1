"""wheelops.lltm: the LLTM cell of PyTorch's C++/CUDA extension tutorial.

One GEMM (torch's: cuBLAS on CUDA) makes the gate pre-activations; one fused
kernel (``wheelops::lltm_gates``) does all the gate math after it. Backward:
one fused kernel (``wheelops::lltm_gates_backward``) turns the output grads
into the gates' and old_cell's grads, then autograd runs the GEMM's own
backward (two GEMMs and a column sum for the bias).
"""

from __future__ import annotations

from typing import Any

import torch

from wheelops.ops import _autograd, _checks

__all__ = ["lltm"]


def _check_2d(op: str, name: str, t: torch.Tensor, shape: tuple[int, int], what: str) -> None:
    if tuple(t.shape) != shape:
        raise ValueError(
            f"wheelops.{op}: argument '{name}' must have shape {list(shape)} ({what}), "
            f"got {list(t.shape)}"
        )


def _check(
    input: torch.Tensor,
    weights: torch.Tensor,
    bias: torch.Tensor,
    old_h: torch.Tensor,
    old_cell: torch.Tensor,
) -> None:
    op = "lltm"
    args = {"input": input, "weights": weights, "bias": bias, "old_h": old_h, "old_cell": old_cell}
    for name, value in args.items():
        _checks.float_tensor(op, name, value)
    for name, value in args.items():
        _checks.same_device(op, "input", input, name, value)
        _checks.same_dtype(op, "input", input, name, value)
    if input.dim() != 2:
        raise ValueError(
            f"wheelops.{op}: argument 'input' must have shape [batch, input_features], "
            f"got {list(input.shape)}"
        )
    if old_h.dim() != 2:
        raise ValueError(
            f"wheelops.{op}: argument 'old_h' must have shape [batch, state_size], "
            f"got {list(old_h.shape)}"
        )
    batch, features = input.shape
    state = old_h.shape[1]
    _check_2d(op, "old_h", old_h, (batch, state), "[batch, state_size], batch from 'input'")
    _check_2d(op, "old_cell", old_cell, (batch, state), "the shape of 'old_h'")
    _check_2d(
        op,
        "weights",
        weights,
        (3 * state, state + features),
        "[3 * state_size, state_size + input_features]",
    )
    if tuple(bias.shape) != (3 * state,):
        raise ValueError(
            f"wheelops.{op}: argument 'bias' must have shape [{3 * state}] "
            f"([3 * state_size]), got {list(bias.shape)}"
        )


def lltm(
    input: torch.Tensor,
    weights: torch.Tensor,
    bias: torch.Tensor,
    old_h: torch.Tensor,
    old_cell: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of the LLTM cell; returns ``(new_h, new_cell)``.

    The cell of PyTorch's C++/CUDA extension tutorial (pytorch/extension-cpp)::

        X = cat([old_h, input], dim=1)               # [B, S + F]
        gates = X @ weights.T + bias                 # [B, 3 S]
        input_gate, output_gate, candidate = gates.chunk(3, dim=1)
        new_cell = old_cell + elu(candidate) * sigmoid(input_gate)
        new_h = tanh(new_cell) * sigmoid(output_gate)

    ``input`` is ``[B, F]``; ``old_h`` and ``old_cell`` are ``[B, S]``;
    ``weights`` is ``[3 S, S + F]`` and ``bias`` ``[3 S]`` (``elu`` has
    alpha = 1). All five share a dtype (float32, float16, bfloat16 or float64)
    and a device. The GEMM is torch's ``addmm`` (cuBLAS on CUDA); everything
    after it is one fused pass computed in float32 (float64 for float64), with
    ``new_cell`` rounded to the dtype only once, after ``new_h`` used it.
    Differentiable in all five inputs: the backward saves only ``gates`` and
    ``old_cell`` (the activations are recomputed) and is one fused pass plus
    the GEMM's backward.

    Example::

        >>> x, h, c = torch.randn(4, 8), torch.randn(4, 16), torch.randn(4, 16)
        >>> w, b = torch.randn(48, 24), torch.randn(48)
        >>> new_h, new_cell = wheelops.lltm(x, w, b, h, c)
        >>> new_h.shape, new_cell.shape
        (torch.Size([4, 16]), torch.Size([4, 16]))
    """
    _check(input, weights, bias, old_h, old_cell)
    _checks.runnable("lltm", input)
    # One GEMM over [old_h, input]: a single d_weights GEMM and d_X GEMM in
    # backward, and the gates rounded by one addmm (two addmm's over the weight
    # slices would round the reduced-precision partial gates once more and need
    # slice backward kernels for d_weights).
    x = torch.cat([old_h, input], dim=1)
    gates = torch.addmm(bias, x, weights.t())
    new_h, new_cell = _autograd.call(torch.ops.wheelops.lltm_gates.default, gates, old_cell)
    return new_h, new_cell


def _check_gates(op: str, gates: torch.Tensor, old_cell: torch.Tensor) -> None:
    _checks.float_tensor(op, "gates", gates)
    _checks.float_tensor(op, "old_cell", old_cell)
    _checks.same_device(op, "gates", gates, "old_cell", old_cell)
    _checks.same_dtype(op, "gates", gates, "old_cell", old_cell)
    if gates.dim() != 2 or gates.shape[1] % 3 != 0:
        raise ValueError(
            f"wheelops.{op}: argument 'gates' must have shape [batch, 3 * state_size], "
            f"got {list(gates.shape)}"
        )
    batch, state = gates.shape[0], gates.shape[1] // 3
    _check_2d(op, "old_cell", old_cell, (batch, state), "[batch, state_size] of 'gates'")


def _fake(gates: torch.Tensor, old_cell: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    _check_gates("lltm_gates", gates, old_cell)
    _checks.gpu_supported("lltm_gates", gates)
    return old_cell.new_empty(old_cell.shape), old_cell.new_empty(old_cell.shape)


def _fake_backward(
    grad_h: torch.Tensor, grad_cell: torch.Tensor, gates: torch.Tensor, old_cell: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    op = "lltm_gates_backward"
    _check_gates(op, gates, old_cell)
    for name, grad in (("grad_h", grad_h), ("grad_cell", grad_cell)):
        _checks.float_tensor(op, name, grad)
        _checks.same_device(op, name, grad, "gates", gates)
        _checks.same_dtype(op, name, grad, "gates", gates)
        _checks.same_shape(op, name, grad, "old_cell", old_cell)
    _checks.gpu_supported(op, gates)
    return gates.new_empty(gates.shape), old_cell.new_empty(old_cell.shape)


def _setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
    gates, old_cell = inputs
    ctx.save_for_backward(gates, old_cell)
    ctx.save_for_forward(gates, old_cell)


def _backward(ctx: Any, grad_h: torch.Tensor, grad_cell: torch.Tensor) -> tuple:
    gates, old_cell = ctx.saved_tensors
    return _autograd.call(
        torch.ops.wheelops.lltm_gates_backward.default, grad_h, grad_cell, gates, old_cell
    )


def _jvp(
    ctx: Any, gates_tangent: torch.Tensor | None, cell_tangent: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    # The gate math differentiated in float32 (float64 for float64), as the kernels compute.
    gates, old_cell = (_checks.opmath(t) for t in ctx.saved_tensors)
    dgates = _checks.opmath(_autograd.zero_if_none(gates_tangent, gates))
    dcell = _checks.opmath(_autograd.zero_if_none(cell_tangent, old_cell))
    input_gate, output_gate, candidate = gates.chunk(3, dim=1)
    d_input, d_output, d_candidate = dgates.chunk(3, dim=1)
    si, so = torch.sigmoid(input_gate), torch.sigmoid(output_gate)
    elu = torch.nn.functional.elu(candidate)
    d_elu = torch.where(candidate > 0, 1.0, elu + 1.0)  # elu' with alpha = 1
    new_cell = old_cell + elu * si
    tanh_cell = torch.tanh(new_cell)
    d_new_cell = dcell + d_elu * d_candidate * si + elu * si * (1 - si) * d_input
    d_new_h = (1 - tanh_cell.square()) * d_new_cell * so + tanh_cell * so * (1 - so) * d_output
    dtype = ctx.saved_tensors[1].dtype
    return d_new_h.to(dtype), d_new_cell.to(dtype)


def register() -> None:
    torch.library.register_fake("wheelops::lltm_gates", _fake)
    torch.library.register_fake("wheelops::lltm_gates_backward", _fake_backward)
    _autograd.register("lltm_gates", setup_context=_setup_context, backward=_backward, jvp=_jvp)
    _autograd.register_gradient_without_derivatives("lltm_gates")
