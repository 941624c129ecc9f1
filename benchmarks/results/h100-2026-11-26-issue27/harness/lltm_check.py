"""lltm backward bf16 at the benchmark's case: ours and eager against float64, worst elements."""

import torch
from cases import OPS_BY_NAME, Case, grad_inputs
from measure import _seeded_like
from verify import as_tuple, mismatch

spec = OPS_BY_NAME["lltm"]
shape = spec.benchmark.shapes["full"][0]
case = Case(spec, shape, torch.bfloat16)
inputs = case.inputs(torch.device("cuda"))
wanted = grad_inputs(inputs)


def grads_of(fn, dtype):
    leaves = tuple(t.detach().to(dtype).requires_grad_(i in wanted) for i, t in enumerate(inputs))
    outs = as_tuple(fn(*leaves))
    gs = tuple(_seeded_like(o.to(torch.bfloat16), salt).to(dtype) for salt, o in enumerate(outs))
    return torch.autograd.grad(outs, tuple(leaves[i] for i in wanted), gs)


for run in range(2):
    ours = grads_of(spec.call, torch.bfloat16)
    eager = grads_of(spec.eager, torch.bfloat16)
    ref = grads_of(spec.eager, torch.float64)
    print("run", run, "mismatch:", mismatch(ours, eager, case.plan.tolerance))
    for k in range(len(ours)):
        eo = (ours[k].double() - ref[k]).abs()
        ee = (eager[k].double() - ref[k]).abs()
        i = eo.argmax()
        mine, theirs = eo.max().item(), ee.flatten()[i].item()
        where, between = ref[k].flatten()[i].item(), (ours[k] - eager[k]).abs().max().item()
        print(
            f"  result {k}: ours max err {mine:.3g} (eager's there {theirs:.3g}, ref {where:.4g}); "
            f"eager max err {ee.max().item():.3g}; ours-eager max {between:.3g}"
        )
