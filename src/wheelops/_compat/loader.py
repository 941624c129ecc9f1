"""Find the native libraries, ask the policy, dlopen what it accepts, keep one state.

The CPU library (every op schema and CPU kernel) and, under a CUDA torch, the
CUDA library. Before any dlopen the facts go to `policy.evaluate`; a loader
failure is read from its real dlerror text and evaluated again. A refusal
raises CompatibilityError (or, for the doctor, is only recorded). The GPU
check runs at the first CUDA call per device, never at import.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import elf, record, torch_internals
from .early import CompatibilityError, UnsupportedGPUError
from .early import finding_lines as _finding_lines
from .facts import (
    BUILD_INFO_FILE,
    BuildInfo,
    CudaLibraryInfo,
    UnreadableBuildInfo,
    other_installs,
    read_build_info,
    this_process,
)
from .policy import Inputs, evaluate
from .report import Finding, LibraryFile, Report, Status

if TYPE_CHECKING:
    import torch

    from .dlerror import LoadFailure
    from .matrix import Matrix

PACKAGE_DIR = Path(__file__).resolve().parent.parent
CMAKE_PREFIX = PACKAGE_DIR / "share" / "cmake"  # holds wheelops/wheelopsConfig.cmake
SKIP_ENV = "WHEELOPS_SKIP_GUARD"
CUDA_LIBRARY_ENV = "WHEELOPS_CUDA_LIBRARY"  # experts: load the CUDA library of this major
DOCTOR = "python -m wheelops"


def guard_enabled() -> bool:
    """False when WHEELOPS_SKIP_GUARD=1: experts who know better than the checks."""
    return os.environ.get(SKIP_ENV, "") not in ("1", "true", "yes")


def cuda_override() -> str | None:
    """WHEELOPS_CUDA_LIBRARY=12: load the CUDA 12 library whatever torch's CUDA (experts).
    Passed on as set, for the policy to accept (a CUDA major wheelops builds) or refuse."""
    return os.environ.get(CUDA_LIBRARY_ENV, "").strip() or None


@dataclass(eq=False)  # the one record of a process's libraries: never compared
class Loaded:
    """The libraries this process loaded, and the report that let them load."""

    cpu: Path
    cuda: Path | None
    report: Report

    @property
    def cuda_info(self) -> CudaLibraryInfo | None:
        """The build facts of the CUDA library that serves."""
        build = self.report.build
        if self.cuda is None or not isinstance(build, BuildInfo):
            return None
        return next(lib for lib in build.cuda_libraries if lib.file == self.cuda.name)

    @property
    def cuda_not_loaded_because(self) -> str | None:
        finding = self.report.finding("torch build")
        if self.cuda is not None or finding is None:
            return None
        return finding.message + "".join(f". Fix: {c}" for c in finding.fix[:1])


@dataclass(eq=False)
class _State:
    """The one record of what loading found: the inputs `evaluate` saw, and the outcome."""

    inputs: Inputs | None = None
    report: Report | None = None
    loaded: Loaded | None = None
    error: CompatibilityError | None = None


_state = _State()


def find_cpu_library(directory: Path) -> Path | None:
    matches = _libraries(directory, "_ops_cpu")
    return matches[0] if matches else None


def _libraries(directory: Path, prefix: str) -> list[Path]:
    """The `prefix`*.so files of `directory`, sorted (a listing: cheaper than Path.glob)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(directory / n for n in names if n.startswith(prefix) and n.endswith(".so"))


def loaded() -> Loaded | None:
    return _state.loaded


def library_paths() -> list[str]:
    """The native libraries this process loaded, the CPU one first: what a C++ program
    using wheelops ops must load too (find_package(wheelops) chooses them for its Torch)."""
    if _state.loaded is None:
        return []
    return [str(p) for p in (_state.loaded.cpu, _state.loaded.cuda) if p is not None]


def state() -> _State:
    return _state


def build_info() -> BuildInfo:
    """The build facts of this wheelops: see BuildInfo. Raises RuntimeError where they
    cannot be read (an unbuilt source checkout, a damaged install)."""
    facts = _state.inputs.build if _state.inputs else None
    facts = facts or read_build_info(PACKAGE_DIR / BUILD_INFO_FILE)
    if isinstance(facts, UnreadableBuildInfo):
        raise RuntimeError(
            f"wheelops has no build facts: {facts.path} is {facts.state}. "
            + (
                "Build in place: `PYTHONPATH=src python -m build_tools.dev`."
                if facts.checkout
                else ""
            )
        )
    return facts


def load_installed(strict: bool = True) -> Loaded | None:
    """Load the libraries next to the package; None in an unbuilt source checkout.

    `strict=False` records a refusal instead of raising (the doctor). Loaded already (an
    `importlib.reload(wheelops)`): what is loaded, as is.
    """
    if _state.loaded is not None:
        return _state.loaded
    build, cpu, cuda = installed()
    if isinstance(build, UnreadableBuildInfo) and build.checkout:
        _state.inputs = Inputs(build)
        return None
    return load_libraries(build, cpu, cuda, strict=strict, verify=True)


def installed() -> tuple[BuildInfo | UnreadableBuildInfo, Path | None, dict[int, Path]]:
    """The package's build facts, its CPU library and its CUDA libraries by major (as the
    facts name them); the facts say `checkout` where no library is built at all."""
    cpu = find_cpu_library(PACKAGE_DIR)
    checkout = cpu is None and not record.has_libraries(PACKAGE_DIR)
    build = read_build_info(PACKAGE_DIR / BUILD_INFO_FILE, checkout=checkout)
    cuda = {}
    if isinstance(build, BuildInfo):
        cpu = PACKAGE_DIR / build.cpu_library  # the facts name it, found or not
        cuda = {lib.major: PACKAGE_DIR / lib.file for lib in build.cuda_libraries}
    return build, cpu, cuda


def library_files(cpu: Path | None, cuda: dict[int, Path]) -> list[LibraryFile]:
    """The libraries as found on disk, the CPU one first (a CUDA library needs its schemas)."""
    files = [_library_file("cpu", cpu, cpu or PACKAGE_DIR / "_ops_cpu*.so")]
    return files + [_library_file(f"cuda{m}", path, path) for m, path in sorted(cuda.items())]


def load_libraries(
    build: BuildInfo | UnreadableBuildInfo,
    cpu: Path | None,
    cuda: dict[int, Path],
    strict: bool = True,
    verify: bool = False,
) -> Loaded | None:
    """Evaluate, then dlopen what the policy accepts. `cuda`: CUDA major -> the library's
    path, as the build facts name them. `verify`: read each library about to load back
    against the sha256 its build recorded (or, from an older build, the wheel's RECORD)
    first (an installed package). The caller has the Python kernels registered once they
    load (wheelops.ops.register_python_kernels_at_first_lookup)."""
    if _state.loaded is not None:
        raise RuntimeError(
            f"wheelops native libraries are already loaded from {_state.loaded.cpu}: a "
            "process loads them once; start a new process to load another build"
        )
    _state.inputs = Inputs(
        build,
        files=library_files(cpu, cuda),
        load_failures={},
        guard=guard_enabled(),
        cuda_override=cuda_override(),
        changed_libraries={},
        installed_version=record.installed_version(PACKAGE_DIR),
        installed_from=record.installed_from(PACKAGE_DIR),
        pip_block=record.pip_block(PACKAGE_DIR),
    )
    report = _evaluate()
    if verify:  # a library that is not the wheel's may abort the process once mapped
        changed = {}
        hashes = (build.library_sha256 if isinstance(build, BuildInfo) else None) or {}
        for candidate in report.to_load:
            path = Path(candidate.path)
            damage = record.library_damage(PACKAGE_DIR, path, hashes.get(path.name))
            if damage is not None:
                changed[candidate.role] = damage
        if changed:
            _state.inputs = replace(_state.inputs, changed_libraries=changed)
            report = _evaluate()
    for candidate in report.to_load:
        failure = _dlopen(Path(candidate.path), build, candidate.role)
        if failure is not None:
            _state.inputs = replace(_state.inputs, load_failures={candidate.role: failure})
            report = _evaluate()
            break
    _state.report = report
    if report.exit_status:
        _state.error = CompatibilityError(refusal_message(report))
        if strict:
            raise _state.error from None  # the findings say it all; no chained traceback
        return None
    paths = {c.role: Path(c.path) for c in report.to_load}
    serving_cuda = next((p for role, p in paths.items() if role != "cpu"), None)
    _state.loaded = Loaded(paths["cpu"], serving_cuda, report)
    return _state.loaded


def _found() -> Inputs:
    """What loading found (where loading never began: the build facts)."""
    return _state.inputs or Inputs(installed()[0])


def _evaluate() -> Report:
    return evaluate(_found(), this_process(), read_matrix)


def read_matrix() -> Matrix:
    """matrix.json's model, read where a rule needs it (a fix command): never by a load
    whose checks all pass. Its commands suit this install (one pip cannot read included)."""
    from .matrix import matrix

    inputs = _state.inputs
    return matrix().for_install(inputs.pip_block if inputs else None)


def report_with_devices(
    gpus: list[Any],
    driver: str | None,
    import_failure: str | None = None,
    compilers: list[Any] | None = None,
    accelerator: str | None = None,
) -> Report:
    """The doctor's report: what import decided, plus the driver, every GPU, the installed
    files against the wheel's RECORD (without one, every library against its build's
    sha256), the other wheelops on sys.path, NVIDIA's wheels (none of which
    import pays for) and the autograd layer that serves the ops, with the accelerator's
    state (`accelerator`: wheelops/ops/_accel.py's, after the ops' first use)."""
    found = _found()
    hashes = found.build.library_sha256 if isinstance(found.build, BuildInfo) else None
    try:
        damaged: list[Any] | None = record.damaged_files(PACKAGE_DIR, hashes)
    except Exception as err:  # the reader itself is damaged (import does not call it)
        damaged = [f"{record.__file__} is damaged ({type(err).__name__}: {err})"]
    torch_here = this_process().torch_kind != "missing"
    from .probes import nvidia_wheels  # the doctor's alone: import never lists distributions

    probed = replace(
        found,
        gpus=gpus,
        driver=driver,
        damaged_files=damaged,
        other_installs=other_installs(PACKAGE_DIR),
        import_failure=import_failure,
        compilers=compilers,
        autograd=torch_internals.facts()._replace(accelerator=accelerator) if torch_here else None,
        nvidia_wheels=nvidia_wheels(),
    )
    return evaluate(probed, this_process(), read_matrix)


def _library_file(role: str, path: Path | None, expected: Path) -> LibraryFile:
    if path is None or not path.exists():
        return LibraryFile(role, str(expected), exists=False)
    return LibraryFile(role, str(path), exists=True, problem=elf.problem(path))


def _dlopen(path: Path, build: BuildInfo | UnreadableBuildInfo, role: str) -> LoadFailure | None:
    import torch

    assert isinstance(build, BuildInfo)
    library = next((lib for lib in build.cuda_libraries if f"cuda{lib.major}" == role), None)
    try:
        torch.ops.load_library(str(path))
    except OSError as err:
        from .dlerror import classify, dlopen_error  # only a failed load reads it

        # torch replaces the loader's words with "Could not load this library".
        text = str(err.__cause__ or "") or dlopen_error(path) or str(err)
        runtime = this_process()
        return classify(
            path,
            text,
            build_torch=build.torch_version,
            runtime_torch=runtime.torch_version,
            build_cuda=library.cuda_version if library else None,
            runtime_cuda=runtime.torch_cuda,
        )
    return None


def finding_lines(finding: Finding) -> list[str]:
    """A finding as the errors print it: the cause, both sides, the fixes."""
    f = finding
    return _finding_lines(f.check, f.message, f.build, f.runtime, f.fix)


def format_findings(headline: str, findings: list[Finding], skippable: bool) -> str:
    """`skippable`: whether WHEELOPS_SKIP_GUARD=1 would let the load go on past them."""
    lines = [headline]
    for finding in findings:
        lines += ["", *finding_lines(finding)]
    switch = (
        f"{SKIP_ENV}=1 skips these checks (for experts: a real mismatch then fails later and "
        "less clearly)."
        if skippable
        else f"{SKIP_ENV}=1 does not skip these: a library that is damaged, missing or "
        "refused by the loader would crash the process or fail to load anyway."
    )
    return "\n".join([*lines, "", f"`{DOCTOR}` prints the whole report. {switch}"])


def refusal_message(report: Report) -> str:
    build = report.build
    what = (
        f"wheelops {build.wheelops_version} ({build.variant} build, against torch "
        f"{build.torch_version})"
        if isinstance(build, BuildInfo)
        else "wheelops"
    )
    fatal = [f for f in report.findings if f.status is Status.FATAL]
    return format_findings(f"{what} cannot run in this environment.", fatal, report.skippable)


def require(op: str) -> None:
    """Raise a clear error when an op is called but no library is loaded."""
    if _state.loaded is not None:
        return
    if _state.error is not None:
        raise RuntimeError(f"wheelops.{op}: wheelops did not load.\n{_state.error}")
    shadowed = "; ".join(other_installs(PACKAGE_DIR))  # only on this error path, not import
    unused = f" Not used, because {PACKAGE_DIR} comes first on sys.path: {shadowed}"
    raise RuntimeError(
        f"wheelops.{op}: the wheelops native libraries are not built. In a source "
        "checkout run `PYTHONPATH=src python -m build_tools.dev` (or call build_tools.dev.load()); "
        "otherwise reinstall with `pip install --force-reinstall --no-deps wheelops`."
        + (unused if shadowed else "")
    )


def require_cuda_kernels(op: str, tensor: torch.Tensor) -> None:
    if tensor.is_cuda and (_state.loaded is None or _state.loaded.cuda is None):
        reason = _state.loaded.cuda_not_loaded_because if _state.loaded else None
        raise RuntimeError(
            f"wheelops.{op}: got a tensor on {tensor.device}, but wheelops has no CUDA kernels "
            f"loaded: {reason or 'this build has none'}"
        )


_covered_devices: set[int] = set()
_refusals: dict[int, str] = {}
_lock = threading.Lock()


def check_device(op: str, index: int) -> None:
    """Raise UnsupportedGPUError before a launch on a GPU the build cannot run on; the
    verdict is cached per device, so later calls pay one set lookup."""
    if index in _covered_devices:
        return
    with _lock:
        if index not in _covered_devices and index not in _refusals:
            _decide(index)
    if index in _refusals:
        raise UnsupportedGPUError(f"wheelops.{op}: {_refusals[index]}")


def _decide(index: int) -> None:
    if not guard_enabled():
        _covered_devices.add(index)
        return
    from .probes import gpu  # the first CUDA call on this device: import never reads a GPU

    try:
        device = gpu(index)
    except (RuntimeError, AssertionError):
        return  # no such GPU in this process (fake tensors): a real launch would say so
    library = _state.loaded.cuda_info if _state.loaded else None
    if library is None:
        return  # no CUDA library serves: require_cuda_kernels has said so
    from .rules.cuda import gpu_finding

    finding = gpu_finding(build_info(), library, this_process(), read_matrix(), device)
    if finding.status is Status.OK:
        _covered_devices.add(index)
    else:
        _refusals[index] = format_findings(
            f"no kernel for cuda:{index} in this wheelops build.", [finding], skippable=True
        )
