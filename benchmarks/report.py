"""The Markdown report, rendered from the JSON alone (so any saved JSON re-renders)."""

from __future__ import annotations

from typing import Any

from . import linear_gelu
from .targets import MET, MISSED, TARGETS

COLUMNS = (
    "op",
    "pass",
    "dtype",
    "shape",
    "wheelops µs",
    "GB/s",
    "% copy",
    "eager µs",
    "compile µs",
    "× eager",  # noqa: RUF001 (the multiplication sign is meant)
    "× compile",  # noqa: RUF001
    "targets",
)
# Before "targets", for an op whose rows have a Liger result (peers.py).
LIGER_COLUMNS = ("liger µs", "× liger")  # noqa: RUF001
MARKS = {MET: "✓", MISSED: "✗"}
SHORT = {
    "forward_bandwidth": "bw",
    "backward_bandwidth": "bw",
    "compile": "c",
    "eager": "e",
    "eager_parity": "p",
}


def render(data: dict[str, Any]) -> str:
    lines = ["# wheelops benchmark", "", *_header(data), "", *_summary(data["rows"])]
    ops: list[str] = []
    for row in data["rows"]:
        if row["op"] not in ops:
            ops.append(row["op"])
    for op in ops:
        rows = [row for row in data["rows"] if row["op"] == op]
        lines += ["", f"## {op}", ""]
        notes = sorted({row["note"] for row in rows if row.get("note")})
        lines += [f"{note}." for note in notes] + ([""] if notes else [])
        lines += _table(rows)
    lines += _overhead(data.get("overhead") or [])
    lines += _sweep(data.get("sweep") or [])
    lines += linear_gelu.render(data.get("linear_gelu") or [])
    return "\n".join(lines) + "\n"


def _overhead(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    met = sum(row["verdict"] == MET for row in rows)
    lines = [
        "",
        "## Host overhead",
        "",
        "µs per call on one tiny tensor (the shape column), best of 5 rounds of `calls` "
        "calls, the device synchronized once a round: PyTorch's formula against wheelops. "
        "forward: inputs that need gradients (the graph is built); no_grad: under "
        "torch.no_grad(); forward+backward: then torch.autograd.grad. Limit: the largest "
        f"wheelops / torch ratio allowed. Met {met} of {len(rows)}.",
        "",
        "| op | mode | shape | torch µs | wheelops µs | ratio | limit | |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        shape = "x".join(map(str, row["shape"][0])) or "()"  # the first input's
        mark = MARKS.get(row["verdict"], f"**{row['verdict'].upper()}**: {row.get('problem')}")
        lines.append(
            f"| {row['op']} | {row['mode']} | {shape} | {_num(row['torch_us'], 2)} | "
            f"{_num(row['wheelops_us'], 2)} | {_num(row['ratio'], 2)} | {row['limit']:.2f} | "
            f"{mark} |"
        )
    return lines


def _sweep(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = [
        "",
        "## Size sweep (forward)",
        "",
        "GB/s = bytes that must move / median time; copy = dst.copy_(src) moving the same "
        "bytes. The plot of these rows is sweep.png.",
        "",
        "| op | dtype | shape | MiB moved | wheelops GB/s | eager GB/s | compile GB/s "
        "| copy GB/s | wheelops % copy |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        gbps = {
            impl: (row.get(impl) or {}).get("gbps") for impl in ("wheelops", "eager", "compile")
        }
        copy = row.get("copy_gbps")
        pct = 100 * gbps["wheelops"] / copy if gbps["wheelops"] and copy else None
        mine = _num(gbps["wheelops"], 0) if row["status"] == "ok" else row["status"].upper()
        lines.append(
            f"| {row['op']} | {row['dtype']} | {row['label']} | {row['bytes'] / 2**20:,.2f} | "
            f"{mine} | {_num(gbps['eager'], 0)} | {_num(gbps['compile'], 0)} | "
            f"{_num(copy, 0)} | {_num(pct, 0)} |"
        )
    return lines


def _header(data: dict[str, Any]) -> list[str]:
    env, settings, copy = data["environment"], data["settings"], data["copy_bandwidth"]
    build = env.get("wheelops_build")
    built = ""
    if isinstance(build, dict):
        libraries = build.get("cuda_libraries") or []
        kind = (
            f"{build.get('built_as', '')} build; CUDA libraries: "
            + ", ".join(
                f"{lib.get('file')} (CUDA {lib.get('cuda_version')}, archs {lib.get('arch_list')})"
                for lib in libraries
            )
            if libraries
            else f"CUDA {build['cuda_version']} build, archs {build.get('cuda_arch_list')}"
            if build.get("cuda_version")  # build facts of schema 1
            else "CPU build"
        )
        dev = ", dev mode" if build.get("dev_mode") else ""
        built = (
            f" ({kind}, commit {str(build.get('git_commit'))[:12]}, "
            f"built against torch {build.get('torch_version')}{dev})"
        )
    device = env["device_name"]
    if env.get("device_type") == "cuda":
        device += (
            f" (sm_{env['compute_capability'].replace('.', '')}, driver {env.get('driver')}, "
            f"driver CUDA {env.get('driver_cuda')})"
        )
    liger = settings.get("liger") or {}
    liger_line = (
        f"Liger-Kernel {liger.get('version') or '(version unknown)'}: "
        f"{', '.join(liger['ops'])}; x liger = its time / wheelops time, checked like "
        "wheelops before it is timed"
        if liger.get("ops")
        else f"Liger-Kernel: no column ({liger.get('absent', 'not run')})"
    )
    compile_s = sum((row.get("compile") or {}).get("compile_s", 0.0) for row in data["rows"])
    compile_line = (
        f"torch.compile: mode {settings['compile_mode']!r}, dynamic=False, fullgraph=True, one "
        f"compiled function per op recompiled per shape and dtype; compiling took "
        f"{compile_s:.0f} s in all, none of it in the timings"
        if settings["compile"]
        else "torch.compile: not run (--no-compile)"
    )
    return [
        f"- date: {env['date']}",
        f"- device: {device}",
        f"- torch {env['torch']} (CUDA {env.get('torch_cuda')}), Python {env['python']}",
        f"- wheelops {env['wheelops']}{built}",
        f"- timing: {settings['timer']}; {settings['reps']} reps after {settings['warmup']} "
        f"warm-up; backward = torch.autograd.grad(out, inputs, grad, retain_graph=True) only",
        f"- copy bandwidth: {copy['gbps']:.0f} GB/s (dst.copy_(src) of "
        f"{copy['size_bytes'] / 2**30:.2f} GiB, bytes = 2 x size, best of {settings['copy_reps']})",
        f"- {compile_line}",
        f"- {liger_line}",
        "- GB/s = bytes that must move / wheelops time; x eager and x compile = their time / "
        "wheelops time (above 1: wheelops is faster)",
    ]


def _summary(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["## Targets", "", "| target | met | missed |", "|---|---|---|"]
    missed_lines: list[str] = []
    for key, text in TARGETS.items():
        verdicts = [row["targets"].get(key) for row in rows]
        lines.append(f"| {text} | {verdicts.count(MET)} | {verdicts.count(MISSED)} |")
        for row in rows:
            if row["targets"].get(key) == MISSED:
                missed_lines.append(f"- {_case_name(row)}: {text} ({_achieved(row, key)})")
    bad = [row for row in rows if row["status"] != "ok"]
    uncompiled = [row for row in rows if row.get("compile_problem")]
    differs = [row for row in rows if (row.get("compile") or {}).get("mismatch")]
    lines += ["", "Targets column: bw = bandwidth, c = compile, e = eager; ✓ met, ✗ missed."]
    if bad:
        lines += ["", f"**{len(bad)} case(s) not timed for wheelops (wrong result or error):**", ""]
        lines += [f"- {_case_name(row)}: {row['status']}: {row['problem']}" for row in bad]
    if uncompiled:
        lines += ["", "torch.compile failed (no compile time):", ""]
        lines += [f"- {_case_name(row)}: {row['compile_problem']}" for row in uncompiled]
    if differs:
        lines += ["", "torch.compile's result differs from eager's (timed anyway):", ""]
        lines += [f"- {_case_name(row)}: {row['compile']['mismatch']}" for row in differs]
    peer_problems = [row for row in rows if row.get("liger_problem")]
    if peer_problems:
        lines += ["", "Liger-Kernel not timed (wrong result or error):", ""]
        lines += [f"- {_case_name(row)}: {row['liger_problem']}" for row in peer_problems]
    if missed_lines:
        lines += ["", "Missed:", "", *missed_lines]
    return lines


def _achieved(row: dict[str, Any], key: str) -> str:
    if row["status"] != "ok":
        return row["status"]
    if key.endswith("bandwidth"):
        return f"{_num(row['wheelops']['pct_copy'], 0)}%"
    speedup = row["speedup_vs_compile" if key == "compile" else "speedup_vs_eager"]
    return f"{_num(speedup, 2)}x"


def _case_name(row: dict[str, Any]) -> str:
    return f"{row['op']} {row['pass']} {row['dtype']} {row['label']}"


def _table(rows: list[dict[str, Any]]) -> list[str]:
    with_liger = any(row.get("liger") or row.get("liger_problem") for row in rows)
    at = COLUMNS.index("targets")
    columns = COLUMNS[:at] + LIGER_COLUMNS + COLUMNS[at:] if with_liger else COLUMNS
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        mine = row.get("wheelops")
        eager, compiled = row.get("eager"), row.get("compile")
        wheelops_cell = _num(mine and mine["median_us"], 1)
        if row["status"] != "ok":
            wheelops_cell = f"**{row['status'].upper()}**"
        compile_cell = _num(compiled and compiled["median_us"], 1)
        if compiled is not None and compiled.get("mismatch"):
            compile_cell += " (differs from eager)"
        cells = [
            row["op"],
            row["pass"],
            row["dtype"],
            row["label"],
            wheelops_cell,
            _num(mine and mine["gbps"], 0),
            _num(mine and mine["pct_copy"], 0),
            _num(eager and eager["median_us"], 1),
            compile_cell,
            _num(row["speedup_vs_eager"], 2),
            _num(row["speedup_vs_compile"], 2),
            _marks(row["targets"]),
        ]
        if with_liger:
            cells[at:at] = [_liger_cell(row), _num(row.get("speedup_vs_liger"), 2)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _liger_cell(row: dict[str, Any]) -> str:
    problem = row.get("liger_problem")
    if problem:
        return f"**{problem.split(':')[0].upper()}**"
    return _num((row.get("liger") or {}).get("median_us"), 1)


def _marks(verdicts: dict[str, str]) -> str:
    marks = [f"{SHORT[key]} {MARKS[v]}" for key, v in verdicts.items() if v in MARKS]
    return " ".join(marks) or "-"


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"
