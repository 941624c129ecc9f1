"""The op descriptions (specs/opspecs) agree with wheelops: one per public op, every
native schema named by one, and each one's answer eager PyTorch's."""

from __future__ import annotations

import opspecs
import pytest
import torch
from _helpers import DEVICES
from _native_checks import registered_ops
from _op_catalog import CATALOG, NAMES, forward_backward, outputs

import wheelops


def test_one_description_per_public_op():
    assert sorted(opspecs.NAMES) == sorted(wheelops.ops.__all__)


def test_descriptions_name_every_native_op_and_only_those():
    # A description names its native ops (the forward, the backward, or the ops it is
    # built on, as lltm on lltm_gates): each is named after it, and together they are
    # exactly the schemas of torch.ops.wheelops.
    named = set()
    for spec in opspecs.ALL:
        native = {bad.op for bad in spec.native_bad_calls}
        if spec.derivatives is not None:
            native.add(spec.derivatives.backward_op)
        assert all(op.startswith(spec.name) for op in native), (spec.name, native)
        named |= native
    assert named == registered_ops()


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
