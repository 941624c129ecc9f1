"""The gradient checkers reject a wrong gradient (issue 26).

Weight and bias gradients (sums over rows) were checked at the dtype's tolerance
times sqrt(rows): at 4096 rows a bfloat16 gradient ~51% off passed, and above ~15,600
rows a gradient of zero. Their checkers now derive each bound from how the sum is
computed (tests/_norm_helpers.py's column_sum_allowance, _bias_gelu_bounds'
assert_grad_bias_close, _lltm_bounds' lltm_allowed). Here each one, at the largest row
count its tests use (the GPU tests' included: a checker is pure math, so it runs on
the CPU on the GPU test's own inputs or on synthetic ones of that size), rejects the
float64 reference times 1.05 and a zero gradient, and passes the CPU kernel's answer
and float32 emulations of the kernels' summation orders: rows in order (the CPU
kernels) and strided chains then the chains in order (the CUDA kernels).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _bias_gelu_bounds import assert_grad_bias_close
from _helpers import randn
from _lltm_bounds import LLTM_INPUTS, assert_lltm_close, lltm_allowed
from _norm_helpers import (
    assert_layer_norm_grad_weight_close,
    assert_layer_norm_grad_x_close,
    assert_norm_bias_grad_close,
    assert_rms_norm_grad_weight_close,
    assert_within,
    float64_grads,
)
from opspecs.bias_gelu import reference_grads as bias_gelu_reference_grads
from opspecs.lltm import float64_results, make_inputs

import wheelops

# The CUDA kernels' row stride: one row per thread of a grid as wide as the GPU (an H100
# has 132 SMs); any stride gives a float32 sum of the same kind.
CUDA_STRIDE = 132 * 4

Check = Callable[[torch.Tensor, torch.Tensor], None]


def float32_sum(terms: torch.Tensor, stride: int) -> torch.Tensor:
    """Column sums of [rows, cols] float32 terms as a kernel adds them in float32: rows
    r, r + stride, ... in order for each r < stride, then those chains in order."""
    rows, cols = terms.shape
    chains = -(-rows // stride)
    padded = np.zeros((chains * stride, cols), np.float32)
    padded[:rows] = terms.float().numpy()
    chain_sums = np.cumsum(padded.reshape(chains, stride, cols), axis=0, dtype=np.float32)[-1]
    return torch.from_numpy(np.cumsum(chain_sums, axis=0, dtype=np.float32)[-1].copy())


def assert_rejects_wrong_and_passes_right(
    check: Check,
    expected: torch.Tensor,
    kernel: torch.Tensor,
    terms32: torch.Tensor,
) -> None:
    """check passes the kernel's answer and the float32 sums of terms32 in row order and in
    CUDA_STRIDE chains; it rejects the reference 5% off (either way) and zero."""
    dtype = kernel.dtype
    check(kernel, expected)
    for stride in (1, CUDA_STRIDE):
        check(float32_sum(terms32, stride).to(dtype), expected)
    for factor in (1.05, 0.95, 0.0):
        with pytest.raises(AssertionError, match="off by"):
            check((expected * factor).to(dtype), expected)


# (rows, cols, dtype, seed): the largest row counts of the norm tests.
PROPERTIES_GPU = [  # test_properties.py on the GPU: up to 64**3 rows (last dim <= 7 there)
    pytest.param(64**3, 7, dtype, 0, id=f"262144x7-{name}-properties-gpu")
    for name, dtype in [("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32)]
]
LAYER_NORM_CASES = [
    *PROPERTIES_GPU,
    # test_layer_norm's more_than_65535_rows (gpu), its own inputs.
    pytest.param(70000, 64, torch.bfloat16, 1, id="70000x64-bf16-more_than_65535_rows"),
    pytest.param(70001, 3, torch.float32, 1, id="70001x3-fp32-more_than_65535_rows"),
    # test_layer_norm's benchmark_shapes_on_gpu, its own inputs (the smallest of its rows).
    pytest.param(4096, 1024, torch.bfloat16, 1, id="4096x1024-bf16-benchmark_shapes"),
]
RMS_NORM_CASES = [
    *PROPERTIES_GPU,
    # test_rms_norm's more_than_65535_rows_and_mixed_devices (gpu), its own inputs.
    pytest.param(70001, 5, torch.float32, 1, id="70001x5-fp32-more_than_65535_rows"),
    pytest.param(4096, 1024, torch.bfloat16, 1, id="4096x1024-bf16-benchmark_shapes"),
]


def _norm_inputs(rows: int, cols: int, dtype: torch.dtype, seed: int):
    x = randn((rows, cols), dtype, "cpu", seed)
    weight = randn((cols,), dtype, "cpu", 2)
    bias = randn((cols,), dtype, "cpu", 3)
    grad = randn((rows, cols), dtype, "cpu", 4)
    return x, weight, bias, grad


@pytest.mark.parametrize(("rows", "cols", "dtype", "seed"), LAYER_NORM_CASES)
def test_layer_norm_weight_and_bias_grad_checks_fail_a_wrong_gradient(rows, cols, dtype, seed):
    x, weight, bias, grad = _norm_inputs(rows, cols, dtype, seed)
    expected = float64_grads(
        lambda a, w, b: F.layer_norm(a, (cols,), w, b, 1e-5), grad, x, weight, bias
    )
    leaves = [t.detach().requires_grad_() for t in (x, weight, bias)]
    kernel = torch.autograd.grad(wheelops.layer_norm(*leaves, 1e-5), leaves, grad)
    # The CUDA backward's terms: float32, from the float32 mean and rstd of the forward.
    _, mean, rstd = torch.ops.wheelops.layer_norm.default(x, weight, bias, 1e-5)
    xhat32 = (x.float() - mean[:, None]) * rstd[:, None]
    assert_rejects_wrong_and_passes_right(
        lambda a, e: assert_layer_norm_grad_weight_close(a, e, x, grad, 1e-5),
        expected[1],
        kernel[1],
        grad.float() * xhat32,
    )
    assert_rejects_wrong_and_passes_right(
        lambda a, e: assert_norm_bias_grad_close(a, e, grad), expected[2], kernel[2], grad.float()
    )


@pytest.mark.parametrize(("rows", "cols", "dtype", "seed"), RMS_NORM_CASES)
def test_rms_norm_weight_grad_check_fails_a_wrong_gradient(rows, cols, dtype, seed):
    x, weight, _, grad = _norm_inputs(rows, cols, dtype, seed)
    eps = torch.finfo(torch.float32).eps
    expected = float64_grads(lambda a, w: F.rms_norm(a, (cols,), w, eps), grad, x, weight)[1]
    leaves = [t.detach().requires_grad_() for t in (x, weight)]
    kernel = torch.autograd.grad(wheelops.rms_norm(*leaves, eps), leaves, grad)[1]
    _, rstd = torch.ops.wheelops.rms_norm.default(x, weight, eps)
    assert_rejects_wrong_and_passes_right(
        lambda a, e: assert_rms_norm_grad_weight_close(a, e, x, grad, eps),
        expected,
        kernel,
        grad.float() * (x.float() * rstd[:, None]),
    )


def test_layer_norm_bias_grad_check_at_the_regression_tests_69632_rows():
    # test_layer_norm's regression_bias_grad_over_65536_rows_of_one_column, its own inputs.
    grad = randn((17, 64, 64, 1), torch.float32, "cpu", 3)
    x = randn((17, 64, 64, 1), torch.float32, "cpu", 0) * 1e-3
    bias = randn((1,), torch.float32, "cpu", 2).requires_grad_()
    (kernel,) = torch.autograd.grad(wheelops.layer_norm(x, None, bias, 1e-12), (bias,), grad)
    expected = grad.double().sum((0, 1, 2))
    assert_rejects_wrong_and_passes_right(
        lambda a, e: assert_norm_bias_grad_close(a, e, grad),
        expected,
        kernel,
        grad.reshape(-1, 1).float(),
    )


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize(
    ("rows", "cols", "dtype"),
    [
        # test_properties.py on the GPU: up to 64**3 rows (last dim <= 7 there).
        pytest.param(64**3, 7, torch.bfloat16, id="262144x7-bf16-properties-gpu"),
        pytest.param(64**3, 7, torch.float16, id="262144x7-fp16-properties-gpu"),
        pytest.param(64**3, 7, torch.float32, id="262144x7-fp32-properties-gpu"),
        # test_bias_gelu's largest shape, its own inputs.
        pytest.param(130, 96, torch.bfloat16, id="130x96-bf16-test_bias_gelu"),
    ],
)
def test_bias_gelu_bias_grad_check_fails_a_wrong_gradient(rows, cols, dtype, approximate):
    x, bias = randn((rows, cols), dtype, "cpu", 1), randn((cols,), dtype, "cpu", 2)
    grad = randn((rows, cols), dtype, "cpu", 3)
    expected_x, expected = bias_gelu_reference_grads(grad, x, bias, approximate)
    _, kernel = torch.ops.wheelops.bias_gelu_backward.default(grad, x, bias, approximate)
    u = x.double() + bias.double()
    # The kernels' terms: float32 g * gelu'(x + bias), here eager's float32 gelu'.
    u32 = (x.float() + bias.float()).requires_grad_()
    (terms32,) = torch.autograd.grad(F.gelu(u32, approximate=approximate), u32, grad.float())
    assert_rejects_wrong_and_passes_right(
        lambda a, e: assert_grad_bias_close(a, e, expected_x, grad, u), expected, kernel, terms32
    )


LLTM_RESULTS = ("new_h", "new_cell", *LLTM_INPUTS)


@pytest.mark.parametrize(
    "dtype", [torch.bfloat16, torch.float16, torch.float32], ids=["bf16", "fp16", "fp32"]
)
@pytest.mark.parametrize(
    ("batch", "features", "state"),
    [
        # test_lltm's large_batch_on_a_side_stream (gpu) sums the weights and bias grads
        # over 4096 rows (there with 256 features and 512 states; fewer here, for the CPU).
        pytest.param(4096, 8, 16, id="4096-rows-large_batch"),
        pytest.param(6, 10, 64, id="6-rows-test_lltm"),
    ],
)
def test_lltm_checks_fail_a_wrong_result(batch, features, state, dtype):
    inputs = make_inputs(batch, features, state, dtype, "cpu", seed=7, requires_grad=True)
    generator = torch.Generator().manual_seed(2)
    grads = [torch.randn(batch, state, generator=generator).to(dtype) for _ in range(2)]
    outputs = wheelops.lltm(*inputs)
    input_grads = torch.autograd.grad(outputs, inputs, grads)
    assert_lltm_close(outputs, input_grads, inputs, grads)
    # What assert_lltm_close checks each result against, for the wrong ones.
    (expected_h, expected_cell), expected_grads = float64_results(inputs, grads)
    allowed = lltm_allowed(inputs, grads, (expected_h, expected_cell), expected_grads)
    expected = dict(zip(LLTM_RESULTS, [expected_h, expected_cell, *expected_grads], strict=True))
    for name, value in expected.items():
        for factor in (1.05, 0.95, 0.0):
            with pytest.raises(AssertionError, match=f"^{name} off by"):
                assert_within((value * factor).to(dtype), value, allowed[name], name)


def _layer_norm_grad_x_float32(x: torch.Tensor, grad: torch.Tensor, eps: float) -> torch.Tensor:
    """layer_norm's grad_x (no weight) in float32 as the CUDA kernels compute it: the
    mean shifted by each row's first value and corrected by the centred sum, then
    rstd * (g - mean(g) - xhat * mean(g * xhat))."""
    n = x.shape[-1]
    shift = x[:, :1]
    offset = (x - shift).sum(-1, keepdim=True) / n
    d = (x - shift) - offset
    sum_d = d.sum(-1, keepdim=True)
    correction = sum_d / n
    var = ((d * d).sum(-1, keepdim=True) - sum_d * correction) / n
    rstd = 1 / torch.sqrt(var + eps)
    mean = shift + (offset + correction)
    xhat = (x - mean) * rstd
    mean_dot = (grad * xhat).sum(-1, keepdim=True) / n
    return rstd * ((grad - grad.sum(-1, keepdim=True) / n) - xhat * mean_dot)


def test_layer_norm_grad_x_bound_covers_the_rounded_mean():
    # The GPU property tests' case (float32, 15 rows of 31 values around 0.5, spread
    # 1e-3, eps 1e-12): the rounded mean moves each xhat by u * max|x| * rstd, which
    # also multiplies mean(g): the bound missed that term (0.0224 off, 0.0161 allowed).
    x = randn((15, 31), torch.float32, "cpu", 528, 0.001, 0.5)
    grad = randn((15, 31), torch.float32, "cpu", 531)
    expected = float64_grads(lambda a: F.layer_norm(a, (31,), None, None, 1e-12), grad, x)[0]
    kernel = _layer_norm_grad_x_float32(x, grad, 1e-12)
    assert (kernel.double() - expected).abs().max() > 0.02  # the case is what it was
    assert_layer_norm_grad_x_close(kernel, expected, x, None, grad, 1e-12, 4.0)
    for factor in (1.05, 0.95, 0.0):
        with pytest.raises(AssertionError, match="off by"):
            wrong = (expected * factor).float()
            assert_layer_norm_grad_x_close(wrong, expected, x, None, grad, 1e-12, 4.0)
