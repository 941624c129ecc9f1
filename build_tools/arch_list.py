"""CUDA architecture lists: the default per CUDA major, and what a list puts in a binary."""

from __future__ import annotations

import os
from dataclasses import dataclass

# PyTorch's own lists per CUDA major, plus 8.9 (Ada) where the toolkit has it.
DEFAULT_ARCH_LISTS: dict[int, str] = {
    12: "7.5;8.0;8.6;8.9;9.0;10.0;12.0",
    13: "7.5;8.0;8.6;8.9;9.0;10.0;12.0+PTX",
}


@dataclass(frozen=True)
class ArchList:
    """A parsed TORCH_CUDA_ARCH_LIST: which archs get SASS and which get PTX."""

    spec: str
    sass: tuple[str, ...]
    ptx: tuple[str, ...]


def parse_arch_list(spec: str) -> ArchList:
    """Parse "7.5;8.0;9.0+PTX" (";" or spaces between entries, "+PTX" adds PTX)."""
    sass: list[str] = []
    ptx: list[str] = []
    for entry in spec.replace(" ", ";").split(";"):
        entry = entry.strip()
        if not entry:
            continue
        arch, _, suffix = entry.partition("+")
        if suffix and suffix.upper() != "PTX":
            raise ValueError(
                f"TORCH_CUDA_ARCH_LIST entry {entry!r}: only '+PTX' may follow an arch"
            )
        major, dot, minor = arch.partition(".")
        if not (dot and major.isdigit() and minor.rstrip("af").isdigit()):
            raise ValueError(
                f"TORCH_CUDA_ARCH_LIST entry {entry!r} is not of the form MAJOR.MINOR[+PTX]"
            )
        sass.append(arch)
        if suffix:
            ptx.append(arch)
    if not sass:
        raise ValueError(f"TORCH_CUDA_ARCH_LIST {spec!r} names no architecture")
    return ArchList(
        spec=";".join(a + ("+PTX" if a in ptx else "") for a in sass),
        sass=tuple(sass),
        ptx=tuple(ptx),
    )


def arch_list_for(cuda_version: str, fallback: str | None = None) -> ArchList:
    """TORCH_CUDA_ARCH_LIST if set, else `fallback`, else the default for this CUDA major."""
    spec = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip() or (fallback or "")
    if not spec:
        major = int(cuda_version.split(".")[0])
        if major not in DEFAULT_ARCH_LISTS:
            raise RuntimeError(
                f"no default arch list for CUDA {cuda_version}; set TORCH_CUDA_ARCH_LIST"
            )
        spec = DEFAULT_ARCH_LISTS[major]
    return parse_arch_list(spec)
