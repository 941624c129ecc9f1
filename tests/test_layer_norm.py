from __future__ import annotations

import decimal

import pytest
import torch
import torch.nn.functional as F
from _helpers import DEVICES, DTYPES, LOW_PRECISION, randn, strided_variants
from _norm_helpers import (
    GPU_LENGTHS,
    LENGTHS,
    _centering_error,
    _grad_x_error,
    _rstd_error,
    assert_layer_norm_grad_weight_close,
    assert_layer_norm_grad_x_close,
    assert_layer_norm_out_close,
    assert_norm_bias_grad_close,
    assert_within,
    float64_grads,
    layer_norm_float64_grads,
    rounded_error,
    wheelops_ops_called,
)
from _saved import saved_for_backward
from opspecs.layer_norm import reference as layer_norm_reference

import wheelops
from wheelops.ops import _autograd

AFFINE = ["weight_and_bias", "weight_only", "bias_only", "none"]


def _params(kind, cols, dtype, device):
    with_weight = kind in ("weight_and_bias", "weight_only")
    with_bias = kind in ("weight_and_bias", "bias_only")
    weight = randn((cols,), dtype, device, 2) if with_weight else None
    bias = randn((cols,), dtype, device, 3) if with_bias else None
    return weight, bias


def _ln64(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def _check_forward_and_backward(x, weight, bias, eps=1e-5):
    out = wheelops.layer_norm(x, weight, bias, eps)
    assert out.shape == x.shape and out.dtype == x.dtype and out.is_contiguous()
    assert_layer_norm_out_close(
        out, layer_norm_reference(x, weight, bias, eps), x, weight, bias, eps
    )
    grad = randn(tuple(x.shape), x.dtype, str(x.device), 4)
    inputs = [t for t in (x, weight, bias) if t is not None]
    leaves = [t.detach().requires_grad_() for t in inputs]
    it = iter(leaves)
    args = [None if t is None else next(it) for t in (x, weight, bias)]
    mine = torch.autograd.grad(wheelops.layer_norm(args[0], args[1], args[2], eps), leaves, grad)
    expected = [
        g
        for g in float64_grads(
            lambda a, w, b: F.layer_norm(a, (a.shape[-1],), w, b, eps), grad, x, weight, bias
        )
        if g is not None
    ]
    assert_layer_norm_grad_x_close(mine[0], expected[0], x, weight, grad, eps)
    if weight is not None:
        assert_layer_norm_grad_weight_close(mine[1], expected[1], x, grad, eps)
    if bias is not None:
        assert_norm_bias_grad_close(mine[-1], expected[-1], grad)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("affine", AFFINE)
@pytest.mark.parametrize("cols", LENGTHS)
def test_matches_float64_forward_and_backward(cols, affine, dtype, device):
    x = randn((3, 2, cols), dtype, device, 1) * 2 + 0.5
    weight, bias = _params(affine, cols, dtype, device)
    _check_forward_and_backward(x, weight, bias)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_float64_300_columns(dtype, device):
    x = randn((7, 300), dtype, device, 1)
    weight, bias = randn((300,), dtype, device, 2), randn((300,), dtype, device, 3)
    out = wheelops.layer_norm(x, weight, bias)
    expected = layer_norm_reference(x, weight, bias, 1e-5)
    assert_layer_norm_out_close(out, expected, x, weight, bias, 1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_autograd_matches_float64(device):
    x = torch.randn(6, 5, 96, device=device, requires_grad=True)
    weight = torch.randn(96, device=device, requires_grad=True)
    bias = torch.randn(96, device=device, requires_grad=True)
    grad = torch.randn(6, 5, 96, device=device)
    mine = torch.autograd.grad(wheelops.layer_norm(x, weight, bias), (x, weight, bias), grad)
    x, weight, bias = x.detach(), weight.detach(), bias.detach()
    expected = float64_grads(_ln64, grad, x, weight, bias)  # eager's formula, in float64
    assert_layer_norm_grad_x_close(mine[0], expected[0], x, weight, grad, 1e-5)
    assert_layer_norm_grad_weight_close(mine[1], expected[1], x, grad, 1e-5)
    assert_norm_bias_grad_close(mine[2], expected[2], grad)


@pytest.mark.parametrize("affine", AFFINE)
def test_gradcheck_float64(affine):
    x = torch.randn(4, 11, dtype=torch.float64, requires_grad=True)
    weight, bias = _params(affine, 11, torch.float64, "cpu")
    weight = weight.requires_grad_() if weight is not None else None
    bias = bias.requires_grad_() if bias is not None else None
    inputs = tuple(t for t in (x, weight, bias) if t is not None)

    def fn(*args):
        it = iter(args)
        a = next(it)
        w = next(it) if weight is not None else None
        b = next(it) if bias is not None else None
        return wheelops.layer_norm(a, w, b, 1e-3)

    assert torch.autograd.gradcheck(fn, inputs)


@pytest.mark.parametrize("device", DEVICES)
def test_only_the_needed_gradients(device):
    x = torch.randn(8, 40, device=device)
    weight = torch.randn(40, device=device, requires_grad=True)
    bias = torch.randn(40, device=device, requires_grad=True)
    grad = torch.randn(8, 40, device=device)
    (gw,) = torch.autograd.grad(wheelops.layer_norm(x, weight, bias), (weight,), grad)
    expected = float64_grads(_ln64, grad, x, weight, bias)[1]
    assert_layer_norm_grad_weight_close(gw, expected, x, grad, 1e-5)
    out = wheelops.layer_norm(x, weight, bias)
    out.backward(grad)
    assert x.grad is None and weight.grad is not None and bias.grad is not None
    # The backward op itself computes only what it is asked for.
    _, mean, rstd = torch.ops.wheelops.layer_norm.default(x, weight, bias, 1e-5)
    grads = torch.ops.wheelops.layer_norm_backward.default(
        grad, x, mean, rstd, weight, False, False, True
    )
    assert grads[0] is None and grads[1] is None
    assert_norm_bias_grad_close(grads[2], grad.double().sum(0), grad)


@pytest.mark.parametrize("device", DEVICES)
def test_saves_only_x_weight_mean_rstd(device):
    x = torch.randn(6, 24, device=device, requires_grad=True)
    weight = torch.randn(24, device=device, requires_grad=True)
    bias = torch.randn(24, device=device, requires_grad=True)
    out, saved = saved_for_backward(lambda: wheelops.layer_norm(x, weight, bias))
    assert len(saved) == 4
    assert saved[0].data_ptr() == x.data_ptr() and saved[1].data_ptr() == weight.data_ptr()
    for stat in saved[2:]:
        assert stat.dtype == torch.float32 and stat.shape == (6,)
    assert all(t.data_ptr() != out.data_ptr() for t in saved)
    x64 = x.detach().double()
    # The statistics' derived bounds: the mean within its centering error (per max|x|), rstd
    # within its relative error, both rounded to float32 (_norm_helpers).
    mean_error = _centering_error(x) * x64.abs().amax(-1)
    assert_within(saved[2].double(), x64.mean(-1), mean_error, "mean")
    rstd = 1 / torch.sqrt(x64.var(-1, unbiased=False) + 1e-5)
    assert_within(saved[3].double(), rstd, _rstd_error(x) * rstd, "rstd")
    out64 = wheelops.layer_norm(x.detach().double())
    assert out64.dtype == torch.float64
    stats = torch.ops.wheelops.layer_norm.default(x.detach().double(), None, None, 1e-5)
    assert stats[1].dtype == torch.float64 and stats[2].dtype == torch.float64


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_non_contiguous_and_misaligned(dtype, device):
    x = randn((40, 24), dtype, device, 1)
    weight, bias = randn((24,), dtype, device, 2), randn((24,), dtype, device, 3)
    for view in strided_variants(x).values():
        _check_forward_and_backward(view, weight, bias)
    padded = torch.zeros(2, 25, dtype=dtype, device=device)
    padded[0, 1:], padded[1, 1:] = weight, bias
    misaligned_w, misaligned_b = padded[0, 1:], padded[1, 1:]
    _check_forward_and_backward(x, misaligned_w, misaligned_b)
    # A long row taking the vector path when aligned, the scalar path here.
    long = randn((3, 4096), dtype, device, 5)
    for view in strided_variants(long).values():
        _check_forward_and_backward(view, None, None)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_and_inf_poison_only_their_row(dtype, device):
    x = randn((5, 16), dtype, device, 1)
    x[1, 3] = float("nan")
    x[3, 0] = float("inf")
    x[4, 5], x[4, 6] = float("inf"), -float("inf")
    out = wheelops.layer_norm(x)
    eager = F.layer_norm(x.double(), (16,))
    assert torch.equal(out.isnan(), eager.isnan()) and out[[1, 3, 4]].isnan().all()
    finite = [0, 2]  # the rows without NaN or inf: layer_norm's derived bound
    assert_layer_norm_out_close(out[finite], eager[finite], x[finite], None, None, 1e-5)
    assert not out[[0, 2]].isnan().any()


@pytest.mark.parametrize("device", DEVICES)
def test_zero_eps_and_constant_rows_follow_pytorch(device):
    x = torch.tensor([[2.0, 2.0, 2.0], [1.0, 2.0, 3.0]], device=device)
    torch.testing.assert_close(
        wheelops.layer_norm(x, eps=0.0), F.layer_norm(x, (3,), eps=0.0), equal_nan=True
    )
    torch.testing.assert_close(wheelops.layer_norm(x, eps=1.0), F.layer_norm(x, (3,), eps=1.0))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [*LENGTHS, pytest.param(70000, marks=pytest.mark.gpu)])
def test_constant_rows_normalize_to_exactly_zero(cols, dtype, device):
    # Issue #14: float64 rows of 1e30 gave 1.0, and rows of 0.3 with eps=1e-30 gave -0.447
    # (a mean a few ulps off). The mean is shift + mean(x - shift) with the row's first
    # value as shift, so a constant row centres to exactly 0, as in eager.
    values = [0.3, -7.25, 1e4]
    if dtype == torch.float64:
        values += [1e30, -5e-300]
    rows = torch.tensor(values, dtype=dtype, device=device)[:, None].expand(-1, cols)
    for eps in (1e-5, 1e-30):
        out = wheelops.layer_norm(rows, eps=eps)
        # (Eager gives 0 here for float32 and float64; in float16 and bfloat16 it does not.)
        assert torch.equal(out, torch.zeros_like(out)), out[:, :3]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cols", [100, 4096, pytest.param(70000, marks=pytest.mark.gpu)])
def test_float64_large_mean_small_spread_at_least_as_accurate_as_eager(cols, device):
    # A layer norm does not see a common offset: the exact answer for offset + small is
    # the answer for small, computed from values with no cancellation. (Offsets and
    # steps keep offset + small exact in float64.) Eager loses up to 1e-4 at 1e12.
    small = randn((8, cols), torch.float64, "cpu", seed=3).mul(4096).round().div(4096)
    reference = F.layer_norm(small, (cols,)).to(device)
    for offset in (0.0, 1e3, 1e6, 1e9, 1e12):
        x = (small + offset).to(device)
        assert torch.equal((x - offset).cpu(), small)
        error = (wheelops.layer_norm(x) - reference).abs().max().item()
        eager_error = (F.layer_norm(x, (cols,)) - reference).abs().max().item()
        assert error <= max(eager_error, 1e-14), (offset, error, eager_error)


@pytest.mark.parametrize("device", DEVICES)
def test_empty_and_single_element(device):
    for shape in [(0, 8), (2, 0, 5), (3, 0), (1,), (4, 1)]:
        x = torch.randn(shape, device=device, requires_grad=True)
        w = torch.ones(shape[-1], device=device, requires_grad=True)
        out = wheelops.layer_norm(x, w)
        assert out.shape == x.shape
        torch.testing.assert_close(out, F.layer_norm(x, shape[-1:], w))
        out.sum().backward()
        assert x.grad.shape == x.shape and w.grad.shape == w.shape
        assert torch.all(x.grad == 0)


@pytest.mark.parametrize("device", DEVICES)
def test_backward_is_deterministic(device):
    x = randn((3000, 96), torch.float32, device, 1)
    grad = randn((3000, 96), torch.float32, device, 3)
    weight = randn((96,), torch.float32, device, 2)
    _, mean, rstd = torch.ops.wheelops.layer_norm.default(x, weight, None, 1e-5)
    first = torch.ops.wheelops.layer_norm_backward.default(
        grad, x, mean, rstd, weight, True, True, True
    )
    for _ in range(3):
        again = torch.ops.wheelops.layer_norm_backward.default(
            grad, x, mean, rstd, weight, True, True, True
        )
        for a, b in zip(first, again, strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for requires_grad in (False, True):
        x = torch.randn(3, 4, 16, device=device, requires_grad=requires_grad)
        w = torch.randn(16, device=device, requires_grad=requires_grad)
        b = torch.randn(16, device=device, requires_grad=requires_grad)
        for args in ((x, w, b, 1e-5), (x, None, None, 1e-3), (x, None, b, 0.0)):
            torch.library.opcheck(torch.ops.wheelops.layer_norm.default, args)
    x, w = torch.randn(5, 24, device=device), torch.randn(24, device=device)
    _, mean, rstd = torch.ops.wheelops.layer_norm.default(x, w, None, 1e-5)
    grad = torch.randn_like(x)
    for flags in ((True, True, True), (True, False, False), (False, True, False)):
        torch.library.opcheck(
            torch.ops.wheelops.layer_norm_backward.default, (grad, x, mean, rstd, w, *flags)
        )
    torch.library.opcheck(
        torch.ops.wheelops.layer_norm_backward.default,
        (grad, x, mean, rstd, None, True, False, True),
    )


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_forward_and_backward(device):
    torch._dynamo.reset()
    x = torch.randn(4, 6, 40, device=device, requires_grad=True)
    weight = torch.randn(40, device=device, requires_grad=True)
    bias = torch.randn(40, device=device, requires_grad=True)

    def fn(a, w, b):
        return (wheelops.layer_norm(a, w, b) * 2).square().sum()

    compiled = torch.compile(fn, fullgraph=True)
    out = compiled(x, weight, bias)
    grads = torch.autograd.grad(out, (x, weight, bias))
    # Against the same op uncompiled: the same kernels on the same inputs; only the sum of
    # the n squares (float32, any order: n roundings of sum |terms| each way) may differ,
    # and the incoming gradient 8 y (exact: powers of two) reaches the same backward.
    eager = fn(x, weight, bias)
    expected = torch.autograd.grad(eager, (x, weight, bias))
    terms = (wheelops.layer_norm(x, weight, bias) * 2).square().detach()
    sum_error = 2 * terms.numel() * 2.0**-24 * float(terms.abs().sum())
    assert abs(float(out) - float(eager)) <= sum_error
    for a, b in zip(grads, expected, strict=True):
        assert torch.equal(a, b)


def test_native_checks_reject_bad_input_too():
    op = torch.ops.wheelops.layer_norm.default
    with pytest.raises(RuntimeError, match="'eps' must be a non-negative number"):
        op(torch.ones(2, 3), None, None, -1.0)
    with pytest.raises(RuntimeError, match=r"'weight' must have shape \[3\]"):
        op(torch.ones(2, 3), torch.ones(2), None, 1e-5)
    with pytest.raises(RuntimeError, match="'x' must have at least one dimension"):
        op(torch.tensor(1.0), None, None, 1e-5)
    with pytest.raises(RuntimeError, match="'x' and 'bias' must have the same dtype"):
        op(torch.ones(2, 3), None, torch.ones(3, dtype=torch.float16), 1e-5)
    x = torch.ones(2, 3)
    _, mean, rstd = op(x, None, None, 1e-5)
    backward = torch.ops.wheelops.layer_norm_backward.default
    with pytest.raises(RuntimeError, match="'grad' and 'x' must have the same shape"):
        backward(torch.ones(3, 3), x, mean, rstd, None, True, False, False)
    with pytest.raises(RuntimeError, match=r"'rstd' must have shape \[2\]"):
        backward(x, x, mean, rstd[:1], None, True, False, False)
    with pytest.raises(RuntimeError, match="'mean' must have dtype Float"):
        backward(x, x, mean.double(), rstd, None, True, False, False)
    with pytest.raises(RuntimeError, match="gradient of 'weight' was requested"):
        backward(x, x, mean, rstd, None, True, True, False)


@pytest.mark.gpu
def test_mixed_devices_rejected():
    x = torch.ones(2, 3, device="cuda")
    with pytest.raises(ValueError, match="same device"):
        wheelops.layer_norm(x, torch.ones(3))
    with pytest.raises(RuntimeError, match="same device"):
        torch.ops.wheelops.layer_norm.default(x, None, torch.ones(3), 1e-5)
    torch.cuda.synchronize()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("cols", GPU_LENGTHS)
def test_long_rows_on_gpu(cols, dtype):
    x = randn((3, cols), dtype, "cuda", 1)
    weight, bias = randn((cols,), dtype, "cuda", 2), randn((cols,), dtype, "cuda", 3)
    _check_forward_and_backward(x, weight, bias)
    _check_forward_and_backward(x, None, None)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(4096, 1024), (4096, 4096), (4096, 8192), (4096, 16384)])
def test_benchmark_shapes_on_gpu(shape, dtype):
    x = randn(shape, dtype, "cuda", 1)
    weight, bias = randn(shape[-1:], dtype, "cuda", 2), randn(shape[-1:], dtype, "cuda", 3)
    _check_forward_and_backward(x, weight, bias)
    del x
    torch.cuda.empty_cache()


@pytest.mark.gpu
def test_more_than_65535_rows():
    x = randn((70001, 3), torch.float32, "cuda", 1)
    _check_forward_and_backward(x, randn((3,), torch.float32, "cuda", 2), None)
    x = randn((2, 35000, 64), torch.bfloat16, "cuda", 1)
    _check_forward_and_backward(x, randn((64,), torch.bfloat16, "cuda", 2), None)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", LOW_PRECISION)
def test_side_stream(dtype):
    x = randn((2048, 1024), dtype, "cuda", 1)
    weight, bias = randn((1024,), dtype, "cuda", 2), randn((1024,), dtype, "cuda", 3)
    expected = layer_norm_reference(x, weight, bias, 1e-5)
    x.requires_grad_()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = wheelops.layer_norm(x, weight, bias)
        (grad_x,) = torch.autograd.grad(out, (x,), torch.ones_like(out))
    torch.cuda.current_stream().wait_stream(stream)
    assert_layer_norm_out_close(out, expected, x.detach(), weight, bias, 1e-5)
    expected_grad = float64_grads(_ln64, torch.ones_like(out), x, weight, bias)[0]
    assert_layer_norm_grad_x_close(
        grad_x, expected_grad, x.detach(), weight, torch.ones_like(out), 1e-5
    )


# Found by review while writing the multi-thread tests (issue 6): threads making
# the first backward call of one kernel with different shared-memory sizes (one
# slot for weight alone, two with the bias) could set the kernel's size limit
# below what another thread was about to launch with: cudaErrorInvalidValue.
# It needs kernels no call has used yet, hence a fresh process; each width below
# is a kernel of its own, so each is a new race.
_CONCURRENT_FIRST_BACKWARDS = """
import threading, torch, torch.nn.functional as F, wheelops
from wheelops._compat import loader
if loader.loaded() is None:
    import build_tools.dev
    build_tools.dev.load()
errors = []
def run(barrier, cols, with_bias, seed):
    try:
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(64, cols, generator=g).cuda().requires_grad_()
        w = torch.randn(cols, generator=g).cuda().requires_grad_()
        b = torch.randn(cols, generator=g).cuda().requires_grad_() if with_bias else None
        barrier.wait()
        grads = torch.autograd.grad(wheelops.layer_norm(x, w, b).square().sum(), (x, w))
        # The same kernels on the same inputs again, the race over: bitwise (the ops are
        # deterministic; their bounds are tested on their own).
        again = torch.autograd.grad(wheelops.layer_norm(x, w, b).square().sum(), (x, w))
        for mine, theirs in zip(grads, again):
            assert torch.equal(mine, theirs), "a first backward differs from the next"
    except BaseException as e:
        errors.append(f"cols={cols} bias={with_bias}: {e!r}")
for cols in (1024, 2048, 3072, 4096, 6144, 8192):
    barrier = threading.Barrier(8)
    threads = [threading.Thread(target=run, args=(barrier, cols, i % 2 == 0, i)) for i in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()
torch.cuda.synchronize()
print("\\n".join(errors) or "ok")
"""


@pytest.mark.gpu
def test_regression_concurrent_first_backward_calls_with_different_smem():
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _CONCURRENT_FIRST_BACKWARDS],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "ok", done.stdout[-3000:]


def test_regression_eps_int_beyond_float64_names_eps():
    # Found by test_properties.py::test_norms_reject_bad_arguments: eps=10**309
    # escaped as float()'s bare OverflowError, naming neither op nor argument.
    with pytest.raises(ValueError, match="layer_norm: argument 'eps' must be representable"):
        wheelops.layer_norm(torch.ones(2, 3), eps=10**309)


@pytest.mark.parametrize("device", DEVICES)
def test_regression_bias_grad_over_65536_rows_of_one_column(device):
    # Found by test_properties.py::test_layer_norm[cuda] on an H200 (issue 6):
    # x of shape (17, 64, 64, 1), bias only. wheelops gave the right sum; the
    # float64 reference, then computed by torch's CUDA layer_norm backward, gave
    # 0 (its two-pass column reduction for more than 65536 rows). References
    # are now computed on the CPU; this pins the case against the plain sum.
    x = randn((17, 64, 64, 1), torch.float32, device, 0) * 1e-3
    bias = randn((1,), torch.float32, device, 2).requires_grad_()
    grad = randn((17, 64, 64, 1), torch.float32, device, 3)
    out = wheelops.layer_norm(x, None, bias, 1e-12)
    torch.testing.assert_close(out, bias.detach().expand_as(x))  # one column: xhat = 0
    (grad_bias,) = torch.autograd.grad(out, (bias,), grad)
    expected = grad.detach().cpu().double().sum().reshape(1)
    assert_norm_bias_grad_close(grad_bias.cpu(), expected, grad.cpu())


def test_regression_float64_grad_x_of_long_rows_near_a_large_mean():
    # Found by test_properties.py::test_layer_norm[cpu] with the random "gpu"
    # profile (issue 6): float64 rows of 4096 values 1e-3 apart around 100. The
    # kernel was right; the test's error bound did not grow with the row length,
    # while the row sums (the kernel's and the float64 reference's) do.
    generator = torch.Generator().manual_seed(0)
    x = (
        100 + 1e-3 * torch.randn(2, 4096, generator=generator, dtype=torch.float64)
    ).requires_grad_()
    grad = torch.randn(2, 4096, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    (grad_x,) = torch.autograd.grad(wheelops.layer_norm(x, None, None, 1e-12), (x,), grad)
    expected = float64_grads(lambda a: F.layer_norm(a, (4096,), None, None, 1e-12), grad, x)[0]
    assert_layer_norm_grad_x_close(grad_x, expected, x.detach(), None, grad, 1e-12)


def _exact_grad_x(x_row, g_row, eps):
    """layer_norm's grad_x of one row without weight, in 50-digit decimal arithmetic."""
    with decimal.localcontext() as context:
        context.prec = 50
        xs = [decimal.Decimal(v) for v in x_row]
        gs = [decimal.Decimal(v) for v in g_row]
        n = len(xs)
        mean = sum(xs) / n
        rstd = 1 / (sum((v - mean) ** 2 for v in xs) / n + decimal.Decimal(eps)).sqrt()
        xhat = [(v - mean) * rstd for v in xs]
        mean_g = sum(gs) / n
        mean_dot = sum(a * b for a, b in zip(gs, xhat, strict=True)) / n
        return [float(rstd * (a - mean_g - b * mean_dot)) for a, b in zip(gs, xhat, strict=True)]


@pytest.mark.parametrize("device", DEVICES)
def test_float64_rows_around_a_large_mean_against_a_shifted_reference(device):
    # Found by test_properties.py::test_layer_norm[cuda] with the random "gpu" profile
    # (issue 45): float64 rows of 32 values 1e-3 apart around 100, eps 1e-12. The kernel was
    # about 1e-11 off the exact grad_x; torch's float64 reference on the rows as they are,
    # 2.16e-9 off, past the 2.10e-9 allowed (on the rows shifted near 0, 2.2e-13). The
    # reference shifts each row by its first value (layer_norm_float64_grads), and must then
    # itself meet the kernel's bound, once, against the exact gradient.
    x = randn((2, 20, 32), torch.float64, device, 1204, 0.001, 100.0)
    x = x.narrow(1, 0, 1).expand(2, 20, 32).detach().requires_grad_()
    grad = randn((2, 20, 32), torch.float64, device, 1207)
    (grad_x,) = torch.autograd.grad(wheelops.layer_norm(x, None, None, 1e-12), (x,), grad)
    expected = layer_norm_float64_grads(grad, x, None, None, 1e-12)[0]
    assert_layer_norm_grad_x_close(grad_x, expected, x.detach(), None, grad, 1e-12)

    def distinct_rows(t):  # x's rows repeat along dim 1
        return t.detach().reshape(-1, 32).cpu()[::20]

    rows, grad_rows = distinct_rows(x), distinct_rows(grad)
    exact = torch.tensor(
        [
            _exact_grad_x(r.tolist(), g.tolist(), 1e-12)
            for r, g in zip(rows, grad_rows, strict=True)
        ],
        dtype=torch.float64,
    )
    kernel_bound = rounded_error(
        exact, _grad_x_error(rows, None, grad_rows, 1e-12, True), torch.float64
    )
    assert_within(distinct_rows(expected), exact, kernel_bound, "the reference")


@pytest.mark.parametrize("device", DEVICES)
def test_no_gradient_wanted_runs_the_op_without_statistics(device):
    # Issue 27: a call that wants no gradient runs layer_norm_inference (no statistics
    # allocated or written); its output is the training op's, bit for bit.
    x = randn((17, 33), torch.float32, device, 1)
    w = randn((33,), torch.float32, device, 2)
    b = randn((33,), torch.float32, device, 3)
    training = torch.ops.wheelops.layer_norm.default(x, w, b, 1e-5)[0]
    inference = ["layer_norm_inference.default"]
    # The public autograd layer cannot tell that no tangent comes but in inference mode.
    no_gradient = ["layer_norm.default"] if _autograd.PUBLIC else inference
    assert wheelops_ops_called(lambda: wheelops.layer_norm(x, w, b, 1e-5)) == no_gradient
    assert torch.equal(wheelops.layer_norm(x, w, b, 1e-5), training)
    x.requires_grad_()
    assert wheelops_ops_called(lambda: wheelops.layer_norm(x, w, b, 1e-5)) == ["layer_norm.default"]
    with torch.no_grad():
        assert wheelops_ops_called(lambda: wheelops.layer_norm(x, w, b, 1e-5)) == no_gradient
        assert torch.equal(wheelops.layer_norm(x, w, b, 1e-5), training)
    with torch.inference_mode():
        assert wheelops_ops_called(lambda: wheelops.layer_norm(x, w, b, 1e-5)) == inference
        assert torch.equal(wheelops.layer_norm(x, w, b, 1e-5), training)
    asked = r"^wheelops\.layer_norm_inference does not support backward"
    with pytest.raises(NotImplementedError, match=asked):
        torch.ops.wheelops.layer_norm_inference.default(x, w, b, 1e-5).sum().backward()
    x = x.detach()
    torch.library.opcheck(torch.ops.wheelops.layer_norm_inference.default, (x, w, b, 1e-5))
