"""torch.compile(fullgraph=True) over every op: no graph break, same results as eager."""

from __future__ import annotations

import pytest
import torch
from _helpers import DEVICES

import wheelops


def _fresh_compile(fn):
    torch._dynamo.reset()
    return torch.compile(fn, fullgraph=True)


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_add_and_relu_scale_compile_forward_and_backward(device):
    def fn(a, b):
        return wheelops.relu_scale(wheelops.add(a, b), 1.7)

    a = torch.randn(8, 33, device=device, requires_grad=True)
    b = torch.randn(8, 33, device=device, requires_grad=True)
    grad = torch.randn(8, 33, device=device)
    compiled = _fresh_compile(fn)
    out = compiled(a, b)
    grads = torch.autograd.grad(out, (a, b), grad)
    eager = fn(a, b)
    # Bitwise: compiled, each op (and its backward) is the same kernel on the same inputs
    # as in eager; no aten reduction after them for inductor to reorder (issue 42).
    torch.testing.assert_close(out, eager, rtol=0, atol=0)
    torch.testing.assert_close(grads, torch.autograd.grad(eager, (a, b), grad), rtol=0, atol=0)


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_bias_gelu_module_compiles_forward_and_backward(device):
    module = wheelops.nn.BiasGELU(32, "tanh", fan_in=16).to(device)
    x = torch.randn(4, 32, device=device, requires_grad=True)
    grad = torch.randn(4, 32, device=device)
    compiled = _fresh_compile(module)
    out = compiled(x)
    grads = torch.autograd.grad(out, (x, module.bias), grad)
    eager = module(x)
    # Bitwise: the module's op and its backward are the same kernels on the same inputs
    # compiled or not, and no aten op follows them for inductor to reorder (issue 42); the
    # ops' own tests hold the results to their derived bounds.
    assert torch.equal(out, eager)
    for mine, theirs in zip(grads, torch.autograd.grad(eager, (x, module.bias), grad), strict=True):
        assert torch.equal(mine, theirs)


@pytest.mark.slow
def test_compiled_bad_input_still_names_the_problem():
    torch._dynamo.reset()
    with pytest.raises(ValueError, match="does not broadcast"):
        torch.compile(wheelops.add)(torch.ones(2, 3), torch.ones(3))
    # fullgraph=True cannot fall back to eager, so dynamo wraps our error; its
    # message still carries ours.
    with pytest.raises(Exception, match="does not broadcast"):
        _fresh_compile(wheelops.add)(torch.ones(2, 3), torch.ones(3))
