"""The install around the libraries, as the doctor probes it (import reads none of it): an
import that failed, files that differ from the wheel, other copies of wheelops, NVIDIA
wheels of another CUDA major, and the C++ compiler torch builds with at run time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..facts import BuildInfo, RuntimeFacts, UnreadableBuildInfo
from ..report import Finding, Status
from .context import Context

if TYPE_CHECKING:  # the doctor's probes: not import
    from ..probes import CompilerProbe
    from ..record import FileDamage


def import_failure(ctx: Context, build: BuildInfo | UnreadableBuildInfo, error: str) -> Finding:
    wanted = "every module of the package imports"
    fix = (ctx.reinstall(build),)
    return Finding("import", Status.FATAL, wanted, "import wheelops raised", error, fix)


def installed_files(
    ctx: Context, build: BuildInfo | UnreadableBuildInfo, damage: Sequence[FileDamage | str]
) -> Finding:
    """Files that differ from the wheel degrade the install even where import works: what
    they hold is not what was tested."""
    wanted = "every file as its wheel (or build) wrote it"
    if not damage:
        message = "every installed file matches its recorded sha256"
        return Finding("installed files", Status.OK, wanted, "all match", message)
    listed = "; ".join(str(d) for d in damage[:6])
    more = f"; and {len(damage) - 6} more" if len(damage) > 6 else ""
    message = f"this wheelops install is damaged: {listed}{more}. Reinstall it"
    here = f"{len(damage)} differ"
    return Finding(
        "installed files", Status.DEGRADED, wanted, here, message, (ctx.reinstall(build),)
    )


def other_installs(others: Sequence[str]) -> Finding:
    return Finding(
        "other wheelops",
        Status.DEGRADED,
        "one wheelops on sys.path",
        f"{len(others) + 1} on sys.path",
        f"this process imports wheelops from the first on sys.path; also there, and not "
        f"used: {'; '.join(others)}. Remove the one you do not want, or run from another "
        "directory (a source tree in the current directory comes first)",
    )


def other_major_nvidia_wheels(runtime: RuntimeFacts, installed: Sequence[str]) -> list[str]:
    """The NVIDIA wheels of another CUDA major than a CUDA torch's, by their names' suffix
    (nvidia-cublas-cu12; CUDA 13's are unsuffixed, nvidia-cublas, or -cu13). None under a
    torch without CUDA: another package may use them there."""
    if runtime.torch_kind != "cuda" or not runtime.torch_cuda:
        return []
    major = runtime.torch_cuda.split(".")[0]
    return sorted(
        name
        for name in {n.lower().replace("_", "-") for n in installed}
        if name.startswith("nvidia-")
        and name.rsplit("-cu", 1)[-1].isdigit()
        and "-cu" in name
        and name.rsplit("-cu", 1)[1] != major
    )


def nvidia_wheels(runtime: RuntimeFacts, leftover: Sequence[str]) -> Finding:
    """NVIDIA's wheels of a CUDA major torch does not use (other_major_nvidia_wheels): left
    behind where torch was replaced by one of another CUDA (`pip install wheelops` upgrades
    a torch older than its floor from PyPI). Nothing loads them; they hold gigabytes and
    name a CUDA that this environment no longer runs, which misleads whoever reads
    `pip list`."""
    assert runtime.torch_cuda is not None
    majors = sorted({name.rsplit("-cu", 1)[1] for name in leftover})
    return Finding(
        "NVIDIA wheels",
        Status.DEGRADED,
        f"those of CUDA {runtime.torch_cuda[0]}",
        f"also CUDA {', '.join(majors)}: {', '.join(leftover)}",
        f"NVIDIA wheels of CUDA {' and '.join(majors)} are installed, and torch "
        f"{runtime.torch_version} uses CUDA {runtime.torch_cuda}: left behind "
        "when torch was replaced (torch does not load them). Uninstall them unless "
        "another package of this environment needs them",
        (f"pip uninstall -y {' '.join(leftover)}",),
    )


def cxx_compiler(probe: CompilerProbe, working: Sequence[CompilerProbe]) -> Finding:
    """The compiler torch builds C++ with at run time. One that links libstdc++
    statically into shared libraries builds AOTInductor packages that crash (SIGSEGV)
    when loaded, with or without wheelops ops: warn before a user exports a model."""
    wanted = "links libstdc++ dynamically (the runtime torch shares)"
    named = probe.compiler
    if probe.path not in (None, probe.compiler):
        named = f"{probe.compiler} ({probe.path})"
    if probe.runtime == "shared":
        message = f"{named} links the shared C++ runtime"
        return Finding("C++ compiler", Status.OK, wanted, f"{named}: shared", message)
    if probe.runtime == "unknown":
        message = (
            f"{named} could not build a probe library ({probe.detail}); "
            "torch.compile's CPU code and AOTInductor need one"
        )
        return Finding("C++ compiler", Status.OK, wanted, f"{named}: not probed", message)
    fix = tuple(f"export CXX={w.path}" for w in working[:1] if w.path)
    return Finding(
        "C++ compiler",
        Status.DEGRADED,
        wanted,
        f"{named}: private copy",
        f"{named}, the compiler torch builds C++ with at run time ($CXX, else g++), links "
        f"a private copy of {probe.detail} into shared libraries: an AOTInductor package "
        "it builds (torch._inductor.aoti_compile_and_package) crashes with SIGSEGV when "
        "loaded, with or without wheelops ops. Build packages with a compiler that links "
        "libstdc++ dynamically" + (f", e.g. CXX={working[0].path}" if fix else ""),
        fix,
    )
