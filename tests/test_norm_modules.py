from __future__ import annotations

import pytest
import torch
from _helpers import DEVICES

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
    torch.testing.assert_close(ours(x), reference(x), atol=1e-5, rtol=1e-5)
    ours(x).square().sum().backward()
    reference(x).square().sum().backward()
    for a, b in zip(ours.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_rms_norm_module_loads_torch_state_and_matches(device):
    reference = torch.nn.RMSNorm(48, device=device)
    with torch.no_grad():
        reference.weight.normal_()
    ours = wheelops.nn.RMSNorm(48, device=device)
    ours.load_state_dict(reference.state_dict())
    x = torch.randn(5, 7, 48, device=device)
    torch.testing.assert_close(ours(x), reference(x), atol=1e-5, rtol=1e-5)
    ours(x).square().sum().backward()
    reference(x).square().sum().backward()
    torch.testing.assert_close(ours.weight.grad, reference.weight.grad, atol=1e-4, rtol=1e-4)


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
    torch._dynamo.reset()
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32),
        wheelops.nn.LayerNorm(32),
        torch.nn.GELU(),
        torch.nn.Linear(32, 32),
        wheelops.nn.RMSNorm(32),
    ).to(device)
    x = torch.randn(4, 16, device=device)
    compiled = torch.compile(model, fullgraph=True)
    compiled(x).square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).square().sum().backward()
    for a, b in zip(grads, [p.grad for p in model.parameters()], strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
