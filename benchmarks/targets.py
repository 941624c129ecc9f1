"""From times to what they mean: GB/s, % of copy bandwidth, speed-ups, targets met."""

from __future__ import annotations

import math
from typing import Any

IMPLEMENTATIONS = ("wheelops", "eager", "compile")
PEERS = ("liger",)  # timed where installed (peers.py); no target is judged against it

# target name -> (what it says, where it applies)
TARGETS: dict[str, str] = {
    "forward_bandwidth": "forward >= 90% of copy bandwidth",
    "backward_bandwidth": "backward >= 80% of copy bandwidth",
    "compile": ">= 1.0x torch.compile (0.95x below 4096 x 4096 elements)",
    "eager": ">= 2x eager (where eager is unfused)",
    "eager_parity": ">= 1.0x eager (never slower than PyTorch)",
}
BANDWIDTH_FRACTION = {"forward": 0.90, "backward": 0.80}
COMPILE_SPEEDUP = 1.0
# Issue 27: below 4096 x 4096 elements (the 4096 x 1024 rows, a few microseconds, where
# launch latency is a large part of the time) 0.95x compile is the target.
SMALL_ELEMENTS = 4096 * 4096
COMPILE_SPEEDUP_SMALL = 0.95
EAGER_SPEEDUP = 2.0
EAGER_PARITY = 1.0

MET, MISSED, NOT_APPLICABLE = "met", "missed", "n/a"


def derive(row: dict[str, Any], copy_gbps: float) -> dict[str, Any]:
    """Add GB/s, % copy, speed-ups and target verdicts to a row of raw times."""
    nbytes = row["bytes"]
    for impl in IMPLEMENTATIONS + PEERS:
        entry = row.get(impl)
        if entry is None:
            continue
        has_rate = bool(nbytes) and entry["median_us"] > 0
        entry["gbps"] = nbytes / (entry["median_us"] * 1e3) if has_rate else None
        entry["pct_copy"] = 100 * entry["gbps"] / copy_gbps if entry["gbps"] else None
    row["speedup_vs_eager"] = _speedup(row, "eager")
    row["speedup_vs_compile"] = _speedup(row, "compile")
    row["speedup_vs_liger"] = _speedup(row, "liger")
    row["targets"] = _verdicts(row)
    return row


def _speedup(row: dict[str, Any], other: str) -> float | None:
    mine, theirs = row.get("wheelops"), row.get(other)
    if not mine or not theirs or mine["median_us"] <= 0:
        return None
    return theirs["median_us"] / mine["median_us"]


def _verdicts(row: dict[str, Any]) -> dict[str, str]:
    ok = row["status"] == "ok" and row.get("wheelops") is not None
    verdicts = dict.fromkeys(TARGETS, NOT_APPLICABLE)
    band = f"{row['pass']}_bandwidth"
    if row["bandwidth_target"] and row["bytes"]:
        pct = row["wheelops"]["pct_copy"] if ok else None
        wanted = 100 * BANDWIDTH_FRACTION[row["pass"]]
        verdicts[band] = MET if pct is not None and pct >= wanted else MISSED
    if not row["bytes"] and row["pass"] == "backward":
        # No kernel in any implementation (add's gradient passes through): the times are
        # the autograd engine's and the timer's, and no speed-up is judged.
        return verdicts
    if row.get("compile") is not None:
        speedup = row["speedup_vs_compile"] if ok else None
        small = math.prod(row.get("shape") or [SMALL_ELEMENTS]) < SMALL_ELEMENTS
        wanted = COMPILE_SPEEDUP_SMALL if small else COMPILE_SPEEDUP
        verdicts["compile"] = MET if speedup is not None and speedup >= wanted else MISSED
    if row.get("eager") is not None:
        speedup = row["speedup_vs_eager"] if ok else None
        verdicts["eager_parity"] = (
            MET if speedup is not None and speedup >= EAGER_PARITY else MISSED
        )
    if row["eager_unfused"]:
        speedup = row["speedup_vs_eager"] if ok else None
        verdicts["eager"] = MET if speedup is not None and speedup >= EAGER_SPEEDUP else MISSED
    return verdicts
