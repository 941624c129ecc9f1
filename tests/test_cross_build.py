"""The aarch64 universal wheel's build tooling, on this host: its pinned inputs, the matrix's
"cross" entry, and the native check the repair step runs on every wheel. The cross build
itself, its repair and its emulated runs are `nox -s e2e -- universal-aarch64`'s."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from _checkout import REPO, import_build_tools

import_build_tools()
from build_tools.docs import readme  # noqa: E402
from build_tools.package import emulation, native_check  # noqa: E402
from build_tools.plan import cross_target  # noqa: E402
from build_tools.plan import matrix as build_matrix  # noqa: E402
from build_tools.plan.arch_list import parse_arch_list  # noqa: E402
from build_tools.run import rows as e2e_rows  # noqa: E402

MATRIX = build_matrix.load()
CROSS = [(v, p) for v in MATRIX.variants for p in v.cross]


def test_every_cross_input_is_pinned_by_version_and_sha256():
    for machine in cross_target.TORCH:
        pins = cross_target._pins(machine)
        for pin in pins:
            assert re.fullmatch(r"[0-9a-f]{64}", pin.sha256), pin
            assert pin.size > 0 and pin.version in pin.location and machine in pin.location, pin
        assert set(cross_target.CUDA_RUNTIME[machine]) == {str(m) for m in MATRIX.cuda_majors}


def test_the_cross_entries_agree_with_the_matrix():
    assert CROSS, "the matrix cross-builds nothing"
    for variant, platform in CROSS:
        assert platform in variant.platforms and platform != "x86_64"
        assert platform in cross_target.TORCH and platform in emulation.DEBIAN_ARCH
        # The host code is built against the aarch64 build of the variant's build torch.
        assert cross_target.TORCH[platform].version == variant.build_torch
        for part, spec in variant.cross[platform]["arch_lists"].items():
            assert part in variant.parts and parse_arch_list(spec).sass
        torches = variant.cross_torch(platform)
        assert torches and set(torches) <= set(variant.torch)
        assert set(torches) <= set(emulation.TORCH_RUNTIME)


def test_a_cross_platform_is_built_on_x86_64_in_the_release_workflow():
    rows = build_matrix.github_matrices(MATRIX)["build"]
    for variant, platform in CROSS:
        (row,) = [r for r in rows if (r["variant"], r["platform"]) == (variant.name, platform)]
        assert row["cross"] and row["runner"] == build_matrix.RUNNERS["x86_64"]
        assert row["target"] == f"{variant.name}-{platform}"


def test_the_readme_says_what_ci_runs(tmp_path):
    script = tmp_path / "run"
    script.write_text("#!/bin/sh\nnox -s lint e2e -- universal universal-aarch64 --quick && x\n")
    assert readme.ci_rows(script) == (["universal", "universal-aarch64"], True)
    rows, _ = readme.ci_rows()  # .ci/run's
    universal = MATRIX.variant("universal")
    said = readme.tested_here(MATRIX, universal)
    assert ("aarch64 (cross-built here)" in said) == ("universal-aarch64" in rows)
    assert readme.tested_here(MATRIX, MATRIX.variant("cu126")) == "not built here"


def _compiler() -> str:
    found = shutil.which("cc") or shutil.which("gcc")
    if found is None:
        pytest.skip("needs a C compiler")
    return found


def _library(tmp_path: Path, name: str, needs: list[str]) -> Path:
    """A shared library of this host that NEEDs `needs` (empty stand-ins linked by name)."""
    for lib in needs:
        stub = tmp_path / lib
        if not stub.exists():
            empty = ["-x", "c", "/dev/null", f"-Wl,-soname,{lib}"]
            subprocess.run([_compiler(), "-shared", "-o", str(stub), *empty], check=True)
    (tmp_path / "x.c").write_text("int wheelops_x(void) { return 1; }\n")
    out = tmp_path / name
    links = [f"-l:{lib}" for lib in needs]
    linking = [f"-L{tmp_path}", "-Wl,--no-as-needed", *links]
    subprocess.run(
        [_compiler(), "-shared", "-o", str(out), str(tmp_path / "x.c"), *linking], check=True
    )
    return out


def _wheel(tmp_path: Path, tag: str, libraries: dict[str, Path]) -> Path:
    wheel = tmp_path / f"wheelops-0.1.0+cpu-cp310-abi3-{tag}.whl"
    facts = {"cuda_libraries": []}
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("wheelops/_build_info.json", json.dumps(facts))
        for name, path in libraries.items():
            archive.write(path, f"wheelops/{name}")
    return wheel


def test_the_native_check_takes_a_wheel_of_the_right_machine_and_links(tmp_path):
    machine = build_matrix.this_platform()
    good = _library(tmp_path, "good.so", ["libc10.so", "libtorch_cpu.so"])
    wheel = _wheel(tmp_path, f"manylinux_2_28_{machine}", {"_ops_cpu.abi3.so": good})
    assert native_check.problems(wheel) == []


def test_the_native_check_refuses_another_machine_and_foreign_links(tmp_path):
    machine = build_matrix.this_platform()
    other = "aarch64" if machine == "x86_64" else "x86_64"
    good = _library(tmp_path, "good.so", ["libc10.so"])
    wheel = _wheel(tmp_path, f"manylinux_2_28_{other}", {"_ops_cpu.abi3.so": good})
    (problem,) = native_check.problems(wheel)
    assert f"built for {machine}, the wheel is {other}" in problem
    bad = _library(tmp_path, "bad.so", ["libtorch_cuda.so", "libcudart.so.13"])
    wheel = _wheel(tmp_path, f"manylinux_2_28_{machine}", {"_ops_cpu.abi3.so": bad})
    (problem,) = native_check.problems(wheel)
    assert "libtorch_cuda.so" in problem and "libcudart.so.13" in problem  # not a CUDA library


def test_the_readme_says_what_the_cpu_only_cells_run():
    """Under --quick with a CUDA row, a CPU-only torch's cell runs the wheel's own test files
    (build_tools/run/rows.py tests_of_cell), not the suite: the matrix table says so and counts
    them."""
    rows, quick = readme.ci_rows()
    if not (quick and "cpu" in rows and "universal" in rows):
        pytest.skip(".ci/run runs no --quick cpu row beside a CUDA row")
    said = readme.tested_here(MATRIX, MATRIX.variant("cpu"))
    assert f"({len(build_matrix.WHEEL_TESTS)} wheel test files" in said and "suite" not in said
    assert all((REPO / test).is_file() for test in build_matrix.WHEEL_TESTS)
    quick = argparse.Namespace(quick=True, variants=["universal", "cpu"])
    assert e2e_rows.tests_of_cell("cpu", "2.13.0+cpu", quick) == build_matrix.WHEEL_TESTS
