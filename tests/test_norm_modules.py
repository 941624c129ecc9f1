from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _helpers import DEVICES
from _norm_helpers import (
    assert_layer_norm_grad_weight_close,
    assert_layer_norm_out_close,
    assert_norm_bias_grad_close,
    assert_rms_norm_grad_weight_close,
    assert_rms_norm_out_close,
    float64_grads,
)
from opspecs.layer_norm import reference as layer_norm_reference
from opspecs.rms_norm import reference as rms_norm_reference

import wheelops


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bias", [True, False])
def test_layer_norm_module_loads_torch_state_and_matches(device, bias):
    torch.manual_seed(0)
    reference = torch.nn.LayerNorm(48, eps=1e-6, bias=bias, device=device)
    with torch.no_grad():
        reference.weight.normal_()
        if bias:
            reference.bias.normal_()
    ours = wheelops.nn.LayerNorm(48, eps=1e-6, bias=bias, device=device)
    assert set(ours.state_dict()) == set(reference.state_dict())
    ours.load_state_dict(reference.state_dict())
    x = torch.randn(5, 7, 48, device=device)
    # torch's module in float64 on the same parameters, within layer_norm's derived bounds.
    weight, b = ours.weight.detach(), ours.bias.detach() if bias else None
    out = ours(x)
    assert_layer_norm_out_close(out, layer_norm_reference(x, weight, b, 1e-6), x, weight, b, 1e-6)
    grad = 2 * out.detach()  # square().sum()'s incoming gradient, exact
    out.backward(grad)
    expected = float64_grads(lambda a, w, c: F.layer_norm(a, (48,), w, c, 1e-6), grad, x, weight, b)
    assert_layer_norm_grad_weight_close(ours.weight.grad, expected[1], x, grad, 1e-6)
    if bias:
        assert_norm_bias_grad_close(ours.bias.grad, expected[2], grad)


@pytest.mark.parametrize("device", DEVICES)
def test_rms_norm_module_loads_torch_state_and_matches(device):
    reference = torch.nn.RMSNorm(48, device=device)
    with torch.no_grad():
        reference.weight.normal_()
    ours = wheelops.nn.RMSNorm(48, device=device)
    ours.load_state_dict(reference.state_dict())
    x = torch.randn(5, 7, 48, device=device)
    # torch's module (eps None: float32's) in float64, within rms_norm's derived bounds.
    eps, weight = torch.finfo(torch.float32).eps, ours.weight.detach()
    out = ours(x)
    assert_rms_norm_out_close(out, rms_norm_reference(x, weight, eps), x, weight, eps)
    grad = 2 * out.detach()  # square().sum()'s incoming gradient, exact
    out.backward(grad)
    expected = float64_grads(lambda a, w: F.rms_norm(a, (48,), w, eps), grad, x, weight)
    assert_rms_norm_grad_weight_close(ours.weight.grad, expected[1], x, grad, eps)


def test_init_and_options_like_torch():
    ln = wheelops.nn.LayerNorm((16,), dtype=torch.float64)
    assert torch.equal(ln.weight, torch.ones(16, dtype=torch.float64))
    assert torch.equal(ln.bias, torch.zeros(16, dtype=torch.float64))
    assert ln.normalized_shape == torch.nn.LayerNorm(16).normalized_shape
    plain = wheelops.nn.LayerNorm(16, elementwise_affine=False)
    assert plain.weight is None and plain.bias is None and not list(plain.parameters())
    no_bias = wheelops.nn.LayerNorm(16, bias=False)
    assert no_bias.bias is None and set(no_bias.state_dict()) == {"weight"}
    x = torch.randn(3, 16)
    torch.testing.assert_close(plain(x), torch.nn.LayerNorm(16, elementwise_affine=False)(x))
    rms = wheelops.nn.RMSNorm(16)
    assert torch.equal(rms.weight, torch.ones(16)) and rms.eps is None
    assert not list(wheelops.nn.RMSNorm(16, elementwise_affine=False).parameters())
    assert "(16,)" in repr(ln) and "(16,)" in repr(rms)


@pytest.mark.parametrize("cls", ["LayerNorm", "RMSNorm"])
@pytest.mark.parametrize("shape", [0, -3, (4, 4), "8", 2.0, True])
def test_bad_normalized_shape(cls, shape):
    with pytest.raises(ValueError, match="'normalized_shape' must be a positive int"):
        getattr(wheelops.nn, cls)(shape)


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_modules_compile_fullgraph(device):
    # Both modules, x's gradient given: nothing but wheelops' ops (and their backward) in
    # the graph, so compiled and eager run the same kernels on the same inputs, bitwise
    # (issue 42); torch's layers between them would leave inductor sums to reorder.
    torch._dynamo.reset()
    model = torch.nn.Sequential(wheelops.nn.LayerNorm(32), wheelops.nn.RMSNorm(32)).to(device)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()
    x = torch.randn(4, 32, device=device, requires_grad=True)
    grad = torch.randn(4, 32, device=device)
    wrt = (x, *model.parameters())
    compiled = torch.compile(model, fullgraph=True)
    out = compiled(x)
    grads = torch.autograd.grad(out, wrt, grad)
    eager = model(x)
    assert torch.equal(out, eager)
    for a, b in zip(grads, torch.autograd.grad(eager, wrt, grad), strict=True):
        assert torch.equal(a, b)
