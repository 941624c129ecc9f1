"""Find the native sources: an op is csrc/ops/<name>.cpp (+ <name>.cu, + <name>_sm90a.cu);
kernels that several ops share are compiled once from csrc/include/wheelops/kernels/;
nothing to list."""

from __future__ import annotations

from pathlib import Path

from build_tools import ROOT

CSRC = ROOT / "csrc"
INCLUDE_DIR = CSRC / "include"
# The optional autograd accelerator: built per torch version, outside the stable ABI, so
# outside csrc/ (whose every file is on it).
ACCEL_DIR = ROOT / "accelerator"
ACCEL_SOURCES = sorted(ACCEL_DIR.glob("*.cpp"))


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


# Kernels for one GPU architecture's own features (sm_90a: Hopper's wgmma and TMA), each
# compiled for that architecture alone: their CUTLASS templates would cost a device pass
# per architecture of the list, and run on none of the others.
SM90A_SUFFIX = "_sm90a.cu"


def cuda_sources(root: Path = ROOT) -> list[Path]:
    """CUDA kernels for every architecture of the list: every .cu under csrc/ops and
    csrc/include/wheelops/kernels but the sm_90a ones."""
    return [p for p in _sources(root, ".cu") if not p.name.endswith(SM90A_SUFFIX)]


def sm90a_sources(root: Path = ROOT) -> list[Path]:
    """CUDA kernels compiled for sm_90a only (where the list has 9.0): csrc/ops/*_sm90a.cu."""
    return sorted((root / "csrc" / "ops").glob(f"*{SM90A_SUFFIX}"))
