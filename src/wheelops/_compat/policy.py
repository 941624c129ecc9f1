"""The compatibility policy: one pure `evaluate` decides what loads, and says why.

Every rule (docs/design.md, "Check before load, explain after failure", and README's
Compatibility table, plus the build facts, the library files, the loader's failures,
the driver and the GPUs) lives in rules/, one family per module; `evaluate` applies
them in order over recorded facts and returns a Report (report.py): each candidate
library accepted or rejected with its reason, every finding with both sides and the
commands that fix it, the verdict and the exit status. Nothing here loads a library or
touches a GPU, so every rule is tested with recorded fact sets; import and
`python -m wheelops` call the same function, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, replace
from typing import TYPE_CHECKING

from .facts import BuildInfo, RuntimeFacts, UnreadableBuildInfo
from .report import Candidate, Finding, LibraryFile, Report, Status
from .rules import cuda, libraries, process
from .rules.autograd import accelerator_finding, autograd_finding, public_autograd
from .rules.context import Context, cuda_role

if TYPE_CHECKING:  # only a failed load, the doctor or a fix command needs them: not import
    from .dlerror import LoadFailure
    from .matrix import Matrix
    from .probes import CompilerProbe, Gpu
    from .record import FileDamage
    from .torch_internals import AutogradFacts

# evaluate, its input, and what the build tooling and the op layer ask the policy for:
# the report's records, and which autograd layer serves (wheelops/ops/_autograd.py).
__all__ = [
    "Candidate",
    "Finding",
    "Inputs",
    "LibraryFile",
    "Report",
    "Status",
    "evaluate",
    "public_autograd",
]


@dataclass(frozen=True, eq=False)  # handed over, never compared
class Inputs:
    """Every fact `evaluate` judges besides this process and the matrix: what the loader
    found (the loader keeps it as its state, so that the doctor's report evaluates exactly
    what import did), and what only the doctor probes (None or empty: not looked at)."""

    build: BuildInfo | UnreadableBuildInfo
    _: KW_ONLY
    # The CPU library and each CUDA library of the build facts, as found.
    files: Sequence[LibraryFile] = ()
    # What the loader said when it tried (role -> failure).
    load_failures: Mapping[str, LoadFailure] | None = None
    # False (WHEELOPS_SKIP_GUARD=1): checks before the load are reported but do not stop it.
    guard: bool = True
    # WHEELOPS_CUDA_LIBRARY, as set: the CUDA major whose library an expert wants loaded,
    # whatever torch's CUDA.
    cuda_override: int | str | None = None
    # role -> how a library about to load differs from the sha256 its build recorded, or
    # from the wheel's RECORD (import hashes those it loads).
    changed_libraries: Mapping[str, str] | None = None
    # The version the install's METADATA names (its local label is the wheel's variant:
    # the reinstall of the same wheel).
    installed_version: str | None = None
    # The local wheel file the install came from (its direct_url.json), reinstalled by
    # path where no index serves its variant.
    installed_from: str | None = None
    # The file of the install's .dist-info that pip cannot read, and the folder
    # (record.pip_block): every wheelops install command works around it (Matrix.for_install).
    pip_block: tuple[str, str] | None = None
    # The doctor's. None: the GPUs were not looked at (import never initialises CUDA);
    # then the driver is not judged either.
    gpus: Sequence[Gpu] | None = None
    driver: str | None = None
    # The installed files that differ from the wheel's RECORD (None: not checked; the
    # doctor hashes every file).
    damaged_files: Sequence[FileDamage | str] | None = None
    # The other wheelops packages on sys.path.
    other_installs: Sequence[str] = ()
    # The error `import wheelops` raised (the doctor runs past it).
    import_failure: str | None = None
    # The installed distributions named nvidia-* (None: not looked at).
    nvidia_wheels: Sequence[str] | None = None
    # torch's run-time C++ compiler, then the ones that would serve instead (None: not
    # probed).
    compilers: Sequence[CompilerProbe] | None = None
    # The torch internals the autograd layer uses, as probed (None: not probed; reported
    # where the build facts can be read).
    autograd: AutogradFacts | None = None


def evaluate(
    inputs: Inputs, runtime: RuntimeFacts, matrix: Matrix | Callable[[], Matrix]
) -> Report:
    """Decide which libraries load and report every finding.

    `matrix`: the matrix model, or the function that reads it, called only where a rule
    needs it (a fix command, WHEELOPS_CUDA_LIBRARY): import, where every check passes,
    never reads matrix.json.
    """
    ctx = Context(
        matrix,
        runtime,
        inputs.cuda_override,
        inputs.installed_version,
        inputs.installed_from,
        inputs.pip_block,
    )
    build = inputs.build
    about_install = _about_install(ctx, inputs)
    if isinstance(build, UnreadableBuildInfo):
        finding = libraries.unreadable_facts(ctx, build)
        candidates = tuple(Candidate(f.role, f.path, False, finding.message) for f in inputs.files)
        return Report(build, runtime, candidates, (finding, *about_install))
    chosen = ctx.chosen_cuda(build)
    wanted = {"cpu", *([cuda_role(chosen)] if chosen else [])}
    # A broken file is never handed to the loader, guard or not: a truncated one can
    # kill the process (SIGBUS) while it is mapped.
    findings = _before_load(ctx, build, inputs.guard) + [
        libraries.library_file(ctx, build, f)
        for f in inputs.files
        if f.role in wanted and (f.problem or not f.exists)
    ]
    candidates = _candidates(ctx, build, inputs, wanted, findings)
    if inputs.gpus is not None and runtime.torch_kind == "cuda":
        assert runtime.torch_cuda is not None
        findings.append(cuda.driver(runtime.torch_cuda, inputs.driver))
    if inputs.gpus is not None and chosen is not None:
        findings += [cuda.gpu_finding(build, chosen, runtime, ctx.matrix, g) for g in inputs.gpus]
    if inputs.autograd is not None:  # which layer serves the ops' derivatives, where ops can load
        about_install.append(autograd_finding(inputs.autograd))
        if inputs.autograd.accelerator is not None:
            state = inputs.autograd.accelerator
            about_install.append(accelerator_finding(state, lambda: ctx.reinstall(build)))
    return Report(build, runtime, candidates, tuple(findings + about_install))


def _before_load(ctx: Context, build: BuildInfo, guard: bool) -> list[Finding]:
    """Everything decidable before any dlopen: check before load, explain after failure.
    WHEELOPS_SKIP_GUARD=1 skips the checks an expert may know better than; not a Python
    below the floor (the package's code cannot run) or no torch at all (nothing loads)."""
    checks = [process.python, process.torch, process.torch_build, cuda.cuda, process.platform]
    findings = [f for f in (check(ctx, build) for check in checks) if f is not None]
    binding = {"Python", *(["torch"] if ctx.runtime.torch_version is None else [])}
    findings = [replace(f, skippable=f.check not in binding) for f in findings]
    return findings if guard else [_not_enforced(f) if f.skippable else f for f in findings]


def _candidates(
    ctx: Context, build: BuildInfo, inputs: Inputs, wanted: set[str], findings: list[Finding]
) -> tuple[Candidate, ...]:
    """Each library file, accepted or refused; the first refusal stops the ones after it,
    and a library changed since its build or refused by the loader adds its finding."""
    stop = next((f for f in findings if f.status is Status.FATAL), None)
    failures = dict(inputs.load_failures or {})
    changed = dict(inputs.changed_libraries or {})
    candidates = []
    for file in inputs.files:  # the CPU library first: a CUDA library needs its schemas
        if file.role not in wanted:
            reason = f"not loaded: {libraries.not_chosen(ctx, build)}"
        elif stop is not None:
            reason = f"not loaded: the {stop.check} check refuses this install"
        elif file.role in changed:
            problem = f"{file.path} is {changed[file.role]}"
            stop = libraries.library_file(ctx, build, replace(file, problem=problem))
            findings.append(stop)
            reason = stop.message
        elif file.role in failures:
            from .rules.load_failure import load_failure

            stop = load_failure(ctx, build, file.role, failures[file.role])
            findings.append(stop)
            reason = stop.message
        else:
            reason = libraries.accepted(ctx, build, file.role)
            candidates.append(Candidate(file.role, file.path, True, reason))
            continue
        candidates.append(Candidate(file.role, file.path, False, reason))
    return tuple(candidates)


def _about_install(ctx: Context, inputs: Inputs) -> list[Finding]:
    """The install around the libraries: what the doctor probes (import passes none of it,
    so it never reads rules/install.py)."""
    probed = (inputs.damaged_files, inputs.compilers, inputs.nvidia_wheels)
    if inputs.import_failure is None and not inputs.other_installs and probed == (None,) * 3:
        return []
    from .rules import install

    build, findings = inputs.build, []
    if inputs.import_failure is not None:
        findings.append(install.import_failure(ctx, build, inputs.import_failure))
    if inputs.damaged_files is not None:
        findings.append(install.installed_files(ctx, build, inputs.damaged_files))
    if inputs.other_installs:
        findings.append(install.other_installs(inputs.other_installs))
    if inputs.compilers:
        findings.append(install.cxx_compiler(inputs.compilers[0], inputs.compilers[1:]))
    leftover = install.other_major_nvidia_wheels(ctx.runtime, inputs.nvidia_wheels or ())
    if leftover:
        findings.append(install.nvidia_wheels(ctx.runtime, leftover))
    return findings


def _not_enforced(finding: Finding) -> Finding:
    if finding.status is not Status.FATAL:
        return finding
    message = f"not enforced (WHEELOPS_SKIP_GUARD=1): {finding.message}"
    return replace(finding, status=Status.DEGRADED, message=message)
