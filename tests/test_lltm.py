from __future__ import annotations

import math
from collections.abc import Iterator

import _example_log
import pytest
import torch
import torch.nn.functional as F
from _helpers import DEVICES, DTYPES
from _lltm_bounds import assert_lltm_close, fp32_accumulating_gemms, gate_ops_allowed
from _norm_helpers import (
    assert_within,
)
from _property_checks import (
    assert_result_layout,
    float_dtypes,
    grad_leaf,
)
from _strategies import (
    Layout,
    apply_layout,
    device_type,
    layouts,
    seeds,
    sizes,
)
from hypothesis import given
from hypothesis import strategies as st
from opspecs.lltm import make_inputs, reference
from opspecs.lltm import make_inputs as lltm_inputs

import wheelops

# (batch, input_features, state_size): single elements, state sizes that are
# and are not a multiple of the 16-byte vector width, empty batch/features/state.
SHAPES = [
    (1, 1, 1),
    (3, 5, 7),
    (4, 8, 16),
    (2, 3, 33),
    (6, 10, 64),
    (0, 4, 8),
    (5, 0, 8),
    (3, 4, 0),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_forward_and_all_gradients_match_float64(shape, dtype, device):
    batch, _, state = shape
    inputs = make_inputs(*shape, dtype, device, seed=1, requires_grad=True)
    new_h, new_cell = wheelops.lltm(*inputs)
    assert new_h.shape == new_cell.shape == (batch, state)
    assert new_h.dtype == new_cell.dtype == dtype
    generator = torch.Generator().manual_seed(2)
    grads = [torch.randn(batch, state, generator=generator).to(dtype).to(device) for _ in range(2)]
    ours = torch.autograd.grad((new_h, new_cell), inputs, grads)
    assert_lltm_close((new_h, new_cell), ours, inputs, grads)


@pytest.mark.parametrize("device", DEVICES)
def test_matches_float64_and_only_new_h_used(device):
    # Eager's formula in float64, within lltm's derived bounds (_lltm_bounds).
    inputs = make_inputs(16, 24, 40, torch.float32, device, seed=3, requires_grad=True)
    ours = wheelops.lltm(*inputs)
    zeros, ones = torch.zeros_like(ours[0]), torch.ones_like(ours[0])
    assert_lltm_close(ours, (None,) * 5, inputs, (zeros, zeros))
    # grad_cell is None here: autograd gives the fused backward zeros.
    mine = torch.autograd.grad(ours[0].square().sum(), inputs)
    assert_lltm_close((None, None), mine, inputs, (2 * ours[0].detach(), zeros))  # 2 h: exact
    mine = torch.autograd.grad(wheelops.lltm(*inputs)[1].sum(), inputs)
    assert_lltm_close((None, None), mine, inputs, (zeros, ones))


def test_gradcheck_float64():
    inputs = make_inputs(3, 4, 5, torch.float64, "cpu", seed=4, requires_grad=True)
    assert torch.autograd.gradcheck(wheelops.lltm, inputs)
    gates = torch.randn(3, 15, dtype=torch.float64, requires_grad=True)
    old_cell = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(torch.ops.wheelops.lltm_gates.default, (gates, old_cell))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_gate_ops_directly(dtype, device):
    # The two fused kernels against the formula, on their own.
    batch, state = 7, 24
    gates = torch.randn(batch, 3 * state, dtype=torch.float64).to(dtype).to(device)
    old_cell = torch.randn(batch, state, dtype=torch.float64).to(dtype).to(device)
    grad_h, grad_cell = (torch.randn(batch, state).to(dtype).to(device) for _ in range(2))
    new_h, new_cell = torch.ops.wheelops.lltm_gates.default(gates, old_cell)
    g = gates.double().requires_grad_()
    c = old_cell.double().requires_grad_()
    g0, g1, g2 = g.chunk(3, dim=1)
    expected_cell = c + F.elu(g2) * torch.sigmoid(g0)
    expected_h = torch.tanh(expected_cell) * torch.sigmoid(g1)
    d_gates, d_old_cell = torch.ops.wheelops.lltm_gates_backward.default(
        grad_h, grad_cell, gates, old_cell
    )
    expected_grads = torch.autograd.grad(
        (expected_h, expected_cell), (g, c), (grad_h.double(), grad_cell.double())
    )
    assert d_gates.shape == gates.shape and d_old_cell.shape == old_cell.shape
    actual = {"new_h": new_h, "new_cell": new_cell, "d_gates": d_gates, "d_old_cell": d_old_cell}
    expected = dict(
        zip(actual, [expected_h.detach(), expected_cell.detach(), *expected_grads], strict=True)
    )
    allowed = gate_ops_allowed(gates, old_cell, grad_h, grad_cell, expected)
    for name, value in actual.items():
        assert_within(value, expected[name], allowed[name], name)


def misaligned(t: torch.Tensor) -> torch.Tensor:
    flat = torch.zeros(t.numel() + 1, dtype=t.dtype, device=t.device)
    flat[1:] = t.reshape(-1)
    return flat[1:].view(t.shape)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_non_contiguous_and_misaligned_inputs(dtype, device):
    inputs = make_inputs(6, 12, 16, dtype, device, seed=5)
    # The output grads live on the outputs' device (a CPU grad for a CUDA
    # output is rejected by autograd itself).
    ones = torch.ones(6, 16, dtype=dtype, device=device)
    input, weights, bias, old_h, old_cell = inputs
    variants = [
        (input.t().contiguous().t(), weights, bias, old_h, old_cell),
        (input, weights.t().contiguous().t(), bias, old_h, old_cell),
        (misaligned(input), misaligned(weights), misaligned(bias), old_h, misaligned(old_cell)),
        (input, weights, bias, old_h.t().contiguous().t(), old_cell.t().contiguous().t()),
    ]
    for variant in variants:
        leaves = [t.detach().requires_grad_() for t in variant]
        new_h, new_cell = wheelops.lltm(*leaves)
        grads = torch.autograd.grad((new_h, new_cell), leaves, (ones, ones))
        assert_lltm_close((new_h, new_cell), grads, inputs, (ones, ones))
        # Every layout's gradients come back on the inputs' device.
        for grad in grads:
            assert grad.device == new_h.device and grad.dtype == dtype
    # The fused ops on unaligned and strided gates / states.
    gates = torch.randn(6, 48, device=device).to(dtype)
    cell = torch.randn(6, 16, device=device).to(dtype)
    expected = torch.ops.wheelops.lltm_gates.default(gates, cell)
    for g, c in [(misaligned(gates), misaligned(cell)), (gates.t().contiguous().t(), cell)]:
        for mine, theirs in zip(torch.ops.wheelops.lltm_gates.default(g, c), expected, strict=True):
            assert torch.equal(mine, theirs)
        grads = (misaligned(cell), cell.t().contiguous().t())
        assert all(
            torch.equal(a, b)
            for a, b in zip(
                torch.ops.wheelops.lltm_gates_backward.default(*grads, g, c),
                torch.ops.wheelops.lltm_gates_backward.default(cell, cell, gates, cell),
                strict=True,
            )
        )


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_gradients_stay_on_the_inputs_device_without_running_kernels(layout):
    # Meta tensors run only the fake kernels and the backward formula, so this
    # checks on any machine that no gradient is built on another device.
    inputs = make_inputs(6, 12, 16, torch.float32, "cpu", seed=8)
    if layout == "transposed":
        inputs = tuple(t.t().contiguous().t() if t.dim() == 2 else t for t in inputs)
    leaves = [t.to("meta").requires_grad_() for t in inputs]
    new_h, new_cell = wheelops.lltm(*leaves)
    assert new_h.device.type == new_cell.device.type == "meta"
    grads = torch.autograd.grad((new_h, new_cell), leaves, [torch.ones_like(new_h)] * 2)
    for grad, leaf in zip(grads, leaves, strict=True):
        assert grad.device == leaf.device and grad.shape == leaf.shape


@pytest.mark.parametrize("device", DEVICES)
def test_nan_and_inf_propagate_as_in_eager(device):
    inputs = [t.double() for t in make_inputs(2, 3, 4, torch.float64, device, seed=6)]
    input, old_cell = inputs[0], inputs[4]
    input[0, 0] = math.nan
    old_cell[1, 1] = math.inf
    old_cell[1, 2] = -math.inf
    for mine, theirs in zip(wheelops.lltm(*inputs), reference(*inputs), strict=True):
        torch.testing.assert_close(mine, theirs, equal_nan=True)
    # Saturated gates: sigmoid and tanh reach their limits without NaN.
    gates = torch.tensor([[1e4, -1e4, 1e4], [-1e4, 1e4, -1e4]], device=device)
    cell = torch.zeros(2, 1, device=device)
    new_h, new_cell = torch.ops.wheelops.lltm_gates.default(gates, cell)
    assert new_cell.tolist() == [[1e4], [0.0]] and new_h.tolist() == [[0.0], [0.0]]
    for t in torch.ops.wheelops.lltm_gates_backward.default(cell + 1, cell + 1, gates, cell):
        assert torch.isfinite(t).all()


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for requires_grad in (False, True):
        for batch, state in [(4, 8), (3, 5), (0, 4)]:
            gates = torch.randn(batch, 3 * state, device=device, requires_grad=requires_grad)
            cell = torch.randn(batch, state, device=device, requires_grad=requires_grad)
            torch.library.opcheck(torch.ops.wheelops.lltm_gates.default, (gates, cell))
    gates, cell = torch.randn(5, 24, device=device), torch.randn(5, 8, device=device)
    torch.library.opcheck(
        torch.ops.wheelops.lltm_gates_backward.default,
        (torch.randn_like(cell), torch.randn_like(cell), gates, cell),
    )


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_forward_and_backward(device):
    # Inductor may reorder the GEMMs' and the bias gradient's float32 sums (padding,
    # its own reductions): no bitwise match with eager, but each compiled call, forward
    # and backward, within lltm's derived bounds against float64 on its own inputs (which
    # take any order of those sums), the second call on the first's state.
    torch._dynamo.reset()
    module = wheelops.nn.LLTM(12, 16).to(device)
    compiled = torch.compile(lambda x, h, c: module(x, (h, c)), fullgraph=True)
    first = torch.randn(5, 12, device=device)
    h, c = torch.randn(5, 16, device=device), torch.randn(5, 16, device=device)
    for x in (first, first * 2):
        inputs = (x, module.weights, module.bias, h, c)
        leaves = [t.detach().requires_grad_() for t in (x, h, c)]
        new_h, new_cell = compiled(leaves[0], leaves[1], leaves[2])
        grads = (torch.randn_like(new_h), torch.randn_like(new_cell))
        wrt = (leaves[0], module.weights, module.bias, leaves[1], leaves[2])
        input_grads = torch.autograd.grad((new_h, new_cell), wrt, grads)
        inputs = tuple(t.detach() for t in inputs)
        assert_lltm_close((new_h, new_cell), input_grads, inputs, grads)
        h, c = new_h.detach(), new_cell.detach()


@pytest.mark.parametrize("device", DEVICES)
def test_module_matches_pure_pytorch_lltm(device):
    torch.manual_seed(0)
    module = wheelops.nn.LLTM(20, 30, device=device)
    x = torch.randn(8, 20, device=device)
    h, c = torch.randn(8, 30, device=device), torch.randn(8, 30, device=device)
    new_h, new_cell = module(x, (h, c))
    (new_h.sum() + new_cell.sum()).backward()
    # The pure-PyTorch LLTM's formula in float64, within lltm's derived bounds.
    inputs = (x, module.weights.detach(), module.bias.detach(), h, c)
    grads = (torch.ones_like(new_h), torch.ones_like(new_cell))
    input_grads = (None, module.weights.grad, module.bias.grad, None, None)
    assert_lltm_close((new_h, new_cell), input_grads, inputs, grads)


def test_module_parameters_and_init():
    module = wheelops.nn.LLTM(input_features=7, state_size=16, dtype=torch.float64)
    names = [name for name, _ in module.named_parameters()]
    assert names == ["weights", "bias"]
    assert module.weights.shape == (48, 23) and module.bias.shape == (48,)
    assert module.weights.dtype == torch.float64
    for p in module.parameters():
        assert p.abs().max() <= 0.25 and p.abs().max() > 0.1  # uniform(-1/4, 1/4)
    assert "input_features=7, state_size=16" in repr(module)
    with pytest.raises(ValueError, match="'state_size' must be a positive int"):
        wheelops.nn.LLTM(4, 0)
    with pytest.raises(ValueError, match="'input_features' must be a positive int"):
        wheelops.nn.LLTM(2.5, 4)


def _good():
    return list(make_inputs(4, 3, 5, torch.float32, "cpu"))


@pytest.mark.gpu
def test_mixed_devices_rejected():
    args = _good()
    args[1] = args[1].cuda()
    with pytest.raises(ValueError, match="same device"):
        wheelops.lltm(*args)
    with pytest.raises(RuntimeError, match="same device"):
        torch.ops.wheelops.lltm_gates.default(torch.zeros(4, 15, device="cuda"), torch.zeros(4, 5))
    torch.cuda.synchronize()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_large_batch_on_a_side_stream(dtype):
    inputs = make_inputs(4096, 256, 512, dtype, "cuda", seed=7, requires_grad=True)
    grads = [torch.randn(4096, 512, device="cuda").to(dtype) for _ in range(2)]
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        new_h, new_cell = wheelops.lltm(*inputs)
        ours = torch.autograd.grad((new_h, new_cell), inputs, grads)
    torch.cuda.current_stream().wait_stream(stream)
    assert_lltm_close((new_h, new_cell), ours, inputs, grads)


@pytest.fixture(autouse=True)
def _gemms_accumulate_in_float32() -> Iterator[None]:
    with fp32_accumulating_gemms():
        yield


# ---------------------------------------------------------------------------
# Properties (hypothesis; the profile in tests/conftest.py sets how many examples)


LLTM_ARGUMENTS = ("input", "weights", "bias", "old_h", "old_cell")


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_property_lltm(device: str, data: st.DataObject) -> None:
    draw = data.draw
    dtype, seed = draw(float_dtypes()), draw(seeds)
    limit = 64 if device_type(device) == "cpu" else 512
    batch, features, state = (draw(sizes(limit), label=name) for name in ("B", "F", "S"))
    inputs = lltm_inputs(batch, features, state, dtype, device, seed)
    inputs = tuple(
        grad_leaf(apply_layout(t, draw(layouts(tuple(t.shape)), label=f"{name} layout")))
        for name, t in zip(LLTM_ARGUMENTS, inputs, strict=True)
    )
    use_cell = draw(st.booleans(), label="new_cell used")
    _example_log.record("lltm", device)

    with fp32_accumulating_gemms():  # torch's GEMMs as the bounds assume
        new_h, new_cell = wheelops.lltm(*inputs)
    assert_result_layout(new_h, (batch, state), dtype)
    assert_result_layout(new_cell, (batch, state), dtype)
    generator = torch.Generator().manual_seed(seed + 1)
    grad_h, grad_cell = (
        torch.randn(batch, state, generator=generator).to(dtype).to(device) for _ in range(2)
    )
    if not use_cell:
        grad_cell = torch.zeros_like(grad_cell)  # what autograd feeds an unused output
    outputs, out_grads = (
        ((new_h, new_cell), (grad_h, grad_cell))
        if use_cell
        else (
            (new_h,),
            (grad_h,),
        )
    )
    with fp32_accumulating_gemms():
        mine = torch.autograd.grad(outputs, inputs, out_grads)
    for name, actual, leaf in zip(LLTM_ARGUMENTS, mine, inputs, strict=True):
        assert actual.shape == leaf.shape and actual.dtype == dtype, name
    # Every result within its derived bound (_lltm_bounds.lltm_allowed).
    assert_lltm_close((new_h, new_cell), mine, inputs, (grad_h, grad_cell))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("seed", range(24))
def test_gates_far_from_zero_from_repeated_columns(device: str, dtype: torch.dtype, seed: int):
    """test_property_lltm's example that failed on an H100 (B=1, F=240, S=1; input and
    weights expanded along dim 1): 240 equal products make gates of -100 to -480. The
    float32 sigmoid was 1 / (1 + exp(-x)), 0 below -88.7 where the result is a subnormal
    (new_h off by 1.7e-41, allowed 7.5e-45); the bound's intervals had no subnormal
    floor (~2 bits of the sigmoid are left at -102), and float64 errors of 1e-219 squared
    to 0 in its Hoeffding sums."""
    expanded = Layout("expanded", dim=1)
    inputs = list(lltm_inputs(1, 240, 1, dtype, device, seed))
    inputs[0], inputs[1] = (apply_layout(t, expanded) for t in inputs[:2])
    inputs = [grad_leaf(t) for t in inputs]
    assert inputs[0].stride(1) == inputs[1].stride(1) == 0
    new_h, new_cell = wheelops.lltm(*inputs)
    generator = torch.Generator().manual_seed(seed + 1)
    grads = [torch.randn(1, 1, generator=generator).to(dtype).to(device) for _ in range(2)]
    mine = torch.autograd.grad((new_h, new_cell), inputs, grads)
    assert_lltm_close((new_h, new_cell), mine, inputs, grads)


@pytest.mark.parametrize("device", DEVICES)
def test_products_repeated_along_the_features(device: str):
    """test_property_lltm's example that failed on an H200 (issue 42): B=231, F=230,
    S=16, float32, seed 0, input and weights expanded along dim 1. Each gate sums 230
    equal products, whose roundings are as correlated as the partial sums: new_cell was
    1.04x the bound that took them for independent (_lltm_bounds._gate_errors)."""
    expanded = Layout("expanded", dim=1)
    inputs = list(lltm_inputs(231, 230, 16, torch.float32, device, 0))
    inputs[0], inputs[1] = (apply_layout(t, expanded) for t in inputs[:2])
    inputs = [grad_leaf(t) for t in inputs]
    with fp32_accumulating_gemms():
        new_h, new_cell = wheelops.lltm(*inputs)
    generator = torch.Generator().manual_seed(1)
    grad_h = torch.randn(231, 16, generator=generator).to(device)
    with fp32_accumulating_gemms():
        mine = torch.autograd.grad((new_h,), inputs, (grad_h,))
    assert_lltm_close((new_h, new_cell), mine, inputs, (grad_h, torch.zeros_like(grad_h)))


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_property_lltm_rejects_mismatched_shapes(device: str, data: st.DataObject) -> None:
    draw = data.draw
    batch, features, state = (draw(sizes(8)) for _ in range(3))
    inputs = list(lltm_inputs(batch, features, state, torch.float32, device))
    index = draw(st.integers(0, 4), label="argument")
    good_shape = tuple(inputs[index].shape)
    bad_shape = draw(
        st.lists(sizes(9), min_size=1, max_size=3).map(tuple).filter(lambda s: s != good_shape)
    )
    _example_log.record("lltm", device)
    inputs[index] = torch.zeros(bad_shape, device=device)
    # A wrong 'input' or 'old_h' can also be reported through the arguments
    # whose shapes derive from it (batch, state_size): any of them is named.
    with pytest.raises(ValueError) as info:
        wheelops.lltm(*inputs)
    message = str(info.value)
    assert "wheelops.lltm" in message
    assert any(f"'{name}'" in message for name in LLTM_ARGUMENTS), message
