"""Settle initcheck's report on lltm (issue #19): does lltm_gates_kernel read gates that
were never written, or did initcheck miss cuBLAS's writes?

    compute-sanitizer --tool initcheck python tools/lltm_initcheck.py {addmm,clone,randn} [BATCH]

Runs wheelops' gate kernel once on gates of the shape and dtype the report named
(4096 x 3*1024, float16), written three ways: by torch.addmm (cuBLAS, as wheelops.lltm
does), by addmm and then gates.clone() (a plain elementwise copy kernel), and by
torch.randn (a plain generator kernel). If only "addmm" draws reports, the sanitizer did
not see the GEMM's stores; if "clone" draws them too, the kernel reads what no one wrote.
Run with PYTORCH_NO_CUDA_MEMORY_CACHING=1, so that each tensor is its own allocation.
"""

from __future__ import annotations

import sys

import torch

import wheelops

STATE, FEATURES = 1024, 8


def gates(how: str, batch: int) -> torch.Tensor:
    g = torch.Generator(device="cuda").manual_seed(0)
    options = {"device": "cuda", "dtype": torch.float16}
    if how == "randn":
        return torch.randn(batch, 3 * STATE, generator=g, **options)
    x = torch.randn(batch, STATE + FEATURES, generator=g, **options)
    weights = torch.randn(3 * STATE, STATE + FEATURES, generator=g, **options) * 0.03
    bias = torch.randn(3 * STATE, generator=g, **options)
    written = torch.addmm(bias, x, weights.t())
    return written.clone() if how == "clone" else written


def main() -> None:
    how = sys.argv[1] if len(sys.argv) > 1 else "addmm"
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 4096  # the reported size
    if how not in ("addmm", "clone", "randn"):
        raise SystemExit(f"usage: {sys.argv[0]} addmm|clone|randn, not {how!r}")
    g = gates(how, batch)
    old_cell = torch.randn(batch, STATE, device="cuda", dtype=torch.float16)
    outputs = torch.ops.wheelops.lltm_gates.default(g, old_cell)
    finite = all(bool(torch.isfinite(t).all()) for t in outputs)
    print(
        f"{how}: gates {tuple(g.shape)} {g.dtype}; wheelops {wheelops.__version__}; "
        f"outputs finite: {finite}"
    )


if __name__ == "__main__":
    main()
