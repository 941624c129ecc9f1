"""CUDA architecture lists for a build: TORCH_CUDA_ARCH_LIST, else the matrix's default.

Parsing and coverage rules live in the compatibility core (src/wheelops/_compat/archs.py),
which the installed guard uses too.
"""

from __future__ import annotations

import os

from build_tools.compat import archs
from build_tools.plan import matrix

ArchList = archs.ArchList
parse_arch_list = archs.parse_arch_list


def arch_list_for(cuda_version: str, fallback: str | None = None) -> ArchList:
    """TORCH_CUDA_ARCH_LIST if set, else `fallback`, else the matrix's list for this CUDA."""
    spec = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip() or (fallback or "")
    return parse_arch_list(spec or matrix.matrix().default_arch_list(cuda_version))
