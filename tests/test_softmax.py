from __future__ import annotations

import math

import _example_log
import pytest
import torch
from _helpers import (
    DEVICES,
    DTYPES,
    LOW_PRECISION,
    randn,
    strided_variants,
)
from _property_checks import (
    assert_rejected,
    assert_result_layout,
    float_dtypes,
    grad_leaf,
)
from _softmax_bounds import (
    assert_softmax_backward_close,
    assert_softmax_close,
    assert_softmax_grad_close,
)
from _strategies import (
    apply_layout,
    layouts,
    row_lengths,
    scales,
    seeds,
    shapes,
    special_fractions,
    sprinkle_specials,
)
from hypothesis import given
from hypothesis import strategies as st

import wheelops

# Lengths that take every CUDA path: a thread per row (1, 2, 3, 7), teams of
# part of a warp (16, 64), a warp (127, 1024), a block (1031, 4096, 8193), and
# two passes (65536: longer than a block's registers). Odd lengths take the
# scalar path, multiples of the vector width the 16-byte one; 1024 and 4096 on
# that path fill a block's team exactly (the forward's whole-row kernel).
LENGTHS = [1, 2, 3, 7, 16, 64, 127, 1024, 1031, 4096, 8193, 65536]
INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", LENGTHS)
def test_forward_matches_float64(cols, dtype, device):
    x = randn((3, cols), dtype, device, 1) * 4
    out = wheelops.softmax(x)
    assert out.shape == x.shape and out.dtype == dtype and out.is_contiguous()
    assert_softmax_close(out, x)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", LENGTHS)
def test_backward_op_matches_float64(cols, dtype, device):
    out = torch.softmax(randn((3, cols), torch.float64, device, 1) * 4, -1).to(dtype)
    grad = randn((3, cols), dtype, device, 2)
    grad_x = torch.ops.wheelops.softmax_backward.default(grad, out, -1)
    assert grad_x.shape == out.shape and grad_x.dtype == dtype
    assert_softmax_backward_close(grad_x, grad, out, -1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [-3, -2, -1, 0, 1, 2])
def test_every_dim_forward_and_backward(dim, dtype, device):
    x = randn((4, 6, 37), dtype, device, 1).requires_grad_()
    grad = randn((4, 6, 37), dtype, device, 2)
    out = wheelops.softmax(x, dim)
    assert out.is_contiguous()
    assert_softmax_close(out, x.detach(), dim)
    (grad_x,) = torch.autograd.grad(out, x, grad)
    assert_softmax_grad_close(grad_x, x.detach(), grad, dim)


@pytest.mark.parametrize("device", DEVICES)
def test_autograd_matches_eager(device):
    x = torch.randn(6, 5, 300, device=device, requires_grad=True)
    grad = torch.randn(6, 5, 300, device=device)
    for dim in (-1, 1):
        ours = torch.autograd.grad(wheelops.softmax(x, dim), x, grad)[0]
        assert_softmax_grad_close(ours, x.detach(), grad, dim)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gradcheck_float64(dim):
    x = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: wheelops.softmax(a, dim), (x,))


def test_saves_only_the_output():
    # Were x saved, changing it in place would make the backward raise.
    x = torch.randn(4, 9, requires_grad=True)
    out = wheelops.softmax(x)
    grad = torch.randn(4, 9)
    with torch.no_grad():
        x.add_(100.0)
    (grad_x,) = torch.autograd.grad(out, x, grad)
    assert_softmax_backward_close(grad_x, grad, out.detach(), -1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_non_contiguous_and_misaligned_inputs(dtype, device):
    x = randn((40, 67), dtype, device, 1)
    grad = randn((40, 67), dtype, device, 2)
    out = torch.softmax(x.double(), -1).to(dtype)
    for view in strided_variants(x).values():
        assert_softmax_close(wheelops.softmax(view), x)
    for out_view, grad_view in zip(
        strided_variants(out).values(), strided_variants(grad).values(), strict=True
    ):
        grad_x = torch.ops.wheelops.softmax_backward.default(grad_view, out_view, 1)
        assert_softmax_backward_close(grad_x, grad, out, 1)
        grad_x = torch.ops.wheelops.softmax_backward.default(grad, out_view, -1)
        assert_softmax_backward_close(grad_x, grad, out, 1)
    # Vectorizable length, but a view that starts one element in.
    wide = randn((8, 257), dtype, device, 3)
    assert_softmax_close(wheelops.softmax(wide[:, 1:]), wide[:, 1:])


@pytest.mark.parametrize("device", DEVICES)
def test_nan_and_inf_like_pytorch(device):
    rows = [
        [INF, 1.0],
        [-INF, -INF],
        [INF, INF],
        [INF, -INF],
        [-INF, 1.0],
        [NAN, 1.0],
        [1.0, NAN],
        [1e308, 1.0],
        [-1e308, 1.0],
        [0.5, 0.25],
    ]
    x = torch.tensor(rows, dtype=torch.float64, device=device)
    for dtype in DTYPES:
        x_low = x.to(dtype)
        assert_softmax_close(wheelops.softmax(x_low), x_low)
    for single in ([INF], [-INF], [NAN], [3.0]):  # exactly 1, or NaN
        t = torch.tensor(single, dtype=torch.float64, device=device)
        torch.testing.assert_close(
            wheelops.softmax(t), torch.softmax(t, -1), equal_nan=True, atol=0, rtol=0
        )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cols", [5000, 70000])
def test_nan_and_inf_in_long_rows(device, cols):
    # 70000 float32 exceeds a block's registers on CUDA: the two-pass kernel,
    # whose running max starts at -inf and meets -inf-only chunks.
    x = torch.randn(6, cols, device=device)
    x[0, :4096] = -INF  # a long -inf prefix, then finite values
    x[1, :] = -INF
    x[2, cols // 2] = INF
    x[3, -1] = NAN
    x[4, ::2] = -INF
    out = wheelops.softmax(x)
    assert_softmax_close(out, x)
    assert torch.isnan(out[1:4]).all() and not torch.isnan(out[[0, 4, 5]]).any()


@pytest.mark.parametrize("device", DEVICES)
def test_deterministic(device):
    for cols in (4096, 70000):
        x = randn((64, cols), torch.float32, device, 1)
        grad = randn((64, cols), torch.float32, device, 2)
        first = wheelops.softmax(x)
        first_grad = torch.ops.wheelops.softmax_backward.default(grad, first, -1)
        for _ in range(3):
            assert torch.equal(wheelops.softmax(x), first)
            again = torch.ops.wheelops.softmax_backward.default(grad, first, -1)
            assert torch.equal(again, first_grad)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    ("shape", "dim"), [((0, 5), -1), ((5, 0), -1), ((0, 5), 0), ((2, 0, 3), 1), ((3, 0), 0)]
)
def test_empty(shape, dim, device):
    x = torch.randn(shape, device=device, requires_grad=True)
    out = wheelops.softmax(x, dim)
    assert out.shape == x.shape
    torch.testing.assert_close(out, torch.softmax(x, dim), atol=0, rtol=0)  # empty
    (grad_x,) = torch.autograd.grad(out.sum(), x)
    assert grad_x.shape == x.shape


@pytest.mark.parametrize("device", DEVICES)
def test_zero_dim_like_pytorch(device):
    for value in (3.0, -INF, NAN):
        x = torch.tensor(value, device=device)
        for dim in (0, -1):
            torch.testing.assert_close(  # one element: exactly 1, or NaN
                wheelops.softmax(x, dim), torch.softmax(x, dim), equal_nan=True, atol=0, rtol=0
            )
    with pytest.raises(ValueError, match=r"'dim' must be in \[-1, 0\]"):
        wheelops.softmax(torch.tensor(1.0, device=device), 1)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for requires_grad in (False, True):
        for dim in (-1, 0, 1):
            x = torch.randn(3, 4, 33, device=device, requires_grad=requires_grad)
            torch.library.opcheck(torch.ops.wheelops.softmax.default, (x, dim))
    for dim in (-1, 1):
        out = torch.softmax(torch.randn(5, 24, device=device), -1)
        grad = torch.randn(5, 24, device=device)
        torch.library.opcheck(torch.ops.wheelops.softmax_backward.default, (grad, out, dim))


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_forward_and_backward(device):
    def fn(x):
        return (wheelops.softmax(x, -1) * wheelops.softmax(x, 0)).sum()

    x = torch.randn(8, 33, device=device, requires_grad=True)
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True)
    out = compiled(x)
    (grad,) = torch.autograd.grad(out, x)
    # Against the same ops uncompiled: the kernels are the same calls on the same inputs,
    # so only the product and the sum (each float32, rounded once per term and per
    # addition in any order: 264 roundings of sum |terms|) may differ.
    x_eager = x.detach().requires_grad_()
    eager = fn(x_eager)
    (grad_eager,) = torch.autograd.grad(eager, x_eager)
    terms = (wheelops.softmax(x_eager, -1) * wheelops.softmax(x_eager, 0)).detach()
    sum_error = 2 * terms.numel() * 2.0**-24 * float(terms.abs().sum())
    torch.testing.assert_close(out, eager, atol=sum_error, rtol=0)
    # grad_x: each softmax_backward on the same saved output with g = the other factor,
    # exactly as uncompiled, then one addition of the two: one rounding of each.
    torch.testing.assert_close(grad, grad_eager, atol=0, rtol=2 * 2.0**-24)


@pytest.mark.parametrize("device", DEVICES)
def test_module_matches_torch_nn_softmax(device):
    x = torch.randn(3, 7, 11, device=device)
    for dim in (-1, 1):
        assert_softmax_close(wheelops.nn.Softmax(dim)(x), x, dim)
    assert wheelops.nn.Softmax().dim == -1 and "dim=-1" in repr(wheelops.nn.Softmax())
    with pytest.raises(TypeError, match="'dim' must be an int"):
        wheelops.nn.Softmax(None)


@pytest.mark.gpu
def test_mixed_devices_rejected():
    with pytest.raises(RuntimeError, match="'grad' and 'out' must be on the same device"):
        torch.ops.wheelops.softmax_backward.default(
            torch.ones(2, 3, device="cuda"), torch.ones(2, 3), -1
        )
    torch.cuda.synchronize()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("cols", [32768, 40000, 100003, 262144])
def test_long_rows_on_gpu(cols, dtype):
    # 32768: the most a block holds in registers; beyond: two passes, with
    # 16-byte vectors (40000, 262144) and without (100003).
    x = randn((5, cols), dtype, "cuda", 1) * 4
    out = wheelops.softmax(x)
    assert_softmax_close(out, x)
    grad = randn((5, cols), dtype, "cuda", 2)
    grad_x = torch.ops.wheelops.softmax_backward.default(grad, out, -1)
    assert_softmax_backward_close(grad_x, grad, out, -1)


@pytest.mark.gpu
@pytest.mark.parametrize(("rows", "cols"), [(3_000_000, 3), (400_000, 100), (70_000, 1024)])
def test_more_rows_than_one_grid(rows, cols):
    # More rows than the grid has teams: the grid-stride loop over rows.
    x = randn((rows, cols), torch.float32, "cuda", 1)
    out = wheelops.softmax(x)
    assert_softmax_close(out, x)
    grad_x = torch.ops.wheelops.softmax_backward.default(x, out, -1)
    assert_softmax_backward_close(grad_x, x, out, -1)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", LOW_PRECISION)
def test_side_stream(dtype):
    x = randn((4096, 1024), dtype, "cuda", 1)
    grad = randn((4096, 1024), dtype, "cuda", 2)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = wheelops.softmax(x)
        grad_x = torch.ops.wheelops.softmax_backward.default(grad, out, -1)
    torch.cuda.current_stream().wait_stream(stream)
    assert_softmax_close(out, x)
    assert_softmax_backward_close(grad_x, grad, out, -1)


@pytest.mark.gpu
@pytest.mark.huge
def test_more_than_2_pow_31_elements():
    rows, cols = 2**21 + 3, 1024  # 2**31 + 3072 elements
    x = torch.zeros(rows, cols, dtype=torch.bfloat16, device="cuda")
    x[-1] = torch.arange(cols, device="cuda") / cols
    out = wheelops.softmax(x)
    torch.cuda.synchronize()
    assert torch.all(out[:-1] == 1.0 / cols)
    assert_softmax_close(out[-1], x[-1])
    grad_x = torch.ops.wheelops.softmax_backward.default(x, out, -1)
    torch.cuda.synchronize()
    assert not grad_x[:-1].any()
    assert_softmax_backward_close(grad_x[-1], x[-1], out[-1], -1)
    del x, out, grad_x
    torch.cuda.empty_cache()


# ---------------------------------------------------------------------------
# Properties (hypothesis; the profile in tests/conftest.py sets how many examples)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_property_softmax(device: str, data: st.DataObject) -> None:
    draw = data.draw
    dtype, seed, scale = draw(float_dtypes()), draw(seeds), draw(scales)
    shape = draw(shapes(device, max_rank=4, last=row_lengths(device)))
    rank = max(len(shape), 1)
    dim = draw(st.integers(-rank, rank - 1), label="dim")
    x = randn(shape, dtype, device, seed, 3 * scale)
    x = sprinkle_specials(x, seed, draw(special_fractions))
    if draw(st.booleans(), label="one slice all -inf") and x.dim() > 0 and x.numel() > 0:
        index = [slice(None)] * x.dim()
        index[draw(st.integers(0, x.dim() - 1))] = 0
        x[tuple(index)] = -math.inf
    x = grad_leaf(apply_layout(x, draw(layouts(shape))))
    _example_log.record("softmax", device)

    out = wheelops.softmax(x, dim)
    assert_result_layout(out, shape, dtype)
    assert_softmax_close(out, x.detach(), dim)
    grad = randn(shape, dtype, device, seed + 1)
    (grad_x,) = torch.autograd.grad(out, x, grad)
    assert_softmax_grad_close(grad_x, x.detach(), grad, dim)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_property_softmax_rejects_bad_dim(device: str, data: st.DataObject) -> None:
    draw = data.draw
    shape = draw(shapes(device, max_rank=4))
    rank = max(len(shape), 1)
    dim = draw(
        st.one_of(
            st.integers().filter(lambda d: not -rank <= d < rank),
            st.floats(),
            st.booleans(),
            st.none(),
            st.just("0"),
        ),
        label="bad dim",
    )
    _example_log.record("softmax", device)
    x = torch.zeros(shape, device=device)
    assert_rejected(lambda: wheelops.softmax(x, dim), "softmax", "dim")
