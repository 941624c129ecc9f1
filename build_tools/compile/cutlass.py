"""CUTLASS's C++ headers for the sm_90a kernels (csrc/ops/*_sm90a.cu): PyPI's
nvidia-cutlass wheel ships them under cutlass_library/source/include. Pinned: the kernels'
template arguments are CUTLASS's API of that release. Found without importing the package
(its Python side needs what a build does not)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

DISTRIBUTION = "nvidia-cutlass"
REQUIREMENT = f"{DISTRIBUTION}==4.2.0.0"
LICENSE = "BSD-3-Clause"  # that release's METADATA (License) and LICENSE.txt: the SBOM says it
# Its LICENSE.txt, which the wheels carry (pyproject's license-files) as this copy, and its
# sha256 as that release's RECORD lists it (tests/test_sbom.py compares them).
LICENSE_COPY = "third_party/cutlass/LICENSE.txt"
LICENSE_RECORD_SHA256 = "gKehi3PUH2TdnKiBrzWTj43oixjHKHAyUfTJTRKZiE0"


def include_dir() -> Path:
    """The directory holding cutlass/ and cute/; SystemExit with the fix where it is absent."""
    spec = importlib.util.find_spec("cutlass_library")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        include = Path(root) / "source" / "include"
        if (include / "cutlass" / "cutlass.h").is_file():
            return include
    raise SystemExit(
        "wheelops build: the sm_90a kernels need CUTLASS's headers, which this Python does "
        f'not have: pip install "{REQUIREMENT}"'
    )
