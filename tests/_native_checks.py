"""Call every native op (backward ops included) with bad input, straight through
torch.ops.wheelops, on CPU and (if present) CUDA, and check each raises its own
RuntimeError with the exact message, numbers included.

Run in a fresh process (a crash is then a test failure, not a dead test run):

    python -m _native_checks [--dev cpu|all]   # from tests/, wheelops and specs/ importable

--dev builds and loads the ops in dev mode first (build_tools.dev, from the checkout
on PYTHONPATH): cpu for the CPU library only, all for both.

It prints one line per failure and ends with "native checks: N of N raised".
A private copy of the C++ runtime in a library (issue #13) crashed here with
SIGSEGV, or lost the numbers ("got [ and [").
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from collections.abc import Callable

import opspecs
import torch
from opspecs._spec import ones_on

import wheelops
from wheelops._compat import loader


def _calls(device: str) -> list[tuple[str, Callable[[], object], str]]:
    """Every description's bad native calls (specs/opspecs), as (op, call, message)."""
    return [
        (bad.op, functools.partial(bad.call, ones_on(device)), bad.message)
        for spec in opspecs.ALL
        for bad in spec.native_bad_calls
    ]


def registered_ops() -> set[str]:
    prefix = "wheelops::"
    return {
        name[len(prefix) :]
        for name in torch._C._dispatch_get_all_op_names()
        if name.startswith(prefix)
    }


def _cuda_kernels_loaded() -> bool:
    libraries = loader.loaded()
    return torch.cuda.is_available() and libraries is not None and libraries.cuda is not None


def run() -> tuple[int, list[str]]:
    """How many bad calls were made, and every failure as a line."""
    made, failures = 0, []
    devices = ["cpu", *(["cuda"] if _cuda_kernels_loaded() else [])]
    for device in devices:
        calls = _calls(device)
        missing = registered_ops() - {name for name, _, _ in calls}
        failures += [f"{name}: no bad call here" for name in sorted(missing)]
        for name, call, expected in calls:
            made += 1
            try:
                call()
            except RuntimeError as err:
                message = str(err).splitlines()[0]
                if not re.search(rf"wheelops\.{name}: .*{expected}", message):
                    failures.append(f"{name} ({device}): wrong message: {message}")
            else:
                failures.append(f"{name} ({device}): no error")
        if device == "cuda":
            torch.cuda.synchronize()  # no CUDA error left behind
    return made, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m _native_checks")
    parser.add_argument("--dev", choices=["cpu", "all"], help="build in dev mode first")
    args = parser.parse_args(argv)
    if args.dev:
        from build_tools import dev

        dev.load(cuda=args.dev == "all")
    made, failures = run()
    for line in failures:
        print(line)
    print(f"native checks: {made} calls, {len(failures)} failures ({wheelops.__file__})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
