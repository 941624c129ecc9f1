"""The one model of matrix.json: the variants, their CUDA and GPU archs, and install commands.

The only reader of matrix.json (`read`). This model holds what the guard reads: which
variant serves a torch and a GPU, and the commands it prints. The build tooling extends
it (build_tools/plan/matrix.py: toolkits, compilers, images, platforms, the torch releases
each variant is built and tested with) over the same data, so both sides always agree
on names, CUDA releases and arch lists. No torch import, no decisions about this machine.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from .archs import ArchList, kernel_for, parse_arch_list
from .versions import variant_name, version_tuple

MATRIX_FILE = Path(__file__).resolve().parent.parent / "matrix.json"
# How every wheelops install command starts where pip can read the install (Matrix.for_install).
PIP_INSTALL = "pip install --force-reinstall --no-deps"


@dataclass(frozen=True)
class Variant:
    """A row of matrix.json, as far as the guard reads it."""

    name: str  # "cpu", "cu130", ...: the index folder and the wheel's local version label
    cuda: str | None
    arch_list: str | None  # TORCH_CUDA_ARCH_LIST
    parts: tuple[str, ...] = ()  # variants whose CUDA libraries it holds (universal)
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
    """matrix.json, as far as the guard reads it: the variants and where to install from."""

    index_url: str  # where the guard's commands install from (WHEELOPS_INDEX_URL overrides)
    torch_index_url: str
    source_url: str
    default_variant: str  # the CUDA variant whose torch the guard suggests by default
    pypi_variant: str  # the wheel PyPI gets, unlabelled
    variants: tuple[Variant, ...]
    # How every wheelops install command starts: --force-reinstall, which uninstalls the
    # install first, where pip can read it (where it cannot: for_install).
    # (Keyword-only: the build's model, build_tools/plan/matrix.py, adds fields without defaults.)
    pip_install: str = field(default=PIP_INSTALL, kw_only=True)
    # WHEELOPS_INDEX_URL is set: a mirror of the index (nox -s index: whl/<label>/ for every
    # wheel, universal included) serves every command, the PyPI wheel's too.
    mirrored: bool = field(default=False, kw_only=True)

    def for_install(self, pip_block: tuple[str, str] | None) -> Matrix:
        """The commands that work on this install, given what of its .dist-info pip cannot
        read (record.pip_block: file, folder). A RECORD: pip cannot uninstall it, so
        --ignore-installed writes over it (--force-reinstall fails; --ignore-installed is
        not the default because, where pip can uninstall, it leaves the old version's
        files and .dist-info beside the new). A METADATA: every pip command fails on it,
        so its .dist-info goes first, and then nothing is left to uninstall. Applied twice,
        the same (the loader's reader and the rules' context both apply it)."""
        if pip_block is None:
            return self
        file, dist_info = pip_block
        if file == "RECORD":
            return replace(self, pip_install="pip install --ignore-installed --no-deps")
        import shlex  # only this command needs it: import never prints one

        return replace(self, pip_install=f"rm -rf {shlex.quote(dist_info)} && {PIP_INSTALL}")

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

    # The commands the guard prints. --no-deps: the wheelops index holds no torch, and
    # the torch installed stays.
    def install_command(self, variant: str) -> str:
        command = f"{self.pip_install} wheelops"
        if variant == self.pypi_variant and not self.mirrored:
            return command  # from PyPI
        return f"{command} --index-url {self.index_url}/{variant}"

    def reinstall_command(
        self, installed_version: str | None, built_as: str | None, installed_from: str | None = None
    ) -> str:
        """The plain reinstall of the wheel that is installed: its variant is the local label
        of the version its METADATA names (PyPI's wheel has none); where METADATA cannot be
        read, the build facts' variant; where neither can, PyPI's wheel, which serves all. A
        wheel built here (a label no index serves: +universal, +cu124) installed from a file
        that is still there: that file."""
        label = (installed_version or "").partition("+")[2]
        if installed_version and not label:
            return self.install_command(self.pypi_variant)
        # METADATA unreadable: the build facts name the variant, and an index may serve it
        # (the cpu variant's): never the file then (#42).
        variant = label if installed_version else built_as or ""
        indexed = variant in self.names and self.variant(variant).index
        if installed_from and not indexed and Path(installed_from).is_file():
            import shlex  # only this command needs it: import never prints one

            return f"{self.pip_install} {shlex.quote(installed_from)}"
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
            f"{self.pip_install} dist/cu130/wheelops-*.whl"
        )


def read(path: Path = MATRIX_FILE) -> dict[str, Any]:
    """matrix.json as data: the one place that reads the file."""
    data: dict[str, Any] = json.loads(path.read_text())
    return data


M = TypeVar("M", bound=Matrix)


def model_of(
    data: dict[str, Any], matrix_type: type[M], variant_type: type[Variant], **extra: Any
) -> M:
    """A model of the data: each variant's row (lists as tuples) as far as `variant_type`
    has fields for it, so that the runtime's model skips the build's fields; the build's
    model (build_tools/plan/matrix.py) has a field for every key and `extra` for its own."""
    names = {f.name for f in fields(variant_type)} - {"name"}
    variants = tuple(
        variant_type(
            name=name,
            **{k: tuple(v) if isinstance(v, list) else v for k, v in row.items() if k in names},
        )
        for name, row in data["variants"].items()
    )
    for v in variants:  # the name <-> CUDA convention holds for every single-CUDA row
        if not v.parts and v.name != variant_name(v.cuda):
            raise ValueError(f"matrix.json: variant {v.name!r} has CUDA {v.cuda}")
    return matrix_type(
        # An override for mirrors and for testing a local index.
        index_url=os.environ.get("WHEELOPS_INDEX_URL", data["index_url"]).rstrip("/"),
        mirrored=bool(os.environ.get("WHEELOPS_INDEX_URL")),
        torch_index_url=data["torch_index_url"].rstrip("/"),
        source_url=data["source_url"],
        default_variant=data["default_variant"],
        pypi_variant=data["pypi_variant"],
        variants=variants,
        **extra,
    )


def load(path: Path = MATRIX_FILE) -> Matrix:
    return model_of(read(path), Matrix, Variant)


@cache
def matrix() -> Matrix:
    return load()
