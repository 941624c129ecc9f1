"""The op descriptions (specs/opspecs) agree with wheelops: one per public op, every
native schema named by one, each one's answer eager PyTorch's, and each one's float64
reference the one its tests compare with."""

from __future__ import annotations

import ast
from pathlib import Path

import opspecs
import pytest
import torch
from _benchmark_rule import assert_within_rule, rules
from _helpers import DEVICES, randn
from _native_checks import registered_ops
from _norm_helpers import wheelops_ops_called
from _op_catalog import forward_backward, outputs

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
@pytest.mark.parametrize("spec", opspecs.ALL, ids=opspecs.NAMES)
def test_default_call_matches_eager_forward_and_backward(spec, device):
    # Within the benchmark's derived bound (benchmarks/verify.py: the op's rule from its
    # description), float64 against eager's float64 (both round: the bound doubles).
    dtype = torch.float64 if spec.differentiable else spec.dtypes[0]
    args = spec.inputs((5, 24), dtype, device, seed=1, requires_grad=True)
    expected = outputs(spec.answer(*args))
    # Random incoming gradients: with ones, softmax's gradient is 0, all cancellation.
    incoming = [randn(e.shape, e.dtype, device, 10 + i) for i, e in enumerate(expected)]
    outs, grads = forward_backward(spec, args, incoming)
    # (some references are on the host: compared there)
    assert_within_rule(outs, expected, rules(spec, (5, 24), args, device))
    if spec.differentiable:
        leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        expected_grads = torch.autograd.grad(expected, leaves, incoming)
        assert len(grads) == len(leaves) > 0
        assert_within_rule(grads, expected_grads, rules(spec, (5, 24), args, device, incoming))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("spec", opspecs.ALL, ids=opspecs.NAMES)
def test_reference_is_met_by_the_default_call(spec, device):
    # In float64 where the op takes it, within float64's tolerance; exactly where the op
    # promises an exact result (rgb_to_gray's integers, normalize_volume's correctly
    # rounded quotients). The reference computes on its own: no wheelops op in it.
    dtype = torch.float64 if torch.float64 in spec.dtypes else spec.dtypes[0]
    args = spec.inputs((5, 33), dtype, device, seed=2)
    assert not wheelops_ops_called(lambda: spec.reference(*args))
    expected = outputs(spec.reference(*args))
    got = outputs(spec.call(*args))
    assert len(got) == len(expected)
    for out, ref in zip(got, expected, strict=True):
        assert ref.dtype == out.dtype and ref.shape == out.shape
        if out.dtype == torch.float64:
            assert_within_rule([out], [ref], rules(spec, (5, 33), args, device))
        else:
            assert torch.equal(out.cpu(), ref.cpu())


def test_every_reference_formula_is_a_descriptions():
    """Each op's tests compare with its description's reference (specs/opspecs/<op>.py
    defines ``reference``): a test module imports it, and none defines a formula of its
    own under a reference's name."""
    own, imported = [], set()
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and (
                node.name.startswith("reference")
                or node.name.removesuffix("_reference") in opspecs.NAMES
            ):
                own.append(f"{path.name}: {node.name}")
            names = [alias.name for alias in getattr(node, "names", ())]
            if isinstance(node, ast.ImportFrom) and "reference" in names:
                imported.add((node.module or "").removeprefix("opspecs."))
    assert own == []
    assert imported == set(opspecs.NAMES)
