"""The wheel's version: src/wheelops/_version.py plus the variant as a local label.

`0.1.0+cu130` on the per-variant indexes, as PyTorch does; plain `0.1.0` for
the PyPI upload (`build_tools/package/relabel.py` strips the label from a built wheel,
so PyPI gets the very same binary). The label is WHEELOPS_VARIANT, set by the
nox build and by cibuildwheel.
"""

from __future__ import annotations

import os
import re

from build_tools import PACKAGE_DIR

VERSION_FILE = PACKAGE_DIR / "_version.py"
_LABEL = re.compile(r"[a-z0-9]+(\.[a-z0-9]+)*")


def base_version() -> str:
    match = re.search(r'__version__\s*=\s*"([^"]+)"', VERSION_FILE.read_text())
    if not match:
        raise SystemExit(f"no __version__ in {VERSION_FILE}")
    return match.group(1)


def wheel_version() -> str:
    label = os.environ.get("WHEELOPS_VARIANT", "").strip()
    if not label:
        return base_version()
    if not _LABEL.fullmatch(label):
        raise SystemExit(f"WHEELOPS_VARIANT={label!r} is not a variant name (e.g. cu130)")
    return f"{base_version()}+{label}"
