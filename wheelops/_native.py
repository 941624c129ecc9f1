"""Load the native libraries behind the guard: check, load, and explain a failure.

The CPU library (every op schema and CPU kernel) always loads; the CUDA library
only under a CUDA build of torch. Before any dlopen the build facts are compared
with this process (`_policy.preload_findings`) and the library files' headers
are checked; a loader failure is translated from its real dlerror text. A fatal
finding raises CompatibilityError, unless WHEELOPS_SKIP_GUARD=1, or records it
for the doctor (`python -m wheelops`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from wheelops import _elf, _guard, _loader_errors, _policy
from wheelops._build_info import BUILD_INFO_FILE, BuildInfo, build_info
from wheelops._policy import Finding, Severity
from wheelops._runtime_facts import RuntimeFacts, this_process

if TYPE_CHECKING:
    import torch

PACKAGE_DIR = Path(__file__).resolve().parent
CPU_LIBRARY = "_ops_cpu"
CUDA_LIBRARY = "_ops_cuda"


@dataclass(frozen=True)
class NativeLibraries:
    cpu: Path
    cuda: Path | None
    cuda_not_loaded_because: str | None  # with the fix, when CUDA kernels are unavailable


@dataclass
class LoadReport:
    """What loading found, for the doctor: facts, findings, and what was loaded."""

    build: BuildInfo | None
    runtime: RuntimeFacts
    findings: list[Finding] = field(default_factory=list)
    libraries: NativeLibraries | None = None
    error: _guard.CompatibilityError | None = None


_loaded: NativeLibraries | None = None
_report: LoadReport | None = None


def find_library(directory: Path, stem: str) -> Path | None:
    matches = sorted(directory.glob(f"{stem}*.so"))
    return matches[0] if matches else None


def torch_has_cuda() -> bool:
    """A CUDA build of torch (not CPU-only, ROCm or XPU)."""
    return this_process().torch_kind == "cuda"


def loaded() -> NativeLibraries | None:
    return _loaded


def report() -> LoadReport | None:
    """The last load's report; None in an unbuilt source checkout."""
    return _report


def load_installed(strict: bool = True) -> NativeLibraries | None:
    """Load the libraries next to the package; None in an unbuilt source checkout.

    `strict=False` records a refusal in report() instead of raising (the doctor).
    """
    cpu = find_library(PACKAGE_DIR, CPU_LIBRARY)
    if cpu is None and not (PACKAGE_DIR / BUILD_INFO_FILE).is_file():
        return None
    return load_libraries(cpu, find_library(PACKAGE_DIR, CUDA_LIBRARY), strict=strict)


def load_libraries(
    cpu: Path | None, cuda: Path | None, strict: bool = True
) -> NativeLibraries | None:
    """Check, then load `cpu` and (under a CUDA torch) `cuda`. The caller registers the
    Python kernels (wheelops.ops.register_python_kernels) once they load."""
    global _loaded, _report
    if _loaded is not None:
        raise RuntimeError(f"wheelops native libraries are already loaded from {_loaded.cpu}")
    runtime = this_process()
    try:
        build = build_info()
    except (RuntimeError, OSError, ValueError, TypeError) as err:
        _report = LoadReport(None, runtime, [_unreadable_build_facts(runtime, err)])
        return _refuse(_report.findings, None, strict)
    _report = LoadReport(build, runtime, _policy.preload_findings(build, runtime))
    use_cuda = build.cuda_version is not None and runtime.torch_kind == "cuda"
    wanted = [("CPU", cpu, CPU_LIBRARY)] + ([("CUDA", cuda, CUDA_LIBRARY)] if use_cuda else [])
    for role, path, stem in wanted:
        problem = f"{PACKAGE_DIR / stem}*.so does not exist" if path is None else _elf.problem(path)
        if problem:
            _report.findings.append(_policy.library_file_finding(build, role, problem))
    unloadable = any(path is None for _, path, _ in wanted)
    if _policy.worst(_report.findings) is Severity.FATAL and (_guard.enabled() or unloadable):
        return _refuse(_report.findings, build, strict)
    for role, path, _ in wanted:
        assert path is not None
        failure = _load(path, build, runtime)
        if failure is not None:
            _report.findings.append(_policy.load_failure_finding(build, runtime, role, failure))
            return _refuse(_report.findings, build, strict)
    assert cpu is not None
    _loaded = NativeLibraries(
        cpu=cpu, cuda=cuda if use_cuda else None, cuda_not_loaded_because=_no_cuda_reason(build)
    )
    _report.libraries = _loaded
    return _loaded


def _load(path: Path, build: BuildInfo, runtime: RuntimeFacts) -> _loader_errors.LoadFailure | None:
    import torch

    try:
        torch.ops.load_library(str(path))
    except OSError as err:
        # torch replaces the loader's words with "Could not load this library".
        text = str(err.__cause__ or "") or _loader_errors.dlopen_error(path) or str(err)
        return _loader_errors.classify(
            path,
            text,
            build_torch=build.torch_version,
            runtime_torch=runtime.torch_version,
            build_cuda=build.cuda_version,
            runtime_cuda=runtime.torch_cuda,
        )
    return None


def _no_cuda_reason(build: BuildInfo) -> str | None:
    assert _report is not None
    if build.cuda_version is not None and _report.runtime.torch_kind == "cuda":
        return None
    finding = _policy.torch_build_finding(build, _report.runtime)
    if finding.severity is Severity.OK:  # a cpu build under a CPU-only torch
        return "this wheelops build has no CUDA kernels (the cpu variant)"
    return finding.message + (f". Fix: {finding.fix}" if finding.fix else "")


def _unreadable_build_facts(runtime: RuntimeFacts, err: Exception) -> Finding:
    # An installed package (its libraries are here) whose build facts are gone or damaged:
    # nothing says what the libraries need, so none is loaded.
    path = PACKAGE_DIR / BUILD_INFO_FILE
    state = "missing" if not path.exists() else f"unreadable ({type(err).__name__}: {err})"
    return Finding(
        "build facts",
        Severity.FATAL,
        f"{path}",
        state,
        f"the package's build facts cannot be read: {path} is {state}, so nothing says "
        "what its libraries need; the install is incomplete or damaged",
        _policy.variant_fix(runtime),
    )


def _refuse(findings: list[Finding], build: BuildInfo | None, strict: bool) -> None:
    assert _report is not None
    fatal = [f for f in findings if f.severity is Severity.FATAL]
    what = (
        f"wheelops {build.wheelops_version} ({build.variant} build, against torch "
        f"{build.torch_version})"
        if build
        else "wheelops"
    )
    _report.error = _guard.CompatibilityError(
        _guard.format_findings(f"{what} cannot run in this environment.", fatal)
    )
    if strict:
        raise _report.error from None  # the findings say it all; no chained traceback
    return None


def require(op: str) -> None:
    """Raise a clear error when an op is called but no library is loaded."""
    if _loaded is not None:
        return
    if _report is not None and _report.error is not None:
        raise RuntimeError(f"wheelops.{op}: wheelops did not load.\n{_report.error}")
    raise RuntimeError(
        f"wheelops.{op}: the wheelops native libraries are not built. In a source "
        "checkout run `python -m wheelops.jit` (or call wheelops.jit.load()); "
        "otherwise reinstall with `pip install --force-reinstall --no-deps wheelops`."
    )


def require_cuda_kernels(op: str, tensor: torch.Tensor) -> None:
    if tensor.is_cuda and (_loaded is None or _loaded.cuda is None):
        reason = _loaded.cuda_not_loaded_because if _loaded else None
        raise RuntimeError(
            f"wheelops.{op}: got a tensor on {tensor.device}, but wheelops has no CUDA kernels "
            f"loaded: {reason or 'this build has none'}"
        )
