"""The per-op tables of docs/reliability.md, from the saved results of a reliability run.

    python tools/reliability_report.py RESULTS_DIR [--write docs/reliability.md]

RESULTS_DIR holds what the runs in docs/reliability.md write (JUnit XML, example
counts, the sanitizer summary); every ``*.xml`` in it is read. Each test case is
put under an op (its parameter id or its file, test_<op>.py; a case naming no
op, like the DDP model of every op, counts for all) and a column (by file and
test name). A cell says passed/run; a failure or error shows as ``FAIL n``.
With --write, the tables replace what is between the markers in that file.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

# The ops, from their modules (importing wheelops needs its native libraries).
ROOT = Path(__file__).resolve().parent.parent
OPS_DIR = ROOT / "src" / "wheelops" / "ops"
NAMES = sorted(p.stem for p in OPS_DIR.glob("*.py") if not p.stem.startswith("_"))
SPECS_DIR = ROOT / "specs" / "opspecs"


def _differentiable(op: str) -> bool:
    """Its description (specs/opspecs/<op>.py) gives `derivatives` other than None: read
    from the file's syntax tree, as importing a description imports wheelops."""
    tree = ast.parse((SPECS_DIR / f"{op}.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "OpSpec":
            given = {k.arg: k.value for k in node.keywords}
            value = given.get("derivatives")
            return value is not None and not (
                isinstance(value, ast.Constant) and value.value is None
            )
    raise SystemExit(f"{SPECS_DIR / f'{op}.py'} has no SPEC = OpSpec(...)")


DIFFERENTIABLE = {op for op in NAMES if _differentiable(op)}

BEGIN = "<!-- reliability tables: begin (python tools/reliability_report.py) -->"
END = "<!-- reliability tables: end -->"

# (column, file stem or None for any, a pattern the test name must match).
# The first match wins, so the specific rows come first.
COLUMNS: list[tuple[str, str | None, str]] = [
    ("property", "test_properties", ""),  # the norms'
    ("property", None, r"^test_property_"),  # every other op's, in its own test file
    ("side stream", "test_streams_graphs", "stream"),
    ("CUDA graph", "test_streams_graphs", "graph"),
    ("reduce-overhead", "test_streams_graphs", "reduce_overhead"),
    ("DDP", "test_multi_gpu", "ddp"),
    ("cuda:1", "test_multi_gpu", ""),
    ("> 2**31", None, r"2_pow_31|over_2_31|huge|int32"),
    ("long rows", "test_scale", r"262144|long_row"),
    ("bitwise determinism", "test_determinism_memory", "determin"),
    ("memory", "test_determinism_memory", r"memory|alloc|leak"),
    ("threads", "test_determinism_memory", "thread"),
]
SANITIZER_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
TOKEN = re.compile(r"[\[\]\-]")


def ops_of(stem: str, name: str) -> list[str]:
    tokens = set(TOKEN.split(name))
    function = name.split("[", 1)[0].removeprefix("test_")
    named = [
        op
        for op in NAMES
        if op in tokens or function == op or function.startswith(f"{op}_") or f"_{op}_" in name
    ]
    if named:
        return named
    if stem.removeprefix("test_") in NAMES:
        return [stem.removeprefix("test_")]
    # The DDP model (also graphed whole) holds every differentiable op; the
    # thread test runs every op.
    if re.search(r"ddp|graphed_callables", name):
        return sorted(DIFFERENTIABLE)
    return list(NAMES) if "threads_match" in name else []


def column_of(stem: str, name: str) -> str:
    for column, file, pattern in COLUMNS:
        if (file is None or stem == file) and re.search(pattern, name):
            return column
    return "op suite"


def read_cases(path: Path) -> list[tuple[str, str, str]]:
    """(file stem, test name, outcome) for every test case in a JUnit file."""
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        stem = case.get("classname", "").rsplit(".", 1)[-1]
        if case.find("skipped") is not None:
            outcome = "skipped"
        elif case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        else:
            outcome = "passed"
        cases.append((stem, case.get("name", ""), outcome))
    return cases


def tally(paths: list[Path]) -> dict[tuple[str, str], dict[str, int]]:
    counts: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for path in paths:
        for stem, name, outcome in read_cases(path):
            for op in ops_of(stem, name):
                counts[(op, column_of(stem, name))][outcome] += 1
    return counts


def cell(count: dict[str, int] | None) -> str:
    if not count:
        return "-"
    run = count.get("passed", 0) + count.get("failed", 0)
    text = f"{count.get('passed', 0)}/{run}" if run else "skipped"
    return text + (f" FAIL {count['failed']}" if count.get("failed") else "")


def examples(results: Path, prefix: str) -> dict[tuple[str, str], int]:
    """Property-test examples per (op, device) from <prefix>-examples.json (and xdist parts)."""
    total: dict[tuple[str, str], int] = defaultdict(int)
    for path in sorted(results.glob(f"{prefix}-examples.json*")):
        for op, per_device in json.loads(path.read_text()).items():
            for device, n in per_device.items():
                total[(op, device)] += n
    return total


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def render(results: Path) -> str:
    xmls = sorted(results.glob("*.xml"))
    main = [p for p in xmls if not p.name.startswith("sanitizer-")]
    counts = tally(main)
    ci, device_run = examples(results, "cpu-tests"), examples(results, "gpu-tests")
    columns = ["op suite", *(c for c, _, _ in COLUMNS)]
    header = ["op", "property examples: CI cpu / GPU run cpu, cuda", *columns]
    rows = [
        [
            op,
            f"{ci.get((op, 'cpu'), 0)} / {device_run.get((op, 'cpu'), 0)}, "
            f"{device_run.get((op, 'cuda'), 0)}",
            *(cell(counts.get((op, c))) for c in columns),
        ]
        for op in NAMES
    ]
    parts = [
        "Tests passed / run, per op (the runs of every saved JUnit file together):",
        "",
        table(header, rows),
    ]

    summary_file = results / "sanitizer-summary.json"
    if summary_file.exists():
        summary = json.loads(summary_file.read_text())
        tools = [t for t in SANITIZER_TOOLS if t in summary]
        per_tool = {
            t: tally([results / f"sanitizer-{t}.xml"])
            for t in tools
            if (results / f"sanitizer-{t}.xml").exists()
        }
        rows = []
        for op in NAMES:
            row = [op]
            for t in tools:
                merged: dict[str, int] = defaultdict(int)
                for (o, _), c in per_tool.get(t, {}).items():
                    if o == op:
                        for k, v in c.items():
                            merged[k] += v
                row.append(cell(merged))
            rows.append(row)
        errors = [
            "did not finish" if summary[t]["errors"] is None else str(summary[t]["errors"])
            for t in tools
        ]
        rows.append(["**sanitizer errors**", *(f"**{e}**" for e in errors)])
        rows.append(["seconds", *(str(summary[t]["seconds"]) for t in tools)])
        parts += ["", "compute-sanitizer, tests passed / run under each tool, per op:", ""]
        parts.append(table(["op", *tools], rows))
    return "\n".join(parts) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--write", type=Path, help="replace the tables between the markers")
    args = parser.parse_args(argv)
    text = render(args.results)
    if not args.write:
        print(text, end="")
        return 0
    doc = args.write.read_text()
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    args.write.write_text(f"{head}{BEGIN}\n{text}{END}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
