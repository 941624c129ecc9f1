"""The compatibility policy: one pure `evaluate` decides what loads, and says why.

Every rule lives here (docs/design.md, "Check before load, explain after failure", and
README's Compatibility table, plus the build facts, the library files, the loader's
failures, the driver and the GPUs). `evaluate`
takes recorded facts and returns a Report: each candidate library accepted or
rejected with its reason, every finding with both sides and the commands that
fix it, the verdict and the exit status. Nothing here loads a library or
touches a GPU, so every rule is tested with recorded fact sets; import and
`python -m wheelops` call the same function, so they cannot disagree.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

from .archs import describe, kernel_for
from .early import python_rule
from .facts import BuildInfo, CudaLibraryInfo, RuntimeFacts, UnreadableBuildInfo
from .torch_internals import AUTOGRAD_ENV, INTERNALS, PUBLIC, AutogradFacts
from .versions import variant_name, version_tuple

if TYPE_CHECKING:  # only a failed load, the doctor or a fix command needs them: not import
    from .dlerror import Cause, LoadFailure
    from .matrix import Matrix
    from .probes import CompilerProbe, Gpu
    from .record import FileDamage


# JetPack 7 (L4T R38, Jetson Thor) moved Jetson to the SBSA CUDA platform of the servers.
L4T_SBSA_MAJOR = 38


def _l4t_major(release: str) -> int:
    """36 for "R36 (release), REVISION: 4.3"; 0 where unreadable (taken as older)."""
    digits = "".join(c for c in release.split()[0] if c.isdigit()) if release.split() else ""
    return int(digits) if digits else 0


class Status(enum.IntEnum):
    OK = 0
    DEGRADED = 1  # works, with less than the build offers (CPU kernels only, a GPU not covered)
    FATAL = 2  # wheelops cannot load here: import raises

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Finding:
    """One compared fact: both sides, the verdict, why, and the commands that fix it."""

    check: str  # what was compared: "Python", "torch", "CUDA", "GPU cuda:0", ...
    status: Status
    build: str  # the build's side
    runtime: str  # this machine's side
    message: str  # names the cause and both sides; what to do where no command does it
    fix: tuple[str, ...] = ()  # commands, each a cure; the one that keeps torch first
    skippable: bool = False  # a check before the load that WHEELOPS_SKIP_GUARD=1 turns off

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status": str(self.status), "fix": list(self.fix)}


@dataclass(frozen=True)
class LibraryFile:
    """A native library as found on disk: its path (or the pattern that found nothing) and
    what reading its headers found wrong (None: a complete library for this machine)."""

    role: str  # "cpu", "cuda12", "cuda13"
    path: str
    exists: bool
    problem: str | None = None


@dataclass(frozen=True)
class Candidate:
    """A library the loader may load, accepted or rejected, with the reason."""

    role: str
    path: str
    accepted: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"library": self.role, "path": self.path, "accepted": self.accepted,
                "reason": self.reason}  # fmt: skip


@dataclass(frozen=True)
class Report:
    """What `evaluate` decided: the candidates, every finding, the verdict."""

    build: BuildInfo | UnreadableBuildInfo
    runtime: RuntimeFacts
    candidates: tuple[Candidate, ...]
    findings: tuple[Finding, ...]

    @property
    def verdict(self) -> Status:
        return max((f.status for f in self.findings), default=Status.OK)

    @property
    def exit_status(self) -> int:
        """1 exactly when import raises: no library may be loaded."""
        return 1 if self.verdict is Status.FATAL else 0

    @property
    def to_load(self) -> tuple[Candidate, ...]:
        return () if self.exit_status else tuple(c for c in self.candidates if c.accepted)

    @property
    def skippable(self) -> bool:
        """Whether WHEELOPS_SKIP_GUARD=1 would let the load go on: every fatal finding is a
        check before the load (never the integrity of a file, which could crash the process)."""
        fatal = [f for f in self.findings if f.status is Status.FATAL]
        return bool(fatal) and all(f.skippable for f in fatal)

    @property
    def fixes(self) -> list[str]:
        """Every command, the fix of what stops wheelops first, each once; among findings
        as bad, the damaged install's first: under a CPU torch a damaged CUDA library is
        unused, and installing the CUDA torch first would make the working install load it."""
        ranked = sorted(
            self.findings,
            key=lambda f: (f.status, f.check == "installed files"),
            reverse=True,
        )
        return list(dict.fromkeys(c for f in ranked if f.status is not Status.OK for c in f.fix))

    def finding(self, check: str) -> Finding | None:
        return next((f for f in self.findings if f.check == check), None)


def role_name(role: str) -> str:
    """ "cpu" -> "CPU", "cuda13" -> "CUDA 13": how findings name a library."""
    return "CPU" if role == "cpu" else f"CUDA {role.removeprefix('cuda')}"


def cuda_role(library: CudaLibraryInfo) -> str:
    return f"cuda{library.major}"


@dataclass(frozen=True, eq=False)  # handed over, never compared
class Inputs:
    """What the loader found and hands to `evaluate`, beside this process's facts and the
    matrix (see evaluate for each): one record, kept as the loader's state, so that the
    doctor's report evaluates exactly what import did."""

    build: BuildInfo | UnreadableBuildInfo
    files: Sequence[LibraryFile] = ()
    load_failures: Mapping[str, LoadFailure] | None = None
    guard: bool = True
    cuda_override: str | None = None
    changed_libraries: Mapping[str, str] | None = None
    installed_version: str | None = None
    installed_from: str | None = None
    record_missing: bool = False


def evaluate(
    build: BuildInfo | UnreadableBuildInfo,
    runtime: RuntimeFacts,
    matrix: Matrix | Callable[[], Matrix],
    gpus: Sequence[Gpu] | None = None,
    load_failures: Mapping[str, LoadFailure] | None = None,
    files: Sequence[LibraryFile] = (),
    driver: str | None = None,
    guard: bool = True,
    cuda_override: int | str | None = None,
    damaged_files: Sequence[FileDamage | str] | None = None,
    other_installs: Sequence[str] = (),
    changed_libraries: Mapping[str, str] | None = None,
    installed_version: str | None = None,
    installed_from: str | None = None,
    import_failure: str | None = None,
    nvidia_wheels: Sequence[str] | None = None,
    record_missing: bool = False,
    compilers: Sequence[CompilerProbe] | None = None,
    autograd: AutogradFacts | None = None,
) -> Report:
    """Decide which libraries load and report every finding.

    `matrix`: the matrix model, or the function that reads it, called only where a rule
    needs it (a fix command, WHEELOPS_CUDA_LIBRARY): import, where every check passes,
    never reads matrix.json. `files`: the CPU library and each CUDA library of the build
    facts, as found.
    `gpus` None: the GPUs were not looked at (import never initialises CUDA); then the
    driver is not judged either. `load_failures`: what the loader said when it tried
    (role -> failure). `guard` False (WHEELOPS_SKIP_GUARD=1): checks before the load
    are reported but do not stop it. `cuda_override` (WHEELOPS_CUDA_LIBRARY, as set): the
    CUDA major whose library an expert wants loaded, whatever torch's CUDA.
    `damaged_files`: the installed files that differ from the wheel's RECORD (None: not
    checked; the doctor hashes every file). `changed_libraries`: role -> how a library
    about to load differs from the sha256 its build recorded, or from the wheel's RECORD
    (import hashes those it loads).
    `installed_version`: the version the install's METADATA names (its local label is the
    wheel's variant: the reinstall of the same wheel). `installed_from`: the local wheel
    file the install came from (its direct_url.json), reinstalled by path where no index
    serves its variant. `other_installs`: the other
    wheelops packages on sys.path. `import_failure`: the error `import wheelops` raised
    (the doctor runs past it). `compilers`: torch's run-time C++ compiler, then the ones
    that would serve instead (None: not probed; the doctor probes). `autograd`: the torch
    internals the autograd layer uses, as probed (None: not probed; the doctor probes;
    reported where the build facts can be read). `nvidia_wheels`: the installed
    distributions named nvidia-* (None: not looked at; the doctor looks). `record_missing`:
    the install's .dist-info has no RECORD, so pip cannot uninstall it: every wheelops
    install command writes over it instead (Matrix.without_record).
    """
    rules = _Rules(
        matrix, runtime, cuda_override, installed_version, installed_from, record_missing
    )
    about_install = []
    if import_failure is not None:
        about_install.append(rules.import_failure(build, import_failure))
    if damaged_files is not None:
        about_install.append(rules.installed_files(build, damaged_files))
    if other_installs:
        about_install.append(rules.other_installs(other_installs))
    if compilers:
        about_install.append(rules.cxx_compiler(compilers[0], compilers[1:]))
    leftover = other_major_nvidia_wheels(runtime, nvidia_wheels or ())
    if leftover:
        about_install.append(rules.other_major_nvidia_wheels(leftover))
    if isinstance(build, UnreadableBuildInfo):
        finding = rules.unreadable_facts(build)
        candidates = tuple(Candidate(f.role, f.path, False, finding.message) for f in files)
        return Report(build, runtime, candidates, (finding, *about_install))
    # WHEELOPS_SKIP_GUARD=1 skips the checks an expert may know better than; not a Python
    # below the floor (the package's code cannot run) or no torch at all (nothing loads).
    binding = {"Python", *(["torch"] if runtime.torch_version is None else [])}
    before_load = [replace(f, skippable=f.check not in binding) for f in rules.before_load(build)]
    if not guard:
        before_load = [_not_enforced(f) if f.skippable else f for f in before_load]
    chosen = rules.chosen_cuda(build)
    wanted = {"cpu", *([cuda_role(chosen)] if chosen else [])}
    # A broken file is never handed to the loader, guard or not: a truncated one can
    # kill the process (SIGBUS) while it is mapped.
    findings = before_load + [
        rules.library_file(build, f)
        for f in files
        if f.role in wanted and (f.problem or not f.exists)
    ]
    stop = next((f for f in findings if f.status is Status.FATAL), None)
    failures = dict(load_failures or {})
    changed = dict(changed_libraries or {})
    candidates = []
    for file in files:  # the CPU library first: a CUDA library needs its schemas
        if file.role not in wanted:
            reason = f"not loaded: {rules.not_chosen(build)}"
        elif stop is not None:
            reason = f"not loaded: the {stop.check} check refuses this install"
        elif file.role in changed:
            stop = rules.library_file(build, replace(file, problem=f"{file.path} is "
                                                     f"{changed[file.role]}"))  # fmt: skip
            findings.append(stop)
            reason = stop.message
        elif file.role in failures:
            stop = rules.load_failure(build, file.role, failures[file.role])
            findings.append(stop)
            reason = stop.message
        else:
            reason = rules.accepted(build, file.role)
            candidates.append(Candidate(file.role, file.path, True, reason))
            continue
        candidates.append(Candidate(file.role, file.path, False, reason))
    if gpus is not None and runtime.torch_kind == "cuda":
        assert runtime.torch_cuda is not None
        findings.append(rules.driver(runtime.torch_cuda, driver))
    if gpus is not None and chosen is not None:
        findings += [gpu_finding(build, chosen, runtime, rules.matrix, gpu) for gpu in gpus]
    if autograd is not None:  # which layer serves the ops' derivatives, where ops can load
        about_install.append(autograd_finding(autograd))
    return Report(build, runtime, tuple(candidates), tuple(findings + about_install))


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


def _not_enforced(finding: Finding) -> Finding:
    if finding.status is not Status.FATAL:
        return finding
    return replace(
        finding,
        status=Status.DEGRADED,
        message=f"not enforced (WHEELOPS_SKIP_GUARD=1): {finding.message}",
    )


def gpu_finding(
    build: BuildInfo, library: CudaLibraryInfo, runtime: RuntimeFacts, matrix: Matrix, gpu: Gpu
) -> Finding:
    """Whether the CUDA library that serves holds a kernel image this GPU can run. A GPU it
    cannot run on degrades the install (CPU tensors and other GPUs work); its first launch
    there raises."""
    check = f"GPU cuda:{gpu.index}"
    holds = describe(library.sass_archs, library.ptx_archs)
    device = f"{gpu.name}, compute capability {gpu.capability_text}"
    runs = kernel_for(library.sass_archs, library.ptx_archs, gpu.capability)
    if runs:
        return Finding(check, Status.OK, holds, device, f"runs {runs}")
    message = (
        f"cuda:{gpu.index} ({device}) cannot run this wheelops build: it holds {holds}. "
        "SASS runs only on GPUs of its major version with an equal or higher minor, "
        "PTX only on GPUs of at least its capability"
    )
    cap = gpu.capability_text
    fix = []
    here = [
        v for v in matrix.variants_for_torch_cuda(runtime.torch_cuda) if v.runs_on(gpu.capability)
    ]
    elsewhere = [v for v in matrix.variants if v.cuda and v.runs_on(gpu.capability)]
    if here:
        message += f"; the {here[0].name} variant covers {cap}"
        fix.append(matrix.install_command(here[0].name))
    elif elsewhere:
        v = elsewhere[-1]
        message += (
            f"; no wheelops variant for CUDA {runtime.torch_cuda} covers {cap}, the {v.name} "
            f"variant does, with a CUDA {v.cuda} torch"
        )
        floor = build.stable_abi_floor
        fix.append(
            f"{matrix.torch_install_command(v.name, floor)} && {matrix.install_command(v.name)}"
        )
    if runtime.torch_cuda and version_tuple(runtime.torch_cuda)[0] == 13:
        message += "; or build for this GPU from source"
        fix.append(matrix.source_build_command(cap))
    if not fix:
        message += f"; no published wheelops variant covers compute capability {cap}"
    return Finding(check, Status.DEGRADED, holds, device, message, tuple(fix))


def public_autograd(facts: AutogradFacts) -> bool:
    """Whether the ops' derivatives run on public torch APIs only: where this torch lacks
    an internal the fast layer uses, or where WHEELOPS_AUTOGRAD=public asks for it."""
    return bool(facts.missing) or facts.requested == PUBLIC


def autograd_finding(facts: AutogradFacts) -> Finding:
    """Which autograd layer serves the ops (wheelops/ops/_autograd.py), and what the public
    one gives up."""
    build = "fast layer (torch internals), else public APIs"
    torch = f"torch {facts.torch_version}"
    if not public_autograd(facts):
        fast = f"fast layer: {torch} has all {len(INTERNALS)} internals it uses"
        if facts.requested is None:
            return Finding("autograd", Status.OK, build, fast, "the fast layer serves the ops")
        return Finding(
            "autograd", Status.DEGRADED, build, fast,
            f"{AUTOGRAD_ENV}={facts.requested!r} is not {PUBLIC!r}: ignored; the fast layer "
            "serves the ops",
            (f"unset {AUTOGRAD_ENV}",),
        )  # fmt: skip
    if facts.missing:
        runtime = f"public APIs: {torch} lacks {len(facts.missing)} internal(s)"
        why = f"{torch} lacks {', '.join(facts.missing)}, which the fast layer uses"
        fix: tuple[str, ...] = ()
    else:
        runtime = f"public APIs: {AUTOGRAD_ENV}={PUBLIC}"
        why = f"{AUTOGRAD_ENV}={PUBLIC} asks for it"
        fix = (f"unset {AUTOGRAD_ENV}",)
    message = (
        f"the public-API autograd layer serves the ops ({why}). The wheelops functions and "
        "modules keep every derivative (reverse and forward mode, torch.func, second "
        "derivatives where an op has them) at more host time per call; a raw "
        "torch.ops.wheelops.* call (what a torch.compile graph makes) has reverse mode only "
        "(torch.library.register_autograd's) and refuses a forward-mode tangent"
    )
    return Finding("autograd", Status.DEGRADED, build, runtime, message, fix)


def _torch_label(torch_version: str) -> str | None:
    """The local version label of a torch wheel names its index: 2.9.0+cu126 -> cu126."""
    _, plus, label = torch_version.partition("+")
    return label if plus and label.startswith(("cu", "cpu", "rocm", "xpu")) else None


class Fix(enum.Enum):
    """Which commands fix a loader failure (Rules.fix writes them for the build)."""

    REINSTALL = "reinstall the same wheel"
    UPGRADE_TORCH = "a torch at least the build's"
    VARIANT = "the wheelops variant of this torch, or the torch of this variant"
    CUBLAS = "a cuBLAS at least the build's, or a newer torch"
    NONE = "no command: the advice says what to change"


class Remedy(NamedTuple):
    advice: str  # appended to the failure's summary; may name {missing}, {built}, {major}
    fix: Fix


_NEWER_CUBLAS = Remedy(
    " (built with cuBLAS {built}); install cuBLAS {major} at least as new, "
    "as torch's CUDA wheels do",
    Fix.CUBLAS,
)


@cache
def remedies() -> Mapping[Cause, Remedy]:
    """Every cause of a loader failure (dlerror.Cause), its advice and its fix: the one
    table. Built at the first failure: a load that works never reads dlerror.py."""
    from .dlerror import Cause

    return {
        Cause.MISSING_FILE: Remedy("", Fix.REINSTALL),
        Cause.CORRUPT_FILE: Remedy("", Fix.REINSTALL),
        Cause.MISSING_LIBRARY: Remedy("", Fix.REINSTALL),
        Cause.UNDEFINED_SYMBOL: Remedy("", Fix.REINSTALL),
        Cause.UNKNOWN: Remedy("", Fix.REINSTALL),
        Cause.TORCH_TOO_OLD: Remedy("", Fix.UPGRADE_TORCH),
        Cause.TORCH_LIBRARIES: Remedy(
            "; import torch before wheelops, or reinstall torch", Fix.UPGRADE_TORCH
        ),
        Cause.TORCH_ABI: Remedy("", Fix.VARIANT),
        Cause.CUDA_MAJOR: Remedy("", Fix.VARIANT),
        Cause.CUDA_MINOR: Remedy("", Fix.VARIANT),
        Cause.CUBLAS_MISSING: _NEWER_CUBLAS,
        Cause.CUBLAS_TOO_OLD: _NEWER_CUBLAS,
        Cause.LIBSTDCXX: Remedy(
            "; run on a system with GCC >= 13's libstdc++ (e.g. Ubuntu 24.04), or in a "
            "conda environment: conda install -c conda-forge 'libstdcxx-ng>=13'",
            Fix.NONE,
        ),
        Cause.GLIBC: Remedy(
            "; run on a system with glibc >= 2.28 (wheelops wheels are manylinux_2_28)",
            Fix.NONE,
        ),
        Cause.DEPENDENCY_DAMAGED: Remedy(
            "; replace or remove the damaged {missing} (the loader took it from "
            "LD_LIBRARY_PATH or the system's library directories, before torch's own "
            "copy); reinstalling wheelops would not help",
            Fix.NONE,
        ),
        Cause.ELF_CLASS: Remedy(
            "; use a 64-bit Python (wheelops publishes 64-bit wheels only)", Fix.NONE
        ),
    }


@dataclass(eq=False)  # a private holder of the facts: nothing compares or hashes it
class _Rules:
    """The rules over one set of facts: one method per finding."""

    matrix_or_reader: Matrix | Callable[[], Matrix]
    runtime: RuntimeFacts
    cuda_override: int | str | None = None
    installed_version: str | None = None
    installed_from: str | None = None
    record_missing: bool = False

    @cached_property
    def matrix(self) -> Matrix:
        given = self.matrix_or_reader
        model = given() if callable(given) else given
        return model.without_record() if self.record_missing else model

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

    def not_chosen(self, build: BuildInfo) -> str:
        if self.runtime.torch_kind != "cuda":
            return self.torch_build(build).message
        return (
            f"torch brings the CUDA {self.runtime.torch_cuda} runtime; a library of another "
            "CUDA major is never loaded beside it"
        )

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

    def unreadable_facts(self, facts: UnreadableBuildInfo) -> Finding:
        if facts.checkout:
            return Finding(
                "native libraries", Status.FATAL, "not built", "source checkout",
                "this is a source checkout whose native libraries are not built",
                ("python -m build_tools.dev",),
            )  # fmt: skip
        return Finding(
            "build facts",
            Status.FATAL,
            facts.path,
            facts.state,
            f"the package's build facts cannot be read: {facts.path} is {facts.state}, so "
            "nothing says what its libraries need; the install is incomplete or damaged",
            (self.reinstall(facts),),
        )

    def import_failure(self, build: BuildInfo | UnreadableBuildInfo, error: str) -> Finding:
        return Finding(
            "import", Status.FATAL, "every module of the package imports",
            "import wheelops raised", error, (self.reinstall(build),),
        )  # fmt: skip

    def before_load(self, build: BuildInfo) -> list[Finding]:
        """Everything decidable before any dlopen: check before load, explain after failure."""
        findings = [self.python(build), self.torch(build), self.torch_build(build)]
        cuda = self.cuda(build)
        return findings + ([cuda] if cuda else []) + [self.platform(build)]

    def python(self, build: BuildInfo) -> Finding:
        floor, here = build.python_floor, self.runtime.python_version
        if here is None:
            return Finding("Python", Status.OK, f">= {floor}", "none (a C++ program)",
                           "a C++ program loads the libraries without Python")  # fmt: skip
        refused = python_rule(here, floor)
        if refused is None:
            return Finding("Python", Status.OK, f">= {floor}", here,
                           f"Python {here} is supported (>= {floor})")  # fmt: skip
        message, fix = refused
        return Finding("Python", Status.FATAL, f">= {floor}", here, message, fix)

    def torch(self, build: BuildInfo) -> Finding:
        floor, here = build.stable_abi_floor, self.runtime.torch_version
        wanted = f">= {floor} (built against {build.torch_version})"
        if here is None:
            message = f"torch is not installed; wheelops needs torch >= {floor}"
        elif version_tuple(here) < version_tuple(floor):
            message = (
                f"torch {here} is older than {floor}, the oldest torch whose stable ABI "
                f"wheelops uses (built against torch {build.torch_version}); no wheelops "
                "variant serves it"
            )
        else:
            return Finding("torch", Status.OK, wanted, here,
                           f"torch {here} is at or above the stable-ABI floor {floor}")  # fmt: skip
        fix = (self.upgrade_torch(build),)
        return Finding("torch", Status.FATAL, wanted, here or "not installed", message, fix)

    def torch_build(self, build: BuildInfo) -> Finding:
        kind = self.runtime.torch_kind
        cuda = ", ".join(lib.cuda_version for lib in build.cuda_libraries)
        ours = f"CUDA {cuda} + CPU" if cuda else "CPU only"
        theirs = self.runtime.describe_torch()

        def finding(status: Status, message: str, *fix: str) -> Finding:
            return Finding("torch build", status, ours, theirs, message, fix)

        if kind == "missing":
            return finding(Status.FATAL, "torch is not installed")
        if not build.cuda_libraries:
            if kind == "cuda":
                return finding(
                    Status.DEGRADED,
                    f"this is the cpu variant of wheelops: it runs CPU tensors only, and "
                    f"{theirs} can use a GPU",
                    *self.variant_fix(build.stable_abi_floor),
                )
            return finding(Status.OK, "CPU kernels for CPU tensors")
        if kind == "cuda":
            return finding(Status.OK, "CPU and CUDA kernels")
        if kind == "cpu":
            return finding(
                Status.DEGRADED,
                f"{theirs} is CPU-only, so wheelops loads its CPU kernels only; CUDA tensors "
                "need a CUDA build of torch",
                self.change_torch(build, build.cuda_libraries[-1]),
            )
        name = "XPU" if kind == "xpu" else "ROCm"
        return finding(
            Status.DEGRADED,
            f"{theirs}: wheelops has no {name} kernels, so it runs CPU tensors only (no "
            "wheelops variant targets it)",
        )

    def cuda(self, build: BuildInfo) -> Finding | None:
        """For a CUDA torch and a build with CUDA libraries: one of torch's CUDA major, its
        runtime minor >= the library's build minor (or the expert's override)."""
        runtime = self.runtime
        if not build.cuda_libraries or runtime.torch_kind != "cuda":
            return None
        assert runtime.torch_cuda is not None
        theirs = version_tuple(runtime.torch_cuda)
        library = self.chosen_cuda(build)
        built = ", ".join(lib.cuda_version for lib in build.cuda_libraries)
        here = f"CUDA {runtime.torch_cuda} (torch {runtime.torch_version})"
        if self.override_invalid:
            return Finding(
                "CUDA", Status.FATAL, f"CUDA {built}", here,
                f"WHEELOPS_CUDA_LIBRARY={str(self.cuda_override)!r} is not a CUDA major "
                f"wheelops builds libraries for ({' or '.join(self.override_values)})",
                ("unset WHEELOPS_CUDA_LIBRARY",),
            )  # fmt: skip
        if self.override is not None:
            if library is None:
                return Finding(
                    "CUDA", Status.FATAL, f"CUDA {built}", here,
                    f"WHEELOPS_CUDA_LIBRARY={self.override} asks for a CUDA "
                    f"{self.override} library, and this build has CUDA {built} only",
                    ("unset WHEELOPS_CUDA_LIBRARY",),
                )  # fmt: skip
            needs = [f"libcudart.so.{library.major}"]
            if library.cublaslt_version is not None:
                needs.append(f"libcublasLt.so.{library.major}")
            return Finding(
                "CUDA", Status.DEGRADED, f"CUDA {library.cuda_version} (override)", here,
                f"WHEELOPS_CUDA_LIBRARY={self.override} chooses the CUDA {library.cuda_version} "
                f"library under torch's CUDA {runtime.torch_cuda} runtime, as an expert "
                f"asked; it loads only where its runtime and cuBLASLt ({', '.join(needs)}) "
                "are on the loader's path",
                ("unset WHEELOPS_CUDA_LIBRARY",),
            )  # fmt: skip
        if library is None:
            nearest = build.cuda_libraries[-1]
            ours = f"CUDA {built} (needs a {nearest.major}.x runtime, >= {nearest.cuda_version})"
            message = (
                f"wheelops was built with CUDA {built} and torch {runtime.torch_version} "
                f"brings the CUDA {runtime.torch_cuda} runtime: CUDA {nearest.major} libraries "
                f"cannot run on a CUDA {theirs[0]} runtime"
            )
        else:
            nearest = library
            ours = (
                f"CUDA {library.cuda_version} (needs the {library.major}.x runtime, "
                f">= {library.cuda_version})"
            )
            if theirs[1] >= version_tuple(library.cuda_version)[1]:
                return Finding("CUDA", Status.OK, ours, here,
                               f"the CUDA runtime matches the CUDA {library.cuda_version} "
                               "library")  # fmt: skip
            message = (
                f"wheelops was built with CUDA {library.cuda_version}, newer than the CUDA "
                f"{runtime.torch_cuda} runtime of torch {runtime.torch_version}, which may "
                "lack functions the build calls"
            )
        # Both directions where both exist, the one that keeps the user's torch first.
        change_torch = self.change_torch(build, nearest)
        fitting = self.matrix.variants_for_torch_cuda(runtime.torch_cuda)
        if fitting:
            message += (
                f". Fix: install the {fitting[0].name} variant of wheelops, or keep this "
                f"wheelops and install a torch built with CUDA {nearest.cuda_version}"
            )
            fix: tuple[str, ...] = (self.matrix.install_command(fitting[0].name), change_torch)
        else:
            message += (
                f". No wheelops variant is built for CUDA {runtime.torch_cuda}: keep this "
                f"wheelops and install a torch built with CUDA {nearest.cuda_version}"
            )
            fix = (change_torch,)
        return Finding("CUDA", Status.FATAL, ours, here, message, fix)

    def platform(self, build: BuildInfo) -> Finding:
        built_for = build.platform.split("_", 1)[-1] if "_" in build.platform else build.platform
        here = self.runtime.machine
        l4t = self.runtime.l4t
        if built_for == here == "aarch64" and l4t and _l4t_major(l4t) < L4T_SBSA_MAJOR:
            return Finding(
                "platform", Status.DEGRADED, build.platform, f"{here}, Jetson (L4T {l4t})",
                "this wheelops is built for aarch64 servers (SBSA: GH200, GB200, DGX Spark); a "
                "Jetson with L4T before JetPack 7 is a different CUDA platform, never built or "
                "tested for: the CPU kernels work, its CUDA library may not load or run there",
            )  # fmt: skip
        if built_for in (here, "any"):
            return Finding("platform", Status.OK, build.platform, here, "same machine")
        return Finding(
            "platform", Status.FATAL, build.platform, here,
            f"this wheelops was built for {built_for}; this machine is {here}",
            (self.reinstall(build),),
        )  # fmt: skip

    def library_file(self, build: BuildInfo, file: LibraryFile) -> Finding:
        """A library file the loader must not be handed (missing, truncated, foreign)."""
        role = role_name(file.role)
        problem = file.problem or f"{file.path} does not exist"
        message = f"the wheelops {role} library cannot be loaded: {problem}"
        fix: tuple[str, ...] = (self.reinstall(build),)
        if "32-bit" in problem:
            message += "; use a 64-bit Python (wheelops publishes 64-bit wheels only)"
            fix = ()
        return Finding(f"{role} library", Status.FATAL,
                       "a complete 64-bit ELF library for " + build.platform,
                       problem, message, fix)  # fmt: skip

    def load_failure(self, build: BuildInfo, role: str, failure: LoadFailure) -> Finding:
        if self.override is not None and role != "cpu":  # the expert's choice comes first
            advice = (
                f"; WHEELOPS_CUDA_LIBRARY={self.override} asked for this library: unset it "
                "to load the library of torch's CUDA"
            )
            fix: tuple[str, ...] = ("unset WHEELOPS_CUDA_LIBRARY",)
        else:
            remedy = remedies()[failure.cause]
            values: dict[str, Any] = {"missing": failure.missing}
            if remedy.fix is Fix.CUBLAS:
                library = next(lib for lib in build.cuda_libraries if cuda_role(lib) == role)
                values.update(built=library.cublaslt_version or library.cuda_version,
                              major=library.major)  # fmt: skip
            advice, fix = remedy.advice.format(**values), self.fix(remedy.fix, build, values)
        return Finding(
            f"load {role_name(role)} library",
            Status.FATAL,
            f"wheelops {build.wheelops_version} ({build.variant}, torch {build.torch_version})",
            self.runtime.describe_torch(),
            f"{failure.summary}{advice}. The loader said: {failure.raw}",
            fix,
        )

    def fix(self, kind: Fix, build: BuildInfo, values: Mapping[str, Any]) -> tuple[str, ...]:
        """The commands of one kind of fix for this build."""
        if kind is Fix.REINSTALL:
            return (self.reinstall(build),)
        if kind is Fix.UPGRADE_TORCH:
            return (self.upgrade_torch(build),)
        if kind is Fix.VARIANT:
            return self.variant_fix(build.stable_abi_floor)
        if kind is Fix.CUBLAS:
            package = "nvidia-cublas-cu12" if values["major"] == 12 else "nvidia-cublas"
            return (f'pip install --upgrade "{package}>={values["built"]}"',
                    self.upgrade_torch(build))  # fmt: skip
        return ()

    def installed_files(
        self, build: BuildInfo | UnreadableBuildInfo, damage: Sequence[FileDamage | str]
    ) -> Finding:
        """Files that differ from the wheel degrade the install even where import works: what
        they hold is not what was tested."""
        wanted = "every file as its wheel (or build) wrote it"
        if not damage:
            return Finding("installed files", Status.OK, wanted, "all match",
                           "every installed file matches its recorded sha256")  # fmt: skip
        listed = "; ".join(str(d) for d in damage[:6])
        more = f"; and {len(damage) - 6} more" if len(damage) > 6 else ""
        fix = (self.reinstall(build),)
        return Finding(
            "installed files", Status.DEGRADED, wanted, f"{len(damage)} differ",
            f"this wheelops install is damaged: {listed}{more}. Reinstall it", fix,
        )  # fmt: skip

    def other_installs(self, others: Sequence[str]) -> Finding:
        return Finding(
            "other wheelops", Status.DEGRADED, "one wheelops on sys.path",
            f"{len(others) + 1} on sys.path",
            f"this process imports wheelops from the first on sys.path; also there, and not "
            f"used: {'; '.join(others)}. Remove the one you do not want, or run from another "
            "directory (a source tree in the current directory comes first)",
        )  # fmt: skip

    def other_major_nvidia_wheels(self, leftover: Sequence[str]) -> Finding:
        """NVIDIA's wheels of a CUDA major torch does not use: left behind where torch was
        replaced by one of another CUDA (`pip install wheelops` upgrades a torch older than
        its floor from PyPI). Nothing loads them; they hold gigabytes and name a CUDA that
        this environment no longer runs, which misleads whoever reads `pip list`."""
        assert self.runtime.torch_cuda is not None
        majors = sorted({name.rsplit("-cu", 1)[1] for name in leftover})
        return Finding(
            "NVIDIA wheels", Status.DEGRADED, f"those of CUDA {self.runtime.torch_cuda[0]}",
            f"also CUDA {', '.join(majors)}: {', '.join(leftover)}",
            f"NVIDIA wheels of CUDA {' and '.join(majors)} are installed, and torch "
            f"{self.runtime.torch_version} uses CUDA {self.runtime.torch_cuda}: left behind "
            "when torch was replaced (torch does not load them). Uninstall them unless "
            "another package of this environment needs them",
            (f"pip uninstall -y {' '.join(leftover)}",),
        )  # fmt: skip

    def cxx_compiler(self, probe: CompilerProbe, working: Sequence[CompilerProbe]) -> Finding:
        """The compiler torch builds C++ with at run time. One that links libstdc++
        statically into shared libraries builds AOTInductor packages that crash (SIGSEGV)
        when loaded, with or without wheelops ops: warn before a user exports a model."""
        wanted = "links libstdc++ dynamically (the runtime torch shares)"
        named = probe.compiler if probe.path in (None, probe.compiler) else (
            f"{probe.compiler} ({probe.path})"
        )  # fmt: skip
        if probe.runtime == "shared":
            return Finding("C++ compiler", Status.OK, wanted, f"{named}: shared",
                           f"{named} links the shared C++ runtime")  # fmt: skip
        if probe.runtime == "unknown":
            return Finding("C++ compiler", Status.OK, wanted, f"{named}: not probed",
                           f"{named} could not build a probe library ({probe.detail}); "
                           "torch.compile's CPU code and AOTInductor need one")  # fmt: skip
        fix = tuple(f"export CXX={w.path}" for w in working[:1] if w.path)
        return Finding(
            "C++ compiler", Status.DEGRADED, wanted, f"{named}: private copy",
            f"{named}, the compiler torch builds C++ with at run time ($CXX, else g++), links "
            f"a private copy of {probe.detail} into shared libraries: an AOTInductor package "
            "it builds (torch._inductor.aoti_compile_and_package) crashes with SIGSEGV when "
            "loaded, with or without wheelops ops. Build packages with a compiler that links "
            "libstdc++ dynamically" + (f", e.g. CXX={working[0].path}" if fix else ""),
            fix,
        )  # fmt: skip

    def accepted(self, build: BuildInfo, role: str) -> str:
        if role == "cpu":
            return f"op schemas and CPU kernels; loads with torch >= {build.stable_abi_floor}"
        library = self.chosen_cuda(build)
        assert library is not None
        why = (
            f"WHEELOPS_CUDA_LIBRARY={self.override} (an expert's override)"
            if self.override
            else f"torch brings the CUDA {self.runtime.torch_cuda} runtime (same major, "
            "minor not older)"
        )
        archs = describe(library.sass_archs, library.ptx_archs)
        return f"CUDA {library.cuda_version} kernels, {why}; {archs}"

    def driver(self, torch_cuda: str, driver: str | None) -> Finding:
        needed = version_tuple(torch_cuda)[0]
        wanted = f"CUDA {torch_cuda} runtime (torch)"
        if driver is None:
            return Finding(
                "CUDA driver", Status.DEGRADED, wanted, "no NVIDIA driver (libcuda.so.1) found",
                "no NVIDIA driver is installed, so no GPU can be used; CPU tensors work",
            )  # fmt: skip
        if version_tuple(driver)[0] < needed:
            return Finding(
                "CUDA driver", Status.DEGRADED, wanted, f"driver for CUDA {driver}",
                f"the NVIDIA driver supports CUDA {driver}, older than the CUDA {torch_cuda} "
                "runtime of torch, so no GPU can be used; CPU tensors work. Update the NVIDIA "
                f"driver to one for CUDA {needed}.x ({'>= 580' if needed >= 13 else '>= 525'} "
                "on Linux)",
            )  # fmt: skip
        return Finding("CUDA driver", Status.OK, wanted, f"driver for CUDA {driver}", "ok")
