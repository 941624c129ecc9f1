"""The fused_linear_gelu section: GEMM + bias + GELU against its floor and its rivals.

For each shape (M x K -> N), dtype and ``approximate``, in the same run:

- ``gemm``: the GEMM alone (``x @ w.T``; forward+backward: the three GEMMs of a
  Linear's training step), the floor no fused op can beat;
- ``eager``: ``nn.Linear`` + ``nn.GELU`` (``F.gelu(F.linear(x, w, b))``);
- ``compile``: ``torch.compile`` of that function (fullgraph, static shapes);
- ``addmm_activation``: ``torch._addmm_activation(b, x, w.T, use_gelu=True)``, cuBLASLt's
  GELU epilogue as PyTorch exposes it (the tanh form: timed for ``"tanh"`` rows, forward);
- ``wheelops``: ``wheelops.fused_linear_gelu``.

Every implementation's result is checked before it is timed: eager's shapes and dtypes,
the values of eager's formula in float64 on the same inputs within verify's bound (RULE).
The targets are issue #25's; each row says which it met.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from .cases import dtype_name
from .timing import Timer
from .verify import Rule, mismatch

SHAPES = {  # (M, K, N): input [M, K], weight [N, K]
    "full": (
        (32, 768, 3072),
        (8192, 768, 3072),
        (8192, 1024, 4096),
        (8192, 4096, 16384),
        (8192, 4096, 11008),
    ),
    "quick": ((32, 768, 3072), (8192, 768, 3072)),
    "tiny": ((5, 16, 24), (9, 33, 20)),
}
APPROXIMATIONS = {"full": ("none", "tanh"), "quick": ("none", "tanh"), "tiny": ("none",)}
DTYPES = (torch.bfloat16, torch.float16, torch.float32)
IMPLS = ("gemm", "eager", "compile", "addmm_activation", "wheelops")
PASSES = ("forward", "forward+backward")
FLOOR_SHAPE = (8192, 768, 3072)
# The gradients: stored in the dtype are the pre-activation (saved for the backward, on
# CUDA also before the GELU) and d = g * gelu'(pre) (CUDA). A term carries at most 4
# roundings of itself (gelu' <= 1.13, gelu'' <= 0.8, |pre| a few times the output's rms
# rounded into the 4), and a GEMM's sum of such terms of random sign LAMBDA = 8 times
# sqrt(sum of squares) ~ its rms: 4 * 8 = 32.
GRADIENT_ROUNDINGS = 32.0
# The output on CUDA: pre rounded to the dtype before the GELU (and before the bias where
# the bias epilogue is not used): 2 * 1.13 u |pre|, |pre| <= 2 |output| for pre > 0; for
# pre < 0, |gelu'(pre) pre| <= 0.17 * 2 rms-sized roundings. The CPU keeps pre in float32.
CUDA_OUTPUT = Rule(relative_roundings=4.6, dtype_roundings=1.0)


def rule(shape: tuple[int, int, int], pass_: str, on_gpu: bool) -> list[Rule]:
    """One rule per result: the output, then grad_input, grad_weight, grad_bias. The
    longest float32 sum: K (forward), N (grad_input), M (grad_weight, grad_bias)."""
    output = CUDA_OUTPUT if on_gpu else Rule()
    output = Rule(shape[1], output.dtype_roundings, output.relative_roundings)
    gradient = Rule(max(shape), GRADIENT_ROUNDINGS)
    return [output] if pass_ == "forward" else [output, gradient, gradient, gradient]


# name -> what it says
TARGETS = {
    "eager_1.3x": "forward, 16-bit: >= 1.3x nn.Linear+nn.GELU",
    "compile": "forward, 16-bit: never slower than torch.compile",
    "addmm_activation": "forward, 16-bit, tanh: never slower than torch._addmm_activation",
    "gemm_floor": "forward, 16-bit, 8192x768->3072: <= 1.15x the GEMM (tanh), 1.3x (erf)",
    "three_gemms": "forward+backward: <= 1.3x the three GEMMs",
    "eager_1.5x": "forward+backward: >= 1.5x nn.Linear+nn.GELU",
    "fp32_eager": "float32: never slower than eager",
}
MET, MISSED, NA = "met", "missed", "n/a"


def label(shape: tuple[int, int, int]) -> str:
    m, k, n = shape
    return f"{m}x{k}->{n}"


def _eager(approximate: str) -> Callable[..., torch.Tensor]:
    def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.gelu(F.linear(x, w, b), approximate=approximate)

    return fn


def _training_step(fn: Callable[..., torch.Tensor], grad: torch.Tensor) -> Callable[..., Any]:
    def step(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> tuple:
        out = fn(x, w, b)
        return (out, *torch.autograd.grad(out, (x, w, b), grad))

    return step


def _implementations(approximate: str, pass_: str, wheelops: Any, compiled: dict, grad):
    """name -> fn(x, w, b), or None where the implementation does not apply."""
    eager = _eager(approximate)

    def mine(x, w, b):
        return wheelops.fused_linear_gelu(x, w, b, approximate)

    if pass_ == "forward":
        impls: dict[str, Any] = {
            "gemm": lambda x, w, b: x @ w.t(),
            "eager": eager,
            "addmm_activation": (
                (lambda x, w, b: torch._addmm_activation(b, x, w.t(), use_gelu=True))
                if approximate == "tanh"
                else None
            ),
            "wheelops": mine,
        }
    else:
        impls = {
            "gemm": lambda x, w, b: (x @ w.t(), grad @ w, grad.t() @ x),
            "eager": _training_step(eager, grad),
            "addmm_activation": None,
            "wheelops": _training_step(mine, grad),
        }
    impls["compile"] = None
    if compiled is not None:  # one compiled function per approximation, as a user has
        if approximate not in compiled:
            compiled[approximate] = torch.compile(eager, fullgraph=True, dynamic=False)
        fn = compiled[approximate]
        impls["compile"] = fn if pass_ == "forward" else _training_step(fn, grad)
    return impls


def _inputs(shape, dtype, device, requires_grad: bool):
    m, k, n = shape
    generator = torch.Generator().manual_seed(25)
    x = torch.randn(m, k, generator=generator).to(dtype).to(device)
    w = (torch.randn(n, k, generator=generator) / k**0.5).to(dtype).to(device)
    b = (torch.randn(n, generator=generator) * 0.1).to(dtype).to(device)
    grad = torch.randn(m, n, generator=generator).to(dtype).to(device)
    if requires_grad:
        for t in (x, w, b):
            t.requires_grad_()
    return x, w, b, grad


def measure_row(shape, dtype, approximate, pass_, timer: Timer, device, wheelops, compiled):
    x, w, b, grad = _inputs(shape, dtype, device, requires_grad=pass_ != "forward")
    impls = _implementations(approximate, pass_, wheelops, compiled, grad)
    row: dict[str, Any] = {
        "shape": list(shape),
        "label": label(shape),
        "dtype": dtype_name(dtype),
        "approximate": approximate,
        "pass": pass_,
        "status": "ok",
        "problem": None,
        **{impl: None for impl in IMPLS},
    }
    eager = impls["eager"](x, w, b)
    # eager's formula in float64 on the same inputs (and incoming gradient), converted exactly
    x64, w64, b64, grad64 = (t.detach().double() for t in (x, w, b, grad))
    if pass_ != "forward":
        for t in (x64, w64, b64):
            t.requires_grad_()
    reference = _implementations(approximate, pass_, wheelops, None, grad64)["eager"](x64, w64, b64)
    del x64, w64, b64, grad64
    check = rule(shape, pass_, device.type == "cuda")
    for impl in IMPLS:
        fn = impls[impl]
        if fn is None:
            continue
        try:
            if impl not in ("gemm", "eager", "addmm_activation"):
                problem = mismatch(fn(x, w, b), eager, reference, check)
                if problem is not None:
                    if impl == "wheelops":
                        row.update(status="wrong", problem=problem)
                        continue
                    row[f"{impl}_problem"] = problem
            timing = timer(lambda fn=fn: fn(x, w, b))
            row[impl] = {"median_us": timing.median_us, "min_us": timing.min_us}
        except Exception as err:  # reported, never fatal
            if impl == "wheelops":
                row.update(status="error", problem=f"{type(err).__name__}: {err}"[:500])
            else:
                row[f"{impl}_problem"] = f"{type(err).__name__}: {err}"[:300]
    return judge(row, device.type == "cuda")


def _us(row: dict[str, Any], impl: str) -> float | None:
    entry = row.get(impl)
    return entry["median_us"] if entry else None


def applicable(row: dict[str, Any], on_gpu: bool) -> set[str]:
    """The targets that judge this row (the GPU's timings only)."""
    if not on_gpu:
        return set()
    names = set()
    sixteen = row["dtype"] in ("bfloat16", "float16")
    if row["pass"] == "forward" and sixteen:
        names |= {"eager_1.3x", "compile"}
        if row["approximate"] == "tanh":
            names.add("addmm_activation")
        if tuple(row["shape"]) == FLOOR_SHAPE:
            names.add("gemm_floor")
    if row["pass"] == "forward+backward":
        names |= {"three_gemms", "eager_1.5x"}
    if row["dtype"] == "float32":
        names.add("fp32_eager")
    return names


def judge(row: dict[str, Any], on_gpu: bool) -> dict[str, Any]:
    """Ratios and the issue's targets, met or missed (n/a where one does not apply, or
    where a rival was not timed); a wrong or failed wheelops misses every one that applies."""
    mine = _us(row, "wheelops")
    ratios = {}
    for impl in ("gemm", "eager", "compile", "addmm_activation"):
        theirs = _us(row, impl)
        ratios[impl] = theirs / mine if mine and theirs else None
    row["speedup"] = ratios  # their time / wheelops' time (> 1: wheelops faster)
    wanted = applicable(row, on_gpu)
    if row["status"] != "ok":
        row["targets"] = {name: MISSED if name in wanted else NA for name in TARGETS}
        return row

    def at_least(ratio: float | None, limit: float) -> bool | None:
        return None if ratio is None else ratio >= limit

    def at_most_gemm(limit: float) -> bool | None:
        return None if ratios["gemm"] is None else 1 / ratios["gemm"] <= limit

    limit = 1.15 if row["approximate"] == "tanh" else 1.3
    checks = {
        "eager_1.3x": at_least(ratios["eager"], 1.3),
        "compile": at_least(ratios["compile"], 1.0),
        "addmm_activation": at_least(ratios["addmm_activation"], 1.0),
        "gemm_floor": at_most_gemm(limit),
        "three_gemms": at_most_gemm(1.3),
        "eager_1.5x": at_least(ratios["eager"], 1.5),
        "fp32_eager": at_least(ratios["eager"], 1.0),
    }
    row["targets"] = {
        name: NA if name not in wanted or checks[name] is None else MET if checks[name] else MISSED
        for name in TARGETS
    }
    return row


def cases(profile: str, dtypes: tuple[torch.dtype, ...]):
    wanted = tuple(d for d in DTYPES if d in dtypes) or DTYPES[:1]
    for shape in SHAPES[profile]:
        for dtype in wanted:
            for approximate in APPROXIMATIONS[profile]:
                for pass_ in PASSES:
                    yield shape, dtype, approximate, pass_


def render(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = [
        "",
        "## fused_linear_gelu (GEMM + bias + GELU)",
        "",
        "Median µs; `× x` is x's time over wheelops' (> 1: wheelops faster). gemm is "  # noqa: RUF001
        "`x @ w.T` (forward+backward: the three GEMMs); addmm_act is "
        "`torch._addmm_activation(..., use_gelu=True)` (tanh form). Targets: "
        + "; ".join(f"`{name}` {text}" for name, text in TARGETS.items())
        + ".",
        "",
        "| shape | dtype | approx | pass | gemm | eager | compile | addmm_act | wheelops "
        "| × eager | × compile | wheelops/gemm | met | missed |",  # noqa: RUF001
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]

    def num(value: float | None, digits: int = 1) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    for row in rows:
        s = row["speedup"]
        floor = 1 / s["gemm"] if s.get("gemm") else None
        met = ", ".join(n for n, v in row["targets"].items() if v == MET) or "-"
        missed = ", ".join(n for n, v in row["targets"].items() if v == MISSED) or "-"
        mine = num(_us(row, "wheelops")) if row["status"] == "ok" else row["status"].upper()
        lines.append(
            f"| {row['label']} | {row['dtype']} | {row['approximate']} | {row['pass']} | "
            f"{num(_us(row, 'gemm'))} | {num(_us(row, 'eager'))} | {num(_us(row, 'compile'))} | "
            f"{num(_us(row, 'addmm_activation'))} | {mine} | {num(s['eager'], 2)} | "
            f"{num(s['compile'], 2)} | {num(floor, 2)} | {met} | {missed} |"
        )
    problems = [row for row in rows if row["status"] != "ok"]
    for row in problems:
        lines.append(f"\n{row['label']} {row['dtype']} {row['pass']}: {row['problem']}")
    return lines


PLOT_NAME = "linear_gelu.png"


def plot(data: dict[str, Any], out) -> Any:
    """Speed-up over eager per shape, forward and forward+backward (one panel each)."""
    rows = [row for row in data.get("linear_gelu") or [] if row["status"] == "ok"]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(12, 4), squeeze=False)
    for ax, pass_ in zip(axes.flat, PASSES, strict=True):
        mine = [row for row in rows if row["pass"] == pass_]
        names = [f"{r['label']}\n{r['dtype']} {r['approximate']}" for r in mine]
        for offset, (impl, colour) in enumerate(
            (("gemm", "black"), ("compile", "tab:green"), ("wheelops", "tab:blue"))
        ):
            values = []
            for r in mine:
                eager, theirs = _us(r, "eager"), _us(r, impl)
                values.append(eager / theirs if eager and theirs else 0.0)
            xs = [i + 0.27 * (offset - 1) for i in range(len(mine))]
            ax.bar(xs, values, width=0.27, color=colour, label=impl)
        ax.axhline(1.0, color="tab:orange", linestyle=":", label="eager")
        ax.set_xticks(range(len(mine)), names, rotation=90, fontsize=6)
        ax.set_ylabel("speed-up over nn.Linear+nn.GELU")
        ax.set_title(f"fused_linear_gelu {pass_}")
        ax.legend(fontsize=7)
    env = data["environment"]
    figure.suptitle(f"wheelops {env['wheelops']}, torch {env['torch']}, {env['device_name']}")
    figure.tight_layout()
    path = out / PLOT_NAME
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
