"""The source checkout from the tests: its build_tools, and copies with nothing built.

The suite runs against an installed wheel from outside the checkout, so the
checkout is not on sys.path, and must not be (its wheelops would shadow the
wheel's): build_tools is imported by its location instead (one of the two bootstraps
build_tools/compat.py lists beside its loader, the only other code loaded by location).
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
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


def import_build_tools() -> None:
    """Make `import build_tools` import the checkout's; skip the module without one."""
    if "build_tools" in sys.modules:
        return
    if not (REPO / "build_tools").is_dir():
        pytest.skip("needs the source checkout", allow_module_level=True)
    spec = importlib.util.spec_from_file_location(
        "build_tools",
        REPO / "build_tools" / "__init__.py",
        submodule_search_locations=[str(REPO / "build_tools")],
    )
    assert spec is not None and spec.loader is not None
    sys.modules["build_tools"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules["build_tools"])
