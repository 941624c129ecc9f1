"""What every rule reads besides the build: this process, the matrix (read only where a
rule prints a command), the install's own facts; the CUDA library chosen; and the commands
that fix what a rule finds, written for this install and this torch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from ..facts import BuildInfo, CudaLibraryInfo, RuntimeFacts, UnreadableBuildInfo
from ..versions import variant_name, version_tuple

if TYPE_CHECKING:  # only a rule that prints a command reads the matrix: not import
    from ..matrix import Matrix


def role_name(role: str) -> str:
    """ "cpu" -> "CPU", "cuda13" -> "CUDA 13": how findings name a library."""
    return "CPU" if role == "cpu" else f"CUDA {role.removeprefix('cuda')}"


def cuda_role(library: CudaLibraryInfo) -> str:
    return f"cuda{library.major}"


def _torch_label(torch_version: str) -> str | None:
    """The local version label of a torch wheel names its index: 2.9.0+cu126 -> cu126."""
    _, plus, label = torch_version.partition("+")
    return label if plus and label.startswith(("cu", "cpu", "rocm", "xpu")) else None


@dataclass(eq=False)  # a private holder of the facts: nothing compares or hashes it
class Context:
    """The facts the rules share over one evaluation (see policy.Inputs for each)."""

    matrix_or_reader: Matrix | Callable[[], Matrix]
    runtime: RuntimeFacts
    cuda_override: int | str | None = None
    installed_version: str | None = None
    installed_from: str | None = None
    pip_block: tuple[str, str] | None = None

    @cached_property
    def matrix(self) -> Matrix:
        given = self.matrix_or_reader
        model = given() if callable(given) else given
        return model.for_install(self.pip_block)

    @property
    def override(self) -> int | None:
        """The CUDA major WHEELOPS_CUDA_LIBRARY asks for: one that wheelops builds, or None
        (unset, or a value it refuses: see override_invalid)."""
        value = str(self.cuda_override).strip() if self.cuda_override is not None else ""
        if not value:
            return None  # unset: no need to read the matrix's CUDA majors
        return int(value) if value in self.override_values else None

    @property
    def override_values(self) -> tuple[str, ...]:
        return tuple(str(m) for m in self.matrix.cuda_majors)

    @property
    def override_invalid(self) -> bool:
        unset = self.cuda_override is None or str(self.cuda_override).strip() == ""
        return not unset and self.override is None

    def chosen_cuda(self, build: BuildInfo) -> CudaLibraryInfo | None:
        """The CUDA library to load: the one of torch's CUDA major (or the override's);
        None under a torch that is not a CUDA build, or where the build has none."""
        if self.runtime.torch_kind != "cuda" or not build.cuda_libraries:
            return None
        if self.override_invalid:
            return None
        assert self.runtime.torch_cuda is not None
        major = self.override or version_tuple(self.runtime.torch_cuda)[0]
        return build.cuda_library(major)

    def reinstall(self, build: BuildInfo | UnreadableBuildInfo) -> str:
        """The plain reinstall of the wheel that is installed (a damaged install's fix)."""
        built_as = build.variant if isinstance(build, BuildInfo) else None
        return self.matrix.reinstall_command(self.installed_version, built_as, self.installed_from)

    def change_torch(self, build: BuildInfo, library: CudaLibraryInfo) -> str:
        """Install a torch built with this library's CUDA."""
        variant = variant_name(library.cuda_version)
        return self.matrix.torch_install_command(variant, build.stable_abi_floor)

    def upgrade_torch(self, build: BuildInfo) -> str:
        """Upgrade torch from the index the running one came from (its CUDA stays); with no
        torch, from the PyTorch index of this wheel's variant, or PyPI's torch for a wheel
        (universal) that serves every torch."""
        if self.runtime.torch_version is not None:
            variant = _torch_label(self.runtime.torch_version)
        else:
            variant = build.variant if build.variant in self.matrix.index_names else None
        return self.matrix.torch_install_command(variant, build.stable_abi_floor)

    def variant_fix(self, floor: str) -> tuple[str, ...]:
        """Install the wheelops variant whose libraries load beside this torch."""
        m = self.matrix
        if self.runtime.torch_kind != "cuda":
            return (m.install_command("cpu"),)
        fitting = m.variants_for_torch_cuda(self.runtime.torch_cuda)
        if fitting:
            return (m.install_command(fitting[0].name),)
        default = m.default_variant  # no variant for this CUDA: a torch for one, then it
        return (f"{m.torch_install_command(default, floor)} && {m.install_command(default)}",)
