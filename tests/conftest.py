from __future__ import annotations

import itertools
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
    try:
        import wheelops
    except ModuleNotFoundError as err:
        if err.name != "wheelops":
            raise
        raise pytest.UsageError(
            "no wheelops to test: install a wheel, or test the checkout's package in dev mode "
            "(DEVELOPING.md): PYTHONPATH=src python -m pytest"
        ) from err
    from wheelops._compat import loader

    # The checkout's package with nothing built (PYTHONPATH=src): build in place (dev mode)
    # so that the tests work straight from a clone; an install under test never gets here.
    if loader.loaded() is None:
        from build_tools import dev

        dev.load()
    # nox's test sessions set this so that they provably test the wheel, not the tree.
    if os.environ.get("WHEELOPS_TEST_INSTALLED") == "1":
        location = Path(wheelops.__file__).resolve().parent
        source = REPO / "src" / "wheelops"
        assert location != source, f"testing the source tree, not the wheel: {location}"


# The slow stage's tests that took over a minute each on the H200 with 14 workers
# (benchmarks/results/h200-2026-11-29-issue43): started last, they ran past the stage's
# 300 s; started first, they end within it.
LONGEST = (
    "test_export.py::test_aoti_package_runs_in_a_fresh_process",
    "test_export.py::test_aoti_control_a_plain_model_crashes_exactly_where_the_doctor_says",
    "test_benchmarks.py::test_smoke_run_checks_and_times_every_available_op",
    "test_gpu_arch_guard.py::test_ptx_for_an_older_arch_runs_through_the_driver_jit",
    "test_jit.py::test_dev_mode_cuda",
    "test_benchmarks.py::test_verify_accepts_correct_rounding_at_2_pow_28_elements",
    "test_gpu_arch_guard.py::test_sass_for_an_older_major_is_refused_by_the_guard",
    "test_normalize_volume.py::test_compile_fullgraph",
    "test_fused_linear_gelu.py::test_compile_fullgraph_forward_and_backward",
    "test_softmax.py::test_compile_fullgraph_forward_and_backward",
    "test_native_throw.py::test_dev_build_with_a_static_runtime_compiler",
    "test_benchmarks.py::test_the_user_loop_compiles_every_row",
)


# Last: after -m and -k have deselected, so that the order is that of the tests that run.
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    no_gpu = pytest.mark.skip(reason="needs a CUDA GPU; this machine has none")
    one_gpu = pytest.mark.skip(reason=f"needs two CUDA GPUs; this machine has {gpus}")

    # The longest first, so that parallel workers (pytest-xdist) start them before the
    # short ones rather than leave one running alone at the end: the tests that each take
    # over a minute on the H200 (LONGEST), then the property tests (250 examples each at
    # the "gpu" profile).
    def rank(item: pytest.Item) -> int:
        if any(f"{Path(item.path).name}::{item.name}".startswith(p) for p in LONGEST):
            return 0
        return 1 if getattr(getattr(item, "obj", None), "is_hypothesis_test", 0) else 2

    items.sort(key=rank)
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    if workers > 1:
        items[:] = _each_worker_starts_long(items, [rank(item) == 0 for item in items], workers)
    for item in items:
        if "gpu" in item.keywords and gpus == 0:
            item.add_marker(no_gpu)
        elif "multi_gpu" in item.keywords and gpus < 2:
            item.add_marker(one_gpu)


def _each_worker_starts_long(
    items: list[pytest.Item], long: list[bool], workers: int
) -> list[pytest.Item]:
    """`items` reordered so that each of the contiguous runs pytest-xdist first hands its
    workers (`--dist worksteal`: worker k gets remaining // (workers - k) tests, in order)
    starts with its share of the long tests; all at the front would make one worker run
    them one after another (a worker's queue is stolen from its end, not its start)."""
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for k, item in enumerate(item for item, is_long in zip(items, long, strict=True) if is_long):
        shares[k % workers].append(item)
    rest = iter([item for item, is_long in zip(items, long, strict=True) if not is_long])
    ordered: list[pytest.Item] = []
    remaining = len(items)
    for k in range(workers):
        size = remaining // (workers - k)
        remaining -= size
        ordered += shares[k]
        ordered += itertools.islice(rest, max(0, size - len(shares[k])))
    return ordered + list(rest)


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
