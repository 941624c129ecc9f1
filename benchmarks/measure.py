"""One op at one shape and dtype, both passes: check wheelops against eager, then time all three.

Forward: each implementation called on inputs that need no gradient. Backward:
each implementation's forward runs once, outside the timing; what is timed is
``torch.autograd.grad(out, inputs, grad, retain_graph=True)`` alone, with the
same incoming gradient for all three. wheelops is timed only once its result
(and, for the backward, its gradients) matched eager's; a wrong answer is
reported, not benchmarked. torch.compile's first call (the compilation) is
timed apart and never counted in its times. The peer (Liger-Kernel, peers.py), where
the op has one, is checked the same way and timed only when right; a wrong or failing
peer is reported under ``liger_problem``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from opspecs._spec import OpSpec, Output, Shape

from .cases import SEED, dtype_name, grad_inputs, inputs, plan
from .peers import Peer
from .timing import Timer
from .verify import Rule, as_tuple, float64_inputs, mismatch

Step = Callable[[], Output]  # what a timer times; the check receives it with its result

PASSES = ("forward", "backward")


@dataclass(frozen=True)
class Implementations:
    wheelops: Callable[..., Output]
    eager: Callable[..., Output]
    compiled: Callable[..., Output] | None  # None with --no-compile
    liger: Peer | None = None  # None where Liger is absent or lacks the op


def measure_case(
    spec: OpSpec,
    shape: Shape,
    dtype: torch.dtype,
    impls: Implementations,
    timer: Timer,
    device: torch.device,
) -> list[dict[str, Any]]:
    args = inputs(spec, shape, dtype, device)
    rows = [_forward(spec, shape, dtype, impls, timer, args)]
    if plan(spec).has_backward:
        rows.append(_backward(spec, shape, dtype, impls, timer, args))
    return rows


def measure_forward(
    spec: OpSpec,
    shape: Shape,
    dtype: torch.dtype,
    impls: Implementations,
    timer: Timer,
    device: torch.device,
) -> dict[str, Any]:
    """The forward pass alone (the size sweep)."""
    return _forward(spec, shape, dtype, impls, timer, inputs(spec, shape, dtype, device))


def new_row(
    spec: OpSpec,
    shape: Shape,
    dtype: torch.dtype,
    pass_: str,
    args: Sequence[torch.Tensor] = (),
) -> dict[str, Any]:
    bench = plan(spec)
    return {
        "op": spec.name,
        "pass": pass_,
        "dtype": dtype_name(dtype),
        "shape": list(shape),
        "label": bench.label(shape),
        "input_shapes": [list(t.shape) for t in args],
        "bytes": bench.bytes(shape, dtype, backward=pass_ == "backward"),
        "eager_unfused": bench.eager_unfused[PASSES.index(pass_)],
        "bandwidth_target": bench.bandwidth_target,
        "note": bench.note,
        "status": "ok",
        "problem": None,
        "wheelops": None,
        "eager": None,
        "compile": None,
        "compile_problem": None,
        "liger": None,
        "liger_problem": None,
    }


def _describe(err: Exception) -> str:
    return f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"


def _forward(
    spec: OpSpec,
    shape: Shape,
    dtype: torch.dtype,
    impls: Implementations,
    timer: Timer,
    inputs: tuple[torch.Tensor, ...],
) -> dict[str, Any]:
    row = new_row(spec, shape, dtype, "forward", inputs)
    rule = rule_of(spec, shape)
    eager = impls.eager(*inputs)
    reference = impls.eager(*float64_inputs(inputs))
    _check(row, lambda: mismatch(impls.wheelops(*inputs), eager, reference, rule))
    row["eager"] = timer(lambda: impls.eager(*inputs)).to_dict()
    if impls.compiled is not None:
        compiled = impls.compiled
        _time_compiled(
            row,
            timer,
            lambda: lambda: compiled(*inputs),
            lambda _, out: mismatch(out, eager, reference, rule),
        )
    if impls.liger is not None:
        peer = impls.liger
        _time_peer(
            row,
            timer,
            peer,
            lambda: lambda: peer.call(*inputs),
            lambda _, out: mismatch(out, eager, reference, peer_rule(rule, peer)),
        )
    if row["status"] == "ok":
        row["wheelops"] = timer(lambda: impls.wheelops(*inputs)).to_dict()
    return row


def rule_of(spec: OpSpec, shape: Shape) -> Rule:
    """What the op's results carry beyond float32 arithmetic and one rounding (verify)."""
    bench = plan(spec)
    return Rule(bench.sum_length(shape), bench.dtype_roundings, bench.relative_roundings)


def peer_rule(rule: Rule, peer: Peer) -> Rule:
    """The op's rule, with the roundings the peer makes beyond wheelops' (peers.py)."""
    return dataclasses.replace(
        rule, relative_roundings=rule.relative_roundings + peer.relative_roundings
    )


def _backward(
    spec: OpSpec,
    shape: Shape,
    dtype: torch.dtype,
    impls: Implementations,
    timer: Timer,
    inputs: tuple[torch.Tensor, ...],
) -> dict[str, Any]:
    row = new_row(spec, shape, dtype, "backward", inputs)
    rule = rule_of(spec, shape)
    wanted = grad_inputs(inputs)
    leaves = tuple(t.detach().requires_grad_(i in wanted) for i, t in enumerate(inputs))
    wrt = tuple(leaves[i] for i in wanted)
    eager_outputs = as_tuple(impls.eager(*leaves))
    grads = tuple(_seeded_like(out, salt) for salt, out in enumerate(eager_outputs))
    eager = torch.autograd.grad(eager_outputs, wrt, grads)
    del eager_outputs
    # The float64 reference: the same inputs and incoming gradients, converted exactly.
    leaves64 = tuple(
        t.detach().double().requires_grad_() if i in wanted else t
        for i, t in enumerate(float64_inputs(leaves))
    )
    from_output = plan(spec).backward_from_rounded_output
    if from_output:  # the op's backward sees its own rounded output: see reference_for
        reference: tuple[torch.Tensor, ...] = ()
    else:
        outputs64 = as_tuple(impls.eager(*leaves64))
        reference = torch.autograd.grad(
            outputs64, tuple(leaves64[i] for i in wanted), tuple(g.double() for g in grads)
        )
        del outputs64
    del leaves64

    def reference_for(outputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        """The float64 reference for a backward that ran after ``outputs``' forward. A
        backward that takes the op's rounded output (softmax's y) is checked against its
        formula on the y that implementation's own forward gave: the correctly rounded y
        differs from a float32-computed one by an ulp where the value lies near a rounding
        boundary, and that ulp moves grad_x by 2u |grad_x| there (issue 42: 2.1x the bound)."""
        if not from_output:
            return reference
        derivatives = spec.derivatives
        assert derivatives is not None and derivatives.backward_eager is not None
        y = outputs[0].detach().double()
        return (derivatives.backward_eager(grads[0].double(), y, -1),)

    class Graph:
        """fn's forward run once; calling it runs its backward alone (the step to time)."""

        def __init__(self, fn: Callable[..., Output]) -> None:
            self.outputs = as_tuple(fn(*leaves))

        def __call__(self) -> tuple[torch.Tensor, ...]:
            return torch.autograd.grad(self.outputs, wrt, grads, retain_graph=True)

        def mismatch(self, out: Output, rules: tuple[Rule, ...]) -> str | None:
            return mismatch(out, eager, reference_for(self.outputs), rules)

    # One rule a result; where the op says how large each element's float32 terms are
    # (a result that cancels), that result's rule carries them.
    rules = (rule,) * len(wrt)
    terms = plan(spec).backward_terms
    if terms is not None:
        sizes = terms(float64_inputs(inputs), tuple(g.double() for g in grads))
        rules = tuple(dataclasses.replace(rule, terms=t) for t in sizes)
    peer_rules = rules if impls.liger is None else tuple(peer_rule(r, impls.liger) for r in rules)

    def checked(graph: Graph) -> str | None:
        return graph.mismatch(graph(), rules)

    _check(row, lambda: checked(Graph(impls.wheelops)))
    row["eager"] = timer(Graph(impls.eager)).to_dict()
    if impls.compiled is not None:
        compiled = impls.compiled
        _time_compiled(
            row, timer, lambda: Graph(compiled), lambda step, out: step.mismatch(out, rules)
        )
    if impls.liger is not None:
        peer = impls.liger
        _time_peer(
            row,
            timer,
            peer,
            lambda: Graph(peer.call),
            lambda step, out: step.mismatch(out, peer_rules),
        )
    if row["status"] == "ok":
        row["wheelops"] = timer(Graph(impls.wheelops)).to_dict()
    return row


def _check(row: dict[str, Any], compare: Callable[[], str | None]) -> None:
    """Run wheelops once and compare with eager; record a wrong answer or an error."""
    try:
        problem = compare()
    except Exception as err:  # reported in the results; the run goes on
        row.update(status="error", problem=_describe(err))
        return
    if problem is not None:
        row.update(status="wrong", problem=problem)


def _time_compiled(
    row: dict[str, Any],
    timer: Timer,
    make_step: Callable[[], Step],
    compare: Callable[[Step, Output], str | None],
) -> None:
    """Compile (timed apart, with the first call), check against eager, time the step.

    ``make_step`` returns the step to time; for the backward it runs the compiled
    forward, and the step's first call compiles the backward.
    """
    start = time.perf_counter()
    try:
        step = make_step()
        out = step()
        timer.synchronize()
    except Exception as err:  # a compile failure is reported, not fatal
        row["compile_problem"] = _describe(err)
        return
    compile_s = time.perf_counter() - start
    problem = compare(step, out)
    del out
    row["compile"] = {**timer(step).to_dict(), "compile_s": compile_s, "mismatch": problem}


def _time_peer(
    row: dict[str, Any],
    timer: Timer,
    peer: Peer,
    make_step: Callable[[], Step],
    compare: Callable[[Step, Output], str | None],
) -> None:
    """Run the peer's step once and check it; time it only when right."""
    try:
        step = make_step()
        problem = compare(step, step())
    except Exception as err:  # reported in the results; the run goes on
        row["liger_problem"] = f"error: {_describe(err)}"
        return
    if problem is not None:
        row["liger_problem"] = peer.wrong(problem)
        return
    row["liger"] = timer(step).to_dict()


def _seeded_like(tensor: torch.Tensor, salt: int) -> torch.Tensor:
    generator = torch.Generator(device=tensor.device).manual_seed(SEED + 100 + salt)
    return torch.randn(tensor.shape, generator=generator, device=tensor.device, dtype=tensor.dtype)
