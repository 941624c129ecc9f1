"""tools/reliability_report.py credits the cases that name no op (the DDP model of every
differentiable op) to the ops whose descriptions give derivatives (#35: it grepped the op
modules for a name they no longer use, and credited them to none)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from _checkout import REPO

TOOL = REPO / "tools" / "reliability_report.py"
CASE = '<testcase classname="tests.test_multi_gpu" name="test_ddp_model_of_every_op" />'


def test_the_ddp_case_counts_for_every_differentiable_op(tmp_path):
    if not TOOL.is_file():
        pytest.skip("needs the source checkout")
    (tmp_path / "run.xml").write_text(f"<testsuites><testsuite>{CASE}</testsuite></testsuites>")
    done = subprocess.run(
        [sys.executable, str(TOOL), str(tmp_path)], capture_output=True, text=True, check=True
    )
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("| op |"))
    ddp = [cell.strip() for cell in header.split("|")].index("DDP")
    credited = {
        cells[1]: cells[ddp] == "1/1"
        for line in lines
        if line.startswith("| ") and not line.startswith(("| op |", "|---"))
        for cells in [[cell.strip() for cell in line.split("|")]]
    }
    without = {"rgb_to_gray", "normalize_volume"}  # no derivatives in their descriptions
    assert {op for op, yes in credited.items() if not yes} == without, credited
    assert len(credited) >= 11
