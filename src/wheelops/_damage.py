"""The error for an install whose own files are missing, changed or unreadable.

`import wheelops` runs this package's modules before any check can: a damaged one
raises whatever Python raises (SyntaxError, ValueError, ImportError, OSError, ...).
`wheelops/__init__` turns that into DamagedInstallError, which names the damaged files
(read back against the wheel's RECORD where the install has one) and the reinstall
command. Standard library only, and imported before everything else, so that it works
whichever other file is damaged.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import traceback
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
FALLBACK_FIX = "pip install --force-reinstall --no-deps wheelops"


class DamagedInstallError(ImportError):
    """A file of this wheelops install is missing, changed or unreadable."""


DamagedInstallError.__module__ = "wheelops"


def damaged_install(err: BaseException) -> DamagedInstallError | None:
    """The error naming what is damaged; None where the wheel's RECORD shows every file
    intact, or in a source tree (no RECORD): then `err` has another cause, or is the
    developer's own, and is raised as it is."""
    if not any(PACKAGE_DIR.parent.glob("wheelops-*.dist-info")):
        return None
    culprits = _from_record()
    if culprits == []:
        return None
    return DamagedInstallError(
        f"wheelops at {PACKAGE_DIR} is damaged and cannot be imported: "
        + "; ".join(culprits or [_blamed_file(err)])
        + f". Reinstall it: {_reinstall_command()}\n(Python said {type(err).__name__}: {err})"
    )


def _from_record() -> list[str] | None:
    """The damaged files by the wheel's RECORD; None where it cannot tell (no RECORD: a
    source tree; or the reader itself damaged). The reader is loaded by its location, so
    that a damaged `_compat/__init__.py` or loader cannot stop it."""
    try:
        spec = importlib.util.spec_from_file_location(
            "_wheelops_record", PACKAGE_DIR / "_compat" / "record.py"
        )
        assert spec is not None and spec.loader is not None
        record = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = record  # dataclasses look their module up there
        try:
            spec.loader.exec_module(record)
            damage = record.damaged_files(PACKAGE_DIR)
        finally:
            del sys.modules[spec.name]
    except Exception:
        return None
    return None if damage is None else [str(d) for d in damage]


def _blamed_file(err: BaseException) -> str:
    """The package file an import error came from, as well as Python says it."""
    if isinstance(err, SyntaxError) and err.filename:
        return f"{err.filename} does not compile"
    if "null bytes" in str(err):  # Python 3.10 and 3.11 raise it naming no file
        with_nul = [str(p) for p in sorted(PACKAGE_DIR.rglob("*.py")) if _holds_nul(p)]
        if with_nul:
            return f"{', '.join(with_nul)} holds NUL bytes"
    if isinstance(err, ModuleNotFoundError) and (err.name or "").startswith("wheelops"):
        module = PACKAGE_DIR.parent.joinpath(*(err.name or "").split("."))
        return f"{module}.py is missing"
    missing = _missing_submodule(str(err))
    if missing:
        return f"{missing} is missing"
    if isinstance(err, ImportError) and err.path:
        return f"{err.path} is incomplete"
    if isinstance(err, OSError) and err.filename:
        return f"{err.filename} cannot be read"
    inside = [f.filename for f in traceback.extract_tb(err.__traceback__)
              if Path(f.filename).resolve().is_relative_to(PACKAGE_DIR)]  # fmt: skip
    return f"{inside[-1]} failed" if inside else "a file of the package failed"


def _holds_nul(path: Path) -> bool:
    try:
        return b"\0" in path.read_bytes()
    except OSError:
        return False


def _missing_submodule(message: str) -> Path | None:
    """`from wheelops.x import y` where y.py is gone: "cannot import name 'y' from 'wheelops.x'"."""
    match = re.search(r"cannot import name '(\w+)' from '(wheelops[\w.]*)'", message)
    if not match:
        return None
    package = PACKAGE_DIR.parent.joinpath(*match.group(2).split("."))
    module = package / f"{match.group(1)}.py"
    return module if package.is_dir() and not module.exists() else None


def _reinstall_command() -> str:
    """The reinstall of the same wheel where the matrix can still be read (the guard's rule)."""
    try:
        from wheelops._compat.facts import BUILD_INFO_FILE, BuildInfo, read_build_info
        from wheelops._compat.matrix import matrix
        from wheelops._compat.record import installed_from, installed_version, pip_block

        build = read_build_info(PACKAGE_DIR / BUILD_INFO_FILE)
        built_as = build.variant if isinstance(build, BuildInfo) else None
        model = matrix().for_install(pip_block(PACKAGE_DIR))
        return model.reinstall_command(
            installed_version(PACKAGE_DIR), built_as, installed_from(PACKAGE_DIR)
        )
    except Exception:
        return FALLBACK_FIX


def imported_by_doctor() -> bool:
    """`python -m wheelops` imports the package before it runs the doctor, which must
    report what stops the import instead of dying of it. CPython sets sys.argv[0] to "-m"
    only while it imports the packages above the module that -m names, before any of the
    user's code runs; Python >= 3.10 also keeps the command line (sys.orig_argv) to tell
    `-m wheelops` from `-m wheelops.ops`. Runs on every Python 3 (an old one is reported)."""
    if sys.argv[:1] != ["-m"]:
        return False
    argv = getattr(sys, "orig_argv", None)
    if argv is None:  # Python < 3.10: -m names wheelops or a module inside it
        return True
    for i, arg in enumerate(argv):
        if arg.startswith("-m"):
            module = arg[2:] or (argv[i + 1] if i + 1 < len(argv) else "")
            return module == "wheelops"
    return False
