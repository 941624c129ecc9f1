"""Tensors of more than 2**31 elements, forward and backward, and the longest rows.

An index computed in int32 anywhere in a kernel wraps past element 2**31 and
reads or writes the wrong element (or faults). Every op that can hold more than
2**31 elements on one 80 GB GPU runs over such a tensor below, or in its own
test file where that test already checks it. The inputs are patterns of the
flat index modulo a small prime (2**32 is no multiple of it), so an element
read from the wrong place has a different value; every element of every result
is checked, chunk by chunk, against an eager reference computed on the GPU,
and the rows or pixels around element 2**31 and at the end are checked once
more against a float64 reference computed on the CPU.

Where the > 2**31 check of each op lives (F: forward, B: backward); an op not in
the table checks it in its own file, test_<op>.py::test_more_than_2_pow_31_elements:

op                test (F/B; what is checked)
----------------  ------------------------------------------------------------
add               test_add.py::test_more_than_2_pow_31_elements (F; constant
                  values, distinct tail); here test_add_over_2_pow_31 (F + B;
                  every element)
relu_scale        test_relu_scale.py::test_more_than_2_pow_31_elements (F);
                  here test_relu_scale_over_2_pow_31 (F + B; every element)
bias_gelu         test_bias_gelu.py::test_more_than_2_pow_31_elements (F + B;
                  zeros but the last row); here test_bias_gelu_over_2_pow_31
                  (F + B; every element, bias grad probed past 2**31)
layer_norm        here test_norm_over_2_pow_31[layer_norm] (F + B; every
                  element, weight and bias grads exact)
rms_norm          here test_norm_over_2_pow_31[rms_norm] (F + B; every
                  element, weight grad exact)
softmax           test_softmax.py::test_more_than_2_pow_31_elements (F + B;
                  1024-long rows, zeros but the last row); here
                  test_softmax_over_2_pow_31 (F + B through autograd; every
                  element; rows of 32768 and of 262144, the two-pass path)
rgb_to_gray       here test_rgb_to_gray_over_2_pow_31 (F, no grad; every pixel;
                  interleaved and planar input)
lltm              here test_lltm_gates_over_2_pow_31 (F + B of the fused gate
                  kernel, batch x 3 state > 2**31; every element; the GEMMs
                  around it are torch's cuBLAS calls)

Row lengths: softmax, layer_norm and rms_norm at 262144 are in their own files
(test_softmax.py::test_long_rows_on_gpu, _norm_helpers.GPU_LENGTHS);
test_long_rows_near_2_pow_18 adds lengths near it that are not powers of two
(one odd: the unvectorized path), forward and backward through autograd.

Each ``huge`` test keeps below 40 GiB of GPU memory (teardown checks the peak
against 60 GiB) and frees its tensors between phases. The small CPU variants
run the same checks at a size where the "boundary" is an ordinary index: they
keep the designs (exact values where claimed) honest on any machine.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import opspecs
import pytest
import torch
import torch.nn.functional as F
from _bias_gelu_bounds import (
    assert_bias_gelu_close,
    assert_bias_gelu_grad_x_close,
    assert_grad_bias_close,
)
from _lltm_bounds import gate_ops_allowed
from _norm_helpers import (
    assert_layer_norm_grad_weight_close,
    assert_layer_norm_grad_x_close,
    assert_layer_norm_out_close,
    assert_norm_bias_grad_close,
    assert_rms_norm_grad_weight_close,
    assert_rms_norm_grad_x_close,
    assert_rms_norm_out_close,
    assert_within,
    float64_grads,
)
from _op_catalog import forward_backward
from _softmax_bounds import assert_softmax_backward_close, assert_softmax_close
from opspecs.layer_norm import reference as layer_norm_reference
from opspecs.rms_norm import EPS as RMS_NORM_EPS
from opspecs.rms_norm import reference as rms_norm_reference

import wheelops

GiB = 2**30
BOUNDARY = 2**31
# Elements per chunk of the on-device references: a few hundred MiB of
# temporaries, few enough chunks that Python's loop costs nothing.
CHUNK = 2**26
PEAK_LIMIT = 60 * GiB


@pytest.fixture(autouse=True)
def _fresh_gpu_memory(request: pytest.FixtureRequest) -> Iterator[None]:
    """Start each huge test with an empty cache; afterwards free it and check the peak."""
    if request.node.get_closest_marker("huge") is None or not torch.cuda.is_available():
        yield
        return
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    yield
    peak = torch.cuda.max_memory_allocated()
    gc.collect()
    torch.cuda.empty_cache()
    request.node.user_properties.append(("peak_gpu_memory_gib", round(peak / GiB, 2)))
    assert peak <= PEAK_LIMIT, f"peak GPU memory {peak / GiB:.1f} GiB over the budget"


def _need_gib(gib: float) -> None:
    """Skip on a GPU too small for the test (the suite's target has 80 GB)."""
    total = torch.cuda.get_device_properties(0).total_memory
    if total < gib * GiB:
        pytest.skip(f"needs {gib} GiB of GPU memory, the GPU has {total / GiB:.0f}")


# ------------------------------------------------------------------ patterns


def _index(lo: int, hi: int, device: str) -> torch.Tensor:
    return torch.arange(lo, hi, dtype=torch.int64, device=device)


def _pattern(lo: int, hi: int, prime: int, scale: float, device: str) -> torch.Tensor:
    """((i mod prime) - prime // 2) * scale in float32 for the flat indices [lo, hi).

    Small primes and power-of-two scales keep every value exact in float16
    and bfloat16 too; 2**32 is no multiple of the prime, so an index that
    wrapped reads another value (unless it lands on a multiple of the prime)."""
    return ((_index(lo, hi, device) % prime) - prime // 2).to(torch.float32) * scale


def _filled(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    device: str,
    chunk: int,
    fill: Callable[[int, int], torch.Tensor],
) -> torch.Tensor:
    """A tensor whose flat elements [lo, hi) are fill(lo, hi), built chunk by chunk."""
    t = torch.empty(shape, dtype=dtype, device=device)
    flat = t.view(-1)
    for lo in range(0, flat.numel(), chunk):
        hi = min(lo + chunk, flat.numel())
        flat[lo:hi] = fill(lo, hi).to(dtype)
    return t


def _spans(n: int, step: int) -> Iterator[tuple[int, int]]:
    for lo in range(0, n, step):
        yield lo, min(n, lo + step)


def _row_spans(rows: int, cols: int, chunk: int) -> Iterator[tuple[int, int]]:
    return _spans(rows, max(1, chunk // cols))


def _edge_rows(rows: int, cols: int, boundary: int) -> list[int]:
    """The first row, the rows around flat element `boundary`, and the last two."""
    b = boundary // cols
    return sorted({0, b - 1, b, b + 1, rows - 2, rows - 1} & set(range(rows)))


def _assert_equal(actual: torch.Tensor, expected: torch.Tensor, where: str) -> None:
    if torch.equal(actual, expected):
        return
    diff = actual.double() != expected.double()
    first = int(diff.reshape(-1).nonzero()[0])
    raise AssertionError(
        f"{where}: {int(diff.sum())} elements differ, the first at flat offset {first}: "
        f"{actual.reshape(-1)[first].item()} != {expected.reshape(-1)[first].item()}"
    )


def _free() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# ------------------------------------------------------------------ add, relu_scale


def _check_add(n: int, dtype: torch.dtype, device: str, chunk: int) -> None:
    # Integers in [-125, 125] and their sums: exact in bfloat16, so every
    # element has one right answer.
    a = _filled((n,), dtype, device, chunk, lambda lo, hi: _pattern(lo, hi, 251, 1.0, device))
    b = _filled((n,), dtype, device, chunk, lambda lo, hi: _pattern(lo, hi, 241, 1.0, device))
    a.requires_grad_()
    b.requires_grad_()
    out = wheelops.add(a, b)
    for lo, hi in _spans(n, chunk):
        expected = (a.detach()[lo:hi].float() + b.detach()[lo:hi].float()).to(dtype)
        _assert_equal(out.detach()[lo:hi], expected, f"add [{lo}, {hi})")
    grad = _filled((n,), dtype, device, chunk, lambda lo, hi: _pattern(lo, hi, 239, 1.0, device))
    grad_a, grad_b = torch.autograd.grad(out, (a, b), grad)
    for lo, hi in _spans(n, chunk):
        _assert_equal(grad_a[lo:hi], grad[lo:hi], f"add grad a [{lo}, {hi})")
        _assert_equal(grad_b[lo:hi], grad[lo:hi], f"add grad b [{lo}, {hi})")


def _check_relu_scale(n: int, dtype: torch.dtype, device: str, chunk: int, boundary: int) -> None:
    # Integers in [-2046, 2046] and a grad in [-125, 125]; alpha = 0.5 keeps
    # every result exact in float16.
    alpha = 0.5
    x = _filled((n,), dtype, device, chunk, lambda lo, hi: _pattern(lo, hi, 4093, 1.0, device))
    x.requires_grad_()
    out = wheelops.relu_scale(x, alpha)
    for lo, hi in _spans(n, chunk):
        expected = (torch.relu(x.detach()[lo:hi].float()) * alpha).to(dtype)
        _assert_equal(out.detach()[lo:hi], expected, f"relu_scale [{lo}, {hi})")
    grad = _filled((n,), dtype, device, chunk, lambda lo, hi: _pattern(lo, hi, 251, 1.0, device))
    (grad_x,) = torch.autograd.grad(out, (x,), grad)
    del out
    for lo, hi in _spans(n, chunk):
        xs, gs = x.detach()[lo:hi].float(), grad[lo:hi].float()
        expected = torch.where(xs > 0, gs * alpha, torch.zeros_like(gs)).to(dtype)
        _assert_equal(grad_x[lo:hi], expected, f"relu_scale grad [{lo}, {hi})")
    # Independently of the device reference: torch's own relu on the CPU.
    for lo in (boundary - 4096, n - 4096):
        xs = x.detach()[lo : lo + 4096].cpu().double().requires_grad_()
        ref = torch.relu(xs) * alpha
        (ref_grad,) = torch.autograd.grad(ref, (xs,), grad[lo : lo + 4096].cpu().double())
        assert torch.equal(grad_x[lo : lo + 4096].cpu().double(), ref_grad)


def test_add_and_relu_scale_designs_on_cpu() -> None:
    n, chunk = 3 * 4096 + 7, 4096
    _check_add(n, torch.bfloat16, "cpu", chunk)
    _check_relu_scale(n, torch.float16, "cpu", chunk, boundary=2 * 4096)


@pytest.mark.gpu
@pytest.mark.huge
def test_add_over_2_pow_31() -> None:
    # a, b, out, grad: 4 x 4 GiB (the grads are grad itself).
    _need_gib(20)
    _check_add(BOUNDARY + 1027, torch.bfloat16, "cuda", CHUNK)


@pytest.mark.gpu
@pytest.mark.huge
def test_relu_scale_over_2_pow_31() -> None:
    # x, out, grad, grad_x: 4 x 4 GiB in float16. Odd length: the vector body
    # runs across element 2**31, the scalar tail after it.
    _need_gib(20)
    _check_relu_scale(BOUNDARY + 9, torch.float16, "cuda", CHUNK, BOUNDARY)


# ------------------------------------------------------------------ bias_gelu


def _check_bias_gelu(rows: int, cols: int, dtype: torch.dtype, device: str, chunk: int) -> None:
    n = rows * cols
    x = _filled(
        (rows, cols), dtype, device, chunk, lambda lo, hi: _pattern(lo, hi, 127, 1 / 16, device)
    )
    c = torch.arange(cols, device=device)
    bias = (((c % 13) - 6).float() / 8).to(dtype)
    x.requires_grad_()
    bias.requires_grad_()
    out = wheelops.bias_gelu(x, bias)
    grad = _filled(
        (rows, cols), dtype, device, chunk, lambda lo, hi: _pattern(lo, hi, 61, 1 / 16, device)
    )
    grad_x, _ = torch.autograd.grad(out, (x, bias), grad, retain_graph=True)
    b = bias.detach()
    for lo, hi in _row_spans(rows, cols, chunk):
        # Against float64 math on each span, within the op's derived bounds.
        xs = x.detach()[lo:hi]
        u = xs.double() + b.double()
        assert_bias_gelu_close(out.detach()[lo:hi], F.gelu(u), xs, b, "none")
        expected = torch.ops.aten.gelu_backward(grad[lo:hi].double(), u)
        assert_bias_gelu_grad_x_close(grad_x[lo:hi], expected, grad[lo:hi], xs, b)
        del u, expected
    del grad, grad_x
    _free()
    # The bias gradient is a column sum over every row: a dense grad's sum in
    # float32 has too much rounding to show one row read from the wrong place.
    # So a second backward with the grad zero but on five probe rows (the
    # first, the three around element 2**31, the last), weighted 1, 2, 4, 8,
    # 16: each probe row is most of the sum's change, and the rows past 2**31
    # carry 28 of the 31 parts.
    b = BOUNDARY // cols if n > BOUNDARY else rows // 2
    probes = [0, b - 1, b, b + 1, rows - 1]
    assert len(set(probes)) == len(probes), probes
    sparse = torch.zeros(rows, cols, dtype=dtype, device=device)
    for k, r in enumerate(probes):
        sparse[r] = 2.0**k
    grad_x, grad_bias = torch.autograd.grad(out, (x, bias), sparse)
    rows_x = x.detach()[probes]
    u = rows_x.double() + bias.detach().double()
    derivative = torch.ops.aten.gelu_backward(sparse[probes].double(), u)
    # The other rows' terms are zeros, which add exactly: the probe rows' column sum.
    assert_grad_bias_close(grad_bias, derivative.sum(0), derivative, sparse[probes], u)
    assert_bias_gelu_grad_x_close(grad_x[probes], derivative, sparse[probes], rows_x, bias)
    not_probed = torch.ones(rows, dtype=torch.bool, device=device)
    not_probed[probes] = False
    for lo, hi in _row_spans(rows, cols, chunk):
        assert not grad_x[lo:hi][not_probed[lo:hi]].any(), f"rows [{lo}, {hi})"


def test_bias_gelu_design_on_cpu() -> None:
    _check_bias_gelu(67, 64, torch.bfloat16, "cpu", 1024)


@pytest.mark.gpu
@pytest.mark.huge
def test_bias_gelu_over_2_pow_31() -> None:
    # x, out, grad, grad_x: 4 x 4 GiB in bfloat16 (grad replaced by the sparse one).
    _need_gib(24)
    _check_bias_gelu(2**21 + 3, 1024, torch.bfloat16, "cuda", CHUNK)


# ------------------------------------------------------------------ layer_norm, rms_norm


def _signs(lo: int, hi: int, device: str) -> torch.Tensor:
    """±1 in pairs (s, -s) for flat elements [lo, hi) (lo, hi even), s from the
    pair index modulo 251: every row of even length has mean exactly 0 and
    mean square exactly 1, whatever its index."""
    k = _index(lo // 2, hi // 2, device)
    s = torch.where((k * 7919) % 251 < 126, 1.0, -1.0)
    return torch.stack((s, -s), dim=-1).view(-1)


def _check_norm(
    op: str, rows: int, cols: int, dtype: torch.dtype, device: str, chunk: int, boundary: int
) -> None:
    """layer_norm / rms_norm with eps = 0 on rows of ±1 pairs (mean 0, rstd exactly 1):
    xhat = x exactly, and with small-integer weight, bias and grad every
    output, grad_x (cols a power of two: the row means are exact) and
    weight/bias column sum (integers below 2**24) is exact in float32, so
    each has one right answer in any dtype: checked with torch.equal. A row
    read from the wrong place has other signs and changes them."""
    centered = op == "layer_norm"
    assert cols % 2 == 0 and cols & (cols - 1) == 0 and 3 * rows < 2**24
    x = _filled((rows, cols), dtype, device, chunk, lambda lo, hi: _signs(lo, hi, device))
    grad = _filled(
        (rows, cols), dtype, device, chunk, lambda lo, hi: _pattern(lo, hi, 7, 1.0, device)
    )
    c = torch.arange(cols, device=device)
    weight = (1 + c % 3).to(dtype).requires_grad_()
    bias = (((c % 5) - 2).float() / 4).to(dtype).requires_grad_() if centered else None
    x.requires_grad_()
    if centered:
        out = wheelops.layer_norm(x, weight, bias, 0.0)
        leaves = (x, weight, bias)
    else:
        out = wheelops.rms_norm(x, weight, 0.0)
        leaves = (x, weight)
    w64 = weight.detach().double()
    b64 = bias.detach().double() if centered else torch.zeros_like(w64)
    for lo, hi in _row_spans(rows, cols, chunk):
        xs = x.detach()[lo:hi].double()
        _assert_equal(out.detach()[lo:hi], (xs * w64 + b64).to(dtype), f"{op} rows [{lo}, {hi})")
    edge = _edge_rows(rows, cols, boundary)
    out_edge = out.detach()[edge].cpu()
    grads = torch.autograd.grad(out, leaves, grad)
    del out
    grad_x = grads[0]
    sum_w = torch.zeros(cols, dtype=torch.float64, device=device)
    sum_b = torch.zeros(cols, dtype=torch.float64, device=device)
    for lo, hi in _row_spans(rows, cols, chunk):
        xs, gs = x.detach()[lo:hi].double(), grad[lo:hi].double()
        gw = gs * w64
        expected = gw - xs * (gw * xs).mean(-1, keepdim=True)
        if centered:
            expected -= gw.mean(-1, keepdim=True)
        _assert_equal(grad_x[lo:hi], expected.to(dtype), f"{op} grad_x rows [{lo}, {hi})")
        sum_w += (gs * xs).sum(0)
        sum_b += gs.sum(0)
    _assert_equal(grads[1], sum_w.to(dtype), f"{op} grad_weight")
    if centered:
        _assert_equal(grads[2], sum_b.to(dtype), f"{op} grad_bias")
    # Independently of the construction: torch's norm on the CPU, in float64,
    # for the rows around element 2**31 and at the end (grad_x of a row needs
    # only that row).
    xe, ge = x.detach()[edge].cpu(), grad[edge].cpu()
    we = weight.detach().cpu()
    be = bias.detach().cpu() if centered else None
    if centered:
        assert_layer_norm_out_close(
            out_edge, layer_norm_reference(xe, we, be, 0.0), xe, we, be, 0.0
        )
        ref = float64_grads(lambda a, w, b: F.layer_norm(a, (cols,), w, b, 0.0), ge, xe, we, be)
        assert_layer_norm_grad_x_close(grad_x[edge].cpu(), ref[0], xe, we, ge, 0.0)
    else:
        assert_rms_norm_out_close(out_edge, rms_norm_reference(xe, we, 0.0), xe, we, 0.0)
        ref = float64_grads(lambda a, w: F.rms_norm(a, (cols,), w, 0.0), ge, xe, we)
        assert_rms_norm_grad_x_close(grad_x[edge].cpu(), ref[0], xe, we, ge, 0.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_norm_design_on_cpu(op: str, dtype: torch.dtype) -> None:
    _check_norm(op, 37, 256, dtype, "cpu", 2048, boundary=20 * 256 + 64)


# (rows, cols): hidden 4096 for layer_norm, 1024 for rms_norm (different row
# configurations of the register kernel); rows x cols just over 2**31.
NORM_SHAPES = {"layer_norm": (2**19 + 3, 4096), "rms_norm": (2**21 + 3, 1024)}


@pytest.mark.gpu
@pytest.mark.huge
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_norm_over_2_pow_31(op: str, dtype: torch.dtype) -> None:
    # x, grad, out, grad_x: 4 x 8 GiB in float32 (the float32 run checks the
    # weight/bias sums to the unit: one row read from the wrong place shows),
    # 4 x 4 GiB in bfloat16; plus ~2 GiB of float64 reference chunks.
    _need_gib(40 if dtype == torch.float32 else 22)
    rows, cols = NORM_SHAPES[op]
    _check_norm(op, rows, cols, dtype, "cuda", CHUNK, BOUNDARY)


# ------------------------------------------------------------------ softmax


def _check_softmax(rows: int, cols: int, dtype: torch.dtype, device: str, chunk: int) -> None:
    x = _filled(
        (rows, cols), dtype, device, chunk, lambda lo, hi: _pattern(lo, hi, 127, 1 / 16, device)
    )
    grad = _filled(
        (rows, cols), dtype, device, chunk, lambda lo, hi: _pattern(lo, hi, 61, 1 / 16, device)
    )
    x.requires_grad_()
    out = wheelops.softmax(x)
    (grad_x,) = torch.autograd.grad(out, (x,), grad)
    for lo, hi in _row_spans(rows, cols, chunk):
        # Probabilities are ~1/cols: bounds relative to each output (_softmax_bounds). A
        # value read from the wrong place changes a probability by up to e**8. The
        # backward uses the saved (rounded) output, as the reference does here.
        y = out.detach()[lo:hi]
        assert_softmax_close(y, x.detach()[lo:hi])
        assert_softmax_backward_close(grad_x[lo:hi], grad[lo:hi], y)
    # The last rows and those around element 2**31 against float64 on the CPU.
    edge = _edge_rows(rows, cols, min(BOUNDARY, rows * cols // 2))
    assert_softmax_close(out.detach()[edge].cpu(), x.detach()[edge].cpu())


def test_softmax_design_on_cpu() -> None:
    _check_softmax(33, 512, torch.bfloat16, "cpu", 4096)


@pytest.mark.gpu
@pytest.mark.huge
@pytest.mark.parametrize(
    ("rows", "cols"),
    [(2**16 + 1, 32768), (2**13 + 1, 262144)],
    ids=["rows-in-registers", "two-pass-rows"],
)
def test_softmax_over_2_pow_31(rows: int, cols: int) -> None:
    # test_softmax.py covers 1024-long rows over 2**31 with zeros but one row;
    # here every element differs, in the two long-row paths. x, grad, out,
    # grad_x: 4 x 4 GiB in bfloat16.
    _need_gib(22)
    _check_softmax(rows, cols, torch.bfloat16, "cuda", CHUNK)


# ------------------------------------------------------------------ lltm gates


def _lltm_gates_eager(gates: torch.Tensor, old_cell: torch.Tensor):
    input_gate, output_gate, candidate = gates.chunk(3, dim=1)
    new_cell = old_cell + F.elu(candidate) * torch.sigmoid(input_gate)
    return torch.tanh(new_cell) * torch.sigmoid(output_gate), new_cell


def _check_lltm_gates(batch: int, state: int, dtype: torch.dtype, device: str, chunk: int) -> None:
    # The GEMMs of wheelops.lltm are torch's (cuBLAS); the fused gate kernel
    # is wheelops' and indexes gates [batch, 3 state] past 2**31.
    def pattern(prime: int) -> Callable[[int, int], torch.Tensor]:
        return lambda lo, hi: _pattern(lo, hi, prime, 1 / 16, device)

    gates = _filled((batch, 3 * state), dtype, device, chunk, pattern(127)).requires_grad_()
    old_cell = _filled((batch, state), dtype, device, chunk, pattern(61)).requires_grad_()
    new_h, new_cell = torch.ops.wheelops.lltm_gates.default(gates, old_cell)
    grad_h = _filled((batch, state), dtype, device, chunk, pattern(53))
    grad_cell = _filled((batch, state), dtype, device, chunk, pattern(47))
    d_gates, d_cell = torch.autograd.grad((new_h, new_cell), (gates, old_cell), (grad_h, grad_cell))
    for lo, hi in _row_spans(batch, 3 * state, chunk):
        # Against float64 math on each span, within the gate kernels' derived bounds.
        g64 = gates.detach()[lo:hi].double().requires_grad_()
        c64 = old_cell.detach()[lo:hi].double().requires_grad_()
        ref_h, ref_cell = _lltm_gates_eager(g64, c64)
        ref_dg, ref_dc = torch.autograd.grad(
            (ref_h, ref_cell), (g64, c64), (grad_h[lo:hi].double(), grad_cell[lo:hi].double())
        )
        expected = {
            "new_h": ref_h.detach(),
            "new_cell": ref_cell.detach(),
            "d_gates": ref_dg,
            "d_old_cell": ref_dc,
        }
        allowed = gate_ops_allowed(
            gates.detach()[lo:hi],
            old_cell.detach()[lo:hi],
            grad_h[lo:hi],
            grad_cell[lo:hi],
            expected,
        )
        actual = {
            "new_h": new_h.detach()[lo:hi],
            "new_cell": new_cell.detach()[lo:hi],
            "d_gates": d_gates[lo:hi],
            "d_old_cell": d_cell[lo:hi],
        }
        for name, value in actual.items():
            assert_within(value, expected[name], allowed[name], f"{name} rows [{lo}, {hi})")


def test_lltm_gates_design_on_cpu() -> None:
    _check_lltm_gates(45, 64, torch.bfloat16, "cpu", 4096)


@pytest.mark.gpu
@pytest.mark.huge
def test_lltm_gates_over_2_pow_31() -> None:
    # batch x 3 state = 699051 x 3072 = 2**31 + 1024. gates 4 GiB, old_cell,
    # new_h, new_cell, grad_h, grad_cell, d_old_cell 1.3 GiB each, d_gates 4 GiB.
    _need_gib(24)
    _check_lltm_gates(699051, 1024, torch.bfloat16, "cuda", CHUNK)


# ------------------------------------------------------------------ rgb_to_gray


def _check_rgb_to_gray(
    h: int, w: int, planar: bool, device: str, chunk: int, boundary: int
) -> None:
    eager = opspecs.BY_NAME["rgb_to_gray"].answer
    pixels = h * w

    def fill(lo: int, hi: int) -> torch.Tensor:
        return _index(lo, hi, device) % 251

    if planar:
        # NCHW planes read in place through a permuted view: channel stride h*w.
        base = _filled((1, 3, h, w), torch.uint8, device, chunk, fill)
        img = base.permute(0, 2, 3, 1)
        by_pixel = base.view(3, pixels).t()
    else:
        img = _filled((h, w, 3), torch.uint8, device, chunk, fill)
        by_pixel = img.view(pixels, 3)
    out = wheelops.rgb_to_gray(img).view(pixels)
    for lo, hi in _spans(pixels, chunk // 4):  # int64 temporaries: 4x the pixels
        _assert_equal(out[lo:hi], eager(by_pixel[lo:hi]), f"rgb_to_gray pixels [{lo}, {hi})")
    for lo in (boundary - 4096, pixels - 4096):
        assert torch.equal(out[lo : lo + 4096].cpu(), eager(by_pixel[lo : lo + 4096].cpu()))


@pytest.mark.parametrize("planar", [False, True], ids=["interleaved", "planar"])
def test_rgb_to_gray_design_on_cpu(planar: bool) -> None:
    _check_rgb_to_gray(97, 129, planar, "cpu", 4096, boundary=6000)


@pytest.mark.gpu
@pytest.mark.huge
@pytest.mark.parametrize(
    ("h", "w", "planar"),
    [(46341, 46341, False), (65537, 32768, True)],
    ids=["interleaved-odd", "planar-vectorized"],
)
def test_rgb_to_gray_over_2_pow_31(h: int, w: int, planar: bool) -> None:
    # Over 2**31 pixels, so the output (uint8) is over 2**31 elements as well
    # as the input (6 GiB). 46341**2 = 2**31 + 4633 pixels: the 16-pixel body
    # and a tail; the planar image's channel stride (h*w, a multiple of 16)
    # is itself past 2**31.
    _need_gib(12)
    _check_rgb_to_gray(h, w, planar, "cuda", CHUNK, BOUNDARY)


# ------------------------------------------------------------------ rows near 2**18


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("cols", [262143, 262152])
@pytest.mark.parametrize("op", ["softmax", "layer_norm", "rms_norm"])
def test_long_rows_near_2_pow_18(op: str, cols: int, dtype: torch.dtype) -> None:
    # 262144 itself is covered per op (see the module docstring); these are
    # not powers of two: 262143 is odd (one element per access), 262152 takes
    # 16-byte vectors with a partial last block.
    spec = opspecs.BY_NAME[op]
    args = spec.inputs((3, cols), dtype, "cuda", seed=1, requires_grad=True)
    grad = torch.randn(3, cols, generator=torch.Generator().manual_seed(2)).to(dtype).cuda()
    (out,), grads = forward_backward(spec, args, [grad])
    leaves = [a.detach() for a in args]
    if op == "softmax":
        assert_softmax_close(out, leaves[0])
        assert_softmax_backward_close(grads[0], grad, out.detach())
        return
    x, weight = leaves[0], leaves[1]
    if op == "layer_norm":
        bias = leaves[2]
        assert_layer_norm_out_close(
            out, layer_norm_reference(x, weight, bias, 1e-5), x, weight, bias, 1e-5
        )
        ref = float64_grads(
            lambda a, w, b: F.layer_norm(a, (cols,), w, b, 1e-5), grad, x, weight, bias
        )
        assert_layer_norm_grad_x_close(grads[0], ref[0], x, weight, grad, 1e-5)
        assert_norm_bias_grad_close(grads[2], ref[2], grad)
        assert_layer_norm_grad_weight_close(grads[1], ref[1], x, grad, 1e-5)
    else:
        eps = RMS_NORM_EPS  # the description's call, spec.call, passes it
        assert_rms_norm_out_close(out, rms_norm_reference(x, weight, eps), x, weight, eps)
        ref = float64_grads(lambda a, w: F.rms_norm(a, (cols,), w, eps), grad, x, weight)
        assert_rms_norm_grad_x_close(grads[0], ref[0], x, weight, grad, eps)
        assert_rms_norm_grad_weight_close(grads[1], ref[1], x, grad, eps)


# ------------------------------------------------------------------ the checks can fail


def _reads_wrapped(fn: Callable[..., object], first: int) -> Callable[..., object]:
    """fn, but its first argument's rows from `first` on read rows from the start,
    as an int32-wrapped index would (through autograd, so the gradients follow)."""

    def wrapped(x: torch.Tensor, *rest: object) -> object:
        rows = torch.arange(x.shape[0], device=x.device)
        rows[first:] -= first
        return fn(x[rows], *rest)

    return wrapped


@pytest.mark.parametrize("op", ["relu_scale", "bias_gelu", "layer_norm", "rms_norm", "softmax"])
def test_designs_catch_a_wrapped_read_on_cpu(op: str, monkeypatch: pytest.MonkeyPatch) -> None:
    checks: dict[str, tuple[int, Callable[[], None]]] = {
        "relu_scale": (
            2 * 4096,
            lambda: _check_relu_scale(3 * 4096 + 7, torch.float16, "cpu", 4096, 2 * 4096),
        ),
        "bias_gelu": (67 // 2, lambda: _check_bias_gelu(67, 64, torch.bfloat16, "cpu", 1024)),
        "layer_norm": (
            20,
            lambda: _check_norm("layer_norm", 37, 256, torch.float32, "cpu", 2048, 20 * 256),
        ),
        "rms_norm": (
            20,
            lambda: _check_norm("rms_norm", 37, 256, torch.float32, "cpu", 2048, 20 * 256),
        ),
        "softmax": (33 // 2, lambda: _check_softmax(33, 512, torch.bfloat16, "cpu", 4096)),
    }
    first, check = checks[op]
    monkeypatch.setattr(wheelops, op, _reads_wrapped(getattr(wheelops, op), first))
    with pytest.raises(AssertionError):
        check()
