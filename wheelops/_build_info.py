"""The facts of the build that made this install, read from a JSON file in the package.

Reading them loads no native code and imports no torch, so they are there to
explain a library that will not load.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

BUILD_INFO_FILE = "_build_info.json"


def variant_name(cuda_version: str | None) -> str:
    """The variant a build of this CUDA release belongs to: "cpu", "cu130", ..."""
    if cuda_version is None:
        return "cpu"
    major, minor = cuda_version.split(".")[:2]
    return f"cu{major}{minor}"


SCHEMA_VERSION = 1


@dataclass(frozen=True)
class BuildInfo:
    """What the build was: versions, toolkit, GPU archs, compiler, platform, commit."""

    wheelops_version: str
    torch_version: str  # the torch the libraries were compiled against
    stable_abi_floor: str  # the oldest torch they load in (TORCH_TARGET_VERSION)
    python_floor: str
    cuda_version: str | None  # CUDA release of the toolkit, None for a CPU-only build
    nvcc_version: str | None
    cuda_toolkit_origin: str | None  # "PyPI" or "CUDA_HOME"
    cuda_arch_list: str | None  # TORCH_CUDA_ARCH_LIST as built
    sass_archs: tuple[str, ...]  # archs with machine code
    ptx_archs: tuple[str, ...]  # archs with PTX, JIT-compiled for newer GPUs
    compiler: str
    platform: str
    git_commit: str
    libraries: dict[str, str | None] = field(default_factory=dict)  # "cpu"/"cuda" -> file
    cxx_runtime: str | None = None  # "libstdc++.so.6 (shared)"; None in older build facts
    dev_mode: bool = False  # built by wheelops.jit rather than by a wheel build

    @property
    def variant(self) -> str:
        """The published variant this build belongs to: "cpu", "cu130", ..."""
        return variant_name(self.cuda_version)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["schema_version"] = SCHEMA_VERSION
        data["sass_archs"] = list(self.sass_archs)
        data["ptx_archs"] = list(self.ptx_archs)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BuildInfo:
        known = {name for name in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in known}
        values["sass_archs"] = tuple(values.get("sass_archs") or ())
        values["ptx_archs"] = tuple(values.get("ptx_archs") or ())
        return cls(**values)


def read_build_info(path: Path) -> BuildInfo:
    return BuildInfo.from_dict(json.loads(path.read_text()))


def write_build_info(info: BuildInfo, path: Path) -> None:
    path.write_text(json.dumps(info.to_dict(), indent=2, sort_keys=True) + "\n")


_override: BuildInfo | None = None


def set_dev_build_info(info: BuildInfo) -> None:
    """Dev mode (wheelops.jit) reports the facts of the libraries it built."""
    global _override
    _override = info


def build_info() -> BuildInfo:
    """The build facts of the loaded wheelops: see BuildInfo.

    Raises RuntimeError in a source checkout that has not been built.
    """
    if _override is not None:
        return _override
    path = Path(__file__).with_name(BUILD_INFO_FILE)
    if not path.is_file():
        raise RuntimeError(
            f"wheelops has no build facts ({path} is missing): this is a source checkout "
            "that has not been built. Install a wheel, or build in place with "
            "`python -m wheelops.jit`."
        )
    return read_build_info(path)
