"""wheelops.fused_linear_gelu and wheelops.nn.LinearGELU (issue #25).

Results are compared with a float64 reference computed from the same (rounded)
inputs, element by element and in aggregate (the sign-weighted sum of the errors),
within bounds derived from how the op computes (tests/_linear_gelu_bounds.py): one GEMM
of length K accumulated in float32 (float64 for float64; the probabilistic sqrt(K) bound
of a long sum), the pre-activation rounded to the dtype where the path stores it, a GELU
evaluated in float32 and one rounding of the result. The bound grows with the GEMM's own
length only, never with the row count.
"""

from __future__ import annotations

import importlib
import math

import pytest
import torch
from _helpers import DEVICES, DTYPES, randn
from _linear_gelu_bounds import assert_bound, backward_bounds, forward_bound, pre_activation
from _norm_helpers import allowance, assert_within

import wheelops
from wheelops.ops import _autograd

# The module (wheelops.ops.fused_linear_gelu is the function of the same name).
flg_module = importlib.import_module("wheelops.ops.fused_linear_gelu")

APPROXIMATIONS = ["none", "tanh"]
OP = torch.ops.wheelops.fused_linear_gelu.default
BACKWARD = torch.ops.wheelops.fused_linear_gelu_backward.default


def inputs(
    shape: tuple[int, ...],
    out_features: int,
    dtype: torch.dtype,
    device: str,
    seed: int = 0,
    bias: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    in_features = shape[-1]
    scale = 1 / math.sqrt(max(in_features, 1))  # nn.Linear's scale: pre-activations ~ N(0, 1)
    x = randn(shape, dtype, device, seed)
    w = randn((out_features, in_features), dtype, device, seed + 1, scale=scale)
    b = randn((out_features,), dtype, device, seed + 2, scale=0.5) if bias else None
    return x, w, b


def bias_added_after_rounding(x, w, b, device) -> bool:
    """Whether the CUDA path adds the bias to a GEMM result already rounded to the dtype:
    where cuBLASLt's bias epilogue is not used (out_features or in_features not a multiple
    of 8, an operand not 16-byte aligned; see fused_linear_gelu.cu)."""
    if device != "cuda" or b is None or x.dtype == torch.float64:
        return False
    aligned = all(t.data_ptr() % 16 == 0 for t in (x, w, b))
    return w.shape[0] % 8 != 0 or w.shape[1] % 8 != 0 or not aligned


FORWARD_SHAPES = [
    ((5, 16), 24),
    ((1, 1), 1),
    ((3, 7, 33), 65),  # 3-D input, odd sizes
    ((64, 96), 130),
    ((0, 16), 8),  # zero rows
    ((4, 0), 6),  # zero in_features: gelu(bias)
    ((4, 8), 0),  # zero out_features
    ((16,), 12),  # 1-D input
]


@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, out_features", FORWARD_SHAPES)
def test_forward_within_derived_bound(shape, out_features, dtype, device, approximate, with_bias):
    x, w, b = inputs(shape, out_features, dtype, device, seed=1, bias=with_bias)
    out = wheelops.fused_linear_gelu(x, w, b, approximate)
    assert out.shape == (*shape[:-1], out_features) and out.dtype == dtype
    assert out.device == x.device and out.is_contiguous()
    twice = bias_added_after_rounding(x, w, b, device)
    assert_bound(out, forward_bound(x, w, b, approximate, device, twice), "output")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_huge_in_features(dtype, device):
    x, w, b = inputs((3, 2**16 + 3), 5, dtype, device, seed=2)
    out = wheelops.fused_linear_gelu(x, w, b)
    assert_bound(out, forward_bound(x, w, b, "none", device), "output")


def _non_contiguous(t: torch.Tensor, how: str) -> torch.Tensor:
    if how == "transposed":
        return t.t().contiguous().t()
    if how == "strided":
        wide = torch.zeros(t.shape[0], 2 * t.shape[1], dtype=t.dtype, device=t.device)
        wide[:, ::2] = t
        return wide[:, ::2]
    flat = torch.zeros(t.numel() + 1, dtype=t.dtype, device=t.device)  # not 16-byte aligned
    flat[1:] = t.reshape(-1)
    return flat[1:].view(t.shape)


@pytest.mark.parametrize("how", ["transposed", "strided", "offset_by_one"])
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_any_strides(how, dtype, device):
    # Within the bound, not bitwise: on CUDA another alignment may pick another GEMM kernel.
    x, w, b = inputs((24, 40), 48, dtype, device, seed=3)
    bias_view = torch.stack([b, b], dim=1)[:, 0]  # stride 2
    for args in ((_non_contiguous(x, how), w, b), (x, _non_contiguous(w, how), b),
                 (x, w, bias_view)):  # fmt: skip
        twice = bias_added_after_rounding(*args, device)  # misaligned: no bias epilogue
        bound = forward_bound(x, w, b, "none", device, twice)
        assert_bound(wheelops.fused_linear_gelu(*args), bound, f"{how} output")


BACKWARD_SHAPES = [((5, 16), 24), ((3, 7, 33), 65), ((64, 96), 130), ((0, 16), 8), ((4, 0), 6)]


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, out_features", BACKWARD_SHAPES)
def test_backward_within_derived_bound(shape, out_features, dtype, device, approximate):
    x, w, b = inputs(shape, out_features, dtype, device, seed=4)
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    out = wheelops.fused_linear_gelu(*leaves, approximate)
    grad = randn(out.shape, dtype, device, seed=5)
    got = torch.autograd.grad(out, leaves, grad)
    bounds = backward_bounds(grad, x, w, b, approximate, device)
    for (name, bound), g, leaf in zip(bounds.items(), got, leaves, strict=True):
        assert g.dtype == dtype and g.shape == leaf.shape
        assert_bound(g, bound, name)


HOPPER_SHAPE = ((8192, 64), 3072)  # 32 x 24 = 768 tiles of 256 x 128: >= 4 waves on 132 SMs
HOPPER_TILE = (128, 128)  # in_features <= 1024: the ping-pong kernel's tiles


def _tile_edges(size: int, tile: int) -> torch.Tensor:
    """The first and last index of every tile along a dim of ``size``: a subset that meets
    every tile of the GEMM and both of its edges."""
    starts = torch.arange(0, size, tile)
    return torch.cat([starts, (starts + tile - 1).clamp_max(size - 1)]).unique()


@pytest.mark.gpu
@pytest.mark.parametrize("keep_pre", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_hopper_epilogue_gemm_within_derived_bound(dtype, keep_pre):
    """On an sm_90 GPU the erf forward of a 16-bit problem of at least 4 waves of tiles is
    one CUTLASS GEMM whose epilogue adds the bias and applies the GELU
    (fused_linear_gelu_sm90a.cu): it runs (the profiler names its kernel) and its output is
    within the bound. Where a gradient may be asked (in_features <= 1024 here) the same
    kernel also writes the pre-activation: the gradients from it are within their bounds.

    The problem must be large (>= 528 tiles) for the kernel to be chosen; its float64
    bounds over every element took 48-160 s of one core (issue 42). Output rows and
    grad_input rows are each a function of their own row of x, grad_weight rows and
    grad_bias of their own column of the output: the bounds are computed for the first and
    last row of every row tile (and column of every column tile), which meets every tile
    the kernel wrote, at about 1/40 of the cost."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the sm_90a kernel runs on sm_90 GPUs only (H100, H200, GH200)")
    (shape, out_features) = HOPPER_SHAPE
    x, w, b = inputs(shape, out_features, dtype, "cuda", seed=21)
    leaves = [t.clone().requires_grad_(keep_pre) for t in (x, w, b)]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        out = wheelops.fused_linear_gelu(*leaves)
        torch.cuda.synchronize()
    kernels = {event.name for event in profile.events()}
    # The CUTLASS kernel's name holds its epilogue's functor (cuBLAS's may say "cutlass").
    assert any("ExactGelu" in name for name in kernels), kernels
    rows = _tile_edges(shape[0], HOPPER_TILE[0]).cuda()
    columns = _tile_edges(out_features, HOPPER_TILE[1]).cuda()
    assert_bound(out.detach()[rows], forward_bound(x[rows], w, b, "none", "cuda"), "output")
    if keep_pre:
        grad = randn(out.shape, dtype, "cuda", seed=22)
        grad_input, grad_weight, grad_bias = torch.autograd.grad(out, leaves, grad)
        by_row = backward_bounds(grad[rows], x[rows], w, b, "none", "cuda")
        assert_bound(grad_input[rows], by_row["grad_input"], "grad_input")
        by_column = backward_bounds(grad[:, columns], x, w[columns], b[columns], "none", "cuda")
        assert_bound(grad_weight[columns], by_column["grad_weight"], "grad_weight")
        assert_bound(grad_bias[columns], by_column["grad_bias"], "grad_bias")


@pytest.mark.gpu
@pytest.mark.parametrize("in_features", [1024, 1032])
def test_hopper_training_forward_keeps_the_pre_activation_in_cutlass_up_to_1024(in_features):
    """The CUTLASS kernel that also writes the pre-activation is the ping-pong one, built for
    in_features up to 1024 (kSm90aPingpongMaxK); above, a training forward takes cuBLASLt's
    BIAS GEMM and the GELU pass, the inference forward still the CUTLASS kernel."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the sm_90a kernel runs on sm_90 GPUs only (H100, H200, GH200)")
    x, w, b = inputs((8192, in_features), 3072, torch.bfloat16, "cuda", seed=23)
    rows = torch.tensor([0, 1, 4095, 8191], device="cuda")  # a few: the bound costs per row

    def cutlass_ran(requires_grad: bool) -> bool:
        leaves = [t.clone().requires_grad_(requires_grad) for t in (x, w, b)]
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            out = wheelops.fused_linear_gelu(*leaves)
            torch.cuda.synchronize()
        assert_bound(out.detach()[rows], forward_bound(x[rows], w, b, "none", "cuda"), "output")
        return any("ExactGelu" in event.name for event in prof.events())

    assert cutlass_ran(requires_grad=False)
    assert cutlass_ran(requires_grad=True) == (in_features <= 1024)


@pytest.mark.parametrize("device", DEVICES)
def test_only_the_gradients_asked_for(device):
    x, w, b = inputs((6, 8), 10, torch.float32, device, seed=6)
    pre = OP(x, w, b, "none", False, True)[1]
    grad = torch.ones_like(pre)
    for flags in ((True, False, False), (False, True, False), (False, False, True)):
        results = BACKWARD(grad, x, w, pre, "none", False, *flags)
        assert [r is not None for r in results] == list(flags)


@pytest.mark.parametrize("device", DEVICES)
def test_pre_activation_kept_only_when_a_gradient_may_be_asked(device):
    x, w, b = inputs((6, 8), 10, torch.float32, device, seed=7)
    out, pre = OP(x, w, b, "none", False, False)
    assert pre.shape == (0,)
    out_kept, pre_kept = OP(x, w, b, "none", False, True)
    torch.testing.assert_close(out_kept, out, atol=0, rtol=0)
    pre64, pre_error, _ = pre_activation(x, w, b, device=device, saved=True)
    allowed = allowance(pre64, pre_error.bound(), torch.float32)  # its saved rounding too
    assert_within(pre_kept.cpu().reshape(pre64.shape), pre64, allowed, "pre_activation")
    # The public autograd layer cannot tell that no tangent comes but in inference mode.
    assert flg_module.keeps_pre_activation(x, w, b) is _autograd.PUBLIC
    assert flg_module.keeps_pre_activation(x, w.requires_grad_(), b)
    with torch.no_grad():
        assert flg_module.keeps_pre_activation(x, w, b) is _autograd.PUBLIC
    with torch.inference_mode():
        assert not flg_module.keeps_pre_activation(x, w, b)
    # The raw op called without the pre-activation under autograd recomputes it.
    w.requires_grad_()
    out, _ = OP(x, w, b, "none", False, False)
    (got,) = torch.autograd.grad(out.sum(), w)
    ones = torch.ones_like(out)
    assert_bound(got, backward_bounds(ones, x, w, b, "none", device)["grad_weight"], "grad_w")


@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_float64(device, approximate, with_bias):
    x, w, b = inputs((2, 3, 5), 4, torch.float64, device, seed=8, bias=with_bias)
    leaves = tuple(t.requires_grad_() for t in (x, w, b) if t is not None)

    def fn(*args):
        return wheelops.fused_linear_gelu(*args[:2], args[2] if with_bias else None, approximate)

    assert torch.autograd.gradcheck(fn, leaves, check_forward_ad=True, check_undefined_grad=True)


@pytest.mark.parametrize("device", DEVICES)
def test_double_backward_names_the_op(device):
    x, w, b = (t.requires_grad_() for t in inputs((3, 4), 5, torch.float64, device, seed=9))
    grads = torch.autograd.grad(wheelops.fused_linear_gelu(x, w, b).square().sum(), (x, w, b),
                                create_graph=True)  # fmt: skip
    with pytest.raises(
        NotImplementedError, match=r"^wheelops\.fused_linear_gelu_backward does not"
    ):
        torch.autograd.grad(sum(g.sum() for g in grads), (x, w, b))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for requires_grad in (False, True):
        x, w, b = inputs((3, 4, 16), 24, torch.float32, device, seed=10)
        for t in (x, w, b):
            t.requires_grad_(requires_grad)
        for args in ((x, w, b, "none", False, True), (x, w, None, "tanh", False, False),
                     (x, w, b, "tanh", False, True)):  # fmt: skip
            torch.library.opcheck(OP, args)
    x, w, b = inputs((5, 16), 24, torch.float32, device, seed=11)
    pre = OP(x, w, b, "none", False, True)[1]
    grad = torch.randn_like(pre)
    for flags in ((True, True, True), (True, False, False), (False, True, True)):
        torch.library.opcheck(BACKWARD, (grad, x, w, pre, "none", False, *flags))


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_forward_and_backward(device):
    torch._dynamo.reset()
    x, w, b = (t.requires_grad_() for t in inputs((4, 6, 40), 24, torch.float32, device, 12))

    def fn(a, weight, bias):
        return (wheelops.fused_linear_gelu(a, weight, bias, "tanh") * 2).square().sum()

    compiled = torch.compile(fn, fullgraph=True)
    out = compiled(x, w, b)
    grads = torch.autograd.grad(out, (x, w, b))
    # Against the same op uncompiled: the same kernels on the same inputs; only the sum of
    # the n squares (float32, any order: n roundings of sum |terms| each way) may differ,
    # and the incoming gradient 8 y (exact: powers of two) reaches the same backward.
    eager = fn(x, w, b)
    expected = torch.autograd.grad(eager, (x, w, b))
    terms = (wheelops.fused_linear_gelu(x, w, b, "tanh") * 2).square().detach()
    sum_error = 2 * terms.numel() * 2.0**-24 * float(terms.abs().sum())
    torch.testing.assert_close(out, eager, atol=sum_error, rtol=0)
    for a, e in zip(grads, expected, strict=True):
        torch.testing.assert_close(a, e, atol=0, rtol=0)
    with torch.no_grad():
        out = torch.compile(wheelops.fused_linear_gelu, fullgraph=True)(x, w, b)
        assert_bound(out, forward_bound(x, w, b, "none", device), "compiled output")


@pytest.mark.gpu
@pytest.mark.parametrize("device_of", ["weight", "bias"])
def test_mixed_devices_are_refused(device_of):
    x, w, b = inputs((2, 3), 4, torch.float32, "cuda", seed=13)
    args = {"input": x, "weight": w, "bias": b}
    args[device_of] = args[device_of].cpu()
    with pytest.raises(ValueError, match=f"'input' and '{device_of}' must be on the same device"):
        wheelops.fused_linear_gelu(**args)


# ------------------------------------------------------------------ wheelops.nn.LinearGELU


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("bias", [True, False])
def test_module_is_a_drop_in_for_linear_and_gelu(bias, approximate):
    torch.manual_seed(0)
    reference = torch.nn.Sequential(
        torch.nn.Linear(12, 20, bias=bias), torch.nn.GELU(approximate=approximate)
    )
    torch.manual_seed(0)
    module = wheelops.nn.LinearGELU(12, 20, bias=bias, approximate=approximate)
    # Same initialisation from the same seed, same parameter names and shapes.
    assert module.state_dict().keys() == reference[0].state_dict().keys()
    for key, value in reference[0].state_dict().items():
        torch.testing.assert_close(module.state_dict()[key], value, atol=0, rtol=0)
    # Loads both ways.
    other = wheelops.nn.LinearGELU(12, 20, bias=bias, approximate=approximate)
    other.load_state_dict(reference[0].state_dict())
    linear = torch.nn.Linear(12, 20, bias=bias)
    linear.load_state_dict(module.state_dict())
    x = torch.randn(3, 5, 12)
    # The same parameters compute the same function: each module's output within the op's
    # derived bound of the float64 formula on its parameters.
    for mod, lin in ((other, reference[0]), (module, linear)):
        bound = forward_bound(x, lin.weight.detach(), _detached(lin.bias), approximate)
        assert_bound(mod(x), bound, "output")
    y = module(x)
    grads = torch.autograd.grad(y.square().sum(), list(module.parameters()))
    weight, bias = module.weight.detach(), _detached(module.bias)
    bounds = backward_bounds(2 * y.detach(), x, weight, bias, approximate)  # grad: 2 y, exact
    for g, name in zip(grads, ("grad_weight", "grad_bias"), strict=False):
        assert_bound(g, bounds[name], name)
    assert f"approximate='{approximate}'" in repr(module)


def _detached(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.detach()


def test_module_rejects_an_unknown_approximation():
    with pytest.raises(ValueError, match="'approximate' must be 'none' or 'tanh'"):
        wheelops.nn.LinearGELU(4, 4, approximate="erf")


@pytest.mark.parametrize("device", DEVICES)
def test_module_dtype_device_and_mlp(device):
    mlp = torch.nn.Sequential(
        wheelops.nn.LinearGELU(16, 64, device=device, dtype=torch.bfloat16),
        torch.nn.Linear(64, 16, device=device, dtype=torch.bfloat16),
    )
    assert mlp[0].weight.dtype == torch.bfloat16 and mlp[0].weight.device.type == device
    out = mlp(torch.randn(8, 16, device=device, dtype=torch.bfloat16))
    assert out.shape == (8, 16) and out.dtype == torch.bfloat16
    out.float().sum().backward()
    assert mlp[0].weight.grad is not None and mlp[0].bias.grad is not None


@pytest.mark.gpu
def test_float32_follows_allow_tf32_like_f_linear():
    # TF32 rounds the inputs to a 10-bit mantissa: its errors are ~100x float32's.
    x, w, b = inputs((64, 4096), 256, torch.float32, "cuda", seed=15)
    errors = {}
    previous = torch.backends.cuda.matmul.allow_tf32
    for allow_tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
        try:
            out = wheelops.fused_linear_gelu(x, w, b)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
        bound = forward_bound(x, w, b, "none", "cuda", tf32=allow_tf32)
        assert_bound(out, bound, f"allow_tf32={allow_tf32}")
        errors[allow_tf32] = float((out.cpu().double() - bound.expected).abs().max())
    assert errors[True] > 20 * errors[False], errors
