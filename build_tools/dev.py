"""Dev mode: build csrc/ from the checkout and register the ops, no reinstall.

    PYTHONPATH=src python -m build_tools.dev   # build (incrementally), load, say what it built
    >>> import build_tools.dev; build_tools.dev.load()

Build tooling, not part of the wheel: it works from a source checkout (csrc/, build_tools/
and src/wheelops/, run from its root with src on PYTHONPATH, so that the checkout's
package is the one imported) whose src/wheelops/ has no built libraries.
The libraries are built by the wheel's builder (build_tools/compile/builder.py), with the
wheel's flags, into a cache per torch/CUDA version (WHEELOPS_JIT_CACHE or
~/.cache/wheelops/jit); an object is rebuilt when its command or a file its last compile
read (its source, the headers its depfile lists) changed. The optional accelerator is
built there too, by the wheel's commands (build_tools/compile/accelerator.py) for the
torch that runs, the same way. The CUDA library needs a matched toolkit, as for a
wheel build (the PyPI one next to torch, or CUDA_HOME); without TORCH_CUDA_ARCH_LIST it
is built for the GPUs of this machine. A library already loaded in a process cannot be
replaced: re-run the process after editing a kernel.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

import wheelops
from build_tools import PACKAGE_DIR, ROOT
from build_tools.compile import accelerator, build_facts, builder, cxx_runtime
from build_tools.compile.builder import cuda_module
from build_tools.plan.arch_list import ArchList
from build_tools.plan.build_plan import prepare_cuda_build
from build_tools.plan.cuda_toolkit import CudaToolkit
from wheelops._compat import loader
from wheelops._compat.facts import BuildInfo, read_build_info, this_process
from wheelops._compat.matrix import variant_name

CHECKOUT = ROOT  # the checkout whose wheelops dev mode builds into


def _require_checkout() -> None:
    """Dev mode loads what it builds into the wheelops that Python imported: that must be
    this checkout's (src/wheelops), not an installed wheel."""
    imported = Path(wheelops.__file__).resolve().parent
    if imported != PACKAGE_DIR:
        raise RuntimeError(
            f"dev mode builds {CHECKOUT}, but Python imported wheelops from {imported} (an "
            f"installed package). Run from the checkout's root with its src on PYTHONPATH: "
            f"cd {CHECKOUT} && PYTHONPATH=src python -m build_tools.dev"
        )


def default_cache_dir() -> Path:
    root = os.environ.get("WHEELOPS_JIT_CACHE") or Path.home() / ".cache" / "wheelops" / "jit"
    variant = variant_name(torch.version.cuda if _cuda_torch() else None)
    return Path(root) / f"torch{torch.__version__.split('+')[0]}-{variant}"


def _cuda_torch() -> bool:
    return this_process().torch_kind == "cuda"


def _gpu_arch_list() -> str | None:
    if not torch.cuda.is_available():
        return None
    caps = sorted({torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})
    return ";".join(f"{major}.{minor}" for major, minor in caps)


def _library(
    cache: Path, toolkit: CudaToolkit | None, archs: ArchList | None, verbose: bool
) -> Path:
    """One library, built by the wheel's builder into the cache (only what changed), for
    this machine; -lineinfo (flags.nvcc_flags) for compute-sanitizer and Nsight."""
    name = cuda_module(toolkit) if toolkit else "_ops_cpu"
    output, work = cache / f"{name}.so", cache / name
    library = builder.Library(name, output, work, toolkit, archs, line_info=True)
    return builder.build(library, verbose=verbose)


def load(verbose: bool = False, cuda: bool | None = None) -> BuildInfo:
    """Build the native libraries from csrc/ (incrementally), load them, register the ops.

    ``cuda=None`` builds CUDA kernels when torch is a CUDA build; ``False`` skips
    them (faster when only CPU kernels changed). Returns the dev build's facts.
    """
    loaded = loader.loaded()
    if loaded is not None:
        if loader.build_info().dev_mode:
            return loader.build_info()
        raise RuntimeError(
            f"wheelops native libraries are already loaded from {loaded.cpu}; dev mode needs a "
            "source checkout without built libraries in src/wheelops/ (delete src/wheelops/*.so)."
        )
    _require_checkout()
    toolkit, archs = None, None
    if _cuda_torch() if cuda is None else cuda:
        toolkit, archs = prepare_cuda_build(torch.version.cuda, _gpu_arch_list())
    cache = default_cache_dir()
    cpu_path = _library(cache, None, None, verbose)
    cuda_path = _library(cache, toolkit, archs, verbose) if toolkit and archs else None
    built = [cpu_path, *([cuda_path] if cuda_path else [])]
    cuda_built = []
    if toolkit and archs and cuda_path:
        cuda_built.append(build_facts.BuiltCudaLibrary(cuda_path.name, toolkit, archs))
    facts = build_facts.collect(
        torch.__version__,
        cpu_path.name,
        cuda_built,
        cxx_runtime.check_libraries(built, build_facts.compiler()),
        built,
        dev_mode=True,
    )
    # Written by the build's writer, read back by this package's reader.
    info = read_build_info(build_facts.write(facts, cache))
    if not isinstance(info, BuildInfo):
        raise RuntimeError(f"build_tools.dev wrote build facts it cannot read: {info.state}")
    assert cuda_path is not None or not info.cuda_libraries
    loader.load_libraries(info, cpu_path, {lib.major: cuda_path for lib in info.cuda_libraries})
    from wheelops.ops import _accel, register_python_kernels_at_first_lookup

    # The optional autograd accelerator, by the wheel's commands for this torch and CPython.
    accelerator_path = accelerator.build_incremental(
        _accel.torch_version(), cache / "accel", verbose
    )
    cxx_runtime.check_libraries([accelerator_path], build_facts.compiler())
    _accel.use_build(accelerator_path)

    register_python_kernels_at_first_lookup()
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m build_tools.dev", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--verbose", action="store_true", help="show the compiler commands")
    parser.add_argument("--cpu-only", action="store_true", help="skip the CUDA library")
    args = parser.parse_args(argv)
    info = load(verbose=args.verbose, cuda=False if args.cpu_only else None)
    libs = loader.loaded()
    assert libs is not None
    print(f"wheelops dev build in {default_cache_dir()}")
    print(f"  cpu library:  {libs.cpu}")
    print(f"  cuda library: {libs.cuda or 'not built'}")
    for lib in info.cuda_libraries:
        print(f"  CUDA {lib.cuda_version} (nvcc {lib.nvcc_version}), archs {lib.arch_list}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
