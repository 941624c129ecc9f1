"""setuptools Extensions for the two native libraries, and the build_ext that also writes
the build facts. Import after plan_build(): torch.utils.cpp_extension reads CUDA_HOME once."""

from __future__ import annotations

from pathlib import Path

from setuptools import Extension
from torch.utils.cpp_extension import BuildExtension, CppExtension

from build_tools import build_facts, cxx_runtime, flags, native_sources
from build_tools.plan import BuildPlan

PACKAGE = "wheelops"


def _relative(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(native_sources.ROOT)) for p in paths]


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
    # CppExtension, not CUDAExtension: that one links libtorch_cuda and libc10_cuda.
    cuda = CppExtension(
        f"{PACKAGE}._ops_cuda",
        _relative(native_sources.cuda_sources()),
        include_dirs=[*include, str(plan.toolkit.include_dir)],
        extra_compile_args={"cxx": flags.cxx_flags(), "nvcc": flags.nvcc_flags()},
        extra_link_args=[
            *flags.link_flags(),
            *flags.cuda_link_flags(str(plan.toolkit.cudart_dir), plan.toolkit.cudart_soname),
        ],
        py_limited_api=True,
    )
    return [cpu, cuda]


def build_ext_command(plan: BuildPlan) -> type[BuildExtension]:
    class BuildWithFacts(BuildExtension):
        """Builds the libraries, then records what was built in wheelops/_build_info.json."""

        def run(self) -> None:
            super().run()
            libraries: dict[str, str | None] = {"cpu": None, "cuda": None}
            for ext in self.extensions:
                kind = "cuda" if ext.name.endswith("_cuda") else "cpu"
                libraries[kind] = Path(self.get_ext_filename(ext.name)).name
            built = [Path(self.get_ext_fullpath(ext.name)) for ext in self.extensions]
            runtime = cxx_runtime.check_libraries(built, build_facts.compiler())
            facts = build_facts.collect(
                plan.torch_version, plan.toolkit, plan.archs, libraries, runtime
            )
            targets = [Path(self.build_lib) / PACKAGE]
            if self.inplace:
                targets.append(native_sources.ROOT / PACKAGE)
            for target in targets:
                target.mkdir(parents=True, exist_ok=True)
                build_facts.write(facts, target)

    return BuildWithFacts
