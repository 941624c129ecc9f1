"""The benchmark harness (python -m benchmarks.run) in its CPU smoke mode.

It runs in-process on the wheelops under test, with tiny shapes: the point is
that every case runs, that wheelops is checked against eager before it is timed
(a wrong answer is reported, never benchmarked), and that the JSON has the
promised shape and re-renders to the same Markdown.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from _checkout import REPO
from opspecs._rounding import signed_errors
from opspecs._shapes import PROFILES

import wheelops
from benchmarks import (
    cases,
    linear_gelu,
    overhead,
    peers,
    plot,
    run,
    targets,
    user_loop,
    verify,
)

AVAILABLE = [spec.name for spec in cases.OPS if callable(getattr(wheelops, spec.name, None))]
IMPL_KEYS = {"median_us", "min_us", "reps", "gbps", "pct_copy"}
ROW_KEYS = {
    "op",
    "pass",
    "dtype",
    "shape",
    "label",
    "input_shapes",
    "bytes",
    "eager_unfused",
    "bandwidth_target",
    "note",
    "status",
    "problem",
    "wheelops",
    "eager",
    "compile",
    "compile_problem",
    "liger",
    "liger_problem",
    "speedup_vs_eager",
    "speedup_vs_compile",
    "speedup_vs_liger",
    "targets",
}
MAIN_ONLY = ("--no-compile", "--sections", "main")  # the main section, without torch.compile
USER_LOOP_TINY = ("--device", "cpu", "--profile", "tiny", "--calls", "2", "--rounds", "1")


def _run(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    code = run.main(["--device", "cpu", "--quick", "--out", str(tmp_path), *args])
    return code, json.loads((tmp_path / run.JSON_NAME).read_text())


def _check_timing(entry: dict[str, Any], reps: int) -> None:
    assert entry.keys() >= IMPL_KEYS
    assert entry["reps"] == reps
    assert 0 < entry["min_us"] <= entry["median_us"]


def _check_overhead_rows(rows: list[dict[str, Any]], limits: dict[str, float]) -> None:
    """Each row timed both ways and judged against its mode's limit. Whether a limit is
    met is the benchmark's to report (run on the GPU machine: benchmarks/results/), not a
    unit test's: a timing assert on a shared host fails on load, not on code."""
    assert rows
    for row in rows:
        assert row["mode"] in overhead.MODES, row
        assert row["limit"] == limits[row["mode"]], row
        assert row["torch_us"] > 0 and row["wheelops_us"] > 0, row
        assert row["ratio"] == pytest.approx(row["wheelops_us"] / row["torch_us"]), row
        assert row["verdict"] == ("met" if row["ratio"] <= row["limit"] else "missed"), row


@pytest.mark.slow
def test_overhead_section_times_and_judges_every_op(tmp_path):
    """The overhead section (issue 43) times every op in each of its modes against
    PyTorch's formula, with the limits of the autograd layer serving this process."""
    code, data = _run(
        tmp_path, "--ops", ",".join(AVAILABLE), "--sections", "overhead", "--no-compile"
    )
    assert code == 0
    rows = data["overhead"]
    assert {row["op"] for row in rows} == set(AVAILABLE)
    assert {row["op"] for row in rows if row["mode"] == "no_grad"} == set(AVAILABLE)
    _check_overhead_rows(rows, overhead.limits(torch.device("cpu")))


@pytest.mark.slow
def test_overhead_of_the_stable_abi_layer_is_judged_by_its_own_limits(tmp_path):
    """Where the accelerator serves this process, the overhead section of a process with
    it turned off times the stable-ABI layer (which serves every call the accelerator
    declines, and every torch it was not built for) against that layer's limits."""
    from wheelops.ops import _accel

    if not _accel.state().startswith("loaded"):
        pytest.skip("the accelerator does not serve here: the test above times this layer")
    if wheelops.build_info().dev_mode:
        pytest.skip("the benchmarks' own process measures an installed wheelops, not dev mode")
    path = os.pathsep.join(filter(None, [str(REPO / "specs"), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "WHEELOPS_ACCEL": "0", "PYTHONPATH": path}
    command = [sys.executable, "-m", "benchmarks.run", "--device", "cpu", "--quick"]
    command += ["--out", str(tmp_path), "--sections", "overhead", "--no-compile"]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads((tmp_path / run.JSON_NAME).read_text())["overhead"]
    _check_overhead_rows(rows, overhead.LIMITS["cpu"])


@pytest.mark.slow
def test_smoke_run_checks_and_times_every_available_op(tmp_path):
    every = ["--ops", ",".join(AVAILABLE), "--sections", ",".join(run.SECTIONS)]
    code, data = _run(tmp_path, *every, "--dtypes", "float32,bfloat16")
    assert code == 0, [row["problem"] for row in data["rows"] + data["linear_gelu"]]

    assert data["schema_version"] == run.SCHEMA_VERSION
    env = data["environment"]
    assert env["torch"] == torch.__version__
    assert env["wheelops"] == wheelops.__version__
    assert {"date", "device_name", "device_type", "torch_cuda", "wheelops_build"} <= env.keys()
    settings = data["settings"]
    assert settings["profile"] == "tiny" and settings["compile"] is True
    assert data["copy_bandwidth"]["gbps"] > 0

    expected = {
        (spec.name, pass_, cases.dtype_name(dtype), spec.benchmark.label(shape))
        for spec in cases.OPS
        if spec.name in AVAILABLE
        for shape, dtype in cases.cases(spec, "tiny", (torch.float32, torch.bfloat16))
        for pass_ in (("forward", "backward") if spec.benchmark.has_backward else ("forward",))
    }
    rows = data["rows"]
    assert {(r["op"], r["pass"], r["dtype"], r["label"]) for r in rows} == expected
    assert len(rows) == len(expected)
    for row in rows:
        assert row.keys() == ROW_KEYS
        # Verified against eager before timing: "ok" is the harness's word for it.
        assert row["status"] == "ok" and row["problem"] is None
        for impl in targets.IMPLEMENTATIONS:
            _check_timing(row[impl], settings["reps"])
        assert row["compile"]["compile_s"] > 0
        # torch.compile of eager's formula is judged by wheelops' bound and only reported:
        # in bfloat16 it may round intermediates to the dtype where wheelops does not.
        if row["dtype"] == "float32":
            assert row["compile"]["mismatch"] is None
        assert row["speedup_vs_eager"] == pytest.approx(
            row["eager"]["median_us"] / row["wheelops"]["median_us"]
        )
        if row["bytes"]:
            gbps = row["bytes"] / (row["wheelops"]["median_us"] * 1e3)
            assert row["wheelops"]["gbps"] == pytest.approx(gbps)
            copy = data["copy_bandwidth"]["gbps"]
            assert row["wheelops"]["pct_copy"] == pytest.approx(100 * gbps / copy)
        assert row["targets"].keys() == targets.TARGETS.keys()
        assert set(row["targets"].values()) <= {"met", "missed", "n/a"}

    # The sweep: the forward of every op at its smoke shapes, first dtype only.
    sweep = data["sweep"]
    assert {(r["op"], r["dtype"], r["label"]) for r in sweep} == {
        (spec.name, cases.dtype_name(dtype), spec.benchmark.label(shape))
        for spec in cases.OPS
        if spec.name in AVAILABLE
        for shape, dtype in cases.cases(spec, "tiny", (torch.float32,))
    }
    for row in sweep:
        assert row["pass"] == "forward" and row["status"] == "ok"
        assert row["copy_gbps"] > 0 and row["elements"] == math.prod(row["input_shapes"][0])

    # Host overhead: every mode the op has, the verdict the one its ratio and limit give.
    modes = {(r["op"], r["mode"]) for r in data["overhead"]}
    for spec in cases.OPS:
        if spec.name in AVAILABLE:
            wanted = overhead.MODES if spec.benchmark.has_backward else overhead.MODES[:2]
            assert {mode for op, mode in modes if op == spec.name} == set(wanted)
    for row in data["overhead"]:
        assert row["torch_us"] > 0 and row["wheelops_us"] > 0
        assert row["ratio"] == pytest.approx(row["wheelops_us"] / row["torch_us"])
        assert row["limit"] == overhead.limits(torch.device("cpu"))[row["mode"]]
        assert row["verdict"] == ("met" if row["ratio"] <= row["limit"] else "missed")

    # The fused_linear_gelu section: every case checked against float64 and timed.
    gemm_rows = data["linear_gelu"]
    assert {(r["label"], r["dtype"], r["pass"]) for r in gemm_rows} == {
        (linear_gelu.label(shape), str(dtype).removeprefix("torch."), pass_)
        for shape, dtype, _, pass_ in linear_gelu.cases("tiny", (torch.float32, torch.bfloat16))
    }
    for row in gemm_rows:
        assert row["status"] == "ok" and row["problem"] is None
        assert row["wheelops"]["median_us"] > 0 and row["eager"]["median_us"] > 0
        assert row["compile"]["median_us"] > 0
        if row["dtype"] == "float32":  # bfloat16: compile's rounded pre is only reported
            assert row.get("compile_problem") is None

    markdown = (tmp_path / run.MARKDOWN_NAME).read_text()
    assert "\n## Host overhead\n" in markdown and "\n## Size sweep (forward)\n" in markdown
    for op in AVAILABLE:
        assert f"\n## {op}\n" in markdown
    rerendered = tmp_path / "again"
    assert run.main(["--only-table", str(tmp_path / run.JSON_NAME), "--out", str(rerendered)]) == 0
    assert (rerendered / run.MARKDOWN_NAME).read_text() == markdown


def _wrong_forward(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return torch.relu(x) * (alpha * 1.01)  # 1% off


def _slightly_wrong_forward(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return torch.relu(x) * (alpha * 1.0001)  # 0.01% off: float32 only


def _wrong_backward(x: torch.Tensor, alpha: float) -> torch.Tensor:
    # The right values, with a gradient that is off by x's own.
    return torch.relu(x) * alpha + (x - x.detach())


def _raises(x: torch.Tensor, alpha: float) -> torch.Tensor:
    raise RuntimeError("kernel exploded")


@pytest.mark.parametrize(
    "fake, dtype, statuses",
    [
        (_wrong_forward, "float32", {"forward": "wrong", "backward": "wrong"}),
        (_wrong_forward, "bfloat16", {"forward": "wrong", "backward": "wrong"}),
        (_slightly_wrong_forward, "float32", {"forward": "wrong", "backward": "wrong"}),
        (_wrong_backward, "float32", {"forward": "ok", "backward": "wrong"}),
        (_wrong_backward, "bfloat16", {"forward": "ok", "backward": "wrong"}),
        (_raises, "float32", {"forward": "error", "backward": "error"}),
    ],
)
def test_a_wrong_answer_is_reported_and_not_timed(tmp_path, monkeypatch, fake, dtype, statuses):
    monkeypatch.setattr(wheelops, "relu_scale", fake)
    code, data = _run(tmp_path, "--ops", "relu_scale", "--dtypes", dtype, "--no-compile")
    assert code == 1
    rows = {row["pass"]: row for row in data["rows"]}
    assert {name: row["status"] for name, row in rows.items()} == statuses
    for row in rows.values():
        assert row["eager"]["median_us"] > 0  # eager is still timed
        if row["status"] == "ok":
            assert row["wheelops"]["median_us"] > 0
        else:
            assert row["wheelops"] is None and row["problem"]
            assert all(v != "met" for v in row["targets"].values())
    if statuses["forward"] == "error":
        assert "kernel exploded" in rows["forward"]["problem"]
    markdown = (tmp_path / run.MARKDOWN_NAME).read_text()
    assert "not timed for wheelops" in markdown


def _wrong_linear_gelu(x, w, b=None, approximate="none"):
    return F.gelu(F.linear(x, w, b), approximate=approximate) * 1.01  # 1% off


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_wrong_fused_linear_gelu_is_reported_and_not_timed(tmp_path, monkeypatch, dtype):
    monkeypatch.setattr(wheelops, "fused_linear_gelu", _wrong_linear_gelu)
    args = ("--sections", "linear_gelu", "--dtypes", dtype, "--no-compile")
    code, data = _run(tmp_path, *args)
    assert code == 1
    rows = data["linear_gelu"]
    assert rows and {row["pass"] for row in rows} == set(linear_gelu.PASSES)
    for row in rows:
        assert row["status"] == "wrong" and "beyond the derived bound" in row["problem"]
        assert row["wheelops"] is None and row["eager"]["median_us"] > 0
        assert all(v != "met" for v in row["targets"].values())
    markdown = (tmp_path / run.MARKDOWN_NAME).read_text()
    assert "WRONG" in markdown


def test_a_wrong_linear_gelu_row_misses_every_target_that_applies():
    row = {
        "shape": list(linear_gelu.FLOOR_SHAPE),
        "dtype": "bfloat16",
        "approximate": "tanh",
        "pass": "forward",
        "status": "wrong",
    }
    for impl in linear_gelu.IMPLS:
        row[impl] = None if impl == "wheelops" else {"median_us": 1.0}
    targets = linear_gelu.judge(row, on_gpu=True)["targets"]
    wanted = {"eager_1.3x", "compile", "addmm_activation", "gemm_floor"}
    assert targets == {n: "missed" if n in wanted else "n/a" for n in linear_gelu.TARGETS}


def test_unknown_names_fail_loudly(tmp_path, capsys):
    with pytest.raises(SystemExit) as err:
        run.main(["--device", "cpu", "--ops", "add,no_such_op", "--out", str(tmp_path)])
    assert err.value.code == 2
    assert "unknown op(s) no_such_op" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run.main(["--device", "cpu", "--dtypes", "float8", "--out", str(tmp_path)])
    assert "unknown dtype(s) float8" in capsys.readouterr().err


@pytest.mark.parametrize("ops", [None, "add,relu_scale"])
def test_an_op_missing_from_wheelops_fails_loudly(tmp_path, monkeypatch, capsys, ops):
    monkeypatch.delattr(wheelops, "add")
    argv = ["--device", "cpu", "--out", str(tmp_path)] + (["--ops", ops] if ops else [])
    assert run.main(argv) == 2
    assert "has no op(s) add" in capsys.readouterr().err
    assert not (tmp_path / run.JSON_NAME).exists()


def test_every_op_has_cases_in_every_profile():
    assert len({spec.name for spec in cases.OPS}) == len(cases.OPS) == 10
    for spec in cases.OPS:
        for profile in PROFILES:
            if (spec.name, profile) == ("lltm", "sweep"):  # GEMM-bound: no bandwidth curve
                assert not spec.benchmark.shapes[profile]
                continue
            assert cases.cases(spec, profile, (torch.bfloat16, torch.float32)), (spec, profile)
    sweep = cases.cases(cases.OPS_BY_NAME["softmax"], "sweep", (torch.bfloat16,))
    assert [math.prod(shape) for shape, _ in sweep] == [4**k for k in range(8, 15)]
    full = {spec.name: cases.cases(spec, "full", (torch.bfloat16,)) for spec in cases.OPS}
    layer_norm = cases.OPS_BY_NAME["layer_norm"].benchmark
    assert [layer_norm.label(shape) for shape, _ in full["layer_norm"]] == [
        "4096x1024",
        "4096x4096",
        "4096x8192",
        "4096x16384",
        "8192x8192",
    ]
    assert [dtype for _, dtype in full["rgb_to_gray"]] == [torch.uint8, torch.uint8]


@pytest.mark.parametrize(
    "op, shape, dtype, forward, backward",
    [
        ("add", (4096, 1024), torch.bfloat16, 3 * 2 * 4096 * 1024, 0),
        ("softmax", (8, 16), torch.float32, 2 * 4 * 128, 3 * 4 * 128),
        ("layer_norm", (8, 16), torch.float32, (2 * 128 + 2 * 16) * 4, (3 * 128 + 3 * 16) * 4),
        ("rgb_to_gray", (4096, 4096), torch.uint8, 4 * 4096 * 4096, None),
        ("normalize_volume", (256, 512, 512), torch.uint16, 6 * 256 * 512 * 512, None),
        ("lltm", (4096, 1024, 512), torch.float32, 6 * 4096 * 512 * 4, 10 * 4096 * 512 * 4),
    ],
)
def test_bytes_that_must_move(op, shape, dtype, forward, backward):
    plan = cases.OPS_BY_NAME[op].benchmark
    assert plan.bytes(shape, dtype, backward=False) == forward
    assert plan.has_backward == (backward is not None)
    if backward is not None:
        assert plan.bytes(shape, dtype, backward=True) == backward


def test_inputs_have_the_shapes_the_ops_take():
    sizes = {
        "rgb_to_gray": ((2, 3, 5), [[2, 3, 5, 3]]),
        "lltm": ((4, 6, 5), [[4, 6], [15, 11], [15], [4, 5], [4, 5]]),
        "bias_gelu": ((5, 33), [[5, 33], [33]]),
    }
    for op, (shape, expected) in sizes.items():
        args = cases.inputs(cases.OPS_BY_NAME[op], shape, torch.float32, torch.device("cpu"))
        assert [list(t.shape) for t in args] == expected
    gray = cases.OPS_BY_NAME["rgb_to_gray"]
    (pixels,) = cases.inputs(gray, (64, 64), torch.uint8, torch.device("cpu"))
    assert pixels.dtype == torch.uint8 and int(pixels.max()) > 250


def test_eager_gray_rounds_half_to_even_exactly():
    # (299R + 587G + 114B) / 1000: 1.495 -> 1, 28.5 -> 28, 21.5 -> 22, 7.5 -> 8, 255 -> 255.
    pixels = [[5, 0, 0], [0, 0, 250], [0, 4, 168], [0, 12, 4], [255, 255, 255]]
    img = torch.tensor([pixels], dtype=torch.uint8)
    assert cases.OPS_BY_NAME["rgb_to_gray"].eager(img).tolist() == [[1, 28, 22, 8, 255]]


def test_eager_gray_matches_float64_half_even_on_every_colour():
    # All 2**24 colours, ties (total % 1000 == 500) included: total / 1000 is
    # exact in float64 at every tie, so round() there is the exact half-even.
    colours = torch.arange(2**24, dtype=torch.int32)
    rgb = torch.stack([colours >> 16, (colours >> 8) & 255, colours & 255], dim=-1)
    total = 299 * rgb[:, 0] + 587 * rgb[:, 1] + 114 * rgb[:, 2]
    expected = torch.round(total.double() / 1000).to(torch.uint8)
    ties = total % 1000 == 500
    assert int(ties.sum()) > 10_000
    got = cases.OPS_BY_NAME["rgb_to_gray"].eager(rgb.to(torch.uint8).view(1, 2**12, 2**12, 3))
    assert torch.equal(got.reshape(-1), expected)
    assert torch.equal(got.reshape(-1)[ties], expected[ties])


def test_verify_accepts_rounding_and_rejects_wrong_answers():
    x = torch.randn(64, 257, dtype=torch.float64)
    softmax = torch.softmax(x, -1)
    rule = verify.Rule(sum_length=257)  # softmax's: the row's sum
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        rounded = softmax.to(dtype)  # one rounding: what wheelops may return
        assert verify.mismatch(rounded, rounded, softmax, rule) is None
        # 1% off, either way (bf16: 1% of a value rounded again), and zero are wrong.
        for factor in (1.01, 0.99, 0.0):
            wrong = (softmax * factor).to(dtype)
            assert "beyond the derived bound" in verify.mismatch(wrong, rounded, softmax, rule)
    # float32: 0.01% off is wrong too.
    wrong = (softmax * 1.0001).float()
    assert verify.mismatch(wrong, wrong, softmax, rule) is not None
    # A bias no single element shows where intermediates stored in bfloat16 loosen the
    # per-element bound (4 roundings of the rms: 1.6%): +0.3% everywhere.
    exact = torch.linspace(1, 2, 2**16, dtype=torch.float64)
    biased = (exact * 1.003).bfloat16()
    loose = verify.Rule(dtype_roundings=4.0)
    assert verify.mismatch(exact.bfloat16(), biased, exact, loose) is None
    assert "a bias" in verify.mismatch(biased, biased, exact, loose)
    got = softmax.float()
    assert "shape" in verify.mismatch(got[:, :5], got, softmax, rule)
    assert "dtype" in verify.mismatch(softmax, got, softmax, rule)
    nan = got.clone()
    nan[0, 0] = math.nan
    assert "NaN" in verify.mismatch(nan, got, softmax, rule)
    gray = torch.tensor([1, 2, 3], dtype=torch.uint8)
    off = gray + (gray == 2)
    assert "1 of 3 elements differ (by up to 1)" in verify.mismatch(off, gray, gray, rule)
    assert "result 1" in verify.mismatch((x, x + 1), (x, x), (x, x), verify.Rule())


def _relu_scale_bf16(shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """relu(x) * 1.7 of bfloat16 normal inputs: (the float64 reference, it rounded once to
    bfloat16, to nearest even: the correctly rounded result)."""
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).bfloat16()
    reference = x.double().relu_().mul_(1.7)  # in place: a 2**28-element check holds one
    return reference, reference.bfloat16()


def test_verify_accepts_the_correctly_rounded_relu_scale_in_bfloat16():
    # Its own signed error is -3e-5 per element, not zero: the old aggregate check (the sum
    # of sign(ref) (got - ref) against zero) called it a bias (#42).
    reference, rounded = _relu_scale_bf16((4096, 4096))
    own, _, count = signed_errors(rounded, reference)
    assert own / count < -2e-5
    assert verify.mismatch(rounded, rounded, reference, verify.Rule()) is None


@pytest.mark.slow  # 15-30 s on 2 cores (OMP_WAIT_POLICY=PASSIVE, as the nox cells run it)
def test_verify_accepts_correct_rounding_at_2_pow_28_elements():
    # The benchmark's largest results (65536x4096), compared in pieces: 2**28 bfloat16
    # elements and their float64 reference take 2.5 GiB, the check no more than pieces.
    reference, rounded = _relu_scale_bf16((2**16, 2**12))
    assert verify.mismatch(rounded, rounded, reference, verify.Rule()) is None


@pytest.mark.parametrize("terms", [False, True])
def test_verify_leaves_out_non_finite_elements_and_judges_the_rest(terms):
    # The masked path (verify._kept): the finite elements alone are held to the bound,
    # with their per-element terms where the rule has them; NaN and infinities must agree.
    reference = torch.tensor([1.0, -2.0, math.inf, math.nan, 3.0], dtype=torch.float64)
    rounded = reference.float()
    rule = verify.Rule(terms=torch.ones(5, dtype=torch.float64) if terms else None)
    assert verify.mismatch(rounded, rounded, reference, rule) is None
    off = rounded.clone()
    off[4] = 3.01  # 3e-3 relative: far beyond one float32 rounding plus 24 of the terms
    assert "1 of 3 elements beyond the derived bound" in verify.mismatch(
        off, rounded, reference, rule
    )
    flipped = rounded.clone()
    flipped[2] = -math.inf
    assert verify.mismatch(flipped, rounded, reference, rule) == (
        "an infinity differs from the reference's"
    )
    nan = rounded.clone()
    nan[0] = math.nan
    assert verify.mismatch(nan, rounded, reference, rule) == (
        "NaN at 1 elements where the reference differs"
    )


@pytest.mark.parametrize(("dtype", "off"), [(torch.float32, 1e-3), (torch.bfloat16, 1e-2)])
def test_verify_rejects_a_systematic_error(dtype, off):
    x = torch.randn(4096, 4096, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    reference = x * 1.7
    rounded = reference.to(dtype)
    assert verify.mismatch(rounded, rounded, reference, verify.Rule()) is None
    assert verify.mismatch((reference * (1 + off)).to(dtype), rounded, reference, verify.Rule())
    if dtype == torch.bfloat16:  # float32's own arithmetic is allowed more than a rounding
        # Within the per-element bound, loosened by intermediates stored in the dtype (4
        # roundings of the rms): every value off by a quarter of a rounding.
        biased = (reference * (1 + verify.unit(dtype) / 4)).to(dtype)
        loose = verify.Rule(dtype_roundings=4.0)
        assert "a bias" in verify.mismatch(biased, rounded, reference, loose)


def test_targets_are_judged_from_times_and_bytes():
    row = {
        "pass": "forward",
        "bytes": 3_000_000,
        "status": "ok",
        "bandwidth_target": True,
        "eager_unfused": True,
        "wheelops": {"median_us": 1.0},
        "eager": {"median_us": 1.9},
        "compile": {"median_us": 1.0},
    }
    derived = targets.derive(row, copy_gbps=3200.0)
    assert derived["wheelops"]["gbps"] == pytest.approx(3000.0)
    assert derived["wheelops"]["pct_copy"] == pytest.approx(93.75)
    assert derived["targets"] == {
        "forward_bandwidth": "met",
        "backward_bandwidth": "n/a",
        "compile": "met",
        "eager": "missed",  # 1.9x < 2x
        "eager_parity": "met",  # 1.9x >= 1.0x
    }
    backward = targets.derive({**row, "pass": "backward", "eager_unfused": False}, 4000.0)
    assert backward["targets"]["backward_bandwidth"] == "missed"  # 75% < 80%
    assert backward["targets"]["eager"] == "n/a"
    slower = targets.derive({**row, "eager": {"median_us": 0.9}}, 3200.0)
    assert slower["targets"]["eager_parity"] == "missed"
    # A backward that moves no bytes (add's: no kernel anywhere) is judged on nothing.
    passthrough = targets.derive({**row, "pass": "backward", "bytes": 0}, 3200.0)["targets"]
    assert set(passthrough.values()) == {"n/a"}
    # compile: 1.0x from 4096 x 4096 elements up, 0.95x below
    behind = {**row, "compile": {"median_us": 0.96}}
    assert targets.derive({**behind, "shape": [4096, 1024]}, 3200.0)["targets"]["compile"] == "met"
    assert targets.derive({**behind, "shape": [4096, 4096]}, 3200.0)["targets"]["compile"] == (
        "missed"
    )
    assert (
        targets.derive({**behind, "shape": [4096, 1023], "compile": {"median_us": 0.94}}, 1.0)[
            "targets"
        ]["compile"]
        == "missed"
    )


def test_the_sweep_is_plotted(tmp_path):
    pytest.importorskip("matplotlib")
    row = {"op": "softmax", "dtype": "bfloat16", "bytes": 2**20, "copy_gbps": 100.0}
    rows = [
        {**row, "bytes": 2**20 * k, **{impl: {"gbps": 10.0 * k} for impl in ("wheelops", "eager")}}
        for k in (1, 4, 16)
    ]
    data = {
        "environment": {"wheelops": "0", "torch": "2", "torch_cuda": None, "device_name": "x"},
        "sweep": rows,
    }
    path = plot.plot_sweep(data, tmp_path)
    assert path == tmp_path / plot.PLOT_NAME
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot.plot_sweep({**data, "sweep": []}, tmp_path / "none") is None


def test_the_user_loop_times_every_op_on_both_clocks_passes(tmp_path):
    """The user's clock (issue #37): every benchmarked op, each pass it has, eager and
    wheelops timed per call, written as JSON and a table."""
    argv = [*USER_LOOP_TINY, "--no-compile", "--out", str(tmp_path)]
    assert user_loop.main(argv) == 0
    rows = json.loads((tmp_path / "user_loop.json").read_text())["rows"]
    timed = {(r["op"], r["pass_"]) for r in rows}
    for spec in cases.OPS:
        passes = user_loop.PASSES if spec.derivatives is not None else ("forward",)
        assert {(spec.name, p) for p in passes} <= timed, spec.name
    assert all(r["us_per_call"]["eager"] > 0 and r["us_per_call"]["wheelops"] > 0 for r in rows)
    seed = [r for r in rows if r["op"] == "fused_linear_gelu"]
    assert seed and "fused_linear_gelu" in (tmp_path / "user_loop.md").read_text()


def test_the_user_loop_compiles_every_row(monkeypatch):
    """torch.compile's column over rows of several dtypes: every row's `eager` shares one
    code object, and their graphs piled up in one dynamo cache until its recompile limit,
    fatal under fullgraph=True (FailOnRecompileLimitHit, #42). The limit is lowered to 2
    so that one shape's three rows reach it (nine rows took 94 s on the GPU machine)."""
    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    monkeypatch.setattr(config, name, 2)
    shapes = ((5, 16, 24),)
    rows = user_loop.linear_gelu_rows(shapes, torch.device("cpu"), 2, 1, compile_=True)
    assert len(rows) == len(shapes) * 3 * len(user_loop.PASSES)  # bf16 erf, tanh; float32
    assert {r.dtype for r in rows} == {"bfloat16", "float32"}
    assert all(r.us_per_call["compile"] > 0 for r in rows)


def test_a_user_loop_row_says_how_much_faster_wheelops_is():
    row = user_loop.Row("op", "4x4", "float32", "forward", {"eager": 30.0, "wheelops": 20.0})
    assert row.speedup("eager") == 1.5 and row.speedup("compile") is None


@pytest.fixture(autouse=True)
def _no_liger_left_behind():
    """A test's (fake) liger_kernel modules leave sys.modules with it."""
    yield
    for name in [m for m in sys.modules if m.split(".")[0] == "liger_kernel"]:
        del sys.modules[name]


def _install_fake_liger(monkeypatch, tmp_path: Path, factor: float = 1.0) -> None:
    """A `liger_kernel` with the functions the benchmark calls, in plain torch (the real
    one is Triton, CUDA only), float32 inside and one rounding as Liger's kernels, on
    sys.path; `factor` scales every forward (1.01: 1% off). The run is let onto the CPU
    by the one rule that keeps Liger to CUDA."""
    package = tmp_path / "fake_site" / "liger_kernel"
    (package / "transformers").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "transformers" / "__init__.py").write_text("")
    (package / "transformers" / "functional.py").write_text(
        "import torch\nimport torch.nn.functional as F\n"
        f"FACTOR = {factor!r}\n"
        "def liger_rms_norm(x, w, eps, offset=0.0, casting_mode='llama', in_place=True):\n"
        "    assert (offset, casting_mode, in_place) == (0.0, 'gemma', False)\n"
        "    out = F.rms_norm(x.float(), x.shape[-1:], w.float(), eps)\n"
        "    return (out * FACTOR).to(x.dtype)\n"
        "def liger_layer_norm(x, w, b, eps):\n"
        "    out = F.layer_norm(x.float(), x.shape[-1:], w.float(), b.float(), eps)\n"
        "    return (out * FACTOR).to(x.dtype)\n"
        "def liger_softmax(x):\n"  # its backward from the rounded output, as Liger's
        "    return torch.softmax(x, -1) * FACTOR\n"
        "def liger_swiglu(a, b):\n"
        "    return (F.silu(a.float()).to(a.dtype) * b * FACTOR)\n"
    )
    (package / "ops.py").write_text("")  # a Liger without the fused gate-up SwiGLU
    monkeypatch.syspath_prepend(str(tmp_path / "fake_site"))
    monkeypatch.setattr(peers, "runs_on", lambda device: True)


LIGER_OPS = ("rms_norm", "layer_norm", "softmax", "silu_and_mul")


def test_liger_runs_only_on_cuda_and_says_why_it_is_absent(monkeypatch):
    assert peers.runs_on(torch.device("cuda")) and not peers.runs_on(torch.device("cpu"))
    cpu = peers.load_liger(torch.device("cpu"))
    assert cpu.ops == {} and cpu.absent == peers.NOT_ON_CUDA
    monkeypatch.setitem(sys.modules, "liger_kernel", None)  # import liger_kernel fails
    monkeypatch.setattr(peers, "runs_on", lambda device: True)
    missing = peers.load_liger(torch.device("cpu"))
    assert missing.ops == {} and missing.absent == peers.NOT_INSTALLED


def test_the_liger_columns_are_timed_beside_the_others(tmp_path, monkeypatch):
    _install_fake_liger(monkeypatch, tmp_path)
    ops = [op for op in LIGER_OPS if op in AVAILABLE] + ["add"]
    code, data = _run(tmp_path / "out", "--ops", ",".join(ops), "--dtypes", "float32", *MAIN_ONLY)
    assert code == 0
    liger = data["settings"]["liger"]
    assert liger["absent"] is None and set(liger["ops"]) == set(LIGER_OPS)
    assert "liger_swiglu(*x.chunk(2, -1))" in liger["ops"]["silu_and_mul"]
    for row in data["rows"]:
        if row["op"] == "add":  # no Liger op: no Liger result
            assert row["liger"] is None and row["speedup_vs_liger"] is None
            continue
        assert row["liger_problem"] is None, row["liger_problem"]
        _check_timing(row["liger"], data["settings"]["reps"])
        assert row["speedup_vs_liger"] == pytest.approx(
            row["liger"]["median_us"] / row["wheelops"]["median_us"]
        )
    markdown = (tmp_path / "out" / run.MARKDOWN_NAME).read_text()
    softmax = markdown.split("\n## softmax\n")[1].split("\n## ")[0]
    assert "| liger µs | × liger |" in softmax  # noqa: RUF001
    assert "liger" not in markdown.split("\n## add\n")[1].split("\n## ")[0]

    argv = [*USER_LOOP_TINY, "--no-compile", "--out", str(tmp_path / "loop")]
    assert user_loop.main(argv) == 0
    rows = json.loads((tmp_path / "loop" / "user_loop.json").read_text())["rows"]
    for row in rows:
        timed = "liger" in row["us_per_call"]
        assert timed == (row["op"] in LIGER_OPS), row
        if timed:
            assert row["us_per_call"]["liger"] > 0 and not row["problems"]
    assert "| liger µs |" in (tmp_path / "loop" / "user_loop.md").read_text()


def test_a_wrong_liger_is_reported_and_not_timed(tmp_path, monkeypatch):
    _install_fake_liger(monkeypatch, tmp_path, factor=1.01)
    code, data = _run(tmp_path / "out", "--ops", "softmax", "--dtypes", "bfloat16", *MAIN_ONLY)
    assert code == 0  # a wrong peer is reported; wheelops' answers decide the exit status
    for row in data["rows"]:
        assert row["status"] == "ok" and row["wheelops"]["median_us"] > 0
        assert row["liger"] is None and row["speedup_vs_liger"] is None
        assert row["liger_problem"].startswith("wrong: ")
        assert row["liger_problem"].endswith(f"({peers.SOFTMAX_ROUNDS})")  # what it breaks
    markdown = (tmp_path / "out" / run.MARKDOWN_NAME).read_text()
    assert "Liger-Kernel not timed (wrong result or error)" in markdown and "**WRONG**" in markdown

    problems = {"liger": "wrong: 3 of 16 elements beyond"}
    row = user_loop.Row("softmax", "4x4", "bfloat16", "forward", {"wheelops": 1.0}, problems)
    assert "| **WRONG** |" in user_loop.table([row])


def test_without_liger_there_is_no_column_and_the_json_says_why(tmp_path):
    code, data = _run(tmp_path, "--ops", "softmax", "--dtypes", "float32", *MAIN_ONLY)
    assert code == 0
    assert data["settings"]["liger"] == {"version": None, "absent": "not on CUDA", "ops": {}}
    assert all(row["liger"] is None and row["liger_problem"] is None for row in data["rows"])
    markdown = (tmp_path / run.MARKDOWN_NAME).read_text()
    assert "liger µs" not in markdown and "Liger-Kernel: no column (not on CUDA)" in markdown


def test_liger_silu_and_mul_reads_the_halves_in_place_where_liger_can():
    calls = []

    class FusedGateUp:
        @staticmethod
        def apply(x: torch.Tensor, in_place: bool) -> torch.Tensor:
            calls.append(in_place)
            return x

    functional = SimpleNamespace(
        liger_rms_norm=None, liger_layer_norm=None, liger_softmax=None, liger_swiglu=None
    )
    ops = SimpleNamespace(LigerFusedGateUpSiLUMulFunction=FusedGateUp)
    peer = peers.liger_ops(functional, ops)["silu_and_mul"]
    x = torch.ones(2, 4)
    assert peer.call(x) is x and calls == [False]  # never in place: the timing reruns it
    assert peer.how.startswith("LigerFusedGateUpSiLUMulFunction") and peer.relative_roundings == 1
