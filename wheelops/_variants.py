"""The published variants (from matrix.json) and the commands that install the right one.

No torch import: the guard uses this to explain a library that will not load.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from wheelops._archs import ArchList, kernel_for, parse_arch_list

MATRIX_FILE = Path(__file__).with_name("matrix.json")


@dataclass(frozen=True)
class Variant:
    name: str  # "cpu", "cu130", ...: the index folder and the wheel's local version label
    cuda: str | None
    archs: ArchList | None

    @property
    def cuda_major_minor(self) -> tuple[int, int] | None:
        return version_tuple(self.cuda) if self.cuda else None

    def runs_on(self, capability: tuple[int, int]) -> bool:
        return self.archs is not None and bool(
            kernel_for(self.archs.sass, self.archs.ptx, capability)
        )


@dataclass(frozen=True)
class Matrix:
    index_url: str
    torch_index_url: str
    source_url: str
    default_variant: str
    variants: tuple[Variant, ...]


def version_tuple(version: str) -> tuple[int, int]:
    """Major and minor of a version: "13.0" -> (13, 0), "2.14.1+cu130" -> (2, 14)."""
    parts = version.split("+")[0].split(".")
    digits = ["".join(c for c in p if c.isdigit()) or "0" for p in parts[:2]]
    return int(digits[0]), int(digits[1]) if len(digits) > 1 else 0


@cache
def matrix() -> Matrix:
    data = json.loads(MATRIX_FILE.read_text())
    variants = tuple(
        Variant(
            name=name,
            cuda=spec["cuda"],
            archs=parse_arch_list(spec["arch_list"]) if spec["arch_list"] else None,
        )
        for name, spec in data["variants"].items()
    )
    return Matrix(
        # An override for mirrors and for testing a local index.
        index_url=os.environ.get("WHEELOPS_INDEX_URL", data["index_url"]).rstrip("/"),
        torch_index_url=data["torch_index_url"].rstrip("/"),
        source_url=data["source_url"],
        default_variant=data["default_variant"],
        variants=variants,
    )


def variants_for_torch_cuda(torch_cuda: str | None) -> list[Variant]:
    """Variants whose libraries load beside this torch, best first: for a CUDA torch, the
    CUDA variants of its major and a minor not above its own (newest first)."""
    if torch_cuda is None:
        return [v for v in matrix().variants if v.cuda is None]
    major, minor = version_tuple(torch_cuda)
    fitting = [
        v
        for v in matrix().variants
        if v.cuda_major_minor and v.cuda_major_minor[0] == major and v.cuda_major_minor[1] <= minor
    ]
    return sorted(fitting, key=lambda v: v.cuda_major_minor or (0, 0), reverse=True)


def install_command(variant: str) -> str:
    # --no-deps: the wheelops index holds no torch, and the torch installed stays.
    return (
        f"pip install --force-reinstall --no-deps wheelops --index-url "
        f"{matrix().index_url}/{variant}"
    )


def torch_install_command(variant: str | None, floor: str = "2.10") -> str:
    """Install a torch >= floor from PyTorch's index for `variant` (None: from PyPI)."""
    command = f'pip install --upgrade "torch>={floor}"'
    return command + (f" --index-url {matrix().torch_index_url}/{variant}" if variant else "")


def source_build_command(arch_list: str) -> str:
    """Build and install a wheel for exactly these archs (needs git, nox and a CUDA 13 torch)."""
    return (
        f"git clone {matrix().source_url} && cd wheelops && "
        f'TORCH_CUDA_ARCH_LIST="{arch_list}" python -m nox -s build && '
        "pip install --force-reinstall --no-deps dist/cu130/wheelops-*.whl"
    )
