from __future__ import annotations

import os
from pathlib import Path

import _progress_log
import pytest
import torch
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parent.parent

# Property tests: "ci" is small (seconds on a 2-core CPU) and derandomized (the
# same examples every run, so CI cannot flake on a new draw); "gpu" is the
# device suite's larger, random run.
# Choose with WHEELOPS_HYPOTHESIS_PROFILE; tools/gpu_tests.sh picks "gpu".
_COMMON = dict(
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("ci", max_examples=200, derandomize=True, **_COMMON)
settings.register_profile("gpu", max_examples=250, **_COMMON)
# Under compute-sanitizer every kernel runs many times slower: the kernels' paths,
# not the count of draws, are what it needs.
settings.register_profile("sanitizer", max_examples=25, derandomize=True, **_COMMON)
# The derivative suite again on the public-API autograd layer (test_autograd_layers.py):
# the formulas are the fast layer's, drawn in full there; this run tests the layer.
settings.register_profile("public-layer", max_examples=25, derandomize=True, **_COMMON)
settings.load_profile(os.environ.get("WHEELOPS_HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config: pytest.Config) -> None:
    import wheelops
    from wheelops._compat import loader

    # In a source checkout with nothing built, build in place (dev mode) so that
    # `pytest` works straight from a clone; an install under test never gets here.
    if loader.loaded() is None:
        from _checkout import import_build_tools

        import_build_tools()  # the checkout's, whether or not its root is on sys.path
        from build_tools import dev

        dev.load()
    # nox's test sessions set this so that they provably test the wheel, not the tree.
    if os.environ.get("WHEELOPS_TEST_INSTALLED") == "1":
        location = Path(wheelops.__file__).resolve().parent
        assert location != REPO / "wheelops", f"testing the source tree, not the wheel: {location}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    no_gpu = pytest.mark.skip(reason="needs a CUDA GPU; this machine has none")
    one_gpu = pytest.mark.skip(reason=f"needs two CUDA GPUs; this machine has {gpus}")
    # The property tests first: they are among the longest (250 examples each at the
    # "gpu" profile), so that parallel workers (pytest-xdist) start them before the short
    # ones rather than leave one of them running alone at the end.
    items.sort(key=lambda item: not getattr(getattr(item, "obj", None), "is_hypothesis_test", 0))
    for item in items:
        if "gpu" in item.keywords and gpus == 0:
            item.add_marker(no_gpu)
        elif "multi_gpu" in item.keywords and gpus < 2:
            item.add_marker(one_gpu)


def pytest_runtest_logstart(nodeid: str, location: tuple) -> None:
    _progress_log.logstart(nodeid)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _progress_log.report(report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import _example_log

    _example_log.write_if_asked()


def pytest_report_header(config: pytest.Config) -> list[str]:
    import wheelops
    from wheelops._compat import loader

    libs = loader.loaded()
    return [
        f"wheelops {wheelops.__version__} from {Path(wheelops.__file__).parent}",
        f"torch {torch.__version__} (CUDA {torch.version.cuda}), "
        f"GPU: {torch.cuda.get_device_name() if torch.cuda.is_available() else 'none'}",
        f"native: cpu={libs.cpu.name if libs else None} "
        f"cuda={libs.cuda.name if libs and libs.cuda else None}",
    ]
