"""The runtime's compatibility core (wheelops/_compat) for the build, without the package.

Importing the wheelops package would import torch and load native libraries.
The core's modules import only each other, relatively, so the build loads that
folder as a package of its own and uses the very facts record, writer, ELF
reader and matrix model the installed guard uses.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

CORE_DIR = Path(__file__).resolve().parent.parent / "wheelops" / "_compat"
_NAME = "_wheelops_compat_for_build"

if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        _NAME, CORE_DIR / "__init__.py", submodule_search_locations=[str(CORE_DIR)]
    )
    assert _spec is not None and _spec.loader is not None
    sys.modules[_NAME] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules[_NAME])

archs = importlib.import_module(f"{_NAME}.archs")
dlerror = importlib.import_module(f"{_NAME}.dlerror")
elf = importlib.import_module(f"{_NAME}.elf")
facts = importlib.import_module(f"{_NAME}.facts")
matrix = importlib.import_module(f"{_NAME}.matrix")
policy = importlib.import_module(f"{_NAME}.policy")
record = importlib.import_module(f"{_NAME}.record")
