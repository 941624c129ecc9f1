"""Find the native sources: an op is csrc/ops/<name>.cpp (+ <name>.cu); nothing to list."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"
INCLUDE_DIR = CSRC / "include"


def cpu_sources(root: Path = ROOT) -> list[Path]:
    """Schemas and CPU kernels: every .cpp under csrc/ops."""
    return sorted((root / "csrc" / "ops").glob("*.cpp"))


def cuda_sources(root: Path = ROOT) -> list[Path]:
    """CUDA kernels: every .cu under csrc/ops."""
    return sorted((root / "csrc" / "ops").glob("*.cu"))
