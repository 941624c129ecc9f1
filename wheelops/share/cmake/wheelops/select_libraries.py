"""Run by wheelopsConfig.cmake: which wheelops libraries suit the Torch a C++ program
builds against. Loads wheelops' compatibility core by its location, as a package of its
own: importing wheelops would import torch, and this runs under any Python >= 3.10."""

import importlib
import importlib.util
import sys
from pathlib import Path

# An older Python cannot parse the core: say so, and how to pass another.
if sys.version_info < (3, 10):  # noqa: UP036
    sys.exit(
        f"wheelops: reading the build facts needs Python >= 3.10, not {sys.version.split()[0]};"
        " pass -DWHEELOPS_PYTHON=/path/to/python3"
    )

CORE = Path(__file__).resolve().parents[3] / "_compat"
NAME = "_wheelops_compat_for_cmake"
spec = importlib.util.spec_from_file_location(
    NAME, CORE / "__init__.py", submodule_search_locations=[str(CORE)]
)
assert spec is not None and spec.loader is not None
sys.modules[NAME] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sys.modules[NAME])
sys.exit(importlib.import_module(f"{NAME}.cmake").main())
