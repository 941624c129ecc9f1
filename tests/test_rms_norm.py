from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _helpers import DEVICES, DTYPES, LOW_PRECISION, randn, strided_variants
from _norm_helpers import (
    GPU_LENGTHS,
    LENGTHS,
    _rstd_error,
    assert_rms_norm_grad_weight_close,
    assert_rms_norm_grad_x_close,
    assert_rms_norm_out_close,
    assert_within,
    float64_grads,
    wheelops_ops_called,
)
from _saved import saved_for_backward
from opspecs.rms_norm import reference as rms_norm_reference

import wheelops
from wheelops.ops import _autograd
from wheelops.ops.rms_norm import default_eps


def _check_forward_and_backward(x, weight, eps=None):
    out = wheelops.rms_norm(x, weight, eps)
    assert out.shape == x.shape and out.dtype == x.dtype and out.is_contiguous()
    ref_eps = default_eps(x.dtype) if eps is None else eps
    assert_rms_norm_out_close(out, rms_norm_reference(x, weight, ref_eps), x, weight, ref_eps)
    grad = randn(tuple(x.shape), x.dtype, str(x.device), 4)
    leaves = [t.detach().requires_grad_() for t in (x, weight) if t is not None]
    w = leaves[1] if weight is not None else None
    mine = torch.autograd.grad(wheelops.rms_norm(leaves[0], w, eps), leaves, grad)
    expected = float64_grads(
        lambda a, w: F.rms_norm(a, (a.shape[-1],), w, ref_eps), grad, x, weight
    )
    assert_rms_norm_grad_x_close(mine[0], expected[0], x, weight, grad, ref_eps)
    if weight is not None:
        assert_rms_norm_grad_weight_close(mine[1], expected[1], x, grad, ref_eps)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_weight", [True, False])
@pytest.mark.parametrize("cols", LENGTHS)
def test_matches_float64_forward_and_backward(cols, with_weight, dtype, device):
    x = randn((3, 2, cols), dtype, device, 1) * 2 + 0.5
    weight = randn((cols,), dtype, device, 2) if with_weight else None
    _check_forward_and_backward(x, weight)
    _check_forward_and_backward(x, weight, eps=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_float64_and_default_eps(dtype, device):
    # eps matters at this scale: eps=None must mean what PyTorch means (the
    # float32 epsilon for float16/bfloat16 input, not finfo(x.dtype).eps).
    x = randn((7, 300), dtype, device, 1) * 1e-3
    weight = randn((300,), dtype, device, 2)
    eps = torch.finfo(torch.float32).eps if dtype != torch.float64 else torch.finfo(dtype).eps
    expected = rms_norm_reference(x, weight, eps)
    assert_rms_norm_out_close(wheelops.rms_norm(x, weight), expected, x, weight, eps)
    expected = rms_norm_reference(x, weight, 1e-2)
    assert_rms_norm_out_close(wheelops.rms_norm(x, weight, 1e-2), expected, x, weight, 1e-2)


@pytest.mark.parametrize("with_weight", [True, False])
def test_gradcheck_float64(with_weight):
    x = torch.randn(4, 11, dtype=torch.float64, requires_grad=True)
    if with_weight:
        w = torch.randn(11, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda a, b: wheelops.rms_norm(a, b, 1e-3), (x, w))
    else:
        assert torch.autograd.gradcheck(lambda a: wheelops.rms_norm(a, None, 1e-3), (x,))


@pytest.mark.parametrize("device", DEVICES)
def test_only_the_needed_gradients_and_saved_tensors(device):
    x = torch.randn(8, 40, device=device)
    weight = torch.randn(40, device=device, requires_grad=True)
    out, saved = saved_for_backward(lambda: wheelops.rms_norm(x, weight))
    assert len(saved) == 3
    assert saved[0].data_ptr() == x.data_ptr() and saved[1].data_ptr() == weight.data_ptr()
    assert saved[2].dtype == torch.float32 and saved[2].shape == (8,)
    rstd = 1 / torch.sqrt(x.double().square().mean(-1) + torch.finfo(torch.float32).eps)
    # rstd within its derived relative error, rounded to float32 (_norm_helpers).
    assert_within(saved[2].double(), rstd, _rstd_error(x) * rstd, "rstd")
    out.backward(torch.ones_like(out))
    assert x.grad is None and weight.grad is not None
    _, rstd = torch.ops.wheelops.rms_norm.default(x, weight, 1e-6)
    grads = torch.ops.wheelops.rms_norm_backward.default(
        torch.ones_like(x), x, rstd, weight, True, False
    )
    assert grads[1] is None and grads[0].shape == x.shape


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_non_contiguous_and_misaligned(dtype, device):
    x = randn((40, 24), dtype, device, 1)
    weight = randn((24,), dtype, device, 2)
    for view in strided_variants(x).values():
        _check_forward_and_backward(view, weight)
    padded = torch.zeros(25, dtype=dtype, device=device)
    padded[1:] = weight
    _check_forward_and_backward(x, padded[1:])
    long = randn((3, 4096), dtype, device, 5)
    for view in strided_variants(long).values():
        _check_forward_and_backward(view, None)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_and_inf_follow_pytorch(dtype, device):
    x = randn((5, 16), dtype, device, 1)
    x[1, 3] = float("nan")
    x[3, 0] = float("inf")
    out = wheelops.rms_norm(x, None, 1e-6)
    # The reference is eager float64 on the CPU: a row holding inf has rms inf,
    # so its finite entries are x / inf = 0 and the inf entry is inf / inf = NaN.
    # Eager CUDA's fused rms_norm returned NaN for the whole row instead (on an
    # H200, torch 2.11: its Welford-style moments compute inf - inf); the kernels
    # here follow the exact arithmetic on every device, as eager CPU does.
    eager = F.rms_norm(x.double().cpu(), (16,), None, 1e-6)
    out = out.cpu()
    assert torch.equal(out.isnan(), eager.isnan())
    assert out[1].isnan().all() and out[3, 0].isnan()
    assert (out[3, 1:] == 0).all()
    finite = [0, 2, 4]  # the rows without NaN or inf: rms_norm's derived bound
    assert_rms_norm_out_close(out[finite], eager[finite], x.cpu()[finite], None, 1e-6)
    assert not out[[0, 2, 4]].isnan().any()


@pytest.mark.parametrize("device", DEVICES)
def test_empty_and_single_element(device):
    for shape in [(0, 8), (2, 0, 5), (3, 0), (1,), (4, 1)]:
        x = torch.randn(shape, device=device, requires_grad=True)
        w = torch.ones(shape[-1], device=device, requires_grad=True)
        out = wheelops.rms_norm(x, w)
        torch.testing.assert_close(out, F.rms_norm(x, shape[-1:], w))
        out.sum().backward()
        assert x.grad.shape == x.shape and w.grad.shape == w.shape


@pytest.mark.parametrize("device", DEVICES)
def test_backward_is_deterministic(device):
    x = randn((3000, 96), torch.float32, device, 1)
    grad = randn((3000, 96), torch.float32, device, 3)
    weight = randn((96,), torch.float32, device, 2)
    _, rstd = torch.ops.wheelops.rms_norm.default(x, weight, 1e-6)
    first = torch.ops.wheelops.rms_norm_backward.default(grad, x, rstd, weight, True, True)
    for _ in range(3):
        again = torch.ops.wheelops.rms_norm_backward.default(grad, x, rstd, weight, True, True)
        assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for requires_grad in (False, True):
        x = torch.randn(3, 4, 16, device=device, requires_grad=requires_grad)
        w = torch.randn(16, device=device, requires_grad=requires_grad)
        for args in ((x, w, 1e-6), (x, None, 0.0)):
            torch.library.opcheck(torch.ops.wheelops.rms_norm.default, args)
    x, w = torch.randn(5, 24, device=device), torch.randn(24, device=device)
    _, rstd = torch.ops.wheelops.rms_norm.default(x, w, 1e-6)
    grad = torch.randn_like(x)
    for args in ((w, True, True), (w, False, True), (None, True, False)):
        torch.library.opcheck(torch.ops.wheelops.rms_norm_backward.default, (grad, x, rstd, *args))


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_forward_and_backward(device):
    torch._dynamo.reset()
    x = torch.randn(4, 6, 40, device=device, requires_grad=True)
    weight = torch.randn(40, device=device, requires_grad=True)

    def fn(a, w):
        return (wheelops.rms_norm(a, w) * 2).square().sum()

    out = torch.compile(fn, fullgraph=True)(x, weight)
    grads = torch.autograd.grad(out, (x, weight))
    # Against the same op uncompiled: the same kernels on the same inputs; only the sum of
    # the n squares (float32, any order: n roundings of sum |terms| each way) may differ,
    # and the incoming gradient 8 y (exact: powers of two) reaches the same backward.
    eager = fn(x, weight)
    expected = torch.autograd.grad(eager, (x, weight))
    terms = (wheelops.rms_norm(x, weight) * 2).square().detach()
    sum_error = 2 * terms.numel() * 2.0**-24 * float(terms.abs().sum())
    assert abs(float(out) - float(eager)) <= sum_error
    for a, b in zip(grads, expected, strict=True):
        assert torch.equal(a, b)


def test_native_checks_reject_bad_input_too():
    op = torch.ops.wheelops.rms_norm.default
    with pytest.raises(RuntimeError, match="'eps' must be a non-negative number"):
        op(torch.ones(2, 3), None, float("nan"))
    with pytest.raises(RuntimeError, match=r"'weight' must have shape \[3\]"):
        op(torch.ones(2, 3), torch.ones(3, 1), 1e-6)
    x = torch.ones(2, 3)
    _, rstd = op(x, None, 1e-6)
    with pytest.raises(RuntimeError, match="'grad' and 'x' must have the same dtype"):
        torch.ops.wheelops.rms_norm_backward.default(x.double(), x, rstd, None, True, False)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("cols", GPU_LENGTHS)
def test_long_rows_on_gpu(cols, dtype):
    x = randn((3, cols), dtype, "cuda", 1)
    _check_forward_and_backward(x, randn((cols,), dtype, "cuda", 2))
    _check_forward_and_backward(x, None)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(4096, 1024), (4096, 4096), (4096, 8192), (4096, 16384)])
def test_benchmark_shapes_on_gpu(shape, dtype):
    x = randn(shape, dtype, "cuda", 1)
    _check_forward_and_backward(x, randn(shape[-1:], dtype, "cuda", 2))
    del x
    torch.cuda.empty_cache()


@pytest.mark.gpu
def test_more_than_65535_rows_and_mixed_devices():
    x = randn((70001, 5), torch.float32, "cuda", 1)
    _check_forward_and_backward(x, randn((5,), torch.float32, "cuda", 2))
    with pytest.raises(ValueError, match="same device"):
        wheelops.rms_norm(x, torch.ones(5))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", LOW_PRECISION)
def test_side_stream(dtype):
    x = randn((2048, 1024), dtype, "cuda", 1)
    weight = randn((1024,), dtype, "cuda", 2)
    expected = rms_norm_reference(x, weight, default_eps(dtype))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = wheelops.rms_norm(x, weight)
    torch.cuda.current_stream().wait_stream(stream)
    assert_rms_norm_out_close(out, expected, x, weight, default_eps(dtype))


def test_regression_eps_int_beyond_float64_names_eps():
    # Found by test_properties.py::test_norms_reject_bad_arguments: eps=10**309
    # escaped as float()'s bare OverflowError, naming neither op nor argument.
    with pytest.raises(ValueError, match="rms_norm: argument 'eps' must be representable"):
        wheelops.rms_norm(torch.ones(2, 3), None, 10**309)


@pytest.mark.parametrize("device", DEVICES)
def test_no_gradient_wanted_runs_the_op_without_statistics(device):
    # Issue 27: a call that wants no gradient runs rms_norm_inference (no statistics
    # allocated or written); its output is the training op's, bit for bit.
    x = randn((17, 33), torch.float32, device, 1)
    w = randn((33,), torch.float32, device, 2)
    training = torch.ops.wheelops.rms_norm.default(x, w, 1e-6)[0]
    inference = ["rms_norm_inference.default"]
    # The public autograd layer cannot tell that no tangent comes but in inference mode.
    no_gradient = ["rms_norm.default"] if _autograd.PUBLIC else inference
    assert wheelops_ops_called(lambda: wheelops.rms_norm(x, w, 1e-6)) == no_gradient
    assert torch.equal(wheelops.rms_norm(x, w, 1e-6), training)
    x.requires_grad_()
    assert wheelops_ops_called(lambda: wheelops.rms_norm(x, w, 1e-6)) == ["rms_norm.default"]
    with torch.no_grad():
        assert wheelops_ops_called(lambda: wheelops.rms_norm(x, w, 1e-6)) == no_gradient
        assert torch.equal(wheelops.rms_norm(x, w, 1e-6), training)
    with torch.inference_mode():
        assert wheelops_ops_called(lambda: wheelops.rms_norm(x, w, 1e-6)) == inference
        assert torch.equal(wheelops.rms_norm(x, w, 1e-6), training)
    asked = r"^wheelops\.rms_norm_inference does not support backward"
    with pytest.raises(NotImplementedError, match=asked):
        torch.ops.wheelops.rms_norm_inference.default(x, w, 1e-6).sum().backward()
    x = x.detach()
    torch.library.opcheck(torch.ops.wheelops.rms_norm_inference.default, (x, w, 1e-6))
