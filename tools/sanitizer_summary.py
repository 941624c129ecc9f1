"""Summarise a tools/sanitize.sh run: errors per tool, tests run, exit status.

    python tools/sanitizer_summary.py OUT_DIR TOOL...

Reads OUT_DIR/sanitizer-<tool>.log (compute-sanitizer's report),
sanitizer-<tool>-summary.json (tools/gpu_tests.sh) and sanitizer-<tool>.status,
prints a table and writes OUT_DIR/sanitizer-summary.json. Exits 1 unless every
tool finished, reported no error and every test passed.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

# "ERROR SUMMARY: 524 errors", not the "... 324 errors were not printed" line after it.
ERRORS = re.compile(r"ERROR SUMMARY: (\d+) errors?$", re.MULTILINE)
# racecheck's own summary; its warnings (possible hazards) count as errors here.
RACES = re.compile(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
STATUS = re.compile(r"exit (\d+) in (\d+) s")
# A report's kernel: the first device frame after its headline.
REPORT = re.compile(
    r"^========= \S.*\n(?:=========  .*\n)*?=========\s+Device Frame: (.*)$", re.MULTILINE
)
# Reports a measurement explains, never a wheelops bug: (tool, kernel, why).
EXPLAINED = [
    (
        "initcheck",
        "wheelops::lltm::<unnamed>::lltm_gates_kernel",
        "the gates were written by cuBLAS's GEMM (torch.addmm), whose stores initcheck does "
        "not see on Hopper: gates written by a plain kernel draw 0 reports, cuBLAS's draw one "
        "per 16-byte load of the whole tensor (tools/lltm_initcheck.py, docs/reliability.md)",
    ),
]


def tool_summary(out: Path, tool: str) -> dict[str, object]:
    log = out / f"sanitizer-{tool}.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    counts = [int(n) for n in ERRORS.findall(text)]
    counts += [int(e) + int(w) for e, w in RACES.findall(text)]
    printed = REPORT.findall(text)
    explained = [f for f in printed if any(t == tool and k in f for t, k, _ in EXPLAINED)]
    tests_file = out / f"sanitizer-{tool}-summary.json"
    tests = json.loads(tests_file.read_text()) if tests_file.exists() else {}
    status_file = out / f"sanitizer-{tool}.status"
    match = STATUS.search(status_file.read_text()) if status_file.exists() else None
    return {
        # No summary line means the sanitizer did not finish (timeout, crash).
        "errors": sum(counts) if counts else None,
        # Of the printed reports (--print-limit), those EXPLAINED names, and the others.
        "printed_reports": len(printed),
        "printed_explained": len(explained),
        "printed_unexplained": len(printed) - len(explained),
        "tests": tests.get("tests"),
        "failures": tests.get("failures"),
        "errors_in_tests": tests.get("errors"),
        "skipped": tests.get("skipped"),
        "exit_status": int(match.group(1)) if match else None,
        "seconds": int(match.group(2)) if match else None,
    }


def clean(s: dict[str, object]) -> bool:
    return (
        s["errors"] == 0
        and s["exit_status"] == 0
        and not s["failures"]
        and not s["errors_in_tests"]
        # Something must have run: all skipped (no GPU) checks nothing.
        and (s["tests"] or 0) - (s["skipped"] or 0) > 0
    )


def main(argv: list[str]) -> int:
    out, tools = Path(argv[0]), argv[1:]
    summary = {tool: tool_summary(out, tool) for tool in tools}
    (out / "sanitizer-summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print("| tool | sanitizer errors | tests | failed | skipped | exit | seconds |")
    print("|---|---|---|---|---|---|---|")
    for tool, s in summary.items():
        failed = (s["failures"] or 0) + (s["errors_in_tests"] or 0)
        errors = "did not finish" if s["errors"] is None else s["errors"]
        print(
            f"| {tool} | {errors} | {s['tests']} | {failed} | {s['skipped']} "
            f"| {s['exit_status']} | {s['seconds']} |"
        )
    return 0 if all(clean(s) for s in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
