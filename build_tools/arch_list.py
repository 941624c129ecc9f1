"""CUDA architecture lists: the default per CUDA version (from the matrix) and parsing.

Parsing and coverage rules live in wheelops/_archs.py, which the installed
package's guard uses too; it is loaded by path so that the build does not
import the wheelops package (and torch) to read them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "wheelops"
MATRIX_FILE = PACKAGE_DIR / "matrix.json"


def load_package_module(name: str) -> ModuleType:
    path = PACKAGE_DIR / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_wheelops_build_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


_archs = load_package_module("_archs")
ArchList = _archs.ArchList
parse_arch_list = _archs.parse_arch_list


def default_arch_lists() -> dict[str, str]:
    """CUDA version ("13.0") -> the TORCH_CUDA_ARCH_LIST of its variant in the matrix."""
    variants = json.loads(MATRIX_FILE.read_text())["variants"].values()
    return {v["cuda"]: v["arch_list"] for v in variants if v["cuda"]}


def default_arch_list(cuda_version: str) -> str:
    """The matrix's list for this CUDA release, else for the newest release of its major
    that is not newer (a 13.2 toolkit builds what 13.0 does)."""
    major, minor = (int(p) for p in cuda_version.split(".")[:2])
    candidates = [
        ((m, n), spec)
        for version, spec in default_arch_lists().items()
        for m, n in [(int(p) for p in version.split("."))]
        if m == major and n <= minor
    ]
    if not candidates:
        raise RuntimeError(
            f"the matrix ({MATRIX_FILE.name}) has no variant for CUDA {cuda_version}; "
            "set TORCH_CUDA_ARCH_LIST"
        )
    return max(candidates)[1]


def arch_list_for(cuda_version: str, fallback: str | None = None) -> ArchList:
    """TORCH_CUDA_ARCH_LIST if set, else `fallback`, else the matrix's list for this CUDA."""
    spec = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip() or (fallback or "")
    return parse_arch_list(spec or default_arch_list(cuda_version))
