"""The outside stable-ABI audit (Quansight's torch-abi-audit) that the repair step runs on
every wheel (build_tools/package/repair.py): each library is on torch's stable ABI and needs exactly
the torch floor the matrix promises."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _checkout import REPO, import_build_tools

import wheelops

import_build_tools()

from build_tools.package import repair  # noqa: E402
from build_tools.plan import matrix as build_matrix  # noqa: E402
from build_tools.run import steps  # noqa: E402

FLOOR = build_matrix.torch_floor(build_matrix.load())


def _lib(min_torch: str = FLOOR, stable: bool = True, unstable: tuple[str, ...] = ()) -> dict:
    return {
        "path": "/w/wheelops/_ops_cpu.abi3.so",
        "error": None,
        "torch": {
            "uses_torch": True,
            "stable": stable,
            "unstable_symbols": list(unstable),
            "min_torch_version": min_torch,
        },
    }


def test_the_floor_is_the_oldest_torch_of_the_matrix():
    assert FLOOR == "2.10.0"  # the stable-ABI floor (docs/design.md): TORCH_TARGET_VERSION


@pytest.mark.parametrize(
    ("lib", "problem"),
    [
        (_lib(), None),
        (_lib(min_torch="2.11.0"), "_ops_cpu.abi3.so needs torch 2.11.0, not 2.10.0"),
        (_lib(stable=False, unstable=("_ZN3c10...",)), "unstable ABI"),
    ],
)
def test_the_audits_report_is_judged(lib, problem):
    problems = repair.abi_audit_problems({"bundled_libs": [lib], "extensions": []}, FLOOR)
    assert (problems == []) if problem is None else (problem in problems[0])
    assert repair.abi_audit_problems({"bundled_libs": []}, FLOOR) == ["it found no native library"]


def test_the_audit_finds_this_builds_libraries_on_the_floor(tmp_path):
    if shutil.which("torch-abi-audit") is None:
        pytest.skip(f"pip install {repair.ABI_AUDIT_REQUIREMENT} (the test sessions install it)")
    libraries = [Path(p) for p in wheelops.library_paths()]
    if not libraries:
        pytest.skip("no wheelops library is loaded")
    package = tmp_path / "wheelops"  # the audit reads a package folder, as in the wheel
    package.mkdir()
    for library in libraries:
        shutil.copy(library, package / library.name)
    report = repair.torch_abi_audit(tmp_path)
    found = {
        Path(lib["path"]).name: lib["torch"]["min_torch_version"] for lib in report["bundled_libs"]
    }
    assert found == {library.name: FLOOR for library in libraries}
    assert repair.abi_audit_problems(report, FLOOR) == []


def test_the_repair_step_and_the_test_sessions_install_it():
    lines = (REPO / "build_tools" / "package" / "repair-requirements.txt").read_text().splitlines()
    assert any(line.startswith(repair.ABI_AUDIT_REQUIREMENT + " ") for line in lines)
    assert repair.ABI_AUDIT_REQUIREMENT in steps.TEST_REQUIREMENTS
