"""benchmarks/results keeps each run's README and key tables, not its data (issue #47): every
clone and every `grep` carries the folder. When a new run would take it over the limit,
summarize an older one as the folder's README says (drop its bulky JSON, plots and
superseded tables; its README names the commit that still holds them).
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
if not RESULTS.is_dir():
    pytest.skip("needs the source checkout", allow_module_level=True)

LIMIT_BYTES = 1_500_000  # 1.5 MB of file contents (issue #47)


def test_the_results_fit_the_limit():
    sizes = {
        path.relative_to(RESULTS).as_posix(): path.stat().st_size
        for path in RESULTS.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    total = sum(sizes.values())
    biggest = sorted(sizes.items(), key=lambda item: -item[1])[:5]
    assert total <= LIMIT_BYTES, (
        f"benchmarks/results holds {total:,} bytes, over {LIMIT_BYTES:,}: summarize an older "
        f"run (benchmarks/results/README.md); the biggest files: {biggest}"
    )
