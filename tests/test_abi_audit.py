"""The outside stable-ABI audit (Quansight's torch-abi-audit) that the repair step runs on
every wheel, unpacked (build_tools/package/repair.py): each library is on torch's stable ABI
and needs exactly the torch floor the matrix promises; the optional accelerator, off that ABI
by design, is left out (repair.ABI_AUDIT_LEAVES_OUT)."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path, PurePosixPath

import pytest
from _checkout import REPO
from _native_fixtures import compiler

import wheelops
from build_tools.package import repair
from build_tools.plan import matrix as build_matrix
from build_tools.run import steps
from wheelops.ops import _accel

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


def _wheel(path: Path, members: dict[str, Path]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, library in members.items():
            archive.write(library, name)
    return path


@pytest.fixture(scope="module")
def off_the_stable_abi(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A library that calls into c10 directly, as the optional accelerator does."""
    folder = tmp_path_factory.mktemp("unstable")
    (folder / "unstable.cpp").write_text(
        "namespace c10 { namespace detail { void wheelops_test_removed(long); } }\n"
        'extern "C" void wheelops_test_entry() { c10::detail::wheelops_test_removed(1); }\n'
    )
    library = folder / "wheelops_accel.abi3.so"
    command = [compiler(), "-shared", "-fPIC", "unstable.cpp", "-o", library.name]
    subprocess.run(command, cwd=folder, check=True)
    return library


def test_the_audit_finds_this_builds_libraries_on_the_floor(tmp_path, off_the_stable_abi):
    """Run as the repair step runs it, on the unpacked wheel: each library of this build
    needs exactly the floor, and the accelerator's path (and only that) is left out."""
    if shutil.which("torch-abi-audit") is None:
        pytest.skip(f"pip install {repair.ABI_AUDIT_REQUIREMENT} (the test sessions install it)")
    libraries = [Path(p) for p in wheelops.library_paths()]
    if not libraries:
        pytest.skip("no wheelops library is loaded")
    members = {f"wheelops/{library.name}": library for library in libraries}
    accelerator = f"wheelops/_accel/{_accel.folder(_accel.torch_version())}/wheelops_accel.abi3.so"
    assert PurePosixPath(accelerator).match(repair.ABI_AUDIT_LEAVES_OUT)
    wheel = _wheel(tmp_path / "audited.whl", {**members, accelerator: off_the_stable_abi})
    report = repair.torch_abi_audit_wheel(wheel)
    found = {
        Path(lib["path"]).name: lib["torch"]["min_torch_version"] for lib in report["bundled_libs"]
    }
    assert found == {library.name: FLOOR for library in libraries}
    assert repair.abi_audit_problems(report, FLOOR) == []
    # Anywhere else in the wheel, the same library fails the audit.
    for elsewhere in ("wheelops/_accel/wheelops_accel.abi3.so", "wheelops/_accel_ops.abi3.so"):
        wheel = _wheel(tmp_path / "unleft.whl", {**members, elsewhere: off_the_stable_abi})
        with pytest.raises(SystemExit, match="torch-abi-audit"):
            repair.torch_abi_audit_wheel(wheel)


def test_the_repair_step_and_the_test_sessions_install_it():
    lines = (REPO / "build_tools" / "package" / "repair-requirements.txt").read_text().splitlines()
    assert any(line.startswith(repair.ABI_AUDIT_REQUIREMENT + " ") for line in lines)
    assert repair.ABI_AUDIT_REQUIREMENT in steps.TEST_REQUIREMENTS
