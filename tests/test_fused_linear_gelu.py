"""wheelops.fused_linear_gelu and wheelops.nn.LinearGELU (issue #25).

Results are compared with a float64 reference computed from the same (rounded)
inputs, element by element, within a bound derived from how the op computes: one
GEMM of length K accumulated in float32 (float64 for float64), the pre-activation
rounded once to the dtype (as F.linear rounds it; the CPU path and cuBLASLt's GELU
epilogue do not even do that), a GELU evaluated in float32, and one rounding of the
result. The bound grows with the GEMM's own length only, never with the row count.
"""

from __future__ import annotations

import importlib
import math

import pytest
import torch
import torch.nn.functional as F
from _helpers import DEVICES, DTYPES, randn

import wheelops
from wheelops.ops import _autograd

# The module (wheelops.ops.fused_linear_gelu is the function of the same name).
flg_module = importlib.import_module("wheelops.ops.fused_linear_gelu")

APPROXIMATIONS = ["none", "tanh"]
OP = torch.ops.wheelops.fused_linear_gelu.default
BACKWARD = torch.ops.wheelops.fused_linear_gelu_backward.default

# Unit roundoff of a result in each dtype, and of the GEMM's accumulator.
ROUNDOFF = {
    torch.float64: 2.0**-53,
    torch.float32: 2.0**-24,
    torch.float16: 2.0**-11,
    torch.bfloat16: 2.0**-8,
}
GELU_SLOPE = 1.129  # max |gelu'(u)| (both forms: 1.12890 erf, 1.12899 tanh)
GELU_CURVATURE = 0.798  # max |gelu''(u)| = 2 / sqrt(2 pi), at u = 0
EVALUATION_ULPS = 4  # erf/tanh/exp in the accumulator type: a few ulps of |u| + 1
# cuBLASLt's GELU epilogue (CUDA, "tanh", 16-bit dtypes) evaluates tanh its own way: measured
# at most 38.5 float32 ulps of |u| + 1 against float64 F.gelu(tanh) of the same float32
# pre-activation (H100, cuBLAS 13.1; 512 x 1024 values); bounded by 64, still 2**-10 of a
# bf16 ulp and 2**-7 of an fp16 ulp. float32 does not use it (README: fused_linear_gelu).
CUBLASLT_GELU_ULPS = 64


def accumulation_unit(dtype: torch.dtype) -> float:
    return ROUNDOFF[torch.float64] if dtype == torch.float64 else ROUNDOFF[torch.float32]


def gemm_error(length: int, magnitude: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # Higham: |fl(sum of n products) - exact| <= n u / (1 - n u) * sum |a||b|; +1 for the bias add
    unit = accumulation_unit(dtype)
    return (length + 1) * unit / (1 - (length + 1) * unit) * magnitude


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


def forward_reference(x, w, b, approximate, device="cpu", rounded_twice=False):
    """(reference output, pre-activation, its |error| bound, the output's |error| bound),
    all float64 [*, N]; `device` is where the op ran; `rounded_twice`: the GEMM result was
    rounded to the dtype before the bias was added (bias_added_after_rounding)."""
    dtype = x.dtype
    x64, w64 = x.double(), w.double()
    b64 = b.double() if b is not None else torch.zeros(w.shape[0], dtype=torch.float64)
    b64 = b64.to(x64.device)
    pre = F.linear(x64, w64, b64)
    ref = F.gelu(pre, approximate=approximate)
    magnitude = F.linear(x64.abs(), w64.abs(), b64.abs())
    pre_error = gemm_error(x.shape[-1], magnitude, dtype) + ROUNDOFF[dtype] * pre.abs()
    if rounded_twice:  # one more rounding, of x @ w.T before the bias
        pre_error = pre_error + ROUNDOFF[dtype] * (pre - b64).abs()
    unit = accumulation_unit(dtype)
    # |y - ref| <= |gelu'| e_pre + GELU evaluated in fp32 + one rounding of the result
    ulps = EVALUATION_ULPS
    if approximate == "tanh" and device == "cuda" and dtype in (torch.float16, torch.bfloat16):
        ulps = CUBLASLT_GELU_ULPS
    bound = GELU_SLOPE * pre_error + ulps * unit * (1 + pre.abs()) + ROUNDOFF[dtype] * ref.abs()
    return ref, pre, pre_error, bound


def assert_within(actual: torch.Tensor, expected: torch.Tensor, bound: torch.Tensor, what: str):
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    error = (actual.double() - expected).abs()
    excess = error - bound
    assert bool((excess <= 0).all()), (
        f"{what}: {int((excess > 0).sum())} of {error.numel()} elements beyond the derived "
        f"bound; worst error {float(error.max()):.3g} where the bound is "
        f"{float(bound.flatten()[excess.flatten().argmax()]):.3g}"
    )


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
    ref, _, _, bound = forward_reference(x.cpu(), w.cpu(), b.cpu() if b is not None else None,
                                         approximate, device, twice)  # fmt: skip
    assert_within(out.cpu(), ref, bound, "output")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_huge_in_features(dtype, device):
    x, w, b = inputs((3, 2**16 + 3), 5, dtype, device, seed=2)
    out = wheelops.fused_linear_gelu(x, w, b)
    ref, _, _, bound = forward_reference(x.cpu(), w.cpu(), b.cpu(), "none")
    assert_within(out.cpu(), ref, bound, "output")


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
    ref, _, _, bound = forward_reference(x.cpu(), w.cpu(), b.cpu(), "none")
    bias_view = torch.stack([b, b], dim=1)[:, 0]  # stride 2
    for args in ((_non_contiguous(x, how), w, b), (x, _non_contiguous(w, how), b),
                 (x, w, bias_view)):  # fmt: skip
        if bias_added_after_rounding(*args, device):  # misaligned: no bias epilogue
            bound = forward_reference(x.cpu(), w.cpu(), b.cpu(), "none", device, True)[3]
        assert_within(wheelops.fused_linear_gelu(*args).cpu(), ref, bound, f"{how} output")


def backward_reference(grad, x, w, b, approximate):
    """(grad_input, grad_weight, grad_bias) in float64 and their |error| bounds."""
    dtype = x.dtype
    _, pre, pre_error, _ = forward_reference(x, w, b, approximate)
    g64, x64, w64 = grad.double(), x.double(), w.double()
    pre_leaf = pre.clone().requires_grad_()
    (d64,) = torch.autograd.grad(F.gelu(pre_leaf, approximate=approximate), pre_leaf, g64)
    unit = accumulation_unit(dtype)
    # d_pre = grad * gelu'(pre): pre off by e_pre, gelu' evaluated in fp32, rounded to dtype
    d_error = (
        g64.abs() * (GELU_CURVATURE * pre_error + EVALUATION_ULPS * unit * (1 + pre.abs()))
        + ROUNDOFF[dtype] * d64.abs()
    )
    d_mag = d64.abs() + d_error
    n, m = w.shape[0], math.prod(x.shape[:-1])
    rows_d, rows_e, rows_x = (t.reshape(m, t.shape[-1]) for t in (d_mag, d_error, x64))
    gi = (d64 @ w64).reshape(x.shape)
    gi_bound = (d_error @ w64.abs()) + gemm_error(n, d_mag @ w64.abs(), dtype)
    gi_bound = gi_bound + ROUNDOFF[dtype] * gi.abs()
    gw = d64.reshape(m, n).t() @ rows_x
    gw_bound = rows_e.t() @ rows_x.abs() + gemm_error(m, rows_d.t() @ rows_x.abs(), dtype)
    gw_bound = gw_bound + ROUNDOFF[dtype] * gw.abs()
    gb = d64.reshape(m, n).sum(0)
    gb_bound = rows_e.sum(0) + gemm_error(m, rows_d.sum(0), dtype) + ROUNDOFF[dtype] * gb.abs()
    return (gi, gw, gb), (gi_bound, gw_bound, gb_bound)


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
    expected, bounds = backward_reference(grad.cpu(), x.cpu(), w.cpu(), b.cpu(), approximate)
    for name, g, e, bound, leaf in zip(("grad_input", "grad_weight", "grad_bias"), got,
                                       expected, bounds, leaves, strict=True):  # fmt: skip
        assert g.dtype == dtype and g.shape == leaf.shape
        assert_within(g.cpu(), e, bound, name)


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
    torch.testing.assert_close(pre_kept, F.linear(x, w, b), atol=1e-5, rtol=1e-5)
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
    (want,) = torch.autograd.grad(F.gelu(F.linear(x, w, b)).sum(), w)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


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
    eager = (F.gelu(F.linear(x, w, b), approximate="tanh") * 2).square().sum()
    expected = torch.autograd.grad(eager, (x, w, b))
    torch.testing.assert_close(out, eager, atol=1e-3, rtol=1e-5)
    for a, e in zip(grads, expected, strict=True):
        torch.testing.assert_close(a, e, atol=1e-3, rtol=1e-4)
    with torch.no_grad():
        torch.testing.assert_close(
            torch.compile(wheelops.fused_linear_gelu, fullgraph=True)(x, w, b),
            F.gelu(F.linear(x, w, b)),
            atol=1e-5,
            rtol=1e-5,
        )


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
    torch.testing.assert_close(other(x), reference(x), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(torch.nn.functional.gelu(linear(x), approximate=approximate),
                               module(x), atol=1e-6, rtol=1e-5)  # fmt: skip
    grads = torch.autograd.grad(module(x).square().sum(), list(module.parameters()))
    want = torch.autograd.grad(reference(x).square().sum(), list(reference.parameters()))
    for g, w in zip(grads, want, strict=True):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-4)
    assert f"approximate='{approximate}'" in repr(module)


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
    ref, _, _, bound = forward_reference(x.cpu(), w.cpu(), b.cpu(), "none")
    magnitude = F.linear(x.cpu().double().abs(), w.cpu().double().abs(), b.cpu().double().abs())
    errors = {}
    previous = torch.backends.cuda.matmul.allow_tf32
    for allow_tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
        try:
            out = wheelops.fused_linear_gelu(x, w, b)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
        # TF32: each product's inputs rounded to 2**-11, then the float32 bound
        extra = GELU_SLOPE * 2 * 2.0**-11 * magnitude if allow_tf32 else 0
        assert_within(out.cpu(), ref, bound + extra, f"allow_tf32={allow_tf32}")
        errors[allow_tf32] = float((out.cpu().double() - ref).abs().max())
    assert errors[True] > 20 * errors[False], errors
