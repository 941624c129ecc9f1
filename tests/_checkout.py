"""A copy of the source checkout with nothing built, for dev-mode (wheelops.jit) tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def checkout_copy(tmp_path: Path) -> Path:
    """csrc/, build_tools/ and wheelops/ without libraries or build facts, so that dev mode
    is what loads the ops there."""
    if not (REPO / "csrc").is_dir():
        pytest.skip("needs the source checkout")
    copy = tmp_path / "checkout"
    for name in ("csrc", "build_tools", "wheelops"):
        shutil.copytree(
            REPO / name, copy / name, ignore=shutil.ignore_patterns("*.so", "_build_info.json")
        )
    return copy
