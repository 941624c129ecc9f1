"""The source checkout from the tests: its build_tools and benchmarks, and copies with
nothing built.

The suite runs against an installed wheel from outside the checkout, so the
checkout is not on sys.path, and must not be (its wheelops would shadow the
wheel's): build_tools and benchmarks are imported by their location instead (one of the
two bootstraps build_tools/compat.py lists beside its loader, the only other code loaded
by location).
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def checkout_copy(tmp_path: Path) -> Path:
    """csrc/, accelerator/, build_tools/ and wheelops/ without libraries or build facts, so
    that dev mode is what builds and loads the ops there."""
    if not (REPO / "csrc").is_dir():
        pytest.skip("needs the source checkout")
    copy = tmp_path / "checkout"
    for name in ("csrc", "accelerator", "build_tools", "wheelops"):
        shutil.copytree(
            REPO / name, copy / name, ignore=shutil.ignore_patterns("*.so", "_build_info.json")
        )
    return copy


def import_build_tools() -> None:
    """Make `import build_tools` import the checkout's; skip the module without one."""
    import_checkout_package("build_tools")


def import_checkout_package(name: str) -> None:
    """Make `import <name>` import the checkout's package of that name (build_tools,
    benchmarks); skip the module without one."""
    if name in sys.modules:
        return
    folder = REPO / name
    if not (folder / "__init__.py").is_file():
        pytest.skip("needs the source checkout", allow_module_level=True)
    spec = importlib.util.spec_from_file_location(
        name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    assert spec is not None and spec.loader is not None
    sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules[name])
