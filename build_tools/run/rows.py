"""Whole rows of the matrix, end to end (`nox -s e2e`): build, repair + checks, the suite
against the wheel under each torch of the row, then index -> served on loopback -> pip
install -> run; a cross-built row runs its CPU subset under emulation. Ends with a table:
cell, wheel, size, build time, result."""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from build_tools.plan import matrix as build_matrix
from build_tools.plan.torch_install import NEWEST, resolve
from build_tools.run import steps
from build_tools.run.steps import MATRIX, TARGETS

if TYPE_CHECKING:
    from nox import Session


@dataclass
class RowResult:
    cell: str
    wheel: str = "-"
    size_mb: float = 0.0
    build_s: float = 0.0
    result: str = "not run"


def table(rows: list[RowResult]) -> str:
    lines = ["| cell | wheel | size | build time | result |", "|---|---|---|---|---|"]
    lines += [
        f"| {r.cell} | {r.wheel} | {r.size_mb:.1f} MB | "
        f"{f'{r.build_s:.0f} s' if r.build_s else '-'} | {r.result} |"
        for r in rows
    ]
    return "\n".join(lines)


def _stepper(session: Session, name: str, steps_in_row: int) -> Callable[[int, str], None]:
    started = time.monotonic()

    def step(number: int, what: str) -> None:
        elapsed = time.monotonic() - started
        session.log(f"[{name} {number}/{steps_in_row}] {what} ({elapsed:.0f} s in)")

    return step


def _repaired(build_row: RowResult, repaired: Path) -> None:
    build_row.wheel, build_row.size_mb = repaired.name, repaired.stat().st_size / 2**20
    build_row.result = "ok: repaired and checked"


def run_cross_row(
    session: Session, target: str, args: argparse.Namespace, rows: list[RowResult]
) -> None:
    """A platform the variant is cross-built for here: build, repair + checks, then under
    torch it runs (steps.emulated_torches), `pip install` off the loopback index into a
    fresh emulated venv, the import check, the doctor and the CPU subset (under the first
    torch; the loading tests under the others: steps.emulated_tests)."""
    spec, platform = TARGETS[target]
    variant, torches = spec.name, steps.emulated_torches(spec.cross_torch(platform), args.quick)
    name = f"{variant} {platform}"
    build_row = RowResult(f"{name} build ({args.arch_list or 'the matrix arch lists'})")
    rows.append(build_row)
    steps_in_row, started = 2 + len(torches), time.monotonic()
    step = _stepper(session, name, steps_in_row)

    step(1, "cross-build")
    steps.build_wheel(session, target, args.arch_list)
    build_row.build_s = time.monotonic() - started
    step(2, "repair: auditwheel, abi3audit --strict, check-wheel-contents, native checks")
    repaired = steps.repair(session, target)
    _repaired(build_row, repaired)
    for number, torch in enumerate(torches, start=3):
        tests = steps.emulated_tests(torch, torches)
        said = "CPU subset" if tests == steps.EMULATED_SUBSET else "loading tests"
        what = f"pip install off the loopback index, import, the doctor and the {said}"
        step(number, f"emulated: {what} under torch {torch}")
        row = RowResult(f"{name} emulated torch {torch}", repaired.name, build_row.size_mb)
        rows.append(row)
        with tempfile.TemporaryDirectory() as scratch:  # 4.6 GB under a CUDA torch
            venv = Path(scratch) / "venv"
            steps.test_emulated(session, target, torch, tests, venv)
        row.result = f"ok: pip took the {platform} wheel; import, doctor, {said} (qemu)"
    session.log(f"[{name}] row done in {time.monotonic() - started:.0f} s")


def tests_of_cell(variant: str, torch: str, args: argparse.Namespace) -> tuple[str, ...]:
    """The suite; but in a --quick run with a CUDA-carrying row, a cell under a CPU-only
    torch (universal's "+cpu", the cpu row's) runs WHEEL_TESTS: the CUDA torches' cells
    (no GPU here) put the same CPU library through the whole suite, and what a CPU-only
    torch changes is what those files test (for CI's 55 minutes)."""
    named = [MATRIX.variant(v) for v in args.variants if v in MATRIX.names]
    cuda_rows = [v for v in named if build_matrix.has_cuda(v)]
    cpu_only = torch.endswith("+cpu") or not build_matrix.has_cuda(MATRIX.variant(variant))
    return build_matrix.WHEEL_TESTS if args.quick and cpu_only and cuda_rows else ("tests",)


# The printed fixes are run (tests/test_fixes_cure.py) in a quick row's WHEEL_TESTS cell:
# each is a pip command, run the same way whatever torch's CUDA. A suite cell beside it
# keeps the faults only a CUDA torch prints (their ids name CUDA): 150 worker-seconds less.
CURED_IN_THE_WHEEL_TESTS_CELL = "not test_fixes_cure or cuda"


def keyword_of_cell(
    variant: str, tests: tuple[str, ...], beside_wheel_tests: bool = False
) -> str | None:
    """What a cell leaves out by name: a CUDA wheel's cell of WHEEL_TESTS (under a CPU-only
    torch) loads the very CPU library that the row's CUDA torches' cells (no GPU here) put
    through the suite, its largest-shape bound tests included: the same library file on
    the same CPU, 50 worker-seconds of CI for nothing. The cpu row's cell, its wheel's only one,
    keeps them. A suite cell `beside_wheel_tests` (a cell of the row runs WHEEL_TESTS) leaves
    the printed fixes to that cell."""
    if tests == ("tests",):
        return CURED_IN_THE_WHEEL_TESTS_CELL if beside_wheel_tests else None
    own_files = build_matrix.has_cuda(MATRIX.variant(variant))
    return steps.NOT_LARGEST_SHAPE_BOUNDS if own_files else None


def run_row(
    session: Session, variant: str, args: argparse.Namespace, rows: list[RowResult]
) -> None:
    if TARGETS[variant][1] != build_matrix.this_platform():
        run_cross_row(session, variant, args, rows)
        return
    spec = MATRIX.variant(variant)
    torches = build_matrix.e2e_torches(MATRIX, spec, args.quick)
    # "newest" (PyPI's newest torch) is tested unless the row tests that release already.
    if NEWEST in torches and resolve(NEWEST) in torches:
        session.log(f"[{variant}] the newest torch on PyPI, {resolve(NEWEST)}, is in the row")
        torches.remove(NEWEST)
    arch = args.arch_list or spec.arch_list
    build_row = RowResult(f"{variant} build ({arch})" if spec.cuda else f"{variant} build")
    rows.append(build_row)
    steps_in_row = 3 + len(torches)
    started = time.monotonic()
    step = _stepper(session, variant, steps_in_row)

    step(1, "build")
    steps.build_wheel(session, variant, args.arch_list)
    build_row.build_s = time.monotonic() - started
    step(2, "repair: auditwheel, abi3audit --strict, check-wheel-contents")
    repaired = steps.repair(session, variant)
    _repaired(build_row, repaired)
    # A venv per cell, deleted when the cell is done: a CUDA torch with its libraries
    # takes 5-7 GB, and a row holds up to four.
    # A quick row runs the suite's slow tests (compiles, AOTInductor packages, dev builds)
    # in one cell: under the newest torch, where they break first; else its first.
    slow_cell = NEWEST if NEWEST in torches else torches[0]
    wheel_tests = any(tests_of_cell(variant, t, args) != ("tests",) for t in torches)
    for number, torch in enumerate(torches, start=3):
        tests = tests_of_cell(variant, torch, args)
        step(number, f"test_wheel: {' '.join(tests)} under torch {torch} in a fresh venv")
        label = f"{resolve(torch)} (newest on PyPI)" if torch == NEWEST else torch
        row = RowResult(f"{variant} test torch {label}", repaired.name, build_row.size_mb)
        rows.append(row)
        with tempfile.TemporaryDirectory() as scratch:
            venv = steps.new_venv(session, Path(scratch) / "venv")
            slow = not args.quick or torch == slow_cell or tests != ("tests",)
            keyword = keyword_of_cell(variant, tests, beside_wheel_tests=wheel_tests)
            steps.test_wheel(session, variant, torch, venv, tests, slow=slow, keyword=keyword)
        row.result = "ok: suite passed" if tests == ("tests",) else "ok: its own tests passed"
    step(steps_in_row, "index: generate, serve on 127.0.0.1, pip install into a fresh venv")
    # From every repaired wheel: rows run earlier stay served.
    steps.write_index(session, steps.REPAIRED)
    row = RowResult(f"{variant} pip install from index", repaired.name, build_row.size_mb)
    rows.append(row)
    with tempfile.TemporaryDirectory() as scratch:
        venv = steps.new_venv(session, Path(scratch) / "venv")
        steps.install_from_index(session, variant, spec.smoke_torch, venv)
    row.result = "ok: installed, imported, ran wheelops.add (pip and uv)"
    session.log(f"[{variant}] row done in {time.monotonic() - started:.0f} s")


def e2e(session: Session) -> None:
    """Each row the session names (default: this machine's best) in turn; a failed row is
    recorded and the next one runs; the table is logged, then the session fails if any did."""
    args = steps.session_variants(session)
    rows: list[RowResult] = []
    failed = None
    for variant in args.variants:
        try:
            run_row(session, variant, args, rows)
        except Exception as err:  # record it, finish the table, then fail
            failing = next((r for r in reversed(rows) if r.result == "not run"), None)
            if failing:
                failing.result = f"FAILED ({type(err).__name__}: {err}); the log above says why"
            failed = failed or err
    session.log("matrix run:\n" + table(rows))
    if failed:
        session.error(f"e2e failed: {failed}")
