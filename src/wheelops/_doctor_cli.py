"""The doctor's command line, `python -m wheelops` (wheelops/__main__.py runs main): can
this install serve this machine? Exit status 1 if not.

It always prints a report (with --json, always valid JSON) and exits 1 exactly when
`import wheelops` raises: also without torch, on a Python older than the wheel's floor,
and with any of the package's own modules damaged. The report comes from the doctor
(wheelops/_compat/doctor.py) wherever it can run; where it cannot (an old Python, or the
doctor's own modules damaged), from the error alone, built here with the standard library:
fatal where import failed too, degraded (exit 0) where only the doctor is damaged.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import wheelops
from wheelops._damage import damaged_install

PACKAGE_DIR = Path(wheelops.__file__).resolve().parent


def main(argv=None) -> int:  # argv: list[str] | None
    parser = argparse.ArgumentParser(
        prog="python -m wheelops",
        description="Compare this wheelops build with this Python, torch, CUDA and GPUs; "
        "print the fix when they do not fit. Exit status: 0 usable, 1 cannot serve.",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    version = getattr(wheelops, "__version__", None) or _version_in_file() or "unknown"
    parser.add_argument("--version", action="version", version=f"wheelops {version}")
    args = parser.parse_args(argv)
    import_error = getattr(wheelops, "_import_error", None) or _first_use_error()
    try:
        if sys.version_info[:2] < (3, 10):  # noqa: UP036 (the doctor needs 3.10; 3.8 gets here)
            raise import_error or RuntimeError("Python older than 3.10")
        from wheelops._compat import doctor

        return doctor.main(
            wheelops.__version__,
            as_json=args.json,
            import_error=import_error,
            accelerator=None if import_error else _accelerator_state(),
        )
    except Exception as err:  # the doctor cannot run here: report what stops it
        imported = import_error is None
        report = _error_report(import_error or damaged_install(err) or err, imported)
    print(json.dumps(report, indent=2) if args.json else _render(report))
    return report["exit_status"]


def _first_use_error() -> BaseException | None:
    """What an op's first use would raise: it registers the ops' Python kernels, which import
    defers to then (wheelops/ops/_first_lookup.py); a damaged op module fails there."""
    try:
        from wheelops._compat import loader

        if loader.loaded() is None:
            return None
        from wheelops.ops import register_python_kernels

        register_python_kernels()
    except Exception as err:
        return damaged_install(err) or err
    return None


def _accelerator_state() -> str | None:
    """The optional C++ accelerator's state (wheelops/ops/_accel.py), where the ops serve;
    None where they cannot (no library loaded) or the module cannot say."""
    try:
        from wheelops._compat import loader

        if loader.loaded() is None:
            return None
        from wheelops.ops import _accel

        return _accel.state()
    except Exception:
        return None


def _error_report(error: BaseException, imported: bool = False) -> dict:
    """The report's shape, from the error alone: the finding that explains it (the Python
    floor on an old Python; else the damage or error that stops the import, or, where
    `import wheelops` worked, the doctor's own: the install serves, its doctor cannot)."""
    finding = None
    try:
        from wheelops._compat.early import old_python_finding

        finding = old_python_finding()
    except Exception:
        pass
    if finding is None:
        _, marker, after = str(error).partition("Reinstall it: ")
        fix = after.split("\n")[0] if marker else ""
        finding = {
            "check": "import",
            "status": "fatal",
            "build": "every module imports",
            "runtime": "import wheelops raised",
            "message": str(error),
            "fix": [fix] if fix else [],
            "skippable": False,
        }
        if imported:
            finding.update(
                check="doctor",
                status="degraded",
                build="the doctor runs",
                runtime="import wheelops works; the doctor raised",
            )
    serves = finding["status"] != "fatal"
    return {
        "wheelops": {
            "version": getattr(wheelops, "__version__", None) or _version_in_file(),
            "location": str(PACKAGE_DIR),
            "variant": None,
        },
        "verdict": finding["status"],
        "exit_status": 0 if serves else 1,
        "build": None,
        "runtime": {"python_version": ".".join(map(str, sys.version_info[:3]))},
        "libraries": [],
        "findings": [finding],
        "gpus": [],
        "ops": [],
        "error": f"{type(error).__name__}: {error}",
        "fixes": finding["fix"],
    }


def _version_in_file():  # -> str | None
    """wheelops.__version__ where import stopped before it (an old Python, a damaged module):
    record.version's answer from the base _version.py assigns, read as text; the installed
    distribution's alone where _version.py is damaged; that base where record.py cannot run."""
    try:
        text = (PACKAGE_DIR / "_version.py").read_text()
    except (OSError, UnicodeDecodeError):
        text = ""
    match = re.search(r"^__version__\s*=\s*[\"']([^\"']+)[\"']", text, re.M)
    base = match.group(1) if match else None
    try:
        from wheelops._compat import record

        return record.version(PACKAGE_DIR, base) if base else record.installed_version(PACKAGE_DIR)
    except Exception:  # the reader damaged, or beyond this Python
        return base


def _render(report: dict) -> str:
    f = report["findings"][0]
    verdict = (
        "CANNOT SERVE this machine (see below for why and the fix)."
        if report["exit_status"]
        else "serves this machine (import wheelops works), but its doctor cannot run:"
    )
    lines = [
        f"wheelops at {report['wheelops']['location']}",
        f"verdict: {verdict}",
        "",
        f"{f['check']} ({f['status']}): {f['message']}",
    ]
    lines += [f"  {'fix:' if i == 0 else 'or: '} {c}" for i, c in enumerate(f["fix"])]
    return "\n".join(lines)
