"""The measured child processes (import_time, first_call): where they start, and the check
that each imported the wheelops this process measures."""

from __future__ import annotations

import sys
from pathlib import Path

# Where a measured child process starts: `python -c` puts its working directory first on
# the import path, and specs/ holds the op descriptions (specs/opspecs) the children import.
CHILD_CWD = Path(__file__).resolve().parent.parent / "specs"


def check_child(location: str) -> None:
    """A measured child process imported wheelops from ``location`` (its __file__): it
    must be the one this process measures."""
    expected = Path(sys.modules["wheelops"].__file__ or "").parent
    if Path(location).parent != expected:
        raise SystemExit(f"the measured process imported wheelops from {location}, not {expected}")
