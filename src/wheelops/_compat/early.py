"""What `import wheelops` checks before any module that needs Python >= 3.10: the Python.

Written for every Python 3 that can reach it (no syntax, library call or annotation that
3.8 lacks), so that an older interpreter gets the guard's CompatibilityError and
`python -m wheelops` its report instead of a SyntaxError or TypeError from code it
cannot run. Standard library only; the errors the guard raises are defined here, so
that this refusal is the same class as every other.
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent
BUILD_INFO_FILE = "_build_info.json"
DEFAULT_PYTHON_FLOOR = "3.10"  # where the build facts cannot be read: the wheel's tag, cp310
PYTHON_FIX = "python3.12 -m venv .venv && . .venv/bin/activate && pip install wheelops"


class CompatibilityError(ImportError):
    """This wheelops install cannot serve this Python / torch / CUDA / machine."""


class UnsupportedGPUError(RuntimeError):
    """This wheelops build holds no kernel image that the GPU can run."""


# Tracebacks name them as users import them: wheelops.CompatibilityError.
CompatibilityError.__module__ = UnsupportedGPUError.__module__ = "wheelops"


def _numbers(version: str) -> tuple:
    return tuple(int("".join(c for c in part if c.isdigit()) or 0) for part in version.split("."))


def python_rule(here: str, floor: str):  # -> tuple[str, tuple[str, ...]] | None
    """The Python rule: None where `here` >= `floor`, else the message and the fix."""
    if _numbers(here)[:2] >= _numbers(floor)[:2]:
        return None
    return f"Python {here} is older than {floor}, the oldest wheelops supports", (PYTHON_FIX,)


def python_floor(package_dir: Path = PACKAGE_DIR) -> str:
    try:
        floor = json.loads((package_dir / BUILD_INFO_FILE).read_text())["python_floor"]
    except Exception:  # unreadable facts: the policy reports them, on a Python it runs on
        return DEFAULT_PYTHON_FLOOR
    return floor if isinstance(floor, str) else DEFAULT_PYTHON_FLOOR


def finding_lines(check: str, message: str, build: str, here: str, fix) -> list:
    """A finding as the errors print it: the cause, both sides, the fixes."""
    lines = [f"{check}: {message}", f"  build: {build}", f"  here:  {here}"]
    return lines + [f"  {'fix:' if i == 0 else 'or: '}   {c}" for i, c in enumerate(fix)]


def old_python_finding(package_dir: Path = PACKAGE_DIR):  # -> dict | None
    """The Python finding, as the doctor's JSON has it, where this Python is too old."""
    floor, here = python_floor(package_dir), platform.python_version()
    refused = python_rule(here, floor)
    if refused is None:
        return None
    message, fix = refused
    return {
        "check": "Python",
        "status": "fatal",
        "build": f">= {floor}",
        "runtime": here,
        "message": message,
        "fix": list(fix),
        # WHEELOPS_SKIP_GUARD cannot skip it: the package's own code needs the floor.
        "skippable": False,
    }


def refuse_old_python() -> None:
    """Raise CompatibilityError on a Python older than the build's floor (the policy, which
    says the same on a Python it can run on, needs 3.10)."""
    # This module runs on old Pythons too (it refuses them); the policy judges 3.10+.
    if sys.version_info[:2] >= (3, 10):  # noqa: UP036
        return
    finding = old_python_finding()
    if finding is not None:
        lines = finding_lines(
            finding["check"],
            finding["message"],
            finding["build"],
            finding["runtime"],
            finding["fix"],
        )
        head = "wheelops cannot run in this environment."
        tail = "`python -m wheelops` prints the whole report."
        raise CompatibilityError("\n".join([head, "", *lines, "", tail]))
