"""Which wheelops the benchmarks measure: the installed one, never this checkout's source
tree, whose wheelops/ `python -m` (run from the checkout's root) puts first on sys.path."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

CHECKOUT = Path(__file__).resolve().parent.parent
# Where a measured child process starts: `python -c` puts its working directory first on
# sys.path, and specs/ holds the op descriptions and no wheelops.
CHILD_CWD = CHECKOUT / "specs"


def import_wheelops() -> ModuleType:
    """wheelops as `import` finds it on sys.path without this checkout's root. A process
    that has imported one already keeps it (the tests: in-process, the wheelops under test)."""
    if "wheelops" in sys.modules:
        return sys.modules["wheelops"]
    elsewhere = [entry for entry in sys.path if Path(entry or ".").resolve() != CHECKOUT]
    spec = importlib.machinery.PathFinder.find_spec("wheelops", elsewhere)
    if spec is None or spec.loader is None:
        raise SystemExit(
            f"error: no wheelops installed (on sys.path outside the checkout {CHECKOUT}); "
            "the benchmarks measure an installed wheel: pip install wheelops, or a built one"
        )
    module = sys.modules["wheelops"] = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["wheelops"]
        raise
    return module


def check_child(location: str) -> None:
    """A measured child process imported wheelops from ``location`` (its __file__): it
    must be the one this process measures."""
    expected = Path(sys.modules["wheelops"].__file__ or "").parent
    if Path(location).parent != expected:
        raise SystemExit(f"the measured process imported wheelops from {location}, not {expected}")
