"""Derivatives of every op against eager PyTorch and numerical differences: reverse
mode, forward mode (torch.func.jvp, torch.autograd.forward_ad), torch.func's
transforms, second derivatives where an op has them, and a clear error naming
the op and the transform where it has not (issue #14: forward-mode AD gave zero
tangents, double backward zeros, raw backward ops gradients of None, silently).
"""

from __future__ import annotations

import opspecs
import pytest
import torch
import torch.autograd.forward_ad as fwAD
from _benchmark_rule import assert_within_rule, rule_of
from _helpers import DEVICES, randn
from _jvp_bounds import assert_tangents_close
from _op_catalog import DERIVATIVE_SAMPLES, outputs
from opspecs._spec import Derivatives, OpSpec, Sample
from torch.autograd import gradcheck, gradgradcheck

import wheelops
from wheelops.ops import _autograd

SHAPE = (3, 6)


def _detached(inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return tuple(t.detach() for t in inputs)


def _tangents(inputs: tuple[torch.Tensor, ...], seed: int = 100) -> tuple[torch.Tensor, ...]:
    return tuple(randn(t.shape, t.dtype, t.device.type, seed + i) for i, t in enumerate(inputs))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("spec, sample", DERIVATIVE_SAMPLES)
def test_gradcheck_reverse_and_forward_mode(spec: OpSpec, sample: Sample, device: str) -> None:
    inputs = spec.inputs(SHAPE, torch.float64, device, 1, sample=sample, requires_grad=True)
    assert gradcheck(
        sample.call,
        inputs,
        check_forward_ad=True,
        check_backward_ad=True,
        check_batched_grad=False,
        check_undefined_grad=True,
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("spec, sample", DERIVATIVE_SAMPLES)
def test_jvp_matches_eager(spec: OpSpec, sample: Sample, device: str) -> None:
    primals = spec.inputs(SHAPE, torch.float64, device, 2, sample=sample)
    tangents = _tangents(primals)
    name = spec.sample_name(sample)
    _, got = torch.func.jvp(sample.call, primals, tangents)
    _, want = torch.func.jvp(sample.eager, primals, tangents)
    for g in outputs(got):
        assert g.abs().max() > 0  # the zero tangent
    arguments = sample.arguments(primals)
    assert_tangents_close(name, arguments, tangents, outputs(got), outputs(want))
    # torch.autograd.forward_ad, and a tangent on one input only.
    with fwAD.dual_level():
        duals = [fwAD.make_dual(primals[0], tangents[0]), *primals[1:]]
        dual_out = outputs(sample.call(*duals))
        got_one = [fwAD.unpack_dual(o).tangent for o in dual_out]
    _, want_one = torch.func.jvp(
        lambda first: sample.eager(first, *primals[1:]), (primals[0],), (tangents[0],)
    )
    assert all(g is not None for g in got_one)
    one = (tangents[0], *(torch.zeros_like(t) for t in tangents[1:]))
    assert_tangents_close(name, arguments, one, tuple(got_one), outputs(want_one))


@pytest.mark.parametrize("spec, sample", DERIVATIVE_SAMPLES)
def test_torch_func_transforms_match_eager(spec: OpSpec, sample: Sample) -> None:
    primals = spec.inputs(SHAPE, torch.float64, "cpu", 3, sample=sample)

    def first_output(fn):
        return lambda *args: outputs(fn(*args))[0]

    # Jacobians are derivatives of the op's results: the benchmark's rule for them.
    rule = rule_of(spec, SHAPE)
    for transform in (torch.func.jacrev, torch.func.jacfwd):
        got = transform(first_output(sample.call))(*primals)
        want = transform(first_output(sample.eager))(*primals)
        assert_within_rule([got], [want], rule, transform.__name__)
    got = torch.func.vmap(first_output(sample.call))(*(t.unsqueeze(0) for t in primals))
    assert_within_rule([got[0]], [first_output(sample.eager)(*primals)], rule, "vmap")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("spec, sample", DERIVATIVE_SAMPLES)
def test_second_derivatives_or_a_clear_error(spec: OpSpec, sample: Sample, device: str) -> None:
    inputs = spec.inputs(SHAPE, torch.float64, device, 4, sample=sample, requires_grad=True)
    if spec.derivatives.second:
        assert gradgradcheck(sample.call, inputs, check_fwd_over_rev=True)
        return
    grads = torch.autograd.grad(
        outputs(sample.call(*inputs))[0].square().sum(), inputs, create_graph=True
    )
    prefix = f"wheelops.{spec.derivatives.backward_op} does not support"
    with pytest.raises(NotImplementedError, match=f"^{prefix} backward: it is the gradient"):
        torch.autograd.grad(sum(g.square().sum() for g in grads), inputs)
    primals = _detached(inputs)

    def loss(*args):
        return outputs(sample.call(*args))[0].square().sum()

    with pytest.raises(NotImplementedError, match=f"^{prefix} forward-mode AD: it is the"):
        torch.func.jacfwd(torch.func.jacrev(loss))(*primals)


def test_softmax_double_backward_is_eagers():
    # The reproduction: this gave zeros, with only a UserWarning.
    x = randn((4, 5), torch.float64, "cpu", seed=5)
    g = randn((4, 5), torch.float64, "cpu", seed=6)
    results = []
    for softmax in (wheelops.softmax, torch.softmax):
        leaf = x.clone().requires_grad_()
        (gx,) = torch.autograd.grad(softmax(leaf, 0), leaf, g, create_graph=True)
        (ggx,) = torch.autograd.grad(gx.pow(2).sum(), leaf)
        results.append(ggx)
    assert results[1].abs().max() > 0.01
    # A second derivative of softmax's results: the benchmark's rule for them.
    assert_within_rule([results[0]], [results[1]], rule_of(opspecs.BY_NAME["softmax"], (4, 5)))


def test_hessians_match_eager():
    x = randn((6,), torch.float64, "cpu", seed=7)
    for op, fn, eager in (
        ("softmax", wheelops.softmax, lambda a: torch.softmax(a, -1)),
        ("relu_scale", lambda a: wheelops.relu_scale(a, 2.0), lambda a: torch.relu(a) * 2.0),
    ):
        rule = rule_of(opspecs.BY_NAME[op], (6,))  # the benchmark's rule, as above
        want = torch.autograd.functional.hessian(lambda a, e=eager: e(a).pow(3).sum(), x)
        for hessian in (
            lambda f: torch.autograd.functional.hessian(f, x),
            lambda f: torch.func.hessian(f)(x),
            lambda f: torch.func.jacrev(torch.func.jacrev(f))(x),
        ):
            got = hessian(lambda a, f=fn: f(a).pow(3).sum())
            assert_within_rule([got], [want], rule, op)


def _backward_op_calls(device: str) -> dict[str, tuple[Derivatives, tuple]]:
    g = randn((3, 4), torch.float64, device, seed=8)
    x = randn((3, 4), torch.float64, device, seed=9)
    return {
        d.backward_op: (d, d.backward_args(g, x))
        for d in (spec.derivatives for spec in opspecs.ALL)
        if d is not None and d.backward_args is not None
    }


def _leaf(a: object) -> object:
    """A copy of a float tensor that needs a gradient; anything else as it is."""
    if isinstance(a, torch.Tensor) and a.is_floating_point():
        return a.clone().requires_grad_()
    return a


@pytest.mark.parametrize("device", DEVICES)
def test_raw_backward_ops_under_autograd(device: str) -> None:
    # Each backward op differentiates as its formula does (those of ops with second
    # derivatives) or raises when a gradient is asked of it; none hands back None or
    # zeros in silence.
    for name, (derivatives, args) in _backward_op_calls(device).items():
        # Float tensors need gradients (an integer one, relu_scale's mask, cannot).
        leaves = [_leaf(a) for a in args]
        result = getattr(torch.ops.wheelops, name).default(*leaves)
        first = outputs(result)[0]
        tensors = [a for a in leaves if isinstance(a, torch.Tensor) and a.requires_grad]
        if derivatives.second:
            assert derivatives.backward_eager is not None
            got = torch.autograd.grad(first.square().sum(), tensors[:2], allow_unused=True)
            copies = [_leaf(a.detach()) if isinstance(a, torch.Tensor) else a for a in leaves]
            wrt = [c for c in copies if isinstance(c, torch.Tensor) and c.requires_grad][:2]
            want_out = derivatives.backward_eager(*copies)
            want = torch.autograd.grad(want_out.square().sum(), wrt, allow_unused=True)
            assert got[0] is not None
            rule = rule_of(opspecs.BY_NAME[name.removesuffix("_backward")], (3, 4))
            for g_, w_ in zip(got, want, strict=True):
                assert (g_ is None) == (w_ is None)
                if g_ is not None:
                    assert_within_rule([g_], [w_], rule, name)
        else:
            with pytest.raises(NotImplementedError, match=f"^wheelops.{name} does not support"):
                first.sum().backward()


def _raw_forward_calls(device: str) -> list[tuple[str, str, tuple]]:
    """(public function, raw op, float64 arguments): the first native op each
    differentiable op's default call reaches, with the arguments it passed (the same op
    and call as the fast layer's Function makes)."""
    calls = []
    for spec in opspecs.ALL:
        if spec.differentiable:
            # Inputs that need gradients: the op that keeps what derivatives need.
            args = spec.inputs(SHAPE, torch.float64, device, 5, requires_grad=True)
            op, passed = _first_native_call(lambda s=spec, a=args: s.call(*a))
            detached = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in passed)
            calls.append((spec.name, op, detached))
    return calls


def _first_native_call(fn) -> tuple[str, tuple]:
    """The first wheelops op ``fn()`` reaches through the dispatcher, and its arguments."""
    from torch.utils._python_dispatch import TorchDispatchMode

    called: list[tuple[str, tuple]] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.namespace == "wheelops" and not called:
                called.append((func._opname, args))
            return func(*args, **(kwargs or {}))

    with Record():
        fn()
    return called[0]


def _raw_tangent(op: str, args: tuple, api: str) -> torch.Tensor | None:
    """The raw op's first output's tangent by `api` (torch.func.jvp or forward_ad), for
    tangents on its tensors, none of which requires grad (issue 42's case)."""
    overload = getattr(torch.ops.wheelops, op).default
    at = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    primals = tuple(args[i] for i in at)
    tangents = _tangents(primals, seed=200)

    def call(*tensors: torch.Tensor) -> torch.Tensor:
        full = list(args)
        for i, t in zip(at, tensors, strict=True):
            full[i] = t
        return outputs(overload(*full))[0]

    if api == "jvp":
        return torch.func.jvp(call, primals, tangents)[1]
    with fwAD.dual_level():
        return fwAD.unpack_dual(call(*map(fwAD.make_dual, primals, tangents))).tangent


@pytest.mark.parametrize("api", ["jvp", "forward_ad"])
@pytest.mark.parametrize("device", DEVICES)
def test_raw_ops_under_forward_mode_serve_or_refuse(device: str, api: str) -> None:
    # A raw torch.ops.wheelops call given a tangent: on the public autograd layer (the
    # derivative suite's second run, test_autograd_layers) it refuses, naming the function
    # that serves forward mode, where it gave a zero tangent in silence (issue 42 item 6);
    # on the fast layer it serves the tangent, that of float64 numerical differences.
    for public, op, args in _raw_forward_calls(device):
        if _autograd.PUBLIC:
            message = (
                rf"^torch\.ops\.wheelops\.{op} was given a forward-mode AD tangent .*: call "
                rf"wheelops\.{public}, which supports forward mode$"
            )
            with pytest.raises(RuntimeError, match=message):
                _raw_tangent(op, args, api)
            continue
        tangent = _raw_tangent(op, args, api)
        assert tangent is not None and tangent.abs().max() > 0, op
        overload = getattr(torch.ops.wheelops, op).default
        leaves = tuple(_leaf(a) for a in args)
        first = lambda *a, o=overload: outputs(o(*a))[0]  # noqa: E731
        assert gradcheck(first, leaves, check_forward_ad=True, check_backward_ad=False), op
