"""The aarch64 universal wheel's build tooling, on this host: its pinned inputs, the matrix's
"cross" entry, and the native check the repair step runs on every wheel. The cross build
itself, its repair and its emulated runs are `nox -s e2e -- universal-aarch64`'s."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from _checkout import REPO

from build_tools.docs import readme
from build_tools.package import emulation, native_check
from build_tools.plan import cross_target
from build_tools.plan import matrix as build_matrix
from build_tools.plan.arch_list import parse_arch_list
from build_tools.run import rows as e2e_rows
from build_tools.run import steps

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
        # A quick row emulates the newest alone (its CUDA build), with the CPU subset.
        newest = max(torches, key=lambda t: tuple(int(p) for p in t.split(".")))
        assert steps.emulated_torches(torches, quick=True) == [newest]
        assert steps.emulated_torches(torches, quick=False) == list(torches)
        assert steps.emulated_tests(newest, [newest]) == steps.EMULATED_SUBSET


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
    assert ("aarch64 (cross-built here" in said) == ("universal-aarch64" in rows)
    assert readme.tested_here(MATRIX, MATRIX.variant("cu126")) == "not built here"


def test_the_emulated_subset_runs_at_least_100_op_tests():
    """The emulated smoke set (#46: import, the doctor and >= 100 CPU op tests): pytest
    collects the subset as steps.test_emulated selects it; the op tests are those outside
    the build-facts and first-lookup files."""
    collect = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    subset = [str(REPO / test) for test in steps.EMULATED_SUBSET]
    # From where this suite runs: outside the checkout against a wheel, at its root in dev mode.
    command = [*collect, *subset, *steps.EMULATED_SUBSET_SELECT]
    done = subprocess.run(command, capture_output=True, text=True, cwd=Path.cwd())
    assert done.returncode == 0, done.stdout + done.stderr
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    not_ops = ("tests/test_build.py::", "tests/test_first_lookup.py::")
    ops = [test for test in ids if not test.startswith(not_ops)]
    assert len(ops) >= 100, done.stdout
    assert not [test for test in ids if "[cuda" in test or "test_bound_passes" in test]


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


def _unpacked_cross_toolchain(tmp_path: Path, triple: str) -> Path:
    """The layout compiler() unpacks Debian's cross packages into, in miniature: its g++ and
    gcc run an assembler, a host program that needs a library found only in
    sysroot/usr/lib/x86_64-linux-gnu, as binutils-<triple>'s `as` needs
    libopcodes-2.40-arm64.so. The library's name is this test's own, so that cross binutils
    installed on this machine cannot serve it."""
    root = tmp_path / "cross-gcc"
    libs = root / "sysroot" / "usr" / "lib" / "x86_64-linux-gnu"
    libs.mkdir(parents=True)
    lib = "libwheelops-test-opcodes.so"
    (tmp_path / "opcodes.c").write_text("int wheelops_opcodes(void) { return 0; }\n")
    shared = ["-shared", "-fPIC", f"-Wl,-soname,{lib}", "-o", str(libs / lib)]
    subprocess.run([_compiler(), *shared, str(tmp_path / "opcodes.c")], check=True)
    assembler = root / "sysroot" / "usr" / triple / "bin" / "as"
    assembler.parent.mkdir(parents=True)
    (tmp_path / "as.c").write_text(
        "int wheelops_opcodes(void);\nint main(void) { return wheelops_opcodes(); }\n"
    )
    linked = [f"-L{libs}", f"-l:{lib}", "-o", str(assembler)]  # no rpath, as Debian's
    subprocess.run([_compiler(), str(tmp_path / "as.c"), *linked], check=True)
    for tool in ("g++", "gcc"):
        driver = root / "sysroot" / "usr" / "bin" / f"{triple}-{tool}"
        driver.parent.mkdir(parents=True, exist_ok=True)
        driver.write_text(f'#!/bin/sh\nexec "{assembler}"\n')
        driver.chmod(0o755)
    return root


def test_the_unpacked_cross_compiler_finds_its_binutils_libraries(tmp_path, monkeypatch):
    """On a fresh machine the unpacked assembler died at the first source (`as: error while
    loading shared libraries: libopcodes-2.40-arm64.so`): the wrappers compiler() writes
    put the unpacked binutils' library folder on the loader's path, and the probe that
    compiler() runs catches a toolchain without it."""
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    triple = cross_target.COMPILERS["aarch64"].removesuffix("-g++")
    root = _unpacked_cross_toolchain(tmp_path, triple)
    bare = root / "sysroot" / "usr" / "bin" / f"{triple}-g++"
    with pytest.raises(cross_target.ToolkitError, match=r"libwheelops-test-opcodes\.so"):
        cross_target._check_compiles(bare, "the advice")
    cross_target._write_wrappers(root, triple)
    for tool in ("g++", "gcc"):  # gcc: the emulated runs' cupti stand-in
        cross_target._check_compiles(root / "bin" / f"{triple}-{tool}", "the advice")
    # A caller's LD_LIBRARY_PATH does not push the toolchain's folder out.
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path / "elsewhere"))
    cross_target._check_compiles(root / "bin" / f"{triple}-g++", "the advice")


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
    them (.ci/run's universal row has such a cell; a cpu row beside it would be all such)."""
    rows, quick = readme.ci_rows()
    if not (quick and "universal" in rows):
        pytest.skip(".ci/run runs no --quick universal row")
    said = readme.tested_here(MATRIX, MATRIX.variant("universal"))
    assert f"under a CPU-only torch, {len(build_matrix.WHEEL_TESTS)} wheel test files" in said
    assert all((REPO / test).is_file() for test in build_matrix.WHEEL_TESTS)
    quick = argparse.Namespace(quick=True, variants=["universal", "cpu"])
    assert e2e_rows.tests_of_cell("universal", "2.13.0+cpu", quick) == build_matrix.WHEEL_TESTS
    assert e2e_rows.tests_of_cell("universal", "2.10.0", quick) == ("tests",)
    assert e2e_rows.tests_of_cell("cpu", "2.13.0+cpu", quick) == build_matrix.WHEEL_TESTS


def test_only_a_cuda_wheels_own_files_cell_leaves_the_largest_shape_bounds_out():
    """universal's CPU-only cell loads the CPU library its CUDA torches' cells ran the
    largest-shape bound tests on; the cpu wheel's cell is its only one, and the suite's
    cells leave nothing out. The expression selects exactly those tests."""
    own = build_matrix.WHEEL_TESTS
    assert e2e_rows.keyword_of_cell("universal", own) == steps.NOT_LARGEST_SHAPE_BOUNDS
    assert e2e_rows.keyword_of_cell("cpu", own) is None
    assert e2e_rows.keyword_of_cell("universal", ("tests",)) is None
    beside = e2e_rows.keyword_of_cell("universal", ("tests",), beside_wheel_tests=True)
    assert beside == e2e_rows.CURED_IN_THE_WHEEL_TESTS_CELL
    assert "def test_" in (REPO / "tests" / "test_fixes_cure.py").read_text()
    assert steps.NOT_LARGEST_SHAPE_BOUNDS.startswith("not ")
    left_out = steps.NOT_LARGEST_SHAPE_BOUNDS.removeprefix("not ")
    source = (REPO / "tests" / "test_add.py").read_text()
    assert f"def {left_out}" in source  # a renamed test would be silently kept
