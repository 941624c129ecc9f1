"""What `evaluate` returns: each finding, each candidate library, the verdict. Records only;
the rules that fill them are in rules/, the order that applies them in policy.py."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass
from typing import Any

from .facts import BuildInfo, RuntimeFacts, UnreadableBuildInfo


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
        return {
            "library": self.role,
            "path": self.path,
            "accepted": self.accepted,
            "reason": self.reason,
        }


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
