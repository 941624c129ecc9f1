"""The seeds' benchmark timed the way its script does: ``time.time()`` around 100 calls.

    python -m benchmarks.seed_script [--device cuda]

B=32, ``nn.Linear(768, 3072)`` + ``nn.GELU()`` against ``wheelops.nn.LinearGELU`` with
the same weights, float32 (TF32 off), parameters requiring grad as a module's do. Prints
the first round of 100 calls (after one warm-up call each) and the best of five, in ms,
and the speed-up. `benchmarks.user_loop` times the same row with the GPU synchronized per
round; this is the number a user who copies the seeds' script sees.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

import wheelops

BATCH, IN_FEATURES, OUT_FEATURES = 32, 768, 3072
CALLS, ROUNDS = 100, 5


def rounds(fn: Callable[[], object], device: torch.device) -> list[float]:
    """Seconds per round of CALLS calls, the device synchronized before and after each."""
    fn()
    times = []
    for _ in range(ROUNDS):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.time()
        for _ in range(CALLS):
            fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.time() - start)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.seed_script", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    device = torch.device(parser.parse_args(argv).device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    linear = torch.nn.Linear(IN_FEATURES, OUT_FEATURES).to(device)
    gelu = torch.nn.GELU()
    fused = wheelops.nn.LinearGELU(IN_FEATURES, OUT_FEATURES).to(device)
    fused.load_state_dict(linear.state_dict())
    x = torch.randn(BATCH, IN_FEATURES, device=device)
    eager = rounds(lambda: gelu(linear(x)), device)
    ours = rounds(lambda: fused(x), device)
    for name, times in (("nn.Linear+nn.GELU", eager), ("wheelops.nn.LinearGELU", ours)):
        print(
            f"{name}: first {times[0] * 1e3:.2f} ms, best {min(times) * 1e3:.2f} ms per 100 calls"
        )
    print(f"speed-up: first {eager[0] / ours[0]:.2f}x, best {min(eager) / min(ours):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
