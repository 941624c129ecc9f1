from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    import wheelops
    from wheelops import _native

    # In a source checkout with nothing built, build in place (dev mode) so that
    # `pytest` works straight from a clone; an install under test never gets here.
    if _native.loaded() is None:
        import wheelops.jit

        wheelops.jit.load()
    # nox's test sessions set this so that they provably test the wheel, not the tree.
    if os.environ.get("WHEELOPS_TEST_INSTALLED") == "1":
        location = Path(wheelops.__file__).resolve().parent
        assert location != REPO / "wheelops", f"testing the source tree, not the wheel: {location}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; this machine has none")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config: pytest.Config) -> list[str]:
    import wheelops
    from wheelops import _native

    libs = _native.loaded()
    return [
        f"wheelops {wheelops.__version__} from {Path(wheelops.__file__).parent}",
        f"torch {torch.__version__} (CUDA {torch.version.cuda}), "
        f"GPU: {torch.cuda.get_device_name() if torch.cuda.is_available() else 'none'}",
        f"native: cpu={libs.cpu.name if libs else None} "
        f"cuda={libs.cuda.name if libs and libs.cuda else None}",
    ]
