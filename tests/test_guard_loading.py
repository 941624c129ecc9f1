"""The guard on real failures: broken libraries and mismatched build facts in a copy of
the installed package, imported in a fresh process; and the doctor's report of them."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest
import torch
from _native_fixtures import (
    DAMAGED_DEPENDENCY,
    MISSING_C10_SYMBOL,
    build_broken_libraries,
    built_into,
    installed_copy,
    patched,
    read_facts,
    run_python,
    served_library,
    truncated,
    with_cuda_version,
    write_facts,
)

import wheelops
from wheelops._compat.dlerror import classify, demangle, dlopen_error
from wheelops._compat.facts import this_process
from wheelops._compat.matrix import matrix

pytestmark = pytest.mark.slow

CUDA_TORCH = this_process().torch_kind == "cuda"
# The library a scenario breaks: the CUDA one where it would load, else the CPU one.
SLOT = served_library(Path())
CUDA_BUILD = bool(wheelops.build_info().cuda_libraries)
REINSTALL = "pip install --force-reinstall --no-deps wheelops --index-url " + matrix().index_url
# Reinstalling this very wheel: from PyPI for the universal one, else from its index.
REINSTALL_THIS = matrix().install_command(wheelops.build_info().variant)
OTHER_MACHINE = (
    (b"\xb7\x00", "aarch64") if platform.machine() == "x86_64" else (b"\x3e\x00", "x86_64")
)
RUN_AN_OP = "import torch, wheelops; print(wheelops.add(torch.ones(2), torch.ones(2)).tolist())"


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_broken_libraries(tmp_path_factory.mktemp("broken"))


@pytest.fixture
def package(tmp_path: Path) -> Path:
    return installed_copy(tmp_path)


def assert_refused(package: Path, result, *words: str, fix: bool = True) -> None:
    assert result.returncode == 1, (result.returncode, result.stderr[-3000:])  # not a signal
    assert "wheelops.CompatibilityError" in result.stderr or "CompatibilityError" in result.stderr
    message = result.stderr[result.stderr.index("CompatibilityError") :]
    for word in words:
        assert word in message, (word, message)
    assert ("\n  fix:   " in message) == fix, message
    # Import and doctor agree: where import refuses, `python -m wheelops` exits 1.
    report = doctor_report(package, expected_status=1)
    assert report["verdict"] == "fatal" and report["exit_status"] == 1, report["findings"]
    assert not any(lib["accepted"] for lib in report["libraries"]) or report["error"]


def doctor_report(package: Path, expected_status: int) -> dict:
    result = doctor(package, "--json")
    assert result.returncode == expected_status, (result.stdout[-3000:], result.stderr[-3000:])
    return json.loads(result.stdout)


def test_a_faithful_copy_imports_and_runs(package):
    result = run_python(package, "-c", RUN_AN_OP)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[2.0, 2.0]"
    assert doctor_report(package, expected_status=0)["verdict"] in ("ok", "degraded")


def test_missing_mangled_c10_symbol_is_a_torch_abi_mismatch(package, broken):
    built_into(package, SLOT, broken["missing_c10_symbol"])
    result = run_python(package, "-c", "import wheelops")
    assert_refused(
        package,
        result,
        MISSING_C10_SYMBOL,  # demangled, not _ZN3c10...
        f"which torch {torch.__version__} does not have",
        f"built against torch {wheelops.build_info().torch_version}",
        "undefined symbol: _ZN3c106detail21wheelops_test_removedEl",  # the loader's words too
        REINSTALL,
    )


def test_absent_needed_cuda_runtime_is_a_cuda_major_mismatch(package, broken):
    if (torch.version.cuda or "").startswith("12."):
        pytest.skip("this torch brings libcudart.so.12 itself: the CUDA 13 cells test this")
    if dlopen_error(broken["needs_cudart12"]) is None:
        pytest.skip("this machine has a libcudart.so.12 on the loader's path")
    built_into(package, SLOT, broken["needs_cudart12"])
    result = run_python(package, "-c", "import wheelops")
    torch_side = f"brings CUDA {torch.version.cuda}" if CUDA_TORCH else "has no CUDA runtime"
    assert_refused(
        package, result, "needs libcudart.so.12, the CUDA 12 runtime", torch_side, REINSTALL
    )


def test_damaged_dependency_is_named_not_wheelops(package, broken):
    # Issue #15, bug 2: a damaged library on LD_LIBRARY_PATH (there: libcudart.so.13) was
    # reported as wheelops' own library being damaged, with reinstall commands as the fix.
    built_into(package, SLOT, broken["needs_dependency"])
    env = {"LD_LIBRARY_PATH": str(broken["damaged_dependency_dir"])}
    result = run_python(package, "-c", "import wheelops", env=env)
    damaged = broken["damaged_dependency_dir"] / DAMAGED_DEPENDENCY
    assert result.returncode == 1, result.stderr[-3000:]
    message = result.stderr[result.stderr.index("CompatibilityError") :]
    assert f"needs {DAMAGED_DEPENDENCY}, and the loader found a damaged copy" in message
    assert f"at {damaged}" in message and "the wheelops library is intact" in message
    assert f"; replace or remove the damaged {damaged}" in message
    assert "--force-reinstall" not in message and "\n  fix:" not in message
    doctor = run_python(package, "-m", "wheelops", "--json", env=env)
    assert doctor.returncode == 1
    report = json.loads(doctor.stdout)
    (fatal,) = [f for f in report["findings"] if f["status"] == "fatal"]
    assert f"replace or remove the damaged {damaged}" in fatal["message"]
    assert fatal["fix"] == []  # reinstalling wheelops would not cure it


def test_truncated_library_is_refused_before_dlopen(package):
    # dlopen of this file dies of SIGBUS; the guard must stop first.
    truncated(package / SLOT, package / SLOT)
    result = run_python(package, "-c", "import wheelops")
    assert_refused(package, result, f"{SLOT} is truncated", REINSTALL_THIS)


def test_library_for_another_cpu_is_named(package):
    code, other = OTHER_MACHINE
    patched(package / SLOT, package / SLOT, 18, code)
    result = run_python(package, "-c", "import wheelops")
    assert_refused(package, result, f"was built for {other}; this machine is {platform.machine()}")


def test_32_bit_library_is_named(package):
    patched(package / SLOT, package / SLOT, 4, b"\x01")
    result = run_python(package, "-c", "import wheelops")
    assert_refused(
        package, result, "is a 32-bit library; this Python is 64-bit", "64-bit Python", fix=False
    )


def test_missing_library_file(package):
    (package / SLOT).unlink()
    result = run_python(package, "-c", "import wheelops")
    # Named as the build facts name it (issue #19: it was the glob "_ops_cpu*.so").
    assert_refused(package, result, f"{package / SLOT} does not exist", REINSTALL_THIS)


def test_torch_below_the_build_floor_is_refused_before_load(package):
    facts = read_facts(package)
    write_facts(package, {**facts, "stable_abi_floor": "2.99"})
    result = run_python(package, "-c", "import wheelops")
    assert_refused(
        package,
        result,
        f"torch {torch.__version__} is older than 2.99",
        'pip install --upgrade "torch>=2.99"',
    )
    # The experts' switch: no checks, the load goes ahead (and works, here) ...
    result = run_python(package, "-c", RUN_AN_OP, env={"WHEELOPS_SKIP_GUARD": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[2.0, 2.0]"
    # ... and the doctor agrees: it shows the finding, not enforced, and exits 0.
    doctor = run_python(package, "-m", "wheelops", "--json", env={"WHEELOPS_SKIP_GUARD": "1"})
    assert doctor.returncode == 0, doctor.stdout[-3000:]
    report = json.loads(doctor.stdout)
    torch_check = next(f for f in report["findings"] if f["check"] == "torch")
    assert torch_check["message"].startswith("not enforced (WHEELOPS_SKIP_GUARD=1)")
    assert report["guard"]["enabled"] is False


def test_python_below_the_build_floor_is_refused(package):
    write_facts(package, {**read_facts(package), "python_floor": "3.99"})
    result = run_python(package, "-c", "import wheelops")
    assert_refused(package, result, f"Python {platform.python_version()} is older than 3.99")


def test_wheel_for_another_platform_is_refused(package):
    _, other = OTHER_MACHINE
    write_facts(package, {**read_facts(package), "platform": f"linux_{other}"})
    result = run_python(package, "-c", "import wheelops")
    assert_refused(package, result, f"built for {other}; this machine is {platform.machine()}")


def test_cuda_major_mismatch(package):
    if SLOT == "_ops_cpu.abi3.so":
        pytest.skip("needs a CUDA library that loads here to mismatch")
    major = torch.version.cuda.split(".")[0]
    other = "12.8" if major == "13" else "13.0"  # a release of the other major
    write_facts(package, with_cuda_version(read_facts(package), other))
    result = run_python(package, "-c", RUN_AN_OP)
    fitting = matrix().variants_for_torch_cuda(torch.version.cuda)
    assert_refused(
        package,
        result,
        f"CUDA {other.split('.')[0]} libraries cannot run on a CUDA {major} runtime",
        f"torch {torch.__version__} brings the CUDA {torch.version.cuda} runtime",
        *(["\n  fix:   " + REINSTALL + "/" + fitting[0].name + "\n"] if fitting else []),
        # Issue #15, bug 3: changing torch instead was never offered.
        f"keep this wheelops and install a torch built with CUDA {other}",
        f'  {"or: " if fitting else "fix:"}   pip install --upgrade "torch>=2.10" --index-url '
        f"https://download.pytorch.org/whl/cu{other.replace('.', '')}\n",
    )


def test_missing_build_facts(package):
    # Issue #15, bug 1: the doctor said "DEGRADED: this install works here" (exit 0), and
    # called an installed package "a source checkout that has not been built".
    (package / "_build_info.json").unlink()
    result = run_python(package, "-c", "import wheelops")
    assert_refused(package, result, "build facts cannot be read", "_build_info.json is missing")
    assert "source checkout" not in result.stderr
    report = doctor_report(package, expected_status=1)
    # The only others: the files read back against RECORD, and the install this copy of
    # the package shadows on sys.path.
    others = {"installed files", "other wheelops", "C++ compiler"}
    assert {f["check"] for f in report["findings"]} <= {"build facts", *others}
    (finding,) = [f for f in report["findings"] if f["check"] == "build facts"]
    assert finding["status"] == "fatal" and finding["runtime"] == "missing"
    assert "source checkout" not in finding["message"]


def test_damaged_build_facts(package):
    (package / "_build_info.json").write_text("garbage{")
    result = run_python(package, "-c", "import wheelops")
    assert_refused(package, result, "_build_info.json is unreadable (JSONDecodeError")
    text = run_python(package, "-m", "wheelops")
    assert text.returncode == 1 and "CANNOT SERVE" in text.stdout, text.stdout


def doctor(package: Path, *args: str):
    result = run_python(package, "-m", "wheelops", *args)
    assert result.returncode in (0, 1), result.stderr
    return result


def test_doctor_reports_a_refusal_with_exit_status_1(package, broken):
    built_into(package, SLOT, broken["missing_c10_symbol"])
    text = doctor(package)
    assert text.returncode == 1
    assert "CANNOT SERVE" in text.stdout and MISSING_C10_SYMBOL in text.stdout
    assert REINSTALL in text.stdout
    # Interpreter options before -m still make it the doctor, not a crash on import.
    assert run_python(package, "-X", "utf8", "-m", "wheelops").returncode == 1
    report = json.loads(doctor(package, "--json").stdout)
    assert report["verdict"] == "fatal" and report["ops"] == []
    assert MISSING_C10_SYMBOL in report["error"]
    assert any(REINSTALL in fix for fix in report["fixes"])


# The classifier on loader texts this machine cannot produce.
@pytest.mark.parametrize(
    ("text", "cause", "words"),
    [
        (
            "/x/_ops_cpu.abi3.so: /lib64/libstdc++.so.6: version `GLIBCXX_3.4.32' not found "
            "(required by /x/_ops_cpu.abi3.so)",
            "libstdcxx",
            ["GLIBCXX_3.4.32", "C++ runtime (libstdc++) is older"],
        ),
        (
            "/x/_ops_cpu.abi3.so: /lib64/libc.so.6: version `GLIBC_2.34' not found "
            "(required by /x/_ops_cpu.abi3.so)",
            "glibc",
            ["GLIBC_2.34", "C library (glibc) is older"],
        ),
        (
            "/x/_ops_cpu.abi3.so: undefined symbol: aoti_torch_new_thing",
            "torch-too-old",
            ["aoti_torch_new_thing", "stable-ABI function that torch 2.10.0"],
        ),
        ("/x/_ops_cpu.abi3.so: invalid ELF header", "corrupt-file", ["damaged"]),
        # Issue #15, bug 2: a damaged CUDA runtime on LD_LIBRARY_PATH was blamed on wheelops.
        (
            "/opt/broken/libcudart.so.13: file too short",
            "dependency-damaged",
            ["needs libcudart.so.13", "at /opt/broken/libcudart.so.13", "library is intact"],
        ),
        ("/x/_ops_cpu.abi3.so: cannot enable executable stack", "unknown", ["refused"]),
        (
            "libtorch_cpu.so: cannot open shared object file: No such file or directory",
            "torch-libraries",
            ["libtorch_cpu.so from torch"],
        ),
        # Issue #25: cuBLASLt, not the CUDA runtime, is what is missing or too old.
        (
            "libcublasLt.so.13: cannot open shared object file: No such file or directory",
            "cublas-missing",
            ["needs libcublasLt.so.13", "GEMM library of cuBLAS 13"],
        ),
        (
            "/x/_ops_cpu.abi3.so: undefined symbol: cublasLtMatmulNewThing",
            "cublas-too-old",
            ["cublasLtMatmulNewThing", "older than the cuBLAS"],
        ),
    ],
)
def test_classify_recorded_loader_texts(text, cause, words):
    failure = classify(
        Path("/x/_ops_cpu.abi3.so"),
        text,
        build_torch="2.14.1+cu130",
        runtime_torch="2.10.0",
        build_cuda="13.0",
        runtime_cuda="13.0",
    )
    assert failure.cause == cause and failure.raw == text
    for word in words:
        assert word in failure.summary


def test_demangle():
    assert demangle("_ZN3c106detail21wheelops_test_removedEl") == MISSING_C10_SYMBOL
    assert demangle("aoti_torch_empty_strided") == "aoti_torch_empty_strided"
    assert demangle("_Znot-a-symbol") == "_Znot-a-symbol"
