"""The compatibility policy, row by row, over recorded fact sets (no loading, no GPU):
`evaluate` is pure, so every rule is checked with the facts alone."""

from __future__ import annotations

from dataclasses import replace

import pytest

from build_tools.docs import troubleshooting
from wheelops._compat.dlerror import LoadFailure
from wheelops._compat.facts import BuildInfo, RuntimeFacts, UnreadableBuildInfo, l4t_release
from wheelops._compat.loader import format_findings
from wheelops._compat.matrix import matrix
from wheelops._compat.policy import Inputs, evaluate
from wheelops._compat.probes import Gpu
from wheelops._compat.record import FileDamage
from wheelops._compat.report import LibraryFile, Report, Status

INDEX = matrix().index_url
TORCH_INDEX = matrix().torch_index_url
REINSTALL = f"pip install --force-reinstall --no-deps wheelops --index-url {INDEX}"

# The troubleshooting tables' builds (build_tools/docs/troubleshooting.py), as this package's
# records.
CU130_BUILD = BuildInfo.from_dict(troubleshooting.BUILD.to_dict())
CPU_BUILD = BuildInfo.from_dict(troubleshooting.CPU_BUILD.to_dict())
UNIVERSAL = BuildInfo.from_dict(troubleshooting.UNIVERSAL.to_dict())
(CUDA13,) = CU130_BUILD.cuda_libraries
CUDA_TORCH = RuntimeFacts("3.12.3", "x86_64", "2.11.0+cu130", "13.0", None, None)


def torch_runtime(version: str, cuda: str | None = None, **other: str) -> RuntimeFacts:
    return replace(CUDA_TORCH, torch_version=version, torch_cuda=cuda, **other)


FILES = (
    LibraryFile("cpu", "/w/_ops_cpu.abi3.so", exists=True),
    LibraryFile("cuda13", "/w/_ops_cuda13.abi3.so", exists=True),
)


def files_of(build: BuildInfo) -> tuple[LibraryFile, ...]:
    cuda = [LibraryFile(f"cuda{lib.major}", f"/w/{lib.file}", True) for lib in build.cuda_libraries]
    return (FILES[0], *cuda)


def judge(build: BuildInfo | UnreadableBuildInfo, runtime: RuntimeFacts, **facts) -> Report:
    """`evaluate` over these facts (Inputs' fields) and the matrix as read here."""
    return evaluate(Inputs(build, **facts), runtime, matrix())


def report_of(build: BuildInfo, runtime: RuntimeFacts, **facts) -> Report:
    return judge(build, runtime, files=files_of(build), **facts)


def with_cuda(**changes) -> BuildInfo:
    return replace(CU130_BUILD, cuda_libraries=(replace(CUDA13, **changes),))


def by_check(build: BuildInfo, runtime: RuntimeFacts) -> dict:
    return {f.check: f for f in report_of(build, runtime).findings}


def test_matching_install_is_ok_on_every_line():
    report = report_of(CU130_BUILD, CUDA_TORCH)
    assert [f.check for f in report.findings] == [
        "Python",
        "torch",
        "torch build",
        "CUDA",
        "platform",
    ]
    assert report.verdict is Status.OK and report.exit_status == 0
    assert [(c.role, c.accepted) for c in report.candidates] == [("cpu", True), ("cuda13", True)]


# Python: >= the wheel's floor.
@pytest.mark.parametrize(
    ("python", "severity"), [("3.10.0", "OK"), ("3.14.1", "OK"), ("3.9.18", "FATAL")]
)
def test_python_row(python, severity):
    finding = by_check(CU130_BUILD, replace(CUDA_TORCH, python_version=python))["Python"]
    assert finding.status is Status[severity]
    if finding.status is Status.FATAL:
        assert "3.9.18" in finding.message and "3.10" in finding.message
        assert "python3.12 -m venv" in finding.fix[0]


# torch: >= 2.10 (stable-ABI floor); older: refuse before load, say so.
@pytest.mark.parametrize(
    ("torch_version", "severity"),
    [
        ("2.10.0+cu130", "OK"),
        ("2.15.0.dev20261101+cu130", "OK"),
        ("2.9.1+cu130", "FATAL"),
        ("1.13.1+cu117", "FATAL"),
    ],
)
def test_torch_version_row(torch_version, severity):
    finding = by_check(CU130_BUILD, torch_runtime(torch_version, "13.0"))["torch"]
    assert finding.status is Status[severity]
    if finding.status is Status.FATAL:
        assert torch_version in finding.message and "2.10" in finding.message
        assert "2.14.1+cu130" in finding.message  # the torch it was built against
        label = torch_version.split("+")[1]
        assert finding.fix == (
            f'pip install --upgrade "torch>=2.10" --index-url {TORCH_INDEX}/{label}',
        )


def test_torch_missing_is_fatal_with_the_install_command():
    finding = by_check(CU130_BUILD, torch_runtime(None))["torch"]  # type: ignore[arg-type]
    assert finding.status is Status.FATAL
    assert finding.fix == (f'pip install --upgrade "torch>=2.10" --index-url {TORCH_INDEX}/cu130',)


# torch build: CPU-only torch loads the CPU library only; ROCm/XPU: CPU only, say why.
@pytest.mark.parametrize(
    ("build", "runtime", "severity", "words"),
    [
        (CU130_BUILD, torch_runtime("2.13.0+cpu"), "DEGRADED", ["CPU-only", "CPU kernels only"]),
        (CU130_BUILD, torch_runtime("2.11.0+rocm6.4", torch_hip="6.4.1"), "DEGRADED", ["ROCm"]),
        (CU130_BUILD, torch_runtime("2.11.0+xpu", torch_xpu="20250101"), "DEGRADED", ["XPU"]),
        (CPU_BUILD, CUDA_TORCH, "DEGRADED", ["cpu variant", "CUDA 13.0"]),
        (CPU_BUILD, torch_runtime("2.13.0+cpu"), "OK", []),
    ],
)
def test_torch_build_row(build, runtime, severity, words):
    finding = by_check(build, runtime)["torch build"]
    assert finding.status is Status[severity], finding
    for word in words:
        assert word in finding.message
    if build is CU130_BUILD and runtime.torch_kind == "cpu":
        assert finding.fix == (
            f'pip install --upgrade "torch>=2.10" --index-url {TORCH_INDEX}/cu130',
        )
    if build is CPU_BUILD and severity == "DEGRADED":
        assert finding.fix[0].endswith(f"--index-url {INDEX}/cu130")
    # No CUDA line where no CUDA library will load.
    assert ("CUDA" in by_check(build, runtime)) == (
        build is CU130_BUILD and runtime.torch_cuda is not None and not runtime.torch_hip
    )


# CUDA: same major as the build; runtime minor >= build minor.
@pytest.mark.parametrize(
    ("build_cuda", "torch_cuda", "severity", "fix_variant"),
    [
        ("13.0", "13.0", "OK", None),
        ("13.0", "13.2", "OK", None),
        ("13.2", "13.0", "FATAL", "cu130"),  # runtime older than the build
        ("13.0", "12.8", "FATAL", "cu128"),  # major mismatch
        ("12.6", "13.0", "FATAL", "cu130"),
        ("12.8", "12.9", "OK", None),
        ("13.0", "12.4", "FATAL", None),  # no variant for 12.4: install a torch for one
    ],
)
def test_cuda_row(build_cuda, torch_cuda, severity, fix_variant):
    build = with_cuda(cuda_version=build_cuda)
    runtime = torch_runtime(f"2.11.0+cu{torch_cuda.replace('.', '')}", torch_cuda)
    report = report_of(build, runtime)
    finding = report.finding("CUDA")
    assert finding.status is Status[severity]
    assert report.exit_status == (severity == "FATAL")
    if finding.status is Status.FATAL:
        assert build_cuda in finding.message and torch_cuda in finding.message
        assert not any(c.accepted for c in report.candidates)
        # Both directions, the one that keeps the user's torch first (issue #15, bug 3).
        change_torch = (
            f'pip install --upgrade "torch>=2.10" --index-url {TORCH_INDEX}/'
            f"cu{build_cuda.replace('.', '')}"
        )
        reinstall = "pip install --force-reinstall --no-deps wheelops --index-url"
        if fix_variant:
            assert finding.fix == (f"{reinstall} {INDEX}/{fix_variant}", change_torch)
            assert f"install the {fix_variant} variant of wheelops, or keep this" in finding.message
        else:
            assert finding.fix == (change_torch,)
            assert "No wheelops variant is built for CUDA 12.4" in finding.message


def test_platform_row():
    finding = by_check(replace(CU130_BUILD, platform="linux_aarch64"), CUDA_TORCH)["platform"]
    assert finding.status is Status.FATAL
    assert "aarch64" in finding.message and "x86_64" in finding.message


@pytest.mark.parametrize(
    ("l4t", "status"),
    [
        (None, Status.OK),
        ("R36 (release), REVISION: 4.3", Status.DEGRADED),
        ("R35 (release), REVISION: 6.0", Status.DEGRADED),
        ("R38 (release), REVISION: 2.0", Status.OK),  # JetPack 7 (Thor): SBSA, as the servers
    ],
)
def test_the_aarch64_wheel_on_a_jetson_warns_before_jetpack_7(l4t, status):
    aarch64 = replace(CUDA_TORCH, machine="aarch64", l4t=l4t)
    finding = by_check(replace(UNIVERSAL, platform="linux_aarch64"), aarch64)["platform"]
    assert finding.status is status
    assert ("Jetson" in finding.message) == (status is Status.DEGRADED)


def test_the_l4t_release_is_read_from_its_file(tmp_path):
    release = tmp_path / "nv_tegra_release"
    release.write_text("# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic\n")
    assert l4t_release(release) == "R36 (release), REVISION: 4.3"
    assert l4t_release(tmp_path / "absent") is None


# GPU: SASS of the same major with minor <= the device's, or PTX <= the device's. A GPU
# the build cannot run on degrades the install (import works, that GPU's first op raises).
@pytest.mark.parametrize(
    ("arch_list", "capability", "severity", "fix_words"),
    [
        ("7.5;8.0;8.6;9.0;10.0;12.0+PTX", (9, 0), "OK", []),
        ("8.0", (8, 9), "OK", []),
        ("8.0+PTX", (9, 0), "OK", []),
        ("8.0", (9, 0), "DEGRADED", [f"{INDEX}/cu130", 'TORCH_CUDA_ARCH_LIST="9.0"']),
        ("7.5;8.0;8.6;9.0;10.0;12.0+PTX", (7, 0), "DEGRADED", [f"{TORCH_INDEX}/cu126"]),
    ],
)
def test_gpu_row(arch_list, capability, severity, fix_words):
    sass = tuple(a.replace("+PTX", "") for a in arch_list.split(";"))
    ptx = tuple(a.replace("+PTX", "") for a in arch_list.split(";") if a.endswith("+PTX"))
    build = with_cuda(arch_list=arch_list, sass_archs=sass, ptx_archs=ptx)
    report = report_of(
        build, CUDA_TORCH, gpus=[Gpu(1, "NVIDIA Test GPU", capability)], driver="13.0"
    )
    finding = report.finding("GPU cuda:1")
    assert finding.status is Status[severity] and report.exit_status == 0
    if finding.status is not Status.OK:
        cap = f"{capability[0]}.{capability[1]}"
        assert f"cuda:1 (NVIDIA Test GPU, compute capability {cap})" in finding.message
        assert f"SASS {', '.join(sass)}" in finding.message
        for word in fix_words:
            assert any(word in command for command in finding.fix), (word, finding.fix)


def test_gpus_not_looked_at_are_not_judged():
    # Import never initialises CUDA: without GPUs there is no GPU or driver line.
    checks = by_check(CU130_BUILD, CUDA_TORCH)
    assert not [c for c in checks if c.startswith("GPU") or c == "CUDA driver"]


@pytest.mark.parametrize(
    ("driver", "status", "words"),
    [
        ("13.0", "OK", []),
        ("12.8", "DEGRADED", ["CUDA 12.8", ">= 580"]),
        (None, "DEGRADED", ["no NVIDIA driver"]),
    ],
)
def test_driver_row(driver, status, words):
    report = report_of(CU130_BUILD, CUDA_TORCH, gpus=[], driver=driver)
    finding = report.finding("CUDA driver")
    assert finding.status is Status[status] and report.exit_status == 0
    for word in words:
        assert word in finding.message


def test_candidates_under_a_cpu_only_torch():
    report = report_of(CU130_BUILD, torch_runtime("2.13.0+cpu"))
    cpu, cuda = report.candidates
    assert cpu.accepted and not cuda.accepted and "CPU-only" in cuda.reason
    assert [c.role for c in report.to_load] == ["cpu"]
    # A damaged CUDA library that would not be loaded does not matter.
    files = (FILES[0], LibraryFile("cuda13", FILES[1].path, True, "x is truncated"))
    report = judge(CU130_BUILD, torch_runtime("2.13.0+cpu"), files=files)
    assert report.exit_status == 0


def test_a_missing_or_damaged_library_stops_everything():
    files = (FILES[0], LibraryFile("cuda13", "/w/_ops_cuda13.abi3.so", exists=False))
    report = judge(CU130_BUILD, CUDA_TORCH, files=files)
    assert report.exit_status == 1 and report.to_load == ()
    missing = report.finding("CUDA 13 library")
    assert missing.message.endswith("/w/_ops_cuda13.abi3.so does not exist")
    assert missing.fix == (f"{REINSTALL}/cu130",)
    files = (
        LibraryFile("cpu", "/w/x.so", True, "/w/x.so is a 32-bit library; this Python is 64-bit"),
    )
    report = judge(CPU_BUILD, CUDA_TORCH, files=files)
    assert (
        report.finding("CPU library").fix == ()
        and "64-bit Python" in report.finding("CPU library").message
    )


def test_load_failures_reject_their_candidate():
    failure = LoadFailure("torch-abi", "x calls c10::f(), which torch does not have", "raw")
    report = report_of(CU130_BUILD, CUDA_TORCH, load_failures={"cuda13": failure})
    assert report.exit_status == 1 and report.to_load == ()
    assert [c.accepted for c in report.candidates] == [True, False]
    finding = report.finding("load CUDA 13 library")
    assert finding.fix == (f"{REINSTALL}/cu130",) and "The loader said: raw" in finding.message
    # A damaged dependency is not wheelops': no reinstall command (issue #15, bug 2).
    damaged = LoadFailure(
        "dependency-damaged", "x needs libcudart.so.13, damaged", "raw", "/o/libcudart.so.13"
    )
    finding = report_of(CU130_BUILD, CUDA_TORCH, load_failures={"cpu": damaged}).finding(
        "load CPU library"
    )
    assert (
        finding.fix == () and "replace or remove the damaged /o/libcudart.so.13" in finding.message
    )


def test_guard_off_reports_but_does_not_refuse():
    report = report_of(replace(CU130_BUILD, stable_abi_floor="2.99"), CUDA_TORCH, guard=False)
    assert report.exit_status == 0 and all(c.accepted for c in report.candidates)
    finding = report.finding("torch")
    assert finding.status is Status.DEGRADED and finding.message.startswith("not enforced")
    # A broken file is refused all the same: it could kill the process when mapped.
    files = (LibraryFile("cpu", "/w/x.so", True, "/w/x.so is truncated"),)
    assert judge(CPU_BUILD, CUDA_TORCH, files=files, guard=False).exit_status == 1


PYPI_REINSTALL = "pip install --force-reinstall --no-deps wheelops"


@pytest.mark.parametrize(
    ("facts", "installed_version", "check", "fix"),
    [
        (
            UnreadableBuildInfo("/w/_build_info.json", "missing", False),
            "0.1.0",  # PyPI's universal wheel: reinstall it, not a slim variant (issue #29)
            "build facts",
            PYPI_REINSTALL,
        ),
        (
            UnreadableBuildInfo("/w/_build_info.json", "unreadable (JSONDecodeError: x)", False),
            "0.1.0+cu130",
            "build facts",
            f"{REINSTALL}/cu130",
        ),
        (
            UnreadableBuildInfo("/w/_build_info.json", "unreadable (TypeError: x)", False),
            None,  # METADATA unreadable too: PyPI's wheel serves every torch
            "build facts",
            PYPI_REINSTALL,
        ),
        (
            UnreadableBuildInfo("/w/_build_info.json", "missing", True),
            None,
            "native libraries",
            "PYTHONPATH=src python -m build_tools.dev",
        ),
    ],
)
def test_unreadable_build_facts_are_fatal(facts, installed_version, check, fix):
    # Issue #15, bug 1: the doctor said "DEGRADED: this install works here" (exit 0).
    report = judge(facts, CUDA_TORCH, files=FILES[:1], installed_version=installed_version)
    assert report.exit_status == 1 and report.to_load == ()
    (finding,) = report.findings
    assert finding.check == check and finding.fix == (fix,)
    assert ("source checkout" in finding.message) == facts.checkout


def test_refusal_message_has_both_sides_and_every_fix():
    build = with_cuda(cuda_version="12.8")
    text = format_findings("headline", [by_check(build, CUDA_TORCH)["CUDA"]], skippable=True)
    assert "build: CUDA 12.8" in text and "here:  CUDA 13.0 (torch 2.11.0+cu130)" in text
    assert f"\n  fix:   {REINSTALL}/cu130\n" in text
    assert (
        f'\n  or:    pip install --upgrade "torch>=2.10" --index-url {TORCH_INDEX}/cu128\n' in text
    )
    assert "WHEELOPS_SKIP_GUARD=1" in text and "python -m wheelops" in text


@pytest.mark.parametrize(
    ("situations", "status"),
    [
        (troubleshooting.AT_IMPORT, "fatal"),
        (troubleshooting.IN_THE_REPORT, "degraded"),
        (troubleshooting.IN_A_CHECKOUT, "fatal"),
    ],
)
def test_the_readme_tables_say_what_the_guard_decides(situations, status):
    # Each troubleshooting row is the policy's finding; its table says whether import raises.
    for situation in situations:
        finding = troubleshooting.finding(situation)
        assert str(finding.status) == status, (situation.meaning, finding)


# The universal wheel: the CUDA library of torch's major loads, the other never does.
@pytest.mark.parametrize(
    ("torch_version", "torch_cuda", "serving"),
    [
        ("2.10.0+cu128", "12.8", "cuda12"),
        ("2.11.0+cu126", "12.6", "cuda12"),
        ("2.14.1+cu130", "13.0", "cuda13"),
        ("2.15.0+cu132", "13.2", "cuda13"),
        ("2.13.0+cpu", None, None),
    ],
)
def test_universal_loads_the_library_of_torchs_major(torch_version, torch_cuda, serving):
    report = report_of(UNIVERSAL, torch_runtime(torch_version, torch_cuda))
    assert report.exit_status == 0
    assert [c.role for c in report.to_load] == ["cpu", *([serving] if serving else [])]
    for candidate in report.candidates[1:]:
        if candidate.role != serving:
            assert not candidate.accepted
            words = "another CUDA major" if torch_cuda else "is CPU-only"
            assert words in candidate.reason
    if serving:
        assert report.finding("CUDA").status is Status.OK


def test_universal_under_an_older_minor_is_refused_with_both_directions():
    newer = replace(
        UNIVERSAL,
        cuda_libraries=(replace(UNIVERSAL.cuda_libraries[0], cuda_version="12.8"), CUDA13),
    )
    report = report_of(newer, torch_runtime("2.11.0+cu126", "12.6"))
    assert report.exit_status == 1
    assert report.finding("CUDA").fix[0].endswith(f"{INDEX}/cu126")


def test_gpu_check_uses_the_serving_library():
    gpu = Gpu(0, "NVIDIA V100", (7, 0))
    report = report_of(UNIVERSAL, torch_runtime("2.10.0+cu128", "12.8"), gpus=[gpu], driver="12.8")
    assert report.finding("GPU cuda:0").status is Status.OK  # the CUDA 12 library has 7.0
    report = report_of(UNIVERSAL, CUDA_TORCH, gpus=[gpu], driver="13.0")
    assert report.finding("GPU cuda:0").status is Status.DEGRADED  # the CUDA 13 one has not


def test_the_experts_override_picks_the_cuda_12_library_and_says_so():
    report = report_of(UNIVERSAL, CUDA_TORCH, cuda_override=12)
    assert [c.role for c in report.to_load] == ["cpu", "cuda12"]
    finding = report.finding("CUDA")
    assert finding.status is Status.DEGRADED and "WHEELOPS_CUDA_LIBRARY=12" in finding.message
    assert "chooses the CUDA 12.4 library" in finding.message  # not "is loaded": it may fail
    # Both of what it links, where a user must provide them (#35: only libcudart was named).
    assert "(libcudart.so.12, libcublasLt.so.12) are on the loader's path" in finding.message
    report = report_of(CU130_BUILD, CUDA_TORCH, cuda_override="12")
    assert report.exit_status == 1 and "has CUDA 13.0 only" in report.finding("CUDA").message


@pytest.mark.parametrize("value", ["0", "11", "99", "twelve", "cuda12", "12.4", "-12"])
def test_the_override_takes_a_cuda_major_wheelops_builds_and_nothing_else(value):
    # Issue #29: WHEELOPS_CUDA_LIBRARY=0 loaded the CUDA 13 library.
    report = report_of(UNIVERSAL, CUDA_TORCH, cuda_override=value)
    assert report.exit_status == 1 and report.to_load == ()
    finding = report.finding("CUDA")
    assert f"WHEELOPS_CUDA_LIBRARY={value!r} is not a CUDA major" in finding.message
    assert "(12 or 13)" in finding.message
    assert finding.fix == ("unset WHEELOPS_CUDA_LIBRARY",)


def test_a_failed_override_library_is_cured_by_unsetting_the_override():
    # Issue #29: the first fix was a reinstall from an index without a CUDA 12 library.
    failure = LoadFailure("cuda-major", "needs libcudart.so.12", "libcudart.so.12: cannot open")
    report = report_of(UNIVERSAL, CUDA_TORCH, cuda_override="12", load_failures={"cuda12": failure})
    assert report.exit_status == 1
    assert report.fixes[0] == "unset WHEELOPS_CUDA_LIBRARY"
    assert "unset it" in report.finding("load CUDA 12 library").message


def test_a_library_changed_since_install_is_fatal_with_the_plain_reinstall():
    # Issue #29: a sibling library in its place aborted the process; bytes changed in its
    # middle loaded. Import hashes the libraries it loads; the policy refuses a changed one.
    changed = {"cuda13": "changed (its sha256 differs from the wheel's RECORD)"}
    report = report_of(UNIVERSAL, CUDA_TORCH, changed_libraries=changed, installed_version="0.1.0")
    assert report.exit_status == 1 and report.to_load == ()
    finding = report.finding("CUDA 13 library")
    assert finding.status is Status.FATAL and "/w/_ops_cuda13.abi3.so is changed" in finding.message
    assert finding.fix == (PYPI_REINSTALL,) and not report.skippable
    text = format_findings("headline", [finding], report.skippable)
    assert "WHEELOPS_SKIP_GUARD=1 does not skip these" in text


def test_the_skip_switch_is_offered_only_where_it_would_let_the_load_go_on():
    mismatch = report_of(with_cuda(cuda_version="12.8"), CUDA_TORCH)
    assert mismatch.skippable
    skipped = report_of(with_cuda(cuda_version="12.8"), CUDA_TORCH, guard=False)
    assert skipped.exit_status == 0 and not skipped.skippable
    broken = (FILES[0], LibraryFile("cuda13", "/w/_ops_cuda13.abi3.so", exists=False))
    damaged = judge(CU130_BUILD, CUDA_TORCH, files=broken, guard=False)
    assert damaged.exit_status == 1 and not damaged.skippable


def test_no_torch_is_refused_with_the_switch_too():
    """#35: WHEELOPS_SKIP_GUARD=1 without torch went on to load and ended in a raw
    ModuleNotFoundError with a reinstall fix: without torch nothing can load."""
    no_torch = torch_runtime(None)
    for guard in (True, False):
        report = report_of(CU130_BUILD, no_torch, guard=guard)
        finding = report.finding("torch")
        assert report.exit_status == 1 and report.to_load == () and not report.skippable
        assert finding.status is Status.FATAL and "torch is not installed" in finding.message
        assert finding.fix and finding.fix[0].startswith("pip install"), finding.fix
        assert "--force-reinstall" not in finding.fix[0]


def test_an_import_failure_the_doctor_ran_past_is_fatal():
    report = report_of(
        UNIVERSAL, CUDA_TORCH, import_failure="SyntaxError: x", installed_version="0.1.0"
    )
    finding = report.finding("import")
    assert report.exit_status == 1 and finding.message == "SyntaxError: x"
    assert finding.fix == (PYPI_REINSTALL,)


@pytest.mark.parametrize(
    ("build", "fix"),
    [
        (UNIVERSAL, 'pip install --upgrade "torch>=2.10"'),  # PyPI: there is no whl/universal
        (CU130_BUILD, f'pip install --upgrade "torch>=2.10" --index-url {TORCH_INDEX}/cu130'),
        (CPU_BUILD, f'pip install --upgrade "torch>=2.10" --index-url {TORCH_INDEX}/cpu'),
    ],
)
def test_no_torch_is_fixed_from_an_index_that_exists(build, fix):
    report = report_of(build, replace(CUDA_TORCH, torch_version=None, torch_cuda=None))
    assert report.finding("torch").fix == (fix,)


def test_a_missing_cublaslt_is_fixed_by_installing_cublas_not_by_another_variant():
    # Issue #25: the CUDA libraries link their major's cuBLASLt; without it the loader's
    # "cannot open libcublasLt.so.13" is not a CUDA-major mismatch.
    linked = [replace(lib, cublaslt_version=f"{lib.major}.1.1") for lib in UNIVERSAL.cuda_libraries]
    build = replace(UNIVERSAL, cuda_libraries=tuple(linked))
    failure = LoadFailure("cublas-missing", "_ops_cuda13.abi3.so needs libcublasLt.so.13", "x")
    report = report_of(build, CUDA_TORCH, load_failures={"cuda13": failure})
    finding = report.finding("load CUDA 13 library")
    assert report.exit_status == 1 and "built with cuBLAS 13.1.1" in finding.message
    assert finding.fix[0] == 'pip install --upgrade "nvidia-cublas>=13.1.1"'


def test_every_loader_failure_cause_has_one_remedy():
    # One table (rules/load_failure.py: remedies) says what each loader refusal advises and fixes.
    from wheelops._compat.dlerror import Cause
    from wheelops._compat.rules.load_failure import remedies

    assert set(remedies()) == set(Cause)
    for cause, remedy in remedies().items():
        assert remedy.advice.format(missing="libx.so", built="13.0.1", major=13) is not None, cause


def test_a_damaged_unused_cuda_library_is_reinstalled_before_torch_changes():
    """#35: under a CPU torch a damaged _ops_cuda13 is not loaded and wheelops works; the
    doctor's first fix was the CUDA 13 torch, which would then load the damaged library."""
    damaged = [FileDamage("/site/wheelops/_ops_cuda13.abi3.so", "changed (sha256 differs)")]
    report = report_of(UNIVERSAL, torch_runtime("2.13.0+cpu"), damaged_files=damaged)
    assert report.exit_status == 0
    assert report.finding("torch build").status is report.finding("installed files").status
    assert report.fixes[0].startswith("pip install --force-reinstall --no-deps wheelops")
    assert any("download.pytorch.org" in fix for fix in report.fixes[1:])


def test_a_wheel_built_here_is_reinstalled_from_its_file(tmp_path):
    """#35: a +universal (or +cu124) wheel is on no index; its reinstall names the file
    pip installed it from (direct_url.json), while that file is there."""
    wheel = tmp_path / "dist dir" / "wheelops-0.1.0+universal-cp310-abi3-linux_x86_64.whl"
    changed = {"cuda13": "changed (its sha256 differs from the sha256 its build recorded)"}

    def fix(version: str, source: str | None) -> str:
        report = report_of(
            UNIVERSAL,
            CUDA_TORCH,
            changed_libraries=changed,
            installed_version=version,
            installed_from=source,
        )
        return report.finding("CUDA 13 library").fix[0]

    assert fix("0.1.0+universal", str(wheel)) == PYPI_REINSTALL  # the file is gone
    wheel.parent.mkdir()
    wheel.write_bytes(b"")
    named = f"pip install --force-reinstall --no-deps '{wheel}'"
    assert fix("0.1.0+universal", str(wheel)) == named
    assert fix("0.1.0+cu124", str(wheel)) == named
    # An index serves the variant, or PyPI's wheel (no label): from there, as before.
    assert fix("0.1.0+cu130", str(wheel)).endswith(
        "--index-url https://wheelops.github.io/wheelops/whl/cu130"
    )
    assert fix("0.1.0", str(wheel)) == PYPI_REINSTALL
    # METADATA unreadable (no version): the build facts' variant decides. An index serves
    # the cpu variant: from there, not the file (#42); +universal is on none: the file.
    cpu = matrix().reinstall_command(None, "cpu", str(wheel))
    assert cpu.endswith("--index-url https://wheelops.github.io/wheelops/whl/cpu"), cpu
    assert matrix().reinstall_command(None, "universal", str(wheel)) == named


@pytest.mark.parametrize(
    ("missing", "requested", "public", "status", "words", "fix"),
    [
        ((), None, False, Status.OK, "the fast layer serves", ()),
        ((), "public", True, Status.DEGRADED, "WHEELOPS_AUTOGRAD=public asks", "unset"),
        (("torch._C._x",), None, True, Status.DEGRADED, "torch 2.16.0 lacks torch._C._x", ()),
        (("torch._C._x",), "public", True, Status.DEGRADED, "lacks torch._C._x", ()),
        ((), "fast", False, Status.DEGRADED, "'fast' is not 'public': ignored", "unset"),
    ],
)
def test_autograd_row(missing, requested, public, status, words, fix):
    # Issue #35: the public-API autograd layer serves where this torch lacks an internal
    # of the fast one, or where WHEELOPS_AUTOGRAD=public asks; the doctor names which.
    from wheelops._compat.policy import public_autograd
    from wheelops._compat.torch_internals import AutogradFacts

    facts = AutogradFacts("2.16.0", missing, requested)
    assert public_autograd(facts) is public
    finding = report_of(CU130_BUILD, CUDA_TORCH, autograd=facts).finding("autograd")
    assert finding.status is status and words in finding.message, finding.message
    assert finding.runtime.startswith("public APIs" if public else "fast layer")
    assert finding.fix == (("unset WHEELOPS_AUTOGRAD",) if fix else ())
    assert report_of(CU130_BUILD, CUDA_TORCH).finding("autograd") is None  # import's: none
    unreadable = UnreadableBuildInfo("/w/_build_info.json", "missing", False)  # no ops load
    assert judge(unreadable, CUDA_TORCH, autograd=facts).finding("autograd") is None


# NVIDIA wheels of a CUDA major torch does not use (left behind where torch was replaced).
NVIDIA_WHEELS = (
    "nvidia-cublas",
    "nvidia-cublas-cu12",
    "nvidia-cuda-runtime-cu12",
    "nvidia_cudnn_cu13",
    "nvidia-ml-py",
)


@pytest.mark.parametrize(
    ("runtime", "leftover"),
    [
        (CUDA_TORCH, "nvidia-cublas-cu12 nvidia-cuda-runtime-cu12"),  # CUDA 13: the cu12 ones
        (torch_runtime("2.10.0+cu128", "12.8"), "nvidia-cudnn-cu13"),  # CUDA 12: the cu13 one
        (torch_runtime("2.13.0+cpu"), None),  # a CPU torch uses none: another package may
    ],
)
def test_nvidia_wheels_of_another_cuda_major_are_degraded_with_the_uninstall(runtime, leftover):
    build = CU130_BUILD if runtime.torch_cuda != "12.8" else CPU_BUILD
    report = report_of(build, runtime, nvidia_wheels=NVIDIA_WHEELS)
    finding = report.finding("NVIDIA wheels")
    if leftover is None:
        assert finding is None
        return
    assert finding is not None and finding.status is Status.DEGRADED
    assert finding.fix == (f"pip uninstall -y {leftover}",)
    assert report.exit_status == 0  # torch loads none of them: wheelops serves
    assert report_of(build, runtime).finding("NVIDIA wheels") is None  # not looked at


@pytest.mark.parametrize(
    ("pip_block", "start"),
    [
        (None, "pip install --force-reinstall"),
        # pip cannot uninstall a distribution whose RECORD is gone or undecodable (`Cannot
        # uninstall wheelops ..., RECORD file not found`): --ignore-installed writes over it.
        (("RECORD", "/w/wheelops-0.1.0+cu130.dist-info"), "pip install --ignore-installed"),
        # pip reads every distribution's METADATA before any command: an undecodable one
        # fails them all until its .dist-info goes (quoted: a path may hold spaces).
        (
            ("METADATA", "/my w/wheelops-0.1.0+cu130.dist-info"),
            "rm -rf '/my w/wheelops-0.1.0+cu130.dist-info' && pip install --force-reinstall",
        ),
    ],
)
def test_every_install_command_works_on_what_pip_can_read_of_the_install(pip_block, start):
    damaged = (LibraryFile("cpu", "/w/_ops_cpu.abi3.so", True, "truncated"), FILES[1])
    report = judge(
        CU130_BUILD,
        CUDA_TORCH,
        files=damaged,
        installed_version="0.1.0+cu130",
        pip_block=pip_block,
    )
    assert report.fixes == [f"{start} --no-deps wheelops --index-url {INDEX}/cu130"]
    other_cuda = judge(
        CU130_BUILD, torch_runtime("2.10.0+cu128", "12.8"), files=FILES, pip_block=pip_block
    )
    assert other_cuda.fixes[0].startswith(f"{start} --no-deps wheelops ")
    # The loader's reader and the rules' context both apply it: twice is once.
    once = matrix().for_install(pip_block)
    assert once.for_install(pip_block) == once


@pytest.mark.parametrize(
    ("metadata", "record", "blocked"),
    [
        (b"Name: wheelops\nVersion: 0.1.0\n", b"wheelops/__init__.py,,\n", None),
        (None, b"wheelops/__init__.py,,\n", None),  # pip skips a .dist-info without METADATA
        (b"", b"", None),
        (b"Name: wheelops\n", None, "RECORD"),
        (b"Name: wheelops\n", b"\x9b\xff garbage", "RECORD"),
        (b"Name: wheelops\n\n\xc3", b"wheelops/__init__.py,,\n", "METADATA"),  # cut in a character
        (b"\x9b\xff garbage", None, "METADATA"),  # it stops every command: it decides
    ],
)
def test_what_pip_cannot_read_of_an_install_is_named(tmp_path, metadata, record, blocked):
    from wheelops._compat.record import pip_block

    package, dist_info = tmp_path / "wheelops", tmp_path / "wheelops-0.1.0.dist-info"
    package.mkdir()
    dist_info.mkdir()
    for name, data in (("METADATA", metadata), ("RECORD", record)):
        if data is not None:
            (dist_info / name).write_bytes(data)
    assert pip_block(package) == (None if blocked is None else (blocked, str(dist_info)))
    assert pip_block(tmp_path / "elsewhere" / "wheelops") is None  # a source tree


def test_wheelops_index_url_serves_every_command_the_universal_wheels_too(monkeypatch):
    """docs/compatibility.md: WHEELOPS_INDEX_URL replaces the index in the fix commands (a
    mirror of the index, which `nox -s index` lays out with whl/universal/ too)."""
    from wheelops._compat.matrix import load

    pypi = load().pypi_variant
    assert load().install_command(pypi) == "pip install --force-reinstall --no-deps wheelops"
    monkeypatch.setenv("WHEELOPS_INDEX_URL", "http://mirror.example/whl/")
    mirrored = load()
    for variant in (pypi, "cu130"):
        assert mirrored.install_command(variant) == (
            f"pip install --force-reinstall --no-deps wheelops "
            f"--index-url http://mirror.example/whl/{variant}"
        )
    assert mirrored.reinstall_command("0.1.0", None).endswith(f"whl/{pypi}")  # PyPI's wheel
