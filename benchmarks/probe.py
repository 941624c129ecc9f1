"""Benchmark cases, each one pass of one implementation, between cudaProfilerStart and
Stop: the kernels Nsight Compute should read, and nothing else.

    PYTHONPATH=specs ncu --profile-from-start off --set full -o gelu python3 \\
        -m benchmarks.probe bias_gelu/forward/bfloat16/4096x16384/compile \\
        bias_gelu/forward/bfloat16/4096x16384/wheelops

A case is op/pass/dtype/shape/implementation (wheelops, eager or compile). The inputs,
the eager formula and its torch.compile are the benchmark's own (the op descriptions in
specs/opspecs); each case's first call (compile's compiles) runs before its profiled
region. Run from the checkout's root, like run.py (python -m benchmarks.probe).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from opspecs._spec import OpSpec, Shape

from .cases import OPS_BY_NAME, grad_inputs, inputs
from .measure import PASSES
from .verify import as_tuple

IMPLEMENTATIONS = ("wheelops", "eager", "compile")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="+", type=parse_case, metavar="op/pass/dtype/shape/impl")
    parser.add_argument("--calls", type=int, default=1, help="profiled calls (default 1)")
    return parser.parse_args(argv)


def parse_case(text: str) -> tuple[OpSpec, Shape, torch.dtype, str, str]:
    """'softmax/backward/bfloat16/4096x4096/compile' -> (spec, shape, dtype, pass,
    implementation)."""
    parts = text.split("/")
    if len(parts) != 5:
        raise argparse.ArgumentTypeError(f"{text!r}: expected op/pass/dtype/shape/impl")
    op, pass_, dtype, shape, impl = parts
    if op not in OPS_BY_NAME or pass_ not in PASSES or impl not in IMPLEMENTATIONS:
        raise argparse.ArgumentTypeError(
            f"{text!r}: op one of {', '.join(sorted(OPS_BY_NAME))}; pass one of "
            f"{', '.join(PASSES)}; implementation one of {', '.join(IMPLEMENTATIONS)}"
        )
    if not isinstance(getattr(torch, dtype, None), torch.dtype):
        raise argparse.ArgumentTypeError(f"{text!r}: {dtype!r} is not a torch dtype")
    try:
        dims = tuple(int(n) for n in shape.split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: shape like 4096x1024") from None
    return OPS_BY_NAME[op], dims, getattr(torch, dtype), pass_, impl


def step(
    spec: OpSpec, shape: Shape, dtype: torch.dtype, pass_: str, impl: str
) -> Callable[[], object]:
    """The call to profile; what it needs (a forward for the backward) already run."""
    fn = {"wheelops": spec.call, "eager": spec.eager}.get(impl)
    if fn is None:
        fn = torch.compile(spec.eager, dynamic=False, fullgraph=True)
    args = inputs(spec, shape, dtype, torch.device("cuda"))
    if pass_ == "forward":
        return lambda: fn(*args)
    wanted = grad_inputs(args)
    leaves = tuple(t.detach().requires_grad_(i in wanted) for i, t in enumerate(args))
    wrt = tuple(leaves[i] for i in wanted)
    outputs = as_tuple(fn(*leaves))
    grads = tuple(torch.randn_like(out) for out in outputs)
    return lambda: torch.autograd.grad(outputs, wrt, grads, retain_graph=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cudart = torch.cuda.cudart()
    for case in args.cases:
        run = step(*case)
        run()  # compiles, for compile; warms the allocator and caches for all
        torch.cuda.synchronize()
        cudart.cudaProfilerStart()
        for _ in range(args.calls):
            run()
        torch.cuda.synchronize()
        cudart.cudaProfilerStop()
        del run
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
