from __future__ import annotations

import pytest
import torch
from _bias_gelu_bounds import bias_gelu_terms, gelu_term_roundings
from _elementwise_bounds import (
    assert_bound_is_sound_and_tight,
    assert_within_roundings,
    compute_error,
)
from _helpers import DEVICES
from _norm_helpers import (
    allowance,
    assert_within,
    column_sum_allowance,
    compute_unit,
    gemm_rounding,
    rounded_error,
)
from _softmax_bounds import EXP_ULPS

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
    # The drop-in against the reference module's math in float64, within the bounds derived
    # for its two steps: torch's GEMM x W^T (32 float32 roundings of its terms, then the
    # pre-activation's rounding), which gelu's slope (<= 1.13) carries into the output,
    # and bias_gelu's own bound on that pre-activation.
    w, b = reference[0].weight.detach(), reference[0].bias.detach()
    z = x.double() @ w.double().T + b.double()
    pre = fused[0](x).detach()  # what the kernel gets (x + b is its own first rounding)
    u = compute_unit(torch.float32)
    pre_error = rounded_error(pre.double(), gemm_rounding(x, w, u), torch.float32)
    out = fused(x)
    expected = torch.nn.functional.gelu(z, approximate=approximate)
    own = compute_error(EXP_ULPS + 3, bias_gelu_terms(z, approximate), torch.float32)
    checks = {"output": (out, expected, 1.13 * pre_error + own)}
    out.sum().backward()
    # The bias gradient, gelu'(x W^T + b) summed over the rows: each term also moved by
    # pre's error through gelu'' (<= 0.8), then bias_gelu's grad_bias bound.
    terms = torch.autograd.functional.jacobian(
        lambda t: torch.nn.functional.gelu(t, approximate=approximate).sum(), z
    )
    term_errors = gelu_term_roundings(torch.ones_like(z), z, torch.float32) + 0.8 * pre_error
    checks["grad_bias"] = (fused[1].bias.grad, terms.sum(0), None)
    allowed = {"grad_bias": column_sum_allowance(terms.sum(0), terms, term_errors, torch.float32)}
    # The weight gradient, (gelu' terms)^T @ x by torch's GEMM over the 8 rows.
    grad_w = terms.T @ x.double()
    error = term_errors.T @ x.double().abs() + gemm_rounding(terms.T, x.double().T, u)
    checks["grad_weight"] = (fused[0].weight.grad, grad_w, None)
    allowed["grad_weight"] = allowance(grad_w, error, torch.float32)
    for name, (got, want, error) in checks.items():

        def check(a: torch.Tensor, want=want, error=error, name=name) -> None:
            if error is None:
                assert_within(a, want, allowed[name], name)
            else:
                assert_within_roundings(a, want, error, name)

        check(got)
        # Decision 14: the correctly rounded result passes, 0.1% off fails.
        assert_bound_is_sound_and_tight(check, want, torch.float32)


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
