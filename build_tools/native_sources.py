"""Find the native sources: an op is csrc/ops/<name>.cpp (+ <name>.cu); kernels that
several ops share are compiled once from csrc/include/wheelops/kernels/; nothing to list."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"
INCLUDE_DIR = CSRC / "include"


def _sources(root: Path, suffix: str) -> list[Path]:
    """Every op's file, then the shared kernels' ones: `suffix` under csrc/ops and under
    csrc/include/wheelops/kernels (each named apart from the ops: objects are named by stem)."""
    csrc = root / "csrc"
    return [
        *sorted((csrc / "ops").glob(f"*{suffix}")),
        *sorted((csrc / "include" / "wheelops" / "kernels").glob(f"*{suffix}")),
    ]


def cpu_sources(root: Path = ROOT) -> list[Path]:
    """Schemas and CPU kernels: every .cpp under csrc/ops (and csrc/include/wheelops/kernels)."""
    return _sources(root, ".cpp")


def cuda_sources(root: Path = ROOT) -> list[Path]:
    """CUDA kernels: every .cu under csrc/ops and csrc/include/wheelops/kernels."""
    return _sources(root, ".cu")
