"""The runtime's compatibility core (src/wheelops/_compat) for the build, without the package.

Importing the wheelops package would import torch and load native libraries, and the
build tooling also runs where neither exists (CI's matrix step, the README generator).
The core's modules import only each other, relatively (tests/test_import_graph.py holds
them to it), so the build loads that folder as a package of its own, under a name no
install uses (so that a process that also imports an installed wheelops, as the tests
do, holds both), and uses the very facts record, writer, ELF reader, matrix model and
policy the installed guard uses.

`load_package` is the build's one loader of code by location. CMake runs the same core
as `python -m _compat.cmake` with the installed package's folder on PYTHONPATH
(share/cmake/wheelops/wheelopsConfig.cmake); src/wheelops/_damage.py reads a damaged
install's RECORD by location on purpose: it must work when the package's own imports fail.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from build_tools import PACKAGE_DIR

CORE_DIR = PACKAGE_DIR / "_compat"


def load_package(name: str, folder: Path) -> ModuleType:
    """Import `folder` as the package `name` (once per process), wherever it is."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


_CORE = load_package("_wheelops_compat_for_build", CORE_DIR).__name__
archs = importlib.import_module(f"{_CORE}.archs")
dlerror = importlib.import_module(f"{_CORE}.dlerror")
elf = importlib.import_module(f"{_CORE}.elf")
links = importlib.import_module(f"{_CORE}.links")
facts = importlib.import_module(f"{_CORE}.facts")
matrix = importlib.import_module(f"{_CORE}.matrix")
policy = importlib.import_module(f"{_CORE}.policy")
probes = importlib.import_module(f"{_CORE}.probes")
record = importlib.import_module(f"{_CORE}.record")
torch_internals = importlib.import_module(f"{_CORE}.torch_internals")
