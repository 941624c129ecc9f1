"""setuptools' view of the native libraries: the Extensions (names and file names only),
the build_ext that builds each of them with the one builder (builder.py), then the
accelerators, and writes the build facts, and the bdist_wheel that writes the SBOM from
them into the .dist-info (PEP 770). setuptools compiles nothing itself: the plan's
toolkit, arch lists and target reach builder.Library as arguments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from setuptools import Extension
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_ext import build_ext

from build_tools import PACKAGE_DIR, ROOT
from build_tools.compile import accelerator, build_facts, builder, cxx_runtime, native_sources
from build_tools.compile.builder import cuda_module
from build_tools.package import sbom
from build_tools.plan import matrix
from build_tools.plan.build_plan import BuildPlan

PACKAGE = "wheelops"


def _relative(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in paths]


def extensions(plan: BuildPlan) -> list[Extension]:
    """The build torch's libraries, as setuptools names them (_ops_cpu.abi3.so): they make
    the wheel a platform one; build_ext below builds them (and the other majors')."""
    cpu = Extension(
        f"{PACKAGE}._ops_cpu", _relative(native_sources.cpu_sources()), py_limited_api=True
    )
    if plan.toolkit is None:
        return [cpu]
    cuda_sources = [*native_sources.cuda_sources(), *native_sources.sm90a_sources()]
    name = f"{PACKAGE}.{cuda_module(plan.toolkit)}"
    return [cpu, Extension(name, _relative(cuda_sources), py_limited_api=True)]


def accelerated_torch(plan: BuildPlan) -> list[str]:
    """The torch versions the wheel carries the optional accelerator for (DESIGN.md 13): each
    its variant is tested with; a build of no variant (a source install), its build torch.
    A cross-built wheel carries none yet: there the stable-ABI layer serves every call."""
    if plan.variant is None:
        return [plan.torch_version.split("+")[0]]
    return list(matrix.matrix().variant(plan.variant).torch)


def build_ext_command(plan: BuildPlan) -> type[build_ext]:
    class BuildWithFacts(build_ext):
        """Builds the libraries, then records what was built in wheelops/_build_info.json."""

        def run(self) -> None:
            cpu = next(e for e in self.extensions if e.name.endswith("_ops_cpu"))
            cpu_path = Path(self.get_ext_fullpath(cpu.name))
            package = cpu_path.parent  # where the others go too
            work = Path(self.build_temp)
            target = plan.target
            libraries = [builder.Library("_ops_cpu", cpu_path, work / "_ops_cpu", target=target)]
            cuda = []
            parts = [(plan.toolkit, plan.archs)] if plan.toolkit and plan.archs else []
            for toolkit, archs in [*parts, *plan.other_cuda]:
                module = cuda_module(toolkit)
                name = cpu_path.name.replace("_ops_cpu", module, 1)  # the same tag
                output, objects = package / name, work / module
                libraries.append(builder.Library(module, output, objects, toolkit, archs, target))
                cuda.append(build_facts.BuiltCudaLibrary(name, toolkit, archs))
            built = [builder.build(library) for library in libraries]
            cross = None
            if plan.target is not None:
                cross = (plan.target.wheel_platform, str(plan.target.cxx))
            else:  # a cross-built wheel carries no accelerator yet (accelerated_torch)
                built += accelerator.build_all(package, accelerated_torch(plan))
            compiler = build_facts.compiler(cross[1] if cross else None)
            runtime = cxx_runtime.check_libraries(built, compiler)
            facts = build_facts.collect(
                plan.torch_version,
                cpu_path.name,
                cuda,
                runtime,
                built,
                built_as=plan.variant,
                cross=cross,
                package=package,
            )
            folders = [Path(self.build_lib) / PACKAGE]
            if self.inplace:
                folders.append(PACKAGE_DIR)
            for folder in folders:
                folder.mkdir(parents=True, exist_ok=True)
                build_facts.write(facts, folder)

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
