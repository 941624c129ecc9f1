"""wheelops.fused_linear_gelu: gelu(input @ weight.T + bias), the GEMM's epilogue fused.

The op returns the output and, when a derivative will be asked for, the
pre-activation ``input @ weight.T + bias`` (the backward's GELU derivative reads it;
recomputing it would cost a fourth GEMM). Whether to keep it, and whether float32
GEMMs may use TF32, are decided here, in Python, and passed to the op as arguments:
the op stays a pure function of its arguments, as its fake kernel, torch.compile and
torch.export need.
"""

from __future__ import annotations

from typing import Any

import torch

from wheelops.ops import _autograd, _checks, _entry, _vmap
from wheelops.ops._entry import dynamo_tracing

__all__ = ["fused_linear_gelu"]

# The namespace, bound once: a call then looks up only its op on it (`torch.ops.wheelops.x`
# costs ~0.2 µs a call, on a call of a few µs).
_OPS = torch.ops.wheelops

APPROXIMATIONS = ("none", "tanh")
OP = "fused_linear_gelu"
BACKWARD_OP = "fused_linear_gelu_backward"


def _check(
    op: str,
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    approximate: str,
) -> None:
    _checks.float_tensor(op, "input", input)
    _checks.float_tensor(op, "weight", weight)
    _checks.same_device(op, "input", input, "weight", weight)
    _checks.same_dtype(op, "input", input, "weight", weight)
    if input.dim() < 1:
        raise ValueError(f"wheelops.{op}: argument 'input' must have at least one dimension")
    in_features = input.shape[-1]
    if weight.dim() != 2 or weight.shape[1] != in_features:
        raise ValueError(
            f"wheelops.{op}: argument 'weight' must have shape [out_features, {in_features}] "
            f"(in_features is the last dimension of 'input'), got {list(weight.shape)}"
        )
    if bias is not None:
        _checks.float_tensor(op, "bias", bias)
        _checks.same_device(op, "input", input, "bias", bias)
        _checks.same_dtype(op, "input", input, "bias", bias)
        if bias.dim() != 1 or bias.shape[0] != weight.shape[0]:
            raise ValueError(
                f"wheelops.{op}: argument 'bias' must have shape [{weight.shape[0]}] "
                f"(out_features, the first dimension of 'weight'), got {list(bias.shape)}"
            )
    _checks.one_of(op, "approximate", approximate, APPROXIMATIONS)


def _check_output_like(op: str, name: str, t: torch.Tensor, input: torch.Tensor, n: int) -> None:
    _checks.float_tensor(op, name, t)
    _checks.same_device(op, "input", input, name, t)
    _checks.same_dtype(op, "input", input, name, t)
    expected = [*input.shape[:-1], n]
    if list(t.shape) != expected:
        raise ValueError(
            f"wheelops.{op}: argument '{name}' must have shape {expected} (the output's: "
            f"input.shape[:-1] + [out_features]), got {list(t.shape)}"
        )


def _requires_grad(t: object) -> bool:
    return isinstance(t, torch.Tensor) and t.requires_grad


def keeps_pre_activation(
    input: object, weight: object, bias: object, compiling: bool | None = None
) -> bool:
    """Whether a derivative may be asked of this call: then the op keeps the
    pre-activation for it (the backward and the JVP read it)."""
    if torch.is_grad_enabled() and any(map(_requires_grad, (input, weight, bias))):
        return True
    if torch.compiler.is_compiling() if compiling is None else compiling:
        return False  # dynamo traces forward-mode AD levels as they are at trace time
    return _autograd.may_carry_tangents()


def allows_tf32(input: object) -> bool:
    """F.linear's rule: a float32 CUDA GEMM may use TF32 when
    torch.backends.cuda.matmul.allow_tf32 (set_float32_matmul_precision) says so."""
    return (
        isinstance(input, torch.Tensor)
        and input.is_cuda
        and input.dtype == torch.float32
        and torch.backends.cuda.matmul.allow_tf32
    )


def fused_linear_gelu(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    approximate: str = "none",
) -> torch.Tensor:
    """Return ``F.gelu(F.linear(input, weight, bias), approximate=approximate)``, fused.

    ``input`` is ``[*, in_features]``, ``weight`` ``[out_features, in_features]``,
    ``bias`` ``[out_features]`` or None, all of one dtype (float32, float16, bfloat16
    or float64) and device; any strides. ``approximate`` is ``"none"`` (erf, what
    ``nn.GELU()`` computes) or ``"tanh"``. On CUDA the GEMM is cuBLASLt's with its
    epilogue doing the bias (and, for ``"tanh"``, the GELU); a float32 GEMM uses TF32
    exactly when ``F.linear`` would. Differentiable in ``input``, ``weight`` and
    ``bias`` (forward-mode AD too; no second derivatives). README's
    "fused_linear_gelu" section says what each path computes and how exactly.

    Example::

        >>> x, w, b = torch.randn(4, 8), torch.randn(16, 8), torch.randn(16)
        >>> ref = torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b))
        >>> torch.allclose(wheelops.fused_linear_gelu(x, w, b), ref, atol=1e-6)
        True
    """
    return (_python_path if dynamo_tracing() else _eager)(input, weight, bias, approximate)


def _python_path(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    approximate: str = "none",
) -> torch.Tensor:
    """wheelops.fused_linear_gelu's own path: every call under torch.compile, and each
    call the accelerator hands back (wheelops/ops/_accel.py)."""
    return _entry.run(
        OP,
        lambda: _check(OP, input, weight, bias, approximate),
        _OPS.fused_linear_gelu.default,
        input,
        weight,
        bias,
        approximate,
        allows_tf32(input),
        keeps_pre_activation(input, weight, bias),
    )[0]


# The eager entry: the accelerator's once register() has run, where it serves this op
# (wheelops/ops/_autograd.py accelerated); until then, and without it, the Python path.
_eager = _python_path


def _output_shape(input: torch.Tensor, weight: torch.Tensor) -> tuple[int, ...]:
    return (*input.shape[:-1], weight.shape[0])


def _fake(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    approximate: str = "none",
    allow_tf32: bool = False,
    keep_pre_activation: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    _check(OP, input, weight, bias, approximate)
    _checks.gpu_supported(OP, input)
    shape = _output_shape(input, weight)
    return input.new_empty(shape), input.new_empty(shape if keep_pre_activation else (0,))


def _fake_backward(
    grad: torch.Tensor,
    input: torch.Tensor,
    weight: torch.Tensor,
    pre_activation: torch.Tensor,
    approximate: str = "none",
    allow_tf32: bool = False,
    input_grad: bool = True,
    weight_grad: bool = True,
    bias_grad: bool = True,
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    _check(BACKWARD_OP, input, weight, None, approximate)
    n = weight.shape[0]
    _check_output_like(BACKWARD_OP, "grad", grad, input, n)
    _check_output_like(BACKWARD_OP, "pre_activation", pre_activation, input, n)
    _checks.gpu_supported(BACKWARD_OP, input)
    return (
        input.new_empty(input.shape) if input_grad else None,
        weight.new_empty(weight.shape) if weight_grad else None,
        weight.new_empty(n) if bias_grad else None,
    )


def _setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
    input, weight, bias, approximate, allow_tf32, _keep = inputs
    _out, pre_activation = output
    ctx.mark_non_differentiable(pre_activation)
    # pre_activation's gradient is never used: left undefined, not filled with zeros.
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(input, weight, bias, pre_activation)
    ctx.save_for_forward(input, weight, bias, pre_activation)
    ctx.approximate, ctx.allow_tf32 = approximate, allow_tf32


def _pre_activation(ctx: Any, input: torch.Tensor, weight: torch.Tensor, bias: Any, pre: Any):
    """The saved pre-activation, or (a call that did not keep it: the raw op called with
    keep_pre_activation=False under autograd) the same GEMM again."""
    if pre.shape == _output_shape(input, weight):
        return pre
    with torch.no_grad():
        return _OPS.fused_linear_gelu.default(
            input, weight, bias, ctx.approximate, ctx.allow_tf32, True
        )[1]


def _backward(ctx: Any, grad: torch.Tensor | None, _grad_pre: Any) -> tuple:
    if grad is None:  # grads are not materialized (setup_context): nothing flows back
        return None, None, None, None, None, None
    input, weight, bias, pre = ctx.saved_tensors
    pre = _pre_activation(ctx, input, weight, bias, pre)
    input_grad, weight_grad, bias_grad = ctx.needs_input_grad[:3]
    grad_input, grad_weight, grad_bias = _autograd.call(
        _OPS.fused_linear_gelu_backward.default,
        grad,
        input,
        weight,
        pre,
        ctx.approximate,
        ctx.allow_tf32,
        input_grad,
        weight_grad,
        bias_grad and bias is not None,
    )
    return grad_input, grad_weight, grad_bias, None, None, None


def _jvp(
    ctx: Any,
    input_tangent: torch.Tensor | None,
    weight_tangent: torch.Tensor | None,
    bias_tangent: torch.Tensor | None,
    *_flags: None,
) -> tuple:
    # d gelu(x W^T + b) = gelu'(pre) * (dx W^T + x dW^T + db)
    input, weight, bias, pre = ctx.saved_tensors
    pre = _pre_activation(ctx, input, weight, bias, pre)
    tangent = torch.zeros_like(pre)
    if input_tangent is not None:
        tangent = tangent + torch.nn.functional.linear(input_tangent, weight)
    if weight_tangent is not None:
        tangent = tangent + torch.nn.functional.linear(input, weight_tangent)
    if bias_tangent is not None:
        tangent = tangent + bias_tangent
    return torch.ops.aten.gelu_backward(tangent, pre, approximate=ctx.approximate), None


def register() -> None:
    torch.library.register_fake(f"wheelops::{OP}", _fake)
    torch.library.register_fake(f"wheelops::{BACKWARD_OP}", _fake_backward)
    _autograd.register(OP, setup_context=_setup_context, backward=_backward, jvp=_jvp)
    _autograd.register_gradient_without_derivatives(OP)
    _vmap.register_loop(BACKWARD_OP)
    # Last: the entry calls the ops registered above.
    global _eager
    _eager = _autograd.accelerated("fused_linear_gelu", _python_path)
