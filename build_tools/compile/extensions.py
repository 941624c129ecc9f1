"""setuptools Extensions for the native libraries, the build_ext that also builds the
CUDA libraries of other majors (universal) and writes the build facts, and the
bdist_wheel that writes the SBOM from them into the .dist-info (PEP 770). The plan's
toolkit and arch list reach torch.utils.cpp_extension as arguments (flags.use_toolkit,
flags.device_code_flags), not through the environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from setuptools import Extension
from setuptools.command.bdist_wheel import bdist_wheel
from torch.utils.cpp_extension import BuildExtension, CppExtension

from build_tools import ROOT
from build_tools.compile import (
    accelerator,
    build_facts,
    cpu_library,
    cublaslt,
    cuda_library,
    cxx_runtime,
    flags,
    native_sources,
)
from build_tools.package import sbom
from build_tools.plan import matrix
from build_tools.plan.build_plan import BuildPlan
from build_tools.plan.cuda_toolkit import CudaToolkit

PACKAGE = "wheelops"


def cuda_module(toolkit: CudaToolkit) -> str:
    """_ops_cuda13: a CUDA library is named by its CUDA major, one per major at most."""
    return f"_ops_cuda{toolkit.release.split('.')[0]}"


def _relative(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in paths]


def extensions(plan: BuildPlan) -> list[Extension]:
    include = [str(native_sources.INCLUDE_DIR)]
    cpu = CppExtension(
        f"{PACKAGE}._ops_cpu",
        _relative(native_sources.cpu_sources()),
        include_dirs=include,
        extra_compile_args={"cxx": flags.cxx_flags()},
        extra_link_args=flags.link_flags(),
        py_limited_api=True,
    )
    if plan.toolkit is None:
        return [cpu]
    assert plan.archs is not None  # planned with the toolkit
    lt = cublaslt.find(plan.toolkit)
    # CppExtension, not CUDAExtension: that one links libtorch_cuda and libc10_cuda.
    cuda = CppExtension(
        f"{PACKAGE}.{cuda_module(plan.toolkit)}",
        _relative(native_sources.cuda_sources()),
        include_dirs=[*include, str(plan.toolkit.include_dir), str(lt.include_dir)],
        extra_compile_args={
            "cxx": flags.cxx_flags(),
            "nvcc": [
                *flags.nvcc_flags(),
                *flags.device_code_flags(plan.archs, plan.toolkit),
                *([flags.SM90A_DEFINE] if _links_sm90a(plan) else []),
            ],
        },
        extra_link_args=[
            *flags.link_flags(),
            *flags.cuda_link_flags(str(plan.toolkit.cudart_dir), plan.toolkit.cudart_soname),
            *flags.cublaslt_link_flags(str(lt.lib_dir), lt.soname),
        ],
        py_limited_api=True,
    )
    return [cpu, cuda]


def accelerated_torch(plan: BuildPlan) -> list[str]:
    """The torch versions the wheel carries the optional accelerator for (DESIGN.md 13): each
    its variant is tested with; a build of no variant (a source install), its build torch.
    A cross-built wheel carries none yet: there the stable-ABI layer serves every call."""
    if plan.variant is None:
        return [plan.torch_version.split("+")[0]]
    return list(matrix.matrix().variant(plan.variant).torch)


def _links_sm90a(plan: BuildPlan) -> bool:
    """Whether setuptools' CUDA library links the sm_90a kernels (compiled apart, below)."""
    return plan.archs is not None and bool(cuda_library.sm90a_sources(plan.archs))


def build_ext_command(plan: BuildPlan) -> type[BuildExtension]:
    class BuildWithFacts(BuildExtension):
        """Builds the libraries, then records what was built in wheelops/_build_info.json."""

        def run(self) -> None:
            if plan.toolkit is not None:
                flags.use_toolkit(plan.toolkit)
            cpu = next(e for e in self.extensions if e.name.endswith("_ops_cpu"))
            if plan.target is None:
                if plan.toolkit is not None and _links_sm90a(plan):
                    self._add_sm90a_objects()
                super().run()
            else:  # setuptools compiles for this machine only: built here, for the target
                cpu_library.build(
                    plan.target,
                    Path(self.get_ext_fullpath(cpu.name)),
                    Path(self.build_temp) / "_ops_cpu",
                )
            package = Path(self.get_ext_fullpath(cpu.name)).parent  # where the others go too
            built = [Path(self.get_ext_fullpath(ext.name)) for ext in self.extensions]
            cuda = []
            if plan.toolkit is not None and plan.archs is not None:
                name = Path(self.get_ext_filename(f"{PACKAGE}.{cuda_module(plan.toolkit)}")).name
                cuda.append(build_facts.BuiltCudaLibrary(name, plan.toolkit, plan.archs))
            cpu_file = Path(self.get_ext_filename(cpu.name)).name  # _ops_cpu.abi3.so
            for toolkit, archs in plan.other_cuda:
                name = cpu_file.replace("_ops_cpu", cuda_module(toolkit), 1)  # same tag
                work = Path(self.build_temp) / cuda_module(toolkit)
                built.append(cuda_library.build(toolkit, archs, package / name, work, plan.target))
                cuda.append(build_facts.BuiltCudaLibrary(name, toolkit, archs))
            cross = None
            if plan.target is not None:
                cross = (plan.target.wheel_platform, str(plan.target.cxx))
            if plan.target is None:
                built += accelerator.build_all(package, accelerated_torch(plan))
            compiler = build_facts.compiler(cross[1] if cross else None)
            runtime = cxx_runtime.check_libraries(built, compiler)
            facts = build_facts.collect(
                plan.torch_version,
                cpu_file,
                cuda,
                runtime,
                built,
                built_as=plan.variant,
                cross=cross,
                package=package,
            )
            targets = [Path(self.build_lib) / PACKAGE]
            if self.inplace:
                targets.append(ROOT / PACKAGE)
            for target in targets:
                target.mkdir(parents=True, exist_ok=True)
                build_facts.write(facts, target)

        def _add_sm90a_objects(self) -> None:
            """setuptools compiles every source of an extension with one set of flags: the
            sm_90a sources are compiled here, for that arch alone, and linked in."""
            from torch.utils import cpp_extension

            assert plan.toolkit is not None and plan.archs is not None
            cuda = next(e for e in self.extensions if not e.name.endswith("_ops_cpu"))
            work = Path(self.build_temp) / "sm90a"
            torch_includes = list(map(Path, cpp_extension.include_paths()))
            objects = cuda_library.compile_sm90a(plan.toolkit, plan.archs, work, torch_includes)
            cuda.extra_objects = [*(cuda.extra_objects or []), *map(str, objects)]

    return BuildWithFacts


def bdist_wheel_command(plan: BuildPlan) -> type[bdist_wheel]:
    toolkits = tuple(t for t in (plan.toolkit, *(t for t, _ in plan.other_cuda)) if t)

    class WheelWithSbom(bdist_wheel):
        """The wheel, its .dist-info holding sboms/wheelops.cdx.json (build_tools/package/sbom.py),
        made from the build facts and the libraries as they go into the wheel."""

        def write_wheelfile(self, wheelfile_base: str, *args: Any, **kwargs: Any) -> None:
            super().write_wheelfile(wheelfile_base, *args, **kwargs)
            package = Path(self.bdist_dir) / PACKAGE
            version = self.distribution.get_version()
            sbom.write(Path(wheelfile_base), package, version, toolkits)

    return WheelWithSbom
