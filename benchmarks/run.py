"""wheelops vs eager PyTorch vs torch.compile, in one run: JSON and Markdown.

    PYTHONPATH=specs python -m benchmarks.run --out DIR [--ops layer_norm,softmax]
        [--dtypes bfloat16,float32] [--quick] [--device cuda|cpu] [--reps N] [--no-compile]
        [--sections main,overhead,sweep,linear_gelu]
    PYTHONPATH=specs python -m benchmarks.run --only-table DIR/benchmark.json [--out DIR]

Writes DIR/benchmark.json (rewritten after every case, so an interrupted run
keeps what it measured), DIR/benchmark.md and, with matplotlib, DIR/sweep.png and
DIR/linear_gelu.png. The linear_gelu section (fused_linear_gelu against the GEMM alone,
nn.Linear+nn.GELU, torch.compile and torch._addmm_activation) runs when --sections names
it, or with every section when --ops is not given.
Progress goes to stderr. Exits 1
when any wheelops result was wrong or failed, 2 on bad arguments or a wheelops
that lacks a selected op. Run from the checkout's root, it imports the installed
wheelops, never the source tree (src/, not on the import path). See
benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from opspecs._shapes import PROFILES
from opspecs._spec import OpSpec, Shape

from . import environment, linear_gelu
from .cases import OPS, OPS_BY_NAME, cases, dtype_name, plan
from .measure import PASSES, Implementations, measure_case, new_row
from .overhead import measure_overhead
from .peers import Liger, load_liger
from .plot import PLOT_NAME, plot_sweep
from .report import render
from .sweep import sweep_rows
from .targets import derive
from .timing import Timer, copy_bandwidth
from .verify import FLOAT_DTYPES

JSON_NAME, MARKDOWN_NAME = "benchmark.json", "benchmark.md"
# 2: sections (overhead, sweep), the eager-parity target; 3: linear_gelu; 4: the Liger peer
SCHEMA_VERSION = 4
SECTIONS = ("main", "overhead", "sweep", "linear_gelu")
DTYPES = {dtype_name(dtype): dtype for dtype in FLOAT_DTYPES}
COMPILE_MODE = "default"
# Enough compiled graphs per op for every shape x dtype x (forward, training) it meets.
RECOMPILE_LIMIT = 256


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", type=Path, help="directory for benchmark.json and .md")
    parser.add_argument(
        "--ops", help=f"comma-separated, default all: {','.join(spec.name for spec in OPS)}"
    )
    parser.add_argument(
        "--dtypes",
        default="bfloat16,float32",
        help=f"comma-separated from {','.join(DTYPES)} (images and volumes have their own)",
    )
    parser.add_argument("--quick", action="store_true", help="one shape per op, fewer reps")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--reps", type=int, help="timed repetitions (default 30; quick 10)")
    parser.add_argument("--warmup", type=int, help="untimed calls first (default 5)")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument(
        "--sections",
        default=None,
        help="comma-separated from main (the tables), overhead (µs per call on a tiny "
        "tensor), sweep (GB/s against size), linear_gelu (fused_linear_gelu against GEMM, "
        "eager, compile, _addmm_activation; default only without --ops); default all",
    )
    parser.add_argument("--overhead-calls", type=int, help="calls per round of the overhead timing")
    parser.add_argument("--only-table", type=Path, metavar="JSON", help="re-render a JSON")
    args = parser.parse_args(argv)
    if args.only_table is None and args.out is None:
        parser.error("--out DIR is required (or --only-table JSON)")
    try:
        args.specs = select_ops(args.ops)
        args.dtype_list = select_dtypes(args.dtypes)
        args.section_list = select_sections(args.sections or ",".join(SECTIONS))
        if args.ops is not None and args.sections is None:
            # --ops chose ops of the main tables: the GEMM section only when named
            args.section_list = tuple(s for s in args.section_list if s != "linear_gelu")
    except ValueError as err:
        parser.error(str(err))
    if args.device == "cuda" and args.only_table is None and not torch.cuda.is_available():
        parser.error("--device cuda, but torch sees no CUDA GPU (use --device cpu for a smoke run)")
    return args


def select_ops(names: str | None) -> list[OpSpec]:
    if names is None:
        return list(OPS)
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in OPS_BY_NAME]
    if unknown or not wanted:
        raise ValueError(
            f"unknown op(s) {', '.join(unknown) or '(none given)'}; known: {', '.join(OPS_BY_NAME)}"
        )
    return [OPS_BY_NAME[name] for name in dict.fromkeys(wanted)]


def select_dtypes(names: str) -> tuple[torch.dtype, ...]:
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in DTYPES]
    if unknown or not wanted:
        raise ValueError(
            f"unknown dtype(s) {', '.join(unknown) or '(none given)'}; known: {', '.join(DTYPES)}"
        )
    return tuple(DTYPES[name] for name in dict.fromkeys(wanted))


def select_sections(names: str) -> tuple[str, ...]:
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in SECTIONS]
    if unknown or not wanted:
        raise ValueError(
            f"unknown section(s) {', '.join(unknown) or '(none given)'}; known: "
            f"{', '.join(SECTIONS)}"
        )
    return tuple(name for name in SECTIONS if name in wanted)


def missing_ops(specs: list[OpSpec], wheelops: Any) -> list[str]:
    return [spec.name for spec in specs if not callable(getattr(wheelops, spec.name, None))]


def configure_compile() -> None:
    config = torch._dynamo.config
    config.cache_size_limit = RECOMPILE_LIMIT
    if hasattr(config, "accumulated_cache_size_limit"):
        config.accumulated_cache_size_limit = max(config.accumulated_cache_size_limit, 4096)
    # Past the limit dynamo would silently run eager; a compile timing must never be that.
    if hasattr(config, "fail_on_recompile_limit_hit"):
        config.fail_on_recompile_limit_hit = True


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.only_table is not None:
        saved = json.loads(args.only_table.read_text())
        markdown = render(saved)
        if args.out is None:
            sys.stdout.write(markdown)
        else:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / MARKDOWN_NAME).write_text(markdown)
            _plot(saved, args.out)
        return 0

    import wheelops
    from wheelops._compat import loader

    where = Path(wheelops.__file__).parent
    if loader.loaded() is None:
        print(
            f"error: wheelops at {where} has no native libraries loaded (a source tree that was "
            "not built?); install the wheel, or build in place with `python -m build_tools.dev` "
            "and call build_tools.dev.load() first",
            file=sys.stderr,
        )
        return 2
    missing = missing_ops(args.specs, wheelops)
    if missing:
        print(
            f"error: wheelops {wheelops.__version__} from {where} has no "
            f"op(s) {', '.join(missing)}; install a wheelops that has them, or choose --ops",
            file=sys.stderr,
        )
        return 2
    return run(args, wheelops, load_liger(torch.device(args.device)))


def run(args: argparse.Namespace, wheelops: Any, liger: Liger) -> int:
    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    profile = ("quick" if args.quick else "full") if on_gpu else "tiny"
    assert profile in PROFILES
    reps = args.reps or ((10 if args.quick else 30) if on_gpu else 3)
    warmup = args.warmup if args.warmup is not None else (5 if on_gpu else 1)
    timer = Timer(device, reps=reps, warmup=warmup)
    copy_reps = 10 if on_gpu else 3
    copy = copy_bandwidth(timer, 2**30 if on_gpu else 2**24, reps=copy_reps)
    overhead_calls = args.overhead_calls or (2000 if on_gpu else 100)
    configure_compile()
    data: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "environment": environment.collect(device, wheelops),
        "settings": {
            "device": str(device),
            "profile": profile,
            "ops": [spec.name for spec in args.specs],
            "dtypes": [dtype_name(dtype) for dtype in args.dtype_list],
            "reps": reps,
            "warmup": warmup,
            "timer": timer.method,
            "l2_flush_bytes": timer.flush_bytes,
            "copy_reps": copy_reps,
            "compile": not args.no_compile,
            "compile_mode": COMPILE_MODE,
            "compile_dynamic": False,
            "compile_fullgraph": True,
            "sections": list(args.section_list),
            "overhead_calls": overhead_calls,
            "liger": liger.describe(),
        },
        "copy_bandwidth": copy.to_dict(),
        "rows": [],
        "overhead": [],
        "sweep": [],
        "linear_gelu": [],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"copy bandwidth: {copy.gbps:.0f} GB/s ({timer.method})", file=sys.stderr)
    print(
        f"Liger-Kernel {liger.version or '(version unknown)'}: {', '.join(liger.ops)}"
        if liger.absent is None
        else f"Liger-Kernel: no column ({liger.absent})",
        file=sys.stderr,
    )
    started = time.perf_counter()
    for spec in args.specs:
        torch.compiler.reset()  # each op starts with an empty compile cache
        impls = Implementations(
            wheelops=spec.call,
            eager=spec.eager,
            compiled=None
            if args.no_compile
            else torch.compile(spec.eager, dynamic=False, fullgraph=True),
            liger=liger.ops.get(spec.name),
        )
        if "main" in args.section_list:
            for shape, dtype in cases(spec, profile, args.dtype_list):
                for row in _measure(spec, shape, dtype, impls, timer, device):
                    data["rows"].append(derive(row, copy.gbps))
                    print(_progress(row, time.perf_counter() - started), file=sys.stderr)
                _write(args.out, data, markdown=False)
        if "sweep" in args.section_list:
            # On the CPU the smoke run's shapes again: already compiled, so cheap.
            sweep = cases(spec, "sweep" if on_gpu else "tiny", args.dtype_list[:1])
            # The main tables' implementations; the peer is compared there only.
            forward = dataclasses.replace(impls, liger=None)
            for row in sweep_rows(spec, sweep, forward, timer, device, copy.gbps):
                data["sweep"].append(row)
                print(_progress(row, time.perf_counter() - started), file=sys.stderr)
            _write(args.out, data, markdown=False)
        if "overhead" in args.section_list:
            for shape, dtype in cases(spec, "overhead", args.dtype_list[:1]):
                rows = measure_overhead(
                    spec, shape, dtype, spec.eager, impls.wheelops, device, overhead_calls
                )
                data["overhead"] += rows
                for row in rows:
                    measured = (
                        f"torch {row['torch_us']:.2f} us, wheelops {row['wheelops_us']:.2f} us "
                        f"({row['ratio']:.2f}x)"
                        if row["ratio"] is not None
                        else f"ERROR: {row['problem']}"
                    )
                    print(
                        f"[{time.perf_counter() - started:5.0f}s] {row['op']} {row['mode']} "
                        f"overhead: {measured}",
                        file=sys.stderr,
                    )
            _write(args.out, data, markdown=False)
    if "linear_gelu" in args.section_list:
        torch.compiler.reset()
        compiled: dict | None = None if args.no_compile else {}
        for shape, dtype, approximate, pass_ in linear_gelu.cases(profile, args.dtype_list):
            row = linear_gelu.measure_row(
                shape, dtype, approximate, pass_, timer, device, wheelops, compiled
            )
            data["linear_gelu"].append(row)
            print(_linear_gelu_progress(row, time.perf_counter() - started), file=sys.stderr)
            _write(args.out, data, markdown=False)
            if on_gpu:
                torch.cuda.empty_cache()
    _write(args.out, data, markdown=True)
    _plot(data, args.out)
    bad = [row for row in data["rows"] + data["sweep"] if row["status"] != "ok"]
    bad += [row for row in data["linear_gelu"] if row["status"] != "ok"]
    bad += [row for row in data["overhead"] if row["verdict"] == "error"]
    print(
        f"wrote {args.out / JSON_NAME} and {MARKDOWN_NAME} in {time.perf_counter() - started:.0f} s"
        + (f"; {len(bad)} case(s) wrong or failed" if bad else ""),
        file=sys.stderr,
    )
    return 1 if bad else 0


def _measure(
    spec: OpSpec,
    shape: Shape,
    dtype: torch.dtype,
    impls: Implementations,
    timer: Timer,
    device: torch.device,
) -> list[dict]:
    """measure_case, with an error outside wheelops (out of memory, say) reported, not fatal."""
    try:
        return measure_case(spec, shape, dtype, impls, timer, device)
    except Exception as err:
        passes = PASSES if plan(spec).has_backward else PASSES[:1]
        rows = [new_row(spec, shape, dtype, pass_) for pass_ in passes]
        for row in rows:
            row.update(status="error", problem=f"{type(err).__name__}: {err}"[:500])
        return rows
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()


def _progress(row: dict[str, Any], elapsed: float) -> str:
    def us(entry: dict[str, Any] | None) -> str:
        return "-" if entry is None else f"{entry['median_us']:.1f} us"

    name = f"{row['op']} {row['pass']} {row['dtype']} {row['label']}"
    mine = row["wheelops"]
    if row["status"] != "ok":
        return f"[{elapsed:5.0f}s] {name}: {row['status'].upper()}: {row['problem']}"
    pct = f" ({mine['pct_copy']:.0f}% copy)" if mine and mine["pct_copy"] else ""
    compiled = row["compile"]
    compile_s = f" (compiled in {compiled['compile_s']:.1f} s)" if compiled else ""
    peer = row.get("liger_problem") or (row.get("liger") and us(row["liger"]))
    return (
        f"[{elapsed:5.0f}s] {name}: wheelops {us(mine)}{pct}, eager {us(row['eager'])}, "
        f"compile {us(compiled)}{compile_s}" + (f", liger {peer}" if peer else "")
    )


def _linear_gelu_progress(row: dict[str, Any], elapsed: float) -> str:
    name = f"fused_linear_gelu {row['pass']} {row['dtype']} {row['approximate']} {row['label']}"
    if row["status"] != "ok":
        return f"[{elapsed:5.0f}s] {name}: {row['status'].upper()}: {row['problem']}"
    times = ", ".join(
        f"{impl} {row[impl]['median_us']:.1f} us" for impl in linear_gelu.IMPLS if row.get(impl)
    )
    missed = [name for name, verdict in row["targets"].items() if verdict == "missed"]
    return f"[{elapsed:5.0f}s] {name}: {times}" + (f"; missed {missed}" if missed else "")


def _plot(data: dict[str, Any], out: Path) -> None:
    for name, plotter in ((PLOT_NAME, plot_sweep), (linear_gelu.PLOT_NAME, linear_gelu.plot)):
        try:
            path = plotter(data, out)
        except ImportError:
            print(f"note: no {name}: matplotlib is not installed", file=sys.stderr)
            return
        if path is not None:
            print(f"wrote {path}", file=sys.stderr)


def _write(out: Path, data: dict[str, Any], markdown: bool) -> None:
    (out / JSON_NAME).write_text(json.dumps(data, indent=1) + "\n")
    if markdown:
        (out / MARKDOWN_NAME).write_text(render(data))


if __name__ == "__main__":
    raise SystemExit(main())
