"""Claims of the docs that a test can read (issue #46): what CI runs, where the doctor
cannot print JSON, and the inductor cache folder the troubleshooting fix removes."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from _checkout import REPO

from build_tools.docs import readme

# test_damaged_install's files that Python runs before the doctor can report
PYTHON_RUNS_FIRST = ("__main__.py", "_doctor_cli.py", "__init__.py", "_damage.py")


def test_the_ci_workflow_names_the_rows_ci_runs():
    workflow = (REPO / ".github" / "workflows" / "ci.yml").read_text()
    comment = " ".join(
        line.removeprefix("#").strip() for line in workflow.splitlines() if line.startswith("#")
    )
    (step,) = re.findall(r"- name: (.*)\n\s+run: \.ci/run", workflow)
    rows, quick = readme.ci_rows()
    said = f"the {' and '.join(rows)} rows end to end"
    assert said in comment and said in step, (said, comment, step)
    assert ("--quick" in comment) == quick


def test_reliability_names_every_file_without_the_doctors_json():
    text = " ".join((REPO / "docs" / "reliability.md").read_text().split())
    (claim,) = re.findall(r"prints valid JSON in every case but (.*?), which Python runs", text)
    assert all(f"`{name}`" in claim for name in PYTHON_RUNS_FIRST), claim


def test_the_inductor_cache_fix_removes_torchs_own_folder():
    """The folder torch uses by default, also in a root shell, where $USER is empty."""
    page = (REPO / "docs" / "troubleshooting.md").read_text()
    (folder,) = re.findall(r'rm -rf "(\$\{TORCHINDUCTOR_CACHE_DIR[^"]*)"', page)
    env = {k: v for k, v in os.environ.items() if k not in ("USER", "TORCHINDUCTOR_CACHE_DIR")}
    shell = subprocess.run(
        ["bash", "-c", f'echo "{folder}"'], env=env, capture_output=True, text=True, check=True
    )
    torch_says = subprocess.run(
        [
            sys.executable,
            "-c",
            "from torch._inductor.runtime.cache_dir_utils import "
            "default_cache_dir; print(default_cache_dir())",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert shell.stdout.strip() == torch_says.stdout.strip()
