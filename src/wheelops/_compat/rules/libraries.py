"""The library files and the build facts that describe them: facts that cannot be read,
which libraries load and why, which are not chosen, and a file the loader must not be
handed (missing, truncated, foreign)."""

from __future__ import annotations

from ..archs import describe
from ..facts import BuildInfo, UnreadableBuildInfo
from ..report import Finding, LibraryFile, Status
from .context import Context, role_name
from .process import torch_build


def unreadable_facts(ctx: Context, facts: UnreadableBuildInfo) -> Finding:
    if facts.checkout:
        return Finding(
            "native libraries",
            Status.FATAL,
            "not built",
            "source checkout",
            "this is a source checkout whose native libraries are not built",
            ("PYTHONPATH=src python -m build_tools.dev",),
        )
    return Finding(
        "build facts",
        Status.FATAL,
        facts.path,
        facts.state,
        f"the package's build facts cannot be read: {facts.path} is {facts.state}, so "
        "nothing says what its libraries need; the install is incomplete or damaged",
        (ctx.reinstall(facts),),
    )


def accepted(ctx: Context, build: BuildInfo, role: str) -> str:
    if role == "cpu":
        return f"op schemas and CPU kernels; loads with torch >= {build.stable_abi_floor}"
    library = ctx.chosen_cuda(build)
    assert library is not None
    why = (
        f"WHEELOPS_CUDA_LIBRARY={ctx.override} (an expert's override)"
        if ctx.override
        else f"torch brings the CUDA {ctx.runtime.torch_cuda} runtime (same major, minor not older)"
    )
    archs = describe(library.sass_archs, library.ptx_archs)
    return f"CUDA {library.cuda_version} kernels, {why}; {archs}"


def not_chosen(ctx: Context, build: BuildInfo) -> str:
    if ctx.runtime.torch_kind != "cuda":
        return torch_build(ctx, build).message
    return (
        f"torch brings the CUDA {ctx.runtime.torch_cuda} runtime; a library of another "
        "CUDA major is never loaded beside it"
    )


def library_file(ctx: Context, build: BuildInfo, file: LibraryFile) -> Finding:
    """A library file the loader must not be handed (missing, truncated, foreign)."""
    role = role_name(file.role)
    problem = file.problem or f"{file.path} does not exist"
    message = f"the wheelops {role} library cannot be loaded: {problem}"
    fix: tuple[str, ...] = (ctx.reinstall(build),)
    if "32-bit" in problem:
        message += "; use a 64-bit Python (wheelops publishes 64-bit wheels only)"
        fix = ()
    wanted = "a complete 64-bit ELF library for " + build.platform
    return Finding(f"{role} library", Status.FATAL, wanted, problem, message, fix)
