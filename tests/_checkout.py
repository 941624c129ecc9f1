"""The source checkout from the tests: copies of it with nothing built.

The checkout's root is on the tests' import path (pyproject.toml's pytest `pythonpath`),
so that they import its build_tools and benchmarks by name; the package itself is in
src/, which is not, so that an installed wheel under test is the wheelops imported.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def checkout_copy(tmp_path: Path) -> Path:
    """csrc/, accelerator/, build_tools/ and src/wheelops/ without libraries or build
    facts, so that dev mode (with the copy's src on PYTHONPATH) is what builds and loads
    the ops there."""
    if not (REPO / "csrc").is_dir():
        pytest.skip("needs the source checkout")
    copy = tmp_path / "checkout"
    for name in ("csrc", "accelerator", "build_tools", "src/wheelops"):
        shutil.copytree(
            REPO / name, copy / name, ignore=shutil.ignore_patterns("*.so", "_build_info.json")
        )
    return copy
