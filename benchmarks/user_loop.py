"""The user's clock: N back-to-back calls timed on the wall clock, as a training or
inference loop runs them — no GPU spin queuing the work first, no L2 flush, host time
included (Python, the dispatcher, autograd, launches). run.py's tables time the GPU clock;
this one says what a user's loop sees. Both are reported; "faster" means faster on both.

    PYTHONPATH=specs python -m benchmarks.user_loop [--out DIR] [--calls N] [--rounds R]
                                                    [--profile full|quick|tiny]

Rows, each forward (parameters requiring grad, as a module's do: autograd records the
call) and forward+backward (torch.autograd.grad of the output):

- the seed's benchmark: ``nn.Linear(768, 3072)`` + ``nn.GELU()`` against
  ``wheelops.fused_linear_gelu`` at B=32 in float32;
- fused_linear_gelu at the linear_gelu section's shapes, 16-bit and float32, both GELUs;
- every other benchmarked op at its first "quick" shape (its model shape), in bfloat16
  where it takes it.

Each cell is microseconds per call: the best of ``--rounds`` rounds of ``--calls`` calls
after a warm-up, synchronized once per round, the implementations' rounds taken in turn
(a host whose speed drifts weighs on each alike). Columns: eager (the PyTorch a user writes),
compile (torch.compile of it) and wheelops, and wheelops' speed-up over each; where
Liger-Kernel is importable on CUDA (peers.py), liger too, for the ops it has, once its
forward matched the float64 reference as run.py checks it (otherwise its cell says
WRONG or ERROR and the JSON's ``problems`` why).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from opspecs._spec import OpSpec, Shape

import wheelops

from . import environment
from .cases import OPS, SEED, dtype_name
from .measure import peer_rule, rule_of
from .overhead import interleaved_us
from .peers import Liger, Peer, load_liger
from .verify import float64_inputs, mismatch

IMPLS = ("eager", "compile", "wheelops")
PEER = "liger"
PASSES = ("forward", "forward+backward")
SEED_ROW = (32, 768, 3072)  # the seeds' benchmark: B=32, Linear(768, 3072) + GELU
LINEAR_GELU_SHAPES = {
    "full": ((32, 768, 3072), (8192, 768, 3072), (8192, 1024, 4096)),
    "quick": ((32, 768, 3072), (8192, 768, 3072)),
    "tiny": ((5, 16, 24),),  # the CPU smoke run: the harness, not speed
}
LINEAR_GELU_DTYPES = (torch.bfloat16, torch.float32)


@dataclass(frozen=True)
class Row:
    op: str
    shape: str
    dtype: str
    pass_: str
    us_per_call: dict[str, float]  # impl -> µs
    problems: dict[str, str] = field(default_factory=dict)  # impl -> why it was not timed

    def speedup(self, over: str) -> float | None:
        mine, theirs = self.us_per_call.get("wheelops"), self.us_per_call.get(over)
        return theirs / mine if mine and theirs else None


def loops(
    forward: Callable[..., object], args: Sequence[object], wrt: Sequence[torch.Tensor]
) -> dict[str, Callable[[], object]]:
    """The forward, and the forward+backward (gradients of `wrt`), of one implementation."""

    def first_tensor() -> torch.Tensor:
        out = forward(*args)
        return out if isinstance(out, torch.Tensor) else next(iter(out))  # type: ignore[call-overload]

    grad = first_tensor().detach().clone().normal_()

    def step() -> object:
        return torch.autograd.grad(first_tensor(), wrt, grad, allow_unused=True)

    return {"forward": lambda: forward(*args), "forward+backward": step}


def compiled(fn: Callable[..., object]) -> Callable[..., object]:
    """torch.compile of fn for one row alone. Dynamo keeps its graphs per code object, not per
    torch.compile call: every fused_linear_gelu row's `eager` shares one code object, so the
    rows' graphs piled up in one cache until its recompile limit, fatal under fullgraph=True
    (#42). A row's compiled function is timed within its row only, so its cache starts
    empty (as run.py empties it per op)."""
    torch.compiler.reset()
    return torch.compile(fn, fullgraph=True, dynamic=False)


def time_impls(
    name: str,
    shape: str,
    dtype: torch.dtype,
    impls: dict[str, Callable[..., object]],
    args: Sequence[object],
    wrt: Sequence[torch.Tensor],
    calls: int,
    rounds: int,
    device: torch.device,
) -> list[Row]:
    timed = {impl: loops(fn, args, wrt) for impl, fn in impls.items()}
    return [
        Row(
            name,
            shape,
            dtype_name(dtype),
            pass_,
            interleaved_us(
                {impl: steps[pass_] for impl, steps in timed.items()}, device, calls, rounds=rounds
            ),
        )
        for pass_ in PASSES
    ]


def linear_gelu_rows(
    shapes: Sequence[tuple[int, int, int]],
    device: torch.device,
    calls: int,
    rounds: int,
    compile_: bool,
) -> list[Row]:
    rows = []
    for m, k, n in shapes:
        for dtype in LINEAR_GELU_DTYPES:
            for approximate in ("none", "tanh") if dtype != torch.float32 else ("none",):
                torch.manual_seed(SEED)
                linear = torch.nn.Linear(k, n, device=device, dtype=dtype)
                gelu = torch.nn.GELU(approximate=approximate)
                x = torch.randn(m, k, device=device, dtype=dtype)

                def eager(x: torch.Tensor, linear=linear, gelu=gelu) -> torch.Tensor:
                    return gelu(linear(x))

                def fused(x: torch.Tensor, linear=linear, approximate=approximate) -> torch.Tensor:
                    return wheelops.fused_linear_gelu(x, linear.weight, linear.bias, approximate)

                impls: dict[str, Callable[..., object]] = {"eager": eager, "wheelops": fused}
                if compile_:
                    impls["compile"] = compiled(eager)
                label = f"{m}x{k}->{n}" + (f" {approximate}" if approximate != "none" else "")
                wrt = [linear.weight, linear.bias]
                rows += time_impls(
                    "fused_linear_gelu", label, dtype, impls, (x,), wrt, calls, rounds, device
                )
    return rows


def peer_problem(
    spec: OpSpec, shape: Shape, peer: Peer, args: Sequence[torch.Tensor]
) -> str | None:
    """The peer's forward against the float64 reference, as run.py checks it."""
    rule = peer_rule(rule_of(spec, shape), peer)
    with torch.no_grad():
        eager = spec.eager(*args)
        reference = spec.eager(*float64_inputs(args))
        try:
            problem = mismatch(peer.call(*args), eager, reference, rule)
        except Exception as err:  # reported in the row; the loop goes on
            return f"error: {type(err).__name__}: {err}"
    return None if problem is None else peer.wrong(problem)


def other_op_rows(
    profile: str, device: torch.device, calls: int, rounds: int, compile_: bool, liger: Liger
) -> list[Row]:
    rows = []
    for spec in OPS:
        if spec.name == "fused_linear_gelu" or spec.benchmark is None:
            continue
        dtype = torch.bfloat16 if torch.bfloat16 in spec.dtypes else spec.dtypes[0]
        shape = spec.benchmark.shapes["tiny" if profile == "tiny" else "quick"][0]
        args = spec.make(shape, dtype, device, SEED)
        wrt = [a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
        if spec.derivatives is not None:
            for t in wrt:
                t.requires_grad_(True)
        impls: dict[str, Callable[..., object]] = {"eager": spec.eager, "wheelops": spec.call}
        if compile_:
            impls["compile"] = compiled(spec.eager)
        problems: dict[str, str] = {}
        peer = liger.ops.get(spec.name)
        if peer is not None:
            problem = peer_problem(spec, shape, peer, args)
            if problem is None:
                impls[PEER] = peer.call
            else:
                problems[PEER] = problem
        label = spec.benchmark.label(shape)
        if spec.derivatives is None:
            steps = {impl: (lambda f=fn, a=args: f(*a)) for impl, fn in impls.items()}
            timed = interleaved_us(steps, device, calls, rounds=rounds)
            rows.append(Row(spec.name, label, dtype_name(dtype), "forward", timed, problems))
            continue
        rows += [
            Row(r.op, r.shape, r.dtype, r.pass_, r.us_per_call, dict(problems))
            for r in time_impls(spec.name, label, dtype, impls, args, wrt, calls, rounds, device)
        ]
    return rows


def table(rows: Sequence[Row]) -> str:
    """The rows as Markdown; liger's columns only where some row has a Liger result."""
    peers = (PEER,) if any(PEER in r.us_per_call or PEER in r.problems for r in rows) else ()
    impls, over = IMPLS + peers, ("eager", "compile", *peers)
    head = (
        "| op | shape | dtype | pass | "
        + " | ".join(f"{i} µs" for i in impls)
        + " | "
        + " | ".join(f"vs {i}" for i in over)
        + " |"
    )
    lines = [head, "|" + "---|" * (4 + len(impls) + len(over))]
    for r in rows:
        cells = [_cell(r, i) for i in impls]
        ratios = [f"{s:.2f}x" if (s := r.speedup(i)) else "-" for i in over]
        lines.append(
            f"| {r.op} | {r.shape} | {r.dtype} | {r.pass_} | {' | '.join(cells)} | "
            f"{' | '.join(ratios)} |"
        )
    return "\n".join(lines)


def _cell(row: Row, impl: str) -> str:
    if impl in row.problems:
        return f"**{row.problems[impl].split(':')[0].upper()}**"
    return f"{row.us_per_call[impl]:.1f}" if impl in row.us_per_call else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.user_loop", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", type=Path, help="directory for user_loop.json and .md")
    parser.add_argument("--calls", type=int, default=100, help="calls per round (default 100)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the best counts")
    parser.add_argument(
        "--profile",
        default="full",
        choices=tuple(LINEAR_GELU_SHAPES),
        help="fused_linear_gelu's shapes (tiny: the other ops' tiny ones too)",
    )
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--ops", default="all", choices=("all", "fused_linear_gelu"))
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    shapes = LINEAR_GELU_SHAPES[args.profile]
    compile_ = not args.no_compile
    rows = linear_gelu_rows(shapes, device, args.calls, args.rounds, compile_)
    liger = load_liger(device)
    if args.ops == "all":
        rows += other_op_rows(args.profile, device, args.calls, args.rounds, compile_, liger)
    text = table(rows)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        record = {
            "environment": environment.collect(device, wheelops),
            "calls": args.calls,
            "rounds": args.rounds,
            "liger": liger.describe(),
            "rows": [asdict(r) for r in rows],
        }
        (args.out / "user_loop.json").write_text(json.dumps(record, indent=2))
        (args.out / "user_loop.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
