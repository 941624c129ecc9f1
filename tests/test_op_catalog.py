"""The shared op catalogue (tests/_op_catalog.py) is complete and right."""

from __future__ import annotations

import pytest
import torch
from _helpers import DEVICES
from _op_catalog import CATALOG, NAMES, forward_backward, outputs

import wheelops


def test_catalog_has_every_public_op_once():
    assert sorted(NAMES) == sorted(wheelops.ops.__all__)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CATALOG, ids=NAMES)
def test_case_matches_eager_forward_and_backward(case, device):
    dtype = torch.float64 if case.differentiable else case.dtypes[0]
    args = case.inputs(5, 24, dtype, device, seed=1, requires_grad=True)
    outs, grads = forward_backward(case, args)
    expected = outputs(case.eager(*args))
    for out, ref in zip(outs, expected, strict=True):  # (some references are on the host)
        torch.testing.assert_close(out.cpu(), ref.cpu(), atol=1e-10, rtol=1e-9)
    if case.differentiable:
        ones = [torch.ones_like(o) for o in expected]
        leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        expected_grads = torch.autograd.grad(expected, leaves, ones)
        assert len(grads) == len(leaves) > 0
        torch.testing.assert_close(grads, expected_grads, atol=1e-10, rtol=1e-9)
