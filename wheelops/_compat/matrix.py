"""The one model of matrix.json: the variants, their CUDA and GPU archs, and install commands.

The only reader of matrix.json. The guard uses it to say which variant serves a
torch; the build tooling (build_tools) to pick toolkits, arch lists, images and
torch versions. No torch import, no decisions about this machine.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .archs import ArchList, kernel_for, parse_arch_list

MATRIX_FILE = Path(__file__).resolve().parent.parent / "matrix.json"


def version_tuple(version: str) -> tuple[int, int]:
    """Major and minor of a version: "13.0" -> (13, 0), "2.14.1+cu130" -> (2, 14)."""
    parts = version.split("+")[0].split(".")
    digits = ["".join(c for c in p if c.isdigit()) or "0" for p in parts[:2]]
    return int(digits[0]), int(digits[1]) if len(digits) > 1 else 0


def variant_name(cuda_version: str | None) -> str:
    """The variant of a CUDA release: None -> "cpu", "13.0" -> "cu130" (PyTorch's labels)."""
    if cuda_version is None:
        return "cpu"
    major, minor = version_tuple(cuda_version)
    return f"cu{major}{minor}"


@dataclass(frozen=True)
class Variant:
    name: str  # "cpu", "cu130", ...: the index folder and the wheel's local version label
    cuda: str | None
    toolkit: str | None  # the exact CUDA toolkit release the variant is built with
    toolkit_source: str | None  # "pypi" (toolkit wheels) or "image" (the Docker image's)
    arch_list: str | None  # TORCH_CUDA_ARCH_LIST
    host_compiler: str  # the manylinux gcc-toolset the image compiles with
    build_torch: str
    torch: tuple[str, ...]  # torch releases the wheel is tested against
    smoke_torch: str | None  # the one torch a quick run tests against
    platforms: tuple[str, ...]
    parts: tuple[str, ...] = ()  # variants whose CUDA libraries it holds (universal)
    quick_torch: tuple[str, ...] = ()  # torch releases a quick run tests besides smoke_torch
    index: bool = True  # published on the variant index as a wheel of its own

    @property
    def archs(self) -> ArchList | None:
        return parse_arch_list(self.arch_list) if self.arch_list else None

    @property
    def cuda_major_minor(self) -> tuple[int, int] | None:
        return version_tuple(self.cuda) if self.cuda else None

    def runs_on(self, capability: tuple[int, int]) -> bool:
        archs = self.archs
        return archs is not None and bool(kernel_for(archs.sass, archs.ptx, capability))


@dataclass(frozen=True)
class Matrix:
    index_url: str  # where the guard's commands install from (WHEELOPS_INDEX_URL overrides)
    published_index_url: str  # the index as matrix.json publishes it
    torch_index_url: str
    source_url: str
    default_variant: str  # the CUDA variant whose torch the guard suggests by default
    pypi_variant: str  # the wheel PyPI gets, unlabelled
    manylinux: str
    python: str
    image_repository: str
    variants: tuple[Variant, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.variants)

    @property
    def index_names(self) -> tuple[str, ...]:
        """The variants published on the index (and PyTorch's index of the same name)."""
        return tuple(v.name for v in self.variants if v.index)

    @property
    def cuda_majors(self) -> tuple[int, ...]:
        """The CUDA majors wheelops builds libraries for: 12, 13."""
        return tuple(sorted({m[0] for v in self.variants if (m := v.cuda_major_minor)}))

    def image(self, variant: str, arch: str) -> str:
        """The build image of a variant on a platform."""
        return f"{self.image_repository}:{variant}-{arch}"

    def manylinux_tag(self, arch: str) -> str:
        return f"{self.manylinux}_{arch}"

    def base_image(self, arch: str) -> str:
        return f"quay.io/pypa/{self.manylinux}_{arch}"

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(f"unknown variant {name!r}: the matrix has {', '.join(self.names)}")

    def variants_for_torch_cuda(self, torch_cuda: str | None) -> list[Variant]:
        """Variants whose libraries load beside this torch, best first: for a CUDA torch,
        the CUDA variants of its major and a minor not above its own (newest first)."""
        if torch_cuda is None:
            return [v for v in self.variants if v.index and v.cuda is None]
        major, minor = version_tuple(torch_cuda)
        fitting = [
            v
            for v in self.variants
            if v.index and v.cuda_major_minor and v.cuda_major_minor[0] == major
            if v.cuda_major_minor[1] <= minor
        ]
        return sorted(fitting, key=lambda v: v.cuda_major_minor or (0, 0), reverse=True)

    def default_arch_list(self, cuda_version: str) -> str:
        """The list of this CUDA release's variant, else of the newest variant of its major
        that is not newer (a 13.2 toolkit builds what 13.0 does)."""
        major, minor = version_tuple(cuda_version)
        fitting = [
            v
            for v in self.variants
            if v.arch_list and v.cuda_major_minor
            if v.cuda_major_minor[0] == major and v.cuda_major_minor[1] <= minor
        ]
        fitting.sort(key=lambda v: v.cuda_major_minor or (0, 0), reverse=True)
        if not fitting:
            raise RuntimeError(
                f"the matrix ({MATRIX_FILE.name}) has no variant for CUDA {cuda_version}; "
                "set TORCH_CUDA_ARCH_LIST"
            )
        assert fitting[0].arch_list is not None
        return fitting[0].arch_list

    # The commands the guard prints. --no-deps: the wheelops index holds no torch, and
    # the torch installed stays.
    def install_command(self, variant: str) -> str:
        command = "pip install --force-reinstall --no-deps wheelops"
        if variant == self.pypi_variant:
            return command  # from PyPI
        return f"{command} --index-url {self.index_url}/{variant}"

    def reinstall_command(self, installed_version: str | None, built_as: str | None) -> str:
        """The plain reinstall of the wheel that is installed: its variant is the local label
        of the version its METADATA names (PyPI's wheel has none); where METADATA cannot be
        read, the build facts' variant; where neither can, PyPI's wheel, which serves all."""
        label = (installed_version or "").partition("+")[2]
        if installed_version and not label:
            return self.install_command(self.pypi_variant)
        for variant in (label, built_as):
            if variant in self.names:
                return self.install_command(variant)
        return self.install_command(self.pypi_variant)

    def torch_install_command(self, variant: str | None, floor: str) -> str:
        """Install a torch >= floor from PyTorch's index for `variant` (None: from PyPI)."""
        command = f'pip install --upgrade "torch>={floor}"'
        return command + (f" --index-url {self.torch_index_url}/{variant}" if variant else "")

    def source_build_command(self, arch_list: str) -> str:
        """Build and install a wheel for exactly these archs (needs git, nox, CUDA 13 torch)."""
        return (
            f"git clone {self.source_url} && cd wheelops && "
            f'TORCH_CUDA_ARCH_LIST="{arch_list}" python -m nox -s build -- cu130 && '
            "pip install --force-reinstall --no-deps dist/cu130/wheelops-*.whl"
        )


def load(path: Path = MATRIX_FILE) -> Matrix:
    data = json.loads(path.read_text())
    variants = tuple(
        Variant(name=name, **{k: tuple(v) if isinstance(v, list) else v for k, v in spec.items()})
        for name, spec in data["variants"].items()
    )
    for v in variants:  # the name <-> CUDA convention holds for every single-CUDA row
        if not v.parts and v.name != variant_name(v.cuda):
            raise ValueError(f"{path.name}: variant {v.name!r} has CUDA {v.cuda}")
    return Matrix(
        # An override for mirrors and for testing a local index.
        index_url=os.environ.get("WHEELOPS_INDEX_URL", data["index_url"]).rstrip("/"),
        published_index_url=data["index_url"].rstrip("/"),
        torch_index_url=data["torch_index_url"].rstrip("/"),
        source_url=data["source_url"],
        default_variant=data["default_variant"],
        pypi_variant=data["pypi_variant"],
        manylinux=data["manylinux"],
        python=data["python"],
        image_repository=data["image_repository"],
        variants=variants,
    )


@cache
def matrix() -> Matrix:
    return load()
