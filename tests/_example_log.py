"""Counts of property-test examples, per op and device, for the reliability report.

Property tests call ``record(op, device)`` once per example they run; if
``WHEELOPS_EXAMPLE_LOG`` names a file, conftest writes the counts there (JSON)
when the session ends; a pytest-xdist worker writes ``<file>.<worker id>``
instead, so that workers do not overwrite each other (the report adds them up).
"""

from __future__ import annotations

import json
import os
from collections import Counter

_counts: Counter[tuple[str, str]] = Counter()


def record(op: str, device: str) -> None:
    _counts[(op, device)] += 1


def write_if_asked() -> None:
    path = os.environ.get("WHEELOPS_EXAMPLE_LOG")
    if not path or not _counts:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    path = f"{path}.{worker}" if worker else path
    table: dict[str, dict[str, int]] = {}
    for (op, device), n in sorted(_counts.items()):
        table.setdefault(op, {})[device] = n
    with open(path, "w") as f:
        json.dump(table, f, indent=2, sort_keys=True)
