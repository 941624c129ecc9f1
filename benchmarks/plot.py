"""The size sweep as a picture: GB/s against bytes moved, one panel per op."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

PLOT_NAME = "sweep.png"
STYLES = {  # implementation -> (label, colour, line style)
    "wheelops": ("wheelops", "tab:blue", "-"),
    "eager": ("eager", "tab:orange", "-"),
    "compile": ("torch.compile", "tab:green", "-"),
    "copy": ("copy (same bytes)", "black", ":"),
}


def plot_sweep(data: dict[str, Any], out: Path) -> Path | None:
    """Write out/sweep.png from a benchmark JSON's sweep; None when there is no sweep.
    Needs matplotlib (any recent version)."""
    rows = data.get("sweep") or []
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = list(dict.fromkeys(row["op"] for row in rows))
    columns = min(3, len(ops))
    lines = math.ceil(len(ops) / columns)
    figure, axes = plt.subplots(
        lines, columns, figsize=(5 * columns, 3.6 * lines), squeeze=False, sharey=True
    )
    for ax, op in zip(axes.flat, ops, strict=False):
        mine = [row for row in rows if row["op"] == op and row["bytes"]]
        sizes = [row["bytes"] / 2**20 for row in mine]
        for impl, (label, colour, style) in STYLES.items():
            values = [_gbps(row, impl) for row in mine]
            points = [(x, y) for x, y in zip(sizes, values, strict=True) if y is not None]
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, style, color=colour, marker="o", markersize=3, label=label)
        ax.set_xscale("log", base=2)
        dtype = mine[0]["dtype"] if mine else ""
        ax.set_title(f"{op} forward ({dtype})")
        ax.set_xlabel("MiB moved")
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes.flat[len(ops) :]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("GB/s")
    axes.flat[0].legend(fontsize=8)
    env = data["environment"]
    figure.suptitle(
        f"wheelops {env['wheelops']}, torch {env['torch']} (CUDA {env.get('torch_cuda')}), "
        f"{env['device_name']}"
    )
    figure.tight_layout()
    path = out / PLOT_NAME
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _gbps(row: dict[str, Any], impl: str) -> float | None:
    if impl == "copy":
        return row.get("copy_gbps")
    entry = row.get(impl)
    return entry.get("gbps") if entry else None
