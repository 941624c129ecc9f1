from __future__ import annotations

import pytest
import torch
from _helpers import DEVICES

import wheelops


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_drop_in_after_linear_without_bias(device, approximate):
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(approximate)).to(device)
    fused = torch.nn.Sequential(
        torch.nn.Linear(32, 64, bias=False), wheelops.nn.BiasGELU(64, approximate)
    ).to(device)
    with torch.no_grad():
        fused[0].weight.copy_(reference[0].weight)
        fused[1].bias.copy_(reference[0].bias)
    x = torch.randn(8, 32, device=device)
    torch.testing.assert_close(fused(x), reference(x), atol=1e-5, rtol=1e-5)
    fused(x).sum().backward()
    reference(x).sum().backward()
    torch.testing.assert_close(fused[1].bias.grad, reference[0].bias.grad, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(fused[0].weight.grad, reference[0].weight.grad, atol=1e-4, rtol=1e-5)


def test_parameters_and_init():
    module = wheelops.nn.BiasGELU(16)
    assert [name for name, _ in module.named_parameters()] == ["bias"]
    assert torch.equal(module.bias, torch.zeros(16))
    like_linear = wheelops.nn.BiasGELU(16, fan_in=4, dtype=torch.float64)
    assert like_linear.bias.dtype == torch.float64
    assert like_linear.bias.abs().max() <= 0.5 and like_linear.bias.abs().max() > 0
    assert "features=16" in repr(module)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"features": 0}, "positive int"), ({"features": 4, "approximate": "fast"}, "approximate")],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        wheelops.nn.BiasGELU(**kwargs)
