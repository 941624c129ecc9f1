"""Call every native op (backward ops included) with bad input, straight through
torch.ops.wheelops, on CPU and (if present) CUDA, and check each raises its own
RuntimeError with the exact message, numbers included.

Run in a fresh process (a crash is then a test failure, not a dead test run):

    python -m _native_checks [--dev cpu|all]   # from tests/, the wheelops under test importable

--dev builds and loads the ops in dev mode first (build_tools.dev, from the checkout
on PYTHONPATH): cpu for the CPU library only, all for both.

It prints one line per failure and ends with "native checks: N of N raised".
A private copy of the C++ runtime in a library (issue #13) crashed here with
SIGSEGV, or lost the numbers ("got [ and [").
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable

import torch

import wheelops
from wheelops._compat import loader

ops = torch.ops.wheelops


def _calls(device: str) -> list[tuple[str, Callable[[], object], str]]:
    def t(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.ones(*shape, dtype=dtype, device=device)

    x = t(2, 3)
    return [
        ("add", lambda: ops.add.default(t(4), t(5)), r"same shape \(got \[4\] and \[5\]\)"),
        (
            "relu_scale",
            lambda: ops.relu_scale.default(t(4, dtype=torch.long), 1.0),
            r"'x' has dtype Long; expected float32",
        ),
        (
            "relu_scale_backward",
            lambda: ops.relu_scale_backward.default(t(3), t(4), 1.0),
            r"same shape \(got \[3\] and \[4\]\)",
        ),
        (
            "bias_gelu",
            lambda: ops.bias_gelu.default(x, t(2), "none"),
            r"'bias' must have shape \[3\] .*, got \[2\]",
        ),
        (
            "bias_gelu_backward",
            lambda: ops.bias_gelu_backward.default(t(3, 3), x, t(3), "none"),
            r"same shape \(got \[3, 3\] and \[2, 3\]\)",
        ),
        (
            "layer_norm",
            lambda: ops.layer_norm.default(x, t(2), None, 1e-5),
            r"'weight' must have shape \[3\] .*, got \[2\]",
        ),
        (
            "layer_norm_backward",
            lambda: ops.layer_norm_backward.default(
                t(3, 3), x, t(2), t(2), None, True, False, False
            ),
            r"same shape \(got \[3, 3\] and \[2, 3\]\)",
        ),
        (
            "rms_norm",
            lambda: ops.rms_norm.default(x, t(3, 1), 1e-6),
            r"'weight' must have shape \[3\] .*, got \[3, 1\]",
        ),
        (
            "rms_norm_backward",
            lambda: ops.rms_norm_backward.default(t(3, 3), x, t(2), None, True, False),
            r"same shape \(got \[3, 3\] and \[2, 3\]\)",
        ),
        (
            "softmax",
            lambda: ops.softmax.default(x, 5),
            r"'dim' must be in \[-2, 1\] for 'x' of shape \[2, 3\], got 5",
        ),
        (
            "softmax_backward",
            lambda: ops.softmax_backward.default(t(3, 3), x, 1),
            r"same shape \(got \[3, 3\] and \[2, 3\]\)",
        ),
        (
            "silu_and_mul",
            lambda: ops.silu_and_mul.default(t(2, 5)),
            r"even last dimension .*, got shape \[2, 5\]",
        ),
        (
            "silu_and_mul_backward",
            lambda: ops.silu_and_mul_backward.default(t(2, 4), t(2, 4)),
            r"x has shape \[2, 4\], grad has \[2, 4\]",
        ),
        (
            "rgb_to_gray",
            lambda: ops.rgb_to_gray.default(t(4, 4, 4, dtype=torch.uint8)),
            r"'img' must have shape .*, got \[4, 4, 4\]",
        ),
        (
            "normalize_volume",
            lambda: ops.normalize_volume.default(t(4, dtype=torch.int16), 1.0),
            r"'vol' has dtype Short; expected uint16",
        ),
        (
            "fused_linear_gelu",
            lambda: ops.fused_linear_gelu.default(x, t(4, 2), t(4)),
            r"'weight' must have shape \[out_features, 3\] .*, got \[4, 2\]",
        ),
        (
            "fused_linear_gelu_backward",
            lambda: ops.fused_linear_gelu_backward.default(t(2, 5), x, t(4, 3), t(2, 4)),
            r"'grad' must have shape \[2, 4\] .*, got \[2, 5\]",
        ),
        (
            "lltm_gates",
            lambda: ops.lltm_gates.default(t(4, 15), t(4, 6)),
            r"'old_cell' must have shape \[4, 5\] .*, got \[4, 6\]",
        ),
        (
            "lltm_gates_backward",
            lambda: ops.lltm_gates_backward.default(t(3, 5), t(4, 5), t(4, 15), t(4, 5)),
            r"'grad_h' must have shape \[4, 5\] .*, got \[3, 5\]",
        ),
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
