"""What each op's first call on the GPU costs: loading (and decompressing) its kernels.

    PYTHONPATH=specs python3 -m benchmarks.first_call            # best of 3 processes an op
    PYTHONPATH=specs python3 -m benchmarks.first_call --runs 5 --json out.json

CUDA loads a library's kernels lazily (CUDA_MODULE_LOADING=LAZY, the default since CUDA
12.2): an op's first launch loads its module, and a compressed fatbin is decompressed
then. So each op runs in a fresh process: CUDA is initialised and a torch kernel runs
first (torch's own cost stays out), then the op's default call at a small shape
(float32, or the op's own dtype): the first call and the best of 5 later ones, each
synchronized; the difference is what the first call pays. Best of --runs processes.
Run it from the checkout's root with the Python whose installed wheelops is to be
measured (benchmarks/__init__.py: never the source tree); each fresh process starts in
specs/ and must import that same wheelops.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import opspecs

from .child import CHILD_CWD, check_child

SHAPE = (64, 256)
ONE_OP = """
import sys, time, torch
import opspecs, wheelops
spec = opspecs.BY_NAME[sys.argv[1]]
device = sys.argv[2]
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
torch.ones(1, device=device).add_(1); sync()
sample = spec.samples[0]
inputs = spec.inputs({shape}, spec.dtypes[0], device, 0)
def timed():
    start = time.perf_counter(); sample.call(*inputs); sync()
    return time.perf_counter() - start
first = timed()
print(wheelops.__file__, first, min(timed() for _ in range(5)))
"""


def measure(op: str, device: str) -> tuple[float, float]:
    """In a fresh process (started in CHILD_CWD, whose op descriptions it imports)."""
    done = subprocess.run(
        [sys.executable, "-c", ONE_OP.format(shape=SHAPE), op, device],
        capture_output=True, text=True, check=True, cwd=CHILD_CWD,
    )  # fmt: skip
    where, first, later = done.stdout.split()[-3:]
    check_child(where)
    return float(first), float(later)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))  # cpu: a smoke run
    args = parser.parse_args(argv)
    print(f"wheelops from {Path(sys.modules['wheelops'].__file__ or '').parent}")
    print("| op | first call (ms) | later call (ms) | first - later (ms) |\n|---|---|---|---|")
    rows = {}
    for op in opspecs.NAMES:
        first, later = min(measure(op, args.device) for _ in range(args.runs))
        rows[op] = {"first_ms": first * 1e3, "later_ms": later * 1e3}
        print(f"| {op} | {first * 1e3:.2f} | {later * 1e3:.3f} | {(first - later) * 1e3:.2f} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
